//! The core components' own RBAC (`components/core/butler.yaml`): its ServiceAccount, Roles
//! and bindings made for a scenario, so that the controllers run with what a real install
//! grants them and no more. Namespaced objects go to the scenario's namespace; cluster-wide
//! ones get the scenario's run in their name and a label that removes them with the scenario
//! (scenarios share a real cluster, and may run beside a real install).

use butler_controller::secrets::SecretReader;
use butler_controller::team::rbac::TeamClusterRoles;
use butler_e2e::Cluster;
use butler_runtime::apply::Applier;
use serde_json::{Value, json};

const COMPONENTS: &str = include_str!("../../../components/core/butler.yaml");

/// The controller's ServiceAccount.
pub const ACCOUNT: &str = "butler-controller";

/// The namespace the components install into, which the scenario's replaces.
const HOME: &str = "butler-system";

const KINDS: [&str; 7] = [
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
];

/// Whether objects of a kind are cluster-wide (and so get the scenario's suffix).
fn cluster_wide(kind: &str) -> bool {
    kind.starts_with("Cluster") || kind.starts_with("ValidatingAdmissionPolicy")
}

/// The label of the cluster-wide objects a scenario made from the components.
const RUN_LABEL: &str = "scenario.butlerlabs.dev/run";

/// The components' RBAC objects, moved to `namespace`, cluster-wide names ending in `suffix`
/// (also where a rule names them).
pub fn objects(namespace: &str, suffix: &str) -> Vec<Value> {
    // Moved to the scenario's namespace as the operator moves them for a core installed
    // elsewhere (the confinement policy's expressions included): what the scenarios check is
    // what such an install gets.
    let images = Default::default();
    let options = butler_repository::ComponentsOptions {
        what: "core-butler",
        provider_label: "core-butler",
        target_namespace: Some(namespace),
        images: &images,
        variables: &|_| None,
    };
    let processed =
        butler_repository::process_components(COMPONENTS, &options).expect("the core components process");
    let documents: Vec<Value> = processed.objects().expect("the core components parse");
    let documents: Vec<Value> =
        documents.into_iter().filter(|o| o["kind"].as_str().is_some_and(|k| KINDS.contains(&k))).collect();
    let renamed: Vec<Value> = documents
        .iter()
        .filter(|o| o["kind"].as_str().is_some_and(cluster_wide))
        .map(|o| o["metadata"]["name"].clone())
        .collect();
    documents
        .into_iter()
        .map(|mut object| {
            if object["kind"].as_str().is_some_and(cluster_wide) {
                let name = format!("{}-{suffix}", object["metadata"]["name"].as_str().unwrap_or_default());
                object["metadata"]["name"] = json!(name);
                object["metadata"]["labels"][RUN_LABEL] = json!(suffix);
            } else {
                object["metadata"]["namespace"] = json!(namespace);
            }
            if object["roleRef"]["kind"] == "ClusterRole" {
                let name = format!("{}-{suffix}", object["roleRef"]["name"].as_str().unwrap_or_default());
                object["roleRef"]["name"] = json!(name);
            }
            // Read through get_mut: indexing mutably adds `rules: null` and `subjects: null` to
            // every object, which a real API server refuses on a server-side apply.
            for rule in object.get_mut("rules").and_then(Value::as_array_mut).into_iter().flatten() {
                for name in rule.get_mut("resourceNames").and_then(Value::as_array_mut).into_iter().flatten()
                {
                    if renamed.contains(name) {
                        *name = json!(format!("{}-{suffix}", name.as_str().unwrap_or_default()));
                    }
                }
            }
            // The confinement policy names the Secrets role and the team roles in its
            // expressions, which the scenario renames (the namespace the processing moved).
            if object["kind"] == "ValidatingAdmissionPolicy" {
                let expressions: Vec<&Value> = ["matchConditions", "validations"]
                    .iter()
                    .flat_map(|l| object["spec"][*l].as_array().into_iter().flatten())
                    .map(|e| &e["expression"])
                    .collect();
                assert!(
                    expressions.iter().all(|e| !e.as_str().unwrap_or_default().contains(HOME)),
                    "the policy follows the namespace"
                );
                let text = object["spec"]
                    .to_string()
                    .replace("'butler-controller-secrets'", &format!("'butler-controller-secrets-{suffix}'"))
                    .replace("(viewer|operator|admin)$'", &format!("(viewer|operator|admin)-{suffix}$'"));
                object["spec"] = serde_json::from_str(&text).expect("the policy stays JSON");
            }
            if object["kind"] == "ValidatingAdmissionPolicyBinding" {
                let policy =
                    format!("{}-{suffix}", object["spec"]["policyName"].as_str().unwrap_or_default());
                object["spec"]["policyName"] = json!(policy);
            }
            for subject in object.get_mut("subjects").and_then(Value::as_array_mut).into_iter().flatten() {
                if subject["namespace"] == HOME {
                    subject["namespace"] = json!(namespace);
                }
            }
            object
        })
        .collect()
}

/// The team ClusterRoles of the components as a scenario installs them.
pub fn team_roles(suffix: &str) -> TeamClusterRoles {
    TeamClusterRoles::new(&format!("{}-{suffix}", TeamClusterRoles::DEFAULT)).expect("a valid template")
}

/// The controller's reading of Secrets as a scenario installs it: the account
/// `namespace/butler-controller` and the components' ClusterRole of the scenario's run.
pub fn secret_reader(namespace: &str, suffix: &str) -> SecretReader {
    SecretReader {
        cluster_role: format!("{}-{suffix}", SecretReader::DEFAULT_ROLE),
        namespace: namespace.to_string(),
        service_account: ACCOUNT.to_string(),
    }
}

/// Makes the components' RBAC for the account `namespace/butler-controller`, as an
/// administrator installs it; the cluster-wide part goes with the scenario, whose cluster-wide
/// names end in the suffix returned.
pub async fn install(cluster: &Cluster, namespace: &str) -> String {
    let suffix = cluster.unique("rbac");
    cluster.remove_cluster_objects_labelled(&format!("{RUN_LABEL}={suffix}"));
    let applier = Applier::new(cluster.client(), "scenario");
    for object in objects(namespace, &suffix) {
        applier.apply(&object, false).await.unwrap_or_else(|e| panic!("installing the shipped RBAC: {e}"));
    }
    confinement_in_force(cluster, namespace, &suffix).await;
    suffix
}

/// Waits until the confinement policy refuses what it should, as a real install would: a real
/// API server loads a new policy and binding about half a second after they are written. The
/// probe is a dry run (nothing is made) of a namespace that is no team's, as the controller.
async fn confinement_in_force(cluster: &Cluster, namespace: &str, suffix: &str) {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, PostParams};
    let config = cluster.service_account_config("confinement-probe", namespace, ACCOUNT).await;
    let api: Api<Namespace> = Api::all(kube::Client::try_from(config).expect("a client of the account"));
    let probe: Namespace = serde_json::from_value(json!({"metadata": {"name": format!("probe-{suffix}")}}))
        .expect("a namespace");
    let params = PostParams { dry_run: true, ..Default::default() };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        match api.create(&params, &probe).await {
            Err(kube::Error::Api(e))
                if e.code == 403 && e.message.contains("butler-controller-confinement") =>
            {
                return;
            }
            other => assert!(
                std::time::Instant::now() < deadline,
                "the confinement policy never came into force: {other:?}"
            ),
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[test]
fn the_shipped_rbac_moves_to_the_scenarios_namespace_and_names() {
    let objects = objects("ns-x", "run-x");
    let kinds: Vec<&str> = objects.iter().filter_map(|o| o["kind"].as_str()).collect();
    for kind in KINDS {
        assert!(kinds.contains(&kind), "the components hold a {kind}: {kinds:?}");
    }
    for object in &objects {
        let text = object.to_string();
        assert!(!text.contains(HOME), "{text}");
    }
    let binding = objects.iter().find(|o| o["kind"] == "ClusterRoleBinding").unwrap();
    assert_eq!(binding["roleRef"]["name"], "butler-controller-run-x");
    assert_eq!(binding["subjects"][0]["namespace"], "ns-x");
    let controller = objects.iter().find(|o| o["metadata"]["name"] == "butler-controller-run-x").unwrap();
    let bind =
        controller["rules"].as_array().unwrap().iter().find(|r| r["verbs"] == json!(["bind"])).unwrap();
    assert_eq!(
        bind["resourceNames"],
        json!([
            "butler-team-viewer-run-x",
            "butler-team-operator-run-x",
            "butler-team-admin-run-x",
            "butler-controller-secrets-run-x"
        ])
    );
    let reader = secret_reader("ns-x", "run-x");
    let home_binding = objects.iter().find(|o| o["metadata"]["name"] == SecretReader::BINDING).unwrap();
    assert_eq!(home_binding["roleRef"]["name"], reader.cluster_role.as_str());
    assert_eq!(home_binding["subjects"][0]["namespace"], "ns-x");
    assert_eq!(team_roles("run-x").name(butler_core::api::TeamRole::Admin), "butler-team-admin-run-x");
}

#[test]
fn the_two_replicas_prefer_two_nodes() {
    let documents: Vec<Value> = serde_saphyr::from_multiple(COMPONENTS).expect("the core components parse");
    let deployment =
        documents.iter().find(|o| o["kind"] == "Deployment").expect("the controller's Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
    let spread = &deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0]["podAffinityTerm"];
    assert_eq!(spread["topologyKey"], "kubernetes.io/hostname");
    assert_eq!(
        spread["labelSelector"]["matchLabels"], deployment["spec"]["selector"]["matchLabels"],
        "it keeps the replicas of this Deployment apart"
    );
}
