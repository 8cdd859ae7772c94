//! Moving over from cluster-api-operator and clusterctl: what they installed is taken over in
//! place (no Deployment made anew, no pod restarted), and `butlerctl migrate` carries their
//! provider objects over.

use std::collections::BTreeMap;

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use butler_operator::cli::apply::Waits;
use butler_operator::cli::migrate::{self, Options};
use butler_repository::{ComponentsOptions, ImageOverrides, process_components};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::discovery::ApiResource;
use serde_json::{Value, json};

use crate::fixtures::{self, publish};
use crate::support::{Scenario, is};

const OLD_GROUP: &str = "operator.cluster.x-k8s.io";
const OLD_VERSION: &str = "v1alpha2";
/// The label that sends the cluster-wide objects the scenario makes itself along with it.
const RUN_LABEL: &str = "scenario.butlerlabs.dev/run";

/// A provider's release: the test provider's components (a ServiceAccount and the manager
/// Deployment), a ClusterRole and its binding named after the scenario, and a CRD (core only).
fn release(name: &str, ns: &str, crd: bool) -> String {
    let mut text = fixtures::components(name, "v1.0.0", &[]);
    text.push_str(&format!(
        "---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: {ns}-{name}-manager-role}}
rules:
  - {{apiGroups: [''], resources: [configmaps], verbs: [get, list, watch]}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: {ns}-{name}-manager-rolebinding}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {ns}-{name}-manager-role}}
subjects:
  - {{kind: ServiceAccount, name: {name}-manager, namespace: {name}-system}}
"
    ));
    if crd {
        text.push_str(&format!(
            "---\n{}",
            fixtures::gadget_crd(&format!("{ns}.cluster.x-k8s.io"), "Namespaced")
        ));
    }
    text
}

/// The stand-ins of cluster-api-operator's CRDs: its provider kinds, any fields, but the
/// default its CRDs write into every manager (`verbosity: 1`).
async fn install_old_crds(s: &Scenario) {
    for (kind, plural) in [
        ("CoreProvider", "coreproviders"),
        ("InfrastructureProvider", "infrastructureproviders"),
        ("BootstrapProvider", "bootstrapproviders"),
        ("ControlPlaneProvider", "controlplaneproviders"),
        ("AddonProvider", "addonproviders"),
        ("IPAMProvider", "ipamproviders"),
    ] {
        let crd: CustomResourceDefinition = serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{OLD_GROUP}")},
            "spec": {
                "group": OLD_GROUP, "scope": "Namespaced",
                "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural, "singular": kind.to_lowercase()},
                "versions": [{"name": OLD_VERSION, "served": true, "storage": true, "subresources": {"status": {}},
                              "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                  "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                      "properties": {"manager": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                                          "properties": {"verbosity": {"type": "integer", "default": 1}}}}}}}}}],
            },
        }))
        .unwrap();
        s.cluster.install_stand_in_crd(&crd).await;
    }
}

/// cluster-api-operator's validating webhooks on its kinds, as its chart installs them
/// (`failurePolicy: Fail`), calling its webhook Service, which answers no more once it is scaled
/// down (here: never, it does not exist). Scoped to the scenario's namespace, so that scenarios
/// running at once are not held by it, and removed with the scenario.
async fn old_webhooks(s: &Scenario) {
    let ns = &s.namespace;
    let hook = |kind: &str, plural: &str| {
        json!({"name": format!("v{}.operator.cluster.x-k8s.io", kind.to_lowercase()),
               "clientConfig": {"service": {"namespace": ns, "name": "capi-operator-webhook-service",
                                            "path": format!("/validate-operator-cluster-x-k8s-io-v1alpha2-{}", kind.to_lowercase())}},
               "rules": [{"apiGroups": [OLD_GROUP], "apiVersions": [OLD_VERSION],
                          "operations": ["CREATE", "UPDATE"], "resources": [plural]}],
               "failurePolicy": "Fail", "sideEffects": "None", "admissionReviewVersions": ["v1"],
               "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}})
    };
    let configuration: k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration =
        serde_json::from_value(json!({
            "metadata": {"name": format!("{ns}-capi-operator-validating-webhook-configuration"),
                         "labels": {RUN_LABEL: ns}},
            "webhooks": [hook("CoreProvider", "coreproviders"), hook("InfrastructureProvider", "infrastructureproviders")],
        }))
        .unwrap();
    Api::all(s.client.clone()).create(&PostParams::default(), &configuration).await.unwrap();
}

fn old_api(s: &Scenario, kind: &str) -> Api<DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk(OLD_GROUP, OLD_VERSION, kind);
    Api::namespaced_with(s.client.clone(), &s.namespace, &ApiResource::from_gvk(&gvk))
}

/// A provider object as cluster-api-operator v0.28 leaves it once installed: its finalizer,
/// its spec hash, and the status it reports.
async fn old_provider(s: &Scenario, kind: &str, name: &str, spec: Value) -> DynamicObject {
    let object: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{OLD_GROUP}/{OLD_VERSION}"), "kind": kind,
        "metadata": {"name": name, "namespace": s.namespace, "finalizers": ["provider.cluster.x-k8s.io"],
                     "annotations": {"operator.cluster.x-k8s.io/applied-spec-hash": "5d41402abc4b2a76b9719d911017c592"}},
        "spec": spec,
    }))
    .unwrap();
    let api = old_api(s, kind);
    let made = api.create(&PostParams::default(), &object).await.unwrap();
    let status = json!({"status": {
        "installedVersion": "v1.0.0", "contract": "v1beta1", "observedGeneration": 1,
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"},
            {"type": "PreflightCheckPassed", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"},
            {"type": "ProviderInstalled", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"},
        ],
    }});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(status)).await.unwrap();
    made
}

/// What cluster-api-operator installs for a provider: the release as clusterctl processes it
/// (its labels, the target namespace, the variables), without the Namespace, each namespaced
/// object owned by the provider object, the manager's flags from `args`; created as its
/// manager does (no server-side apply).
async fn old_install(
    s: &Scenario,
    label: &str,
    components: &str,
    owner: Option<&DynamicObject>,
    args: &[&str],
    greeting: &str,
    images: &ImageOverrides,
) {
    let what = format!("{label} v1.0.0");
    let variables = |name: &str| (name == "GREETING").then(|| greeting.to_string());
    let options = ComponentsOptions {
        what: &what,
        provider_label: label,
        target_namespace: Some(&s.namespace),
        images,
        variables: &variables,
    };
    let objects = process_components(components, &options).unwrap().objects().unwrap();
    let client = &s.client;
    for mut object in objects.into_iter().filter(|o| o["kind"] != "Namespace") {
        let namespaced = object["metadata"]["namespace"].is_string();
        match (namespaced, owner) {
            (true, Some(owner)) => {
                object["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": format!("{OLD_GROUP}/{OLD_VERSION}"),
                    "kind": owner.types.as_ref().unwrap().kind,
                    "name": owner.metadata.name, "uid": owner.metadata.uid,
                }]);
            }
            (false, _) => object["metadata"]["labels"][RUN_LABEL] = json!(s.namespace),
            _ => {}
        }
        if object["kind"] == "Deployment" {
            let container = &mut object["spec"]["template"]["spec"]["containers"][0]["args"];
            for arg in args {
                container.as_array_mut().unwrap().push(json!(arg));
            }
        }
        let r = butler_runtime::objects::ObjectRef::of(&object);
        let (resource, namespaced) =
            butler_runtime::apply::builtin(&r.api_version, &r.kind).expect("a built-in kind");
        let api: Api<DynamicObject> = match namespaced {
            true => Api::namespaced_with(client.clone(), &s.namespace, &resource),
            false => Api::all_with(client.clone(), &resource),
        };
        let object: DynamicObject = serde_json::from_value(object).unwrap();
        let params = PostParams { field_manager: Some("manager".into()), ..Default::default() };
        api.create(&params, &object).await.unwrap_or_else(|e| panic!("create {}: {e}", r.describe()));
    }
}

/// The provider Deployments (UID, generation, pod template) by name, and their pods' UIDs.
type Running = (BTreeMap<String, (String, i64, Value)>, Vec<String>);

/// The provider Deployments' identity and pod template, and their pods: a Deployment made anew
/// or with another template restarts its pods.
async fn running(s: &Scenario) -> Running {
    let deployments = Api::<Deployment>::namespaced(s.client.clone(), &s.namespace)
        .list(&ListParams::default().labels("cluster.x-k8s.io/provider"))
        .await
        .unwrap()
        .items;
    let seen = deployments
        .iter()
        .map(|d| {
            let template = serde_json::to_value(&d.spec.as_ref().unwrap().template).unwrap();
            (
                d.metadata.name.clone().unwrap(),
                (d.metadata.uid.clone().unwrap(), d.metadata.generation.unwrap_or_default(), template),
            )
        })
        .collect();
    let mut pods: Vec<String> = Api::<Pod>::namespaced(s.client.clone(), &s.namespace)
        .list(&ListParams::default().labels("control-plane"))
        .await
        .unwrap()
        .items
        .iter()
        .map(|p| p.metadata.uid.clone().unwrap())
        .collect();
    pods.sort();
    (seen, pods)
}

/// Pods restarted between two readings: Deployments made anew or with another template or
/// generation (each restarts its pods), and pods gone.
fn restarts(before: &Running, after: &Running) -> usize {
    let changed = before.0.iter().filter(|(name, was)| after.0.get(*name) != Some(*was)).count();
    let pods_gone = before.1.iter().filter(|p| !after.1.contains(p)).count();
    changed + pods_gone
}

/// A stand-in of this operator's Deployment as its manifest makes it (at 0 replicas: the
/// scenario runs the operator in its own process), run with `args`: what `migrate` reads to know
/// which namespaces it honours.
async fn operator_stand_in(s: &Scenario, args: &[&str]) {
    let labels = json!({"app.kubernetes.io/name": "butler-operator"});
    // Bound to the operator's ClusterRole as its manifest binds the operator (its account is
    // never made, so the binding grants nothing): a Deployment is taken for an operator only so.
    let account = "butler-operator-stand-in";
    s.cluster.remove_cluster_objects_labelled(&format!("{RUN_LABEL}={}", s.namespace));
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": format!("{}-operator-stand-in", s.namespace), "labels": {RUN_LABEL: s.namespace}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "butler-operator"},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": s.namespace}],
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(s.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "butler-operator", "namespace": s.namespace, "labels": labels},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"serviceAccountName": account,
                                       "containers": [{"name": "operator", "image": "ghcr.io/butlerdotdev/butler-operator:v0.1.0", "args": args}]}}},
    }))
    .unwrap();
    Api::<Deployment>::namespaced(s.client.clone(), &s.namespace)
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
}

/// What the stand-in's account holds once installed as the manifest installs the operator,
/// with the upstream rules an administrator adds before moving Cluster API's providers over:
/// the manifest's rules and the upstream ones, in a ClusterRole of the scenario's own.
async fn grant_upstream_rules(s: &Scenario) {
    let name = format!("{}-operator-stand-in-upstream", s.namespace);
    let mut rules = butler_operator::manifest::cluster_rules();
    rules.extend(butler_operator::manifest::upstream_rules());
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {RUN_LABEL: s.namespace}},
        "rules": rules,
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(s.client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    let binding: k8s_openapi::api::rbac::v1::ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {RUN_LABEL: s.namespace}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "butler-operator-stand-in", "namespace": s.namespace}],
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRoleBinding>::all(s.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
}

/// cluster-api-operator's Deployment `old-operator` in the scenario's namespace, at 1 replica,
/// with `annotations`; the Deployments API of the namespace.
async fn old_operator_deployment(s: &Scenario, annotations: Value) -> Api<Deployment> {
    let old_operator: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "old-operator", "namespace": s.namespace, "annotations": annotations},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "old-operator"}},
                 "template": {"metadata": {"labels": {"app": "old-operator"}},
                              "spec": {"containers": [{"name": "manager", "image": "registry.example.com/cluster-api-operator:v0.28.0"}]}}},
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    deployments.create(&PostParams::default(), &old_operator).await.unwrap();
    deployments
}

/// A migration of the providers of `namespace` from the old operator's Deployment `old` (of that
/// namespace), each step waiting at most `seconds`; no flag given.
fn moving(namespace: &str, old: Option<&str>, seconds: u64) -> Options {
    Options {
        namespace: Some(namespace.to_string()),
        old_operator: old.map(|name| (namespace.to_string(), name.to_string())),
        dry_run: false,
        leave_unsupported: false,
        copy_secrets: false,
        gitops_paused: false,
        waits: Waits {
            timeout: std::time::Duration::from_secs(seconds),
            poll: std::time::Duration::from_millis(100),
        },
    }
}

/// The labels of the scenario's namespace.
async fn namespace_labels(s: &Scenario) -> BTreeMap<String, String> {
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(s.client.clone());
    namespaces.get(&s.namespace).await.unwrap().metadata.labels.unwrap_or_default()
}

fn owned_by_the_old_operator(object: &Value) -> bool {
    object["metadata"]["ownerReferences"].as_array().is_some_and(|owners| {
        owners.iter().any(|o| o["apiVersion"].as_str().is_some_and(|v| v.starts_with(OLD_GROUP)))
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_moves_core_and_infrastructure_from_cluster_api_operator_without_a_pod_restart() {
    let mut s = Scenario::new("migrate").await;
    s.cluster.remove_cluster_objects_labelled(&format!("{RUN_LABEL}={}", s.namespace));
    install_old_crds(&s).await;
    let ns = s.namespace.clone();
    let core_release = release("capi", &ns, true);
    let infra_release = release("widget", &ns, false);
    // The core came from the network: what cluster-api-operator cached of it is all there is
    // here (the scenarios reach no network).
    let cached: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "core-cluster-api-v1.0.0", "namespace": ns,
                     "labels": {"managed-by.operator.cluster.x-k8s.io": "true", "provider.cluster.x-k8s.io/name": "cluster-api",
                                "provider.cluster.x-k8s.io/type": "core", "provider.cluster.x-k8s.io/version": "v1.0.0"}},
        "data": {"metadata": fixtures::METADATA, "components": core_release}}))
    .unwrap();
    Api::namespaced(s.client.clone(), &ns).create(&PostParams::default(), &cached).await.unwrap();
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.0.0", &infra_release).await;
    // Its config Secret where cluster-api-operator's chart puts them: another namespace.
    let secrets_ns = s.cluster.namespace("capi-secrets").await;
    let elsewhere: k8s_openapi::api::core::v1::Secret = serde_json::from_value(json!({
        "metadata": {"name": "widget-variables", "namespace": secrets_ns}, "stringData": {"GREETING": "hi"}}))
    .unwrap();
    Api::namespaced(s.client.clone(), &secrets_ns).create(&PostParams::default(), &elsewhere).await.unwrap();

    // cluster-api-operator's objects, and what it installed.
    let selector =
        |label: &str| json!({"selector": {"matchLabels": {"butler.butlerlabs.dev/provider": label}}});
    let core = old_provider(&s, "CoreProvider", "cluster-api", json!({"version": "v1.0.0"})).await;
    let infra = old_provider(
        &s,
        "InfrastructureProvider",
        "widget",
        json!({"version": "v1.0.0", "fetchConfig": selector("infrastructure-widget"),
               "configSecret": {"name": "widget-variables", "namespace": secrets_ns},
               "manager": {"featureGates": {"MachinePool": true}},
               "deployment": {"containers": [{"name": "manager", "imageUrl": "registry.example.com/widget/manager:v9"}]}}),
    )
    .await;
    // Its own clusterctl.yaml, mounted into its pod, moves every provider's images to a mirror,
    // and the core's releases to a mirror of them.
    let core_url = "https://mirror.local/capi/releases/latest/core-components.yaml";
    let clusterctl = format!(
        "images:\n  all:\n    repository: mirror.local/capi\nproviders:\n- name: cluster-api\n  type: CoreProvider\n  url: {core_url}\n"
    );
    let mirrored: ImageOverrides = serde_saphyr::from_str("all:\n  repository: mirror.local/capi\n").unwrap();
    let config: k8s_openapi::api::core::v1::ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "capi-operator-clusterctl", "namespace": ns},
        "data": {"clusterctl": clusterctl}}))
    .unwrap();
    Api::namespaced(s.client.clone(), &ns).create(&PostParams::default(), &config).await.unwrap();
    old_install(&s, "cluster-api", &core_release, Some(&core), &[], "hello", &mirrored).await;
    old_install(
        &s,
        "infrastructure-widget",
        &infra_release,
        Some(&infra),
        &["--feature-gates=MachinePool=true"],
        "hi",
        &mirrored,
    )
    .await;
    let old_operator: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "capi-operator-cluster-api-operator", "namespace": ns,
                     "labels": {"clusterctl.cluster.x-k8s.io/core": "capi-operator", "control-plane": "controller-manager"}},
        "spec": {"replicas": 1,
                 "selector": {"matchLabels": {"clusterctl.cluster.x-k8s.io/core": "capi-operator"}},
                 "template": {"metadata": {"labels": {"clusterctl.cluster.x-k8s.io/core": "capi-operator"}},
                              "spec": {"containers": [{"name": "manager", "image": "registry.example.com/cluster-api-operator:v0.28.0",
                                                       "volumeMounts": [{"name": "clusterctl", "mountPath": "/config"}]}],
                                       "volumes": [{"name": "clusterctl", "configMap": {"name": "capi-operator-clusterctl",
                                           "items": [{"key": "clusterctl", "path": "clusterctl.yaml"}]}}]}}},
    }))
    .unwrap();
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &ns);
    deployments.create(&PostParams::default(), &old_operator).await.unwrap();
    // Its mounted overrides came after the object's imageUrl, as cluster-api-operator applies them.
    let image = json!([{"op": "replace", "path": "/spec/template/spec/containers/0/image",
                        "value": "mirror.local/capi/manager:v9"}]);
    let image: json_patch::Patch = serde_json::from_value(image).unwrap();
    deployments
        .patch("widget-controller-manager", &PatchParams::default(), &Patch::<()>::Json(image))
        .await
        .unwrap();
    if s.cluster.is_in_memory() {
        butler_apiserver::stand_ins::roll_out_deployments(&s.client, &ns, "cluster.x-k8s.io/provider")
            .await
            .unwrap();
    }
    let before = running(&s).await;
    assert_eq!(before.0.len(), 2, "the two providers run: {:?}", before.0.keys());
    // Its webhooks, which fail closed once it is down (here from now on).
    old_webhooks(&s).await;
    let infra_verbosity = old_api(&s, "InfrastructureProvider").get("widget").await.unwrap();
    assert_eq!(infra_verbosity.data["spec"]["manager"]["verbosity"], 1, "its CRD's default");

    // The operator as its manifest runs it: butler-system by name, the rest by label, which
    // the scenario's namespace (cluster-api-operator's layout) does not carry yet.
    use butler_operator::controller::wanted::policy::NAMESPACE_LABEL;
    operator_stand_in(&s, &["run", "--provider-namespace=butler-system"]).await;
    s.start_operator_with_options(|o| {
        o.policy.provider_namespaces = Some(vec!["butler-system".into()]);
        o.policy.namespace_label = Some(NAMESPACE_LABEL.into());
    });
    let marking = crate::cli::keep_marking_available(&s);
    let options = |dry_run: bool| Options {
        dry_run,
        copy_secrets: true,
        ..moving(&ns, Some("capi-operator-cluster-api-operator"), 60)
    };

    // The operator's account lacks what the releases' ClusterRoles grant: nothing moves. (On a
    // shared cluster the operator's ClusterRole may be installed and grant it already.)
    let first = migrate::migrate(&s.client, &options(true), &|_| {}).await;
    if s.cluster.is_in_memory() || first.is_err() {
        let refused = first.unwrap_err();
        assert!(
        refused.contains(&format!("CoreProvider {ns}/cluster-api: this operator's account {ns}/butler-operator-stand-in may not write what its release ships ("))
            && refused.contains(&format!("create on serviceaccounts in {ns}"))
            && refused.contains("upstreamRBAC.enabled=true"),
            "{refused}"
        );
    }
    grant_upstream_rules(&s).await;

    // The dry run says it all and changes nothing.
    let plan = migrate::migrate(&s.client, &options(true), &|_| {}).await.unwrap();
    assert!(
        plan.contains(&format!("InfrastructureProvider {ns}/widget: spec.deployment.containers[0].imageUrl: mirror.local/capi/manager:v9, as cluster-api-operator's image overrides made registry.example.com/widget/manager:v9")),
        "{plan}"
    );
    // Rendered as this operator will install them, the pod templates are those that run.
    for deployment in ["capi-controller-manager", "widget-controller-manager"] {
        assert!(
            plan.contains(&format!(
                "Deployment {ns}/{deployment}: the same pod template; its pods keep running"
            )),
            "{plan}"
        );
    }
    println!("{plan}");
    assert!(plan.contains("scale from 1 to 0 replicas"), "{plan}");
    assert!(
        plan.contains(&format!(
            "CoreProvider {ns}/cluster-api v1.0.0: carry over as CoreProvider {ns}/cluster-api"
        )),
        "{plan}"
    );
    assert!(plan.contains(&format!("InfrastructureProvider {ns}/widget v1.0.0: carry over")), "{plan}");
    assert!(plan.contains("dry run: nothing was changed"), "{plan}");
    assert!(
        plan.contains(&format!(
            "spec.fetchConfig.selector: reads v1.0.0 from ConfigMap {ns}/core-cluster-api-v1.0.0"
        )),
        "{plan}"
    );
    assert!(
        plan.contains(&format!("ValidatingWebhookConfiguration {ns}-capi-operator-validating-webhook-configuration: its webhooks vcoreprovider.operator.cluster.x-k8s.io, vinfrastructureprovider.operator.cluster.x-k8s.io on its own kinds fail closed")),
        "{plan}"
    );
    // (Unless an operator of a shared cluster honours every namespace.)
    let operators = butler_operator::cli::honoured::operators(&s.client).await.expect("Deployments are read");
    let to_label = operators.why_not(&ns).is_some();
    if to_label {
        assert!(plan.contains(&format!("namespace {ns}: label it {NAMESPACE_LABEL}=true")), "{plan}");
    }
    assert!(
        plan.contains(&format!("copy Secret {secrets_ns}/widget-variables into {ns}/widget-variables")),
        "{plan}"
    );
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(s.client.clone(), &ns);
    assert!(secrets.get_opt("widget-variables").await.unwrap().is_none(), "the dry run copies nothing");
    // The core reads the release cluster-api-operator cached; to follow new releases, the
    // mirror its clusterctl.yaml named.
    assert!(
        plan.contains(&format!(
            "to follow new releases, set spec.fetchConfig to {{url: {core_url}}} (from ConfigMap {ns}/capi-operator-clusterctl)"
        )),
        "{plan}"
    );
    assert!(
        plan.contains(&format!("Secret {ns}/cluster-api-images: make it with the image overrides of ConfigMap {ns}/capi-operator-clusterctl"))
            && plan.contains(&format!("Secret {ns}/widget-variables: add the key images")),
        "{plan}"
    );
    assert!(
        !to_label || !namespace_labels(&s).await.contains_key(NAMESPACE_LABEL),
        "the dry run labels nothing"
    );
    assert_eq!(
        deployments.get("capi-operator-cluster-api-operator").await.unwrap().spec.unwrap().replicas,
        Some(1)
    );
    assert!(s.api::<CoreProvider>().get_opt("cluster-api").await.unwrap().is_none());

    let report = migrate::migrate(&s.client, &options(false), &|line| println!("{line}")).await.unwrap();
    println!("{report}");
    assert!(
        report.contains(&format!("InfrastructureProvider {ns}/widget: Ready under this operator")),
        "{report}"
    );

    if to_label {
        assert_eq!(namespace_labels(&s).await.get(NAMESPACE_LABEL).map(String::as_str), Some("true"));
    }

    // Nothing restarted, everything is this operator's now.
    let after = running(&s).await;
    let restarted = restarts(&before, &after);
    println!("pod restarts during the migration: {restarted}");
    assert_eq!(restarted, 0, "before: {:#?}\nafter: {:#?}", before.0, after.0);
    let old_operator = deployments.get("capi-operator-cluster-api-operator").await.unwrap();
    assert_eq!(old_operator.spec.unwrap().replicas, Some(0));
    assert_eq!(old_operator.metadata.annotations.unwrap()[migrate::REPLICAS_BEFORE], "1");
    for kind in ["CoreProvider", "InfrastructureProvider"] {
        assert!(
            old_api(&s, kind).list(&ListParams::default()).await.unwrap().items.is_empty(),
            "{kind}s of cluster-api-operator are gone"
        );
    }
    let widget = s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
    let own = widget.spec.config_secret.clone().unwrap();
    assert_eq!(
        (own.name.as_str(), own.namespace.as_deref()),
        ("widget-variables", None),
        "it reads its copy"
    );
    let copied = secrets.get("widget-variables").await.unwrap();
    assert_eq!(
        copied.metadata.labels.unwrap()[migrate::secrets::COPIED_FROM],
        format!("{secrets_ns}.widget-variables")
    );
    // The copy is a snapshot: a later run brings it up to its changed source.
    let changed = json!({"stringData": {"GREETING": "hey"}});
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(s.client.clone(), &secrets_ns)
        .patch("widget-variables", &PatchParams::default(), &Patch::Merge(changed))
        .await
        .unwrap();
    let again = migrate::migrate(&s.client, &options(false), &|_| {}).await.unwrap();
    assert!(
        again.contains(&format!("copy Secret {secrets_ns}/widget-variables into {ns}/widget-variables")),
        "{again}"
    );
    let refreshed = secrets.get("widget-variables").await.unwrap().data.unwrap();
    assert_eq!(refreshed["GREETING"].0, b"hey");
    assert_eq!(widget.status.as_ref().unwrap().installed_version.as_deref(), Some("v1.0.0"));
    for d in deployments.list(&ListParams::default().labels("cluster.x-k8s.io/provider")).await.unwrap().items
    {
        let value = serde_json::to_value(&d).unwrap();
        assert!(!owned_by_the_old_operator(&value), "{} still has the old owner", d.metadata.name.unwrap());
        assert!(value["metadata"]["labels"]["operator.butlerlabs.dev/provider-name"].is_string());
    }
    let roles: Api<DynamicObject> = Api::all_with(
        s.client.clone(),
        &butler_runtime::apply::builtin("rbac.authorization.k8s.io/v1", "ClusterRole").unwrap().0,
    );
    let role = roles.get(&format!("{ns}-widget-manager-role")).await.unwrap();
    assert_eq!(role.metadata.labels.unwrap()["operator.butlerlabs.dev/provider-name"], "widget");

    // A second run finds nothing left to do.
    let again = migrate::migrate(&s.client, &options(false), &|_| {}).await.unwrap();
    assert!(again.contains("nothing to move"), "{again}");

    // The provider deletes what it took over.
    s.api::<InfrastructureProvider>().delete("widget", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("widget").await;
    assert!(deployments.get_opt("widget-controller-manager").await.unwrap().is_none());
    assert!(roles.get_opt(&format!("{ns}-widget-manager-role")).await.unwrap().is_none());
    marking.abort();
    s.stop_operator().await;
}

#[tokio::test]
async fn what_cluster_api_operator_installed_is_taken_over_in_place_and_outlives_its_old_owner() {
    let mut s = Scenario::new("adopt").await;
    s.cluster.remove_cluster_objects_labelled(&format!("{RUN_LABEL}={}", s.namespace));
    install_old_crds(&s).await;
    let ns = s.namespace.clone();
    let text = release("widget", &ns, false);
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.0.0", &text).await;
    let spec = json!({"version": "v1.0.0"});
    let old = old_provider(&s, "InfrastructureProvider", "widget", spec).await;
    old_install(&s, "infrastructure-widget", &text, Some(&old), &[], "hello", &ImageOverrides::default())
        .await;
    // But something else owns its ServiceAccount too.
    let accounts: Api<DynamicObject> = Api::namespaced_with(
        s.client.clone(),
        &ns,
        &butler_runtime::apply::builtin("v1", "ServiceAccount").unwrap().0,
    );
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &ns);
    let other = deployments.get("widget-controller-manager").await.unwrap();
    let old_owner = json!({"apiVersion": format!("{OLD_GROUP}/{OLD_VERSION}"), "kind": "InfrastructureProvider",
                           "name": "widget", "uid": old.metadata.uid});
    let foreign = json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "widget-controller-manager",
                         "uid": other.metadata.uid});
    let owners = |list: Value| json!({"metadata": {"ownerReferences": list}});
    accounts
        .patch("widget-manager", &PatchParams::default(), &Patch::Merge(owners(json!([old_owner, foreign]))))
        .await
        .unwrap();
    let before = running(&s).await;

    // A core provider of its own, installed afresh.
    publish(&s, "cluster-api", "core-components.yaml", "v1.0.0", &release("capi", &ns, false)).await;
    s.start_operator();
    s.create::<CoreProvider>("cluster-api", &fixtures::selector("cluster-api")).await;
    s.create::<InfrastructureProvider>("widget", &fixtures::selector("infrastructure-widget")).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("widget", "refusal", |p| is(p, "ProviderInstalled", "False"))
        .await;
    let conditions = refused.status.unwrap().conditions;
    let message = &conditions.iter().find(|c| c.type_ == "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("ServiceAccount")
            && message.contains("widget-manager")
            && message.contains("left alone"),
        "{message}"
    );

    // Owned by cluster-api-operator's object alone, the rest is taken over in place.
    accounts
        .patch("widget-manager", &PatchParams::default(), &Patch::Merge(owners(json!([old_owner]))))
        .await
        .unwrap();
    let marking = crate::cli::keep_marking_available(&s);
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
    assert_eq!(restarts(&before, &running(&s).await), 0);

    // cluster-api-operator's object goes (as when its CRDs are uninstalled): what this
    // operator took over stays.
    let remove_finalizer = json!({"metadata": {"finalizers": null}});
    let old_objects = old_api(&s, "InfrastructureProvider");
    old_objects.patch("widget", &PatchParams::default(), &Patch::Merge(remove_finalizer)).await.unwrap();
    old_objects.delete("widget", &kube::api::DeleteParams::background()).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while old_objects.get_opt("widget").await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "cluster-api-operator's object is not gone");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The garbage collector has had its turn when a late dependent would be gone.
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    assert_eq!(restarts(&before, &running(&s).await), 0, "the old owner's deletion took the provider along");
    assert!(accounts.get_opt("widget-manager").await.unwrap().is_some());
    marking.abort();
    s.stop_operator().await;
}

#[tokio::test]
async fn migrate_changes_nothing_while_something_would_be_lost() {
    let s = Scenario::new("migrate-blocked").await;
    install_old_crds(&s).await;
    let ns = s.namespace.clone();
    let spec = json!({"version": "v1.0.0", "configSecret": {"name": "widget-variables", "namespace": "kube-system"}});
    old_provider(&s, "InfrastructureProvider", "widget", spec).await;
    // Argo CD manages it (annotation tracking): it would scale it back up.
    let tracking = json!({"argocd.argoproj.io/tracking-id": "capi:apps/Deployment:x/old-operator"});
    let deployments = old_operator_deployment(&s, tracking).await;
    // An operator that honours butler-system alone, by name.
    operator_stand_in(&s, &["run", "--provider-namespace=butler-system", "--provider-namespace-label="])
        .await;
    let options = moving(&ns, Some("old-operator"), 5);
    let refused = migrate::migrate(&s.client, &options, &|_| {}).await.unwrap_err();
    assert!(refused.contains("nothing was changed"), "{refused}");
    assert!(
        refused.contains(&format!("cluster-api-operator's Deployment {ns}/old-operator is managed by Argo CD (application capi), which would undo the move"))
            && refused.contains("argocd app set APP --sync-policy none")
            && refused.contains("--gitops-paused"),
        "{refused}"
    );
    assert!(
        refused.contains(&format!("InfrastructureProvider {ns}/widget: its spec.configSecret kube-system/widget-variables is in another namespace"))
            && refused.contains("give --copy-secrets"),
        "{refused}"
    );
    // On a shared cluster another operator (or another scenario's stand-in) may honour labelled
    // namespaces; then migrate would label this one instead.
    let operators = butler_operator::cli::honoured::operators(&s.client).await.expect("Deployments are read");
    if operators.label_for().is_none() {
        assert!(
            refused.contains(&format!("no operator honours provider objects in {ns}"))
                && refused.contains(&format!("add --provider-namespace={ns} to an operator")),
            "{refused}"
        );
    }
    assert_eq!(deployments.get("old-operator").await.unwrap().spec.unwrap().replicas, Some(1));
    assert!(s.api::<InfrastructureProvider>().get_opt("widget").await.unwrap().is_none());
    assert_eq!(
        old_api(&s, "InfrastructureProvider").list(&ListParams::default()).await.unwrap().items.len(),
        1
    );
}

/// Each carried-over object is rendered from its release before anything changes, as this
/// operator would install it: a patch that matches nothing, a role granting what the operator's
/// account lacks and a kind the cluster does not serve each stop the move, and the pods that
/// would restart are named.
#[tokio::test]
async fn migrate_renders_each_provider_first_and_stops_on_what_the_operator_could_not_install() {
    let s = Scenario::new("migrate-render").await;
    s.cluster.remove_cluster_objects_labelled(&format!("{RUN_LABEL}={}", s.namespace));
    install_old_crds(&s).await;
    let ns = s.namespace.clone();
    // A release whose ClusterRole may create Deployments (beyond the operator's role ceiling)
    // and that ships a kind no CRD defines.
    let gadget_installed = release("gadget", &ns, false);
    let mut gadget_release = gadget_installed.clone();
    gadget_release.push_str(&format!(
        "---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {ns}-gadget-deployer}}\nrules:\n  - {{apiGroups: [apps], resources: [deployments], verbs: [create]}}\n---\napiVersion: issuers.{ns}.example/v1\nkind: Issuer\nmetadata: {{name: gadget-selfsigned-issuer, namespace: gadget-system}}\nspec: {{selfSigned: {{}}}}\n"
    ));
    let widget_release = release("widget", &ns, false);
    publish(&s, "infrastructure-gadget", "infrastructure-components.yaml", "v1.0.0", &gadget_release).await;
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.0.0", &widget_release).await;
    let selector =
        |label: &str| json!({"selector": {"matchLabels": {"butler.butlerlabs.dev/provider": label}}});
    // It runs with --v=3, which its object no longer asks for: its pods would restart.
    let gadget = old_provider(
        &s,
        "InfrastructureProvider",
        "gadget",
        json!({"version": "v1.0.0", "fetchConfig": selector("infrastructure-gadget")}),
    )
    .await;
    // A patch for a Deployment the release does not have: cluster-api-operator passed it by.
    let widget = old_provider(
        &s,
        "InfrastructureProvider",
        "widget",
        json!({"version": "v1.0.0", "fetchConfig": selector("infrastructure-widget"),
               "manifestPatches": ["kind: Deployment\nmetadata: {name: widget-webhook}\nspec: {replicas: 2}\n"]}),
    )
    .await;
    // An OCI registry over plain HTTP on the local network, which cluster-api-operator reached.
    old_provider(
        &s,
        "InfrastructureProvider",
        "gizmo",
        json!({"version": "v1.0.0", "fetchConfig": {"oci": "http://10.20.0.5:5000/capi/gizmo:v1.0.0"}}),
    )
    .await;
    let none = ImageOverrides::default();
    old_install(&s, "infrastructure-gadget", &gadget_installed, Some(&gadget), &["--v=3"], "hello", &none)
        .await;
    old_install(&s, "infrastructure-widget", &widget_release, Some(&widget), &[], "hello", &none).await;
    old_operator_deployment(&s, json!({})).await;
    // The operator as shipped holds releases' roles to its ceiling (here one of the scenario's
    // own, with the shipped rules).
    let ceiling = format!("{ns}-ceiling");
    let role: k8s_openapi::api::rbac::v1::ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": ceiling, "labels": {RUN_LABEL: ns}},
        "rules": butler_operator::manifest::ceiling_rules(),
    }))
    .unwrap();
    Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(s.client.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    operator_stand_in(
        &s,
        &["run", &format!("--provider-namespace={ns}"), &format!("--role-ceiling={ceiling}")],
    )
    .await;

    let refused =
        migrate::migrate(&s.client, &moving(&ns, Some("old-operator"), 5), &|_| {}).await.unwrap_err();
    println!("{refused}");
    for said in [
        "nothing was changed".to_string(),
        format!(
            "InfrastructureProvider {ns}/widget: rendered as this operator would install it after the move, it fails: spec.manifestPatches[0]"
        ),
        format!(
            "InfrastructureProvider {ns}/gadget: this operator's account {ns}/butler-operator-stand-in may not write what its release ships ("
        ),
        format!(
            "InfrastructureProvider {ns}/gadget: the operator {ns}/butler-operator would refuse it: ClusterRole {ns}-gadget-deployer is refused: its rule"
        ),
        format!(
            "grants create on deployments.apps, which the ceiling ClusterRole {ns}-ceiling (--role-ceiling) does not"
        ),
        format!(
            "InfrastructureProvider {ns}/gadget: its release ships what this cluster does not serve: issuers.{ns}.example/v1 Issuer is not served by the cluster"
        ),
        format!(
            "Deployment {ns}/gadget-controller-manager: its pods will restart: this operator renders another template.spec.containers[manager].args"
        ),
        format!(
            "InfrastructureProvider {ns}/gizmo: spec.fetchConfig.oci reaches 10.20.0.5:5000 over plain HTTP"
        ),
        format!(
            "InfrastructureProvider {ns}/gizmo: spec.fetchConfig.oci names 10.20.0.5:5000, and 10.20.0.5 is a private address"
        ),
    ] {
        assert!(refused.contains(&said), "{said}\nnot in:\n{refused}");
    }
    assert!(s.api::<InfrastructureProvider>().list(&ListParams::default()).await.unwrap().items.is_empty());
}

/// GitOps users keep cluster-api-operator's provider objects in Git: `migrate --from-file`
/// converts each file of the shapes its users write (its quick starts, chart, e2e fixtures,
/// v1alpha1 objects; `tests/capi-operator-objects/`) without a cluster, and every
/// object it writes is one this operator's CRDs take (created as a dry run, in the scenario's
/// namespace, so nothing is left and no other namespace is touched).
#[tokio::test]
async fn every_provider_object_of_their_users_files_is_taken_after_from_file() {
    let s = Scenario::new("from-file").await;
    let folder = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/capi-operator-objects");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "yaml") {
            files.push((
                path.file_name().unwrap().to_string_lossy().to_string(),
                std::fs::read_to_string(&path).unwrap(),
            ));
        }
    }
    files.sort();
    let theirs: usize =
        files.iter().map(|(_, text)| text.matches("apiVersion: operator.cluster.x-k8s.io/").count()).sum();
    let converted = migrate::files::convert(&files).unwrap();
    println!("{}", converted.report.join("\n"));
    assert_eq!(converted.providers, theirs, "every one of their {theirs} provider objects is converted");
    let documents: Vec<Value> = serde_saphyr::from_multiple(&converted.yaml).unwrap();
    let mut taken = 0;
    for mut document in
        documents.into_iter().filter(|d| d["apiVersion"] == "operator.butlerlabs.dev/v1alpha1")
    {
        let kind = document["kind"].as_str().unwrap().to_string();
        let name = document["metadata"]["name"].as_str().unwrap().to_string();
        document["metadata"]["namespace"] = json!(s.namespace);
        let resource =
            <butler_operator::api::ProviderKind as butler_operator::api::KindNames>::from_kind(&kind)
                .map(butler_operator::api::KindNames::api_resource)
                .unwrap_or_else(|| panic!("{kind} is a kind of this operator"));
        let api: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), &s.namespace, &resource);
        let object: DynamicObject = serde_json::from_value(document).unwrap();
        let params = PostParams { dry_run: true, ..Default::default() };
        api.create(&params, &object).await.unwrap_or_else(|e| panic!("{kind} {name} is refused: {e}"));
        taken += 1;
    }
    println!("{taken} of their {theirs} provider objects taken after migrate --from-file");
    assert_eq!(taken, theirs);
}

/// cluster-api-operator's objects as Git keeps them often name no version. Converted as they
/// are and applied from Git, this operator would install the newest release once it honours
/// their namespace; `--from-file --versions-from-cluster` writes the versions that run, and
/// `migrate` sets it on an object Git applied without one before it labels the namespace. Under
/// Argo CD, migrate waits for `--gitops-paused`; then the provider moves with the version that
/// ran (a newer release is there) and no pod restarts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_kept_in_git_without_a_version_get_the_one_that_runs() {
    let mut s = Scenario::new("migrate-git").await;
    s.cluster.remove_cluster_objects_labelled(&format!("{RUN_LABEL}={}", s.namespace));
    install_old_crds(&s).await;
    let ns = s.namespace.clone();
    // v1.0.0 runs; v1.1.0 is newer, which a provider with no version would install.
    let core_release = release("capi", &ns, true);
    publish(&s, "cluster-api", "core-components.yaml", "v1.0.0", &core_release).await;
    publish(&s, "cluster-api", "core-components.yaml", "v1.1.0", &core_release.replace("v1.0.0", "v1.1.0"))
        .await;
    let fetch = json!({"selector": {"matchLabels": {"butler.butlerlabs.dev/provider": "cluster-api"}}});
    // Argo CD applied cluster-api-operator's object from Git (annotation tracking).
    let tracked = |kind: &str, name: &str| format!("capi:operator.cluster.x-k8s.io/{kind}:{ns}/{name}");
    let core = old_provider(&s, "CoreProvider", "cluster-api", json!({"fetchConfig": fetch})).await;
    old_api(&s, "CoreProvider")
        .patch(
            "cluster-api",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"argocd.argoproj.io/tracking-id": tracked("CoreProvider", "cluster-api")}}})),
        )
        .await
        .unwrap();
    old_install(&s, "cluster-api", &core_release, Some(&core), &[], "hello", &ImageOverrides::default())
        .await;
    old_operator_deployment(&s, json!({})).await;
    if s.cluster.is_in_memory() {
        butler_apiserver::stand_ins::roll_out_deployments(&s.client, &ns, "cluster.x-k8s.io/provider")
            .await
            .unwrap();
    }
    let before = running(&s).await;

    // The Git file holds no version: the plain conversion says so, for the command to refuse;
    // with the versions of the cluster it writes the one that runs.
    let fetch_yaml = "{selector: {matchLabels: {butler.butlerlabs.dev/provider: cluster-api}}}";
    let file = format!(
        "apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: CoreProvider\nmetadata: {{name: cluster-api, namespace: {ns}}}\nspec: {{fetchConfig: {fetch_yaml}}}\n"
    );
    let files = vec![("git.yaml".to_string(), file)];
    let plain = migrate::files::convert(&files).unwrap();
    assert_eq!(
        plain.unversioned,
        vec![format!("CoreProvider {ns}/cluster-api")],
        "said, for the command to refuse"
    );
    let running_versions = migrate::files::running_versions(&s.client).await.unwrap();
    let filled = migrate::files::convert_with(&files, &running_versions).unwrap();
    assert!(filled.unversioned.is_empty());
    let documents: Vec<Value> = serde_saphyr::from_multiple(&filled.yaml).unwrap();
    assert_eq!(documents[0]["spec"]["version"], "v1.0.0", "the version that runs");

    // Applied from Git as the plain conversion wrote it, before migrate ran (the namespace is not
    // honoured yet, so nothing installs it).
    let applied: Vec<Value> = serde_saphyr::from_multiple(&plain.yaml).unwrap();
    let object: CoreProvider = serde_json::from_value(applied[0].clone()).unwrap();
    s.api::<CoreProvider>().create(&PostParams::default(), &object).await.unwrap();
    use butler_operator::controller::wanted::policy::NAMESPACE_LABEL;
    operator_stand_in(&s, &["run", "--provider-namespace=butler-system"]).await;
    grant_upstream_rules(&s).await;
    s.start_operator_with_options(|o| {
        o.policy.provider_namespaces = Some(vec!["butler-system".into()]);
        o.policy.namespace_label = Some(NAMESPACE_LABEL.into());
    });
    let marking = crate::cli::keep_marking_available(&s);

    // Argo CD would undo the move: nothing changes until it is paused.
    let refused =
        migrate::migrate(&s.client, &moving(&ns, Some("old-operator"), 60), &|_| {}).await.unwrap_err();
    assert!(
        refused.contains(&format!("CoreProvider {ns}/cluster-api is managed by Argo CD (application capi)"))
            && refused.contains("--gitops-paused"),
        "{refused}"
    );
    let options = Options { dry_run: true, gitops_paused: true, ..moving(&ns, Some("old-operator"), 60) };
    let plan = migrate::migrate(&s.client, &options, &|_| {}).await.unwrap();
    assert!(
        plan.contains(&format!(
            "CoreProvider {ns}/cluster-api: carried over already (from a file), with no version: set to v1.0.0, the version that runs"
        )),
        "{plan}"
    );
    let options = Options { dry_run: false, ..options };
    let report = migrate::migrate(&s.client, &options, &|line| println!("{line}")).await.unwrap();
    assert!(
        report.contains(&format!("CoreProvider {ns}/cluster-api: Ready under this operator")),
        "{report}"
    );
    let moved = s.wait_for::<CoreProvider>("cluster-api", "Ready", |p| is(p, "Ready", "True")).await;
    assert_eq!(moved.spec.version.as_deref(), Some("v1.0.0"), "the version that ran, not the newest");
    assert_eq!(moved.status.as_ref().unwrap().installed_version.as_deref(), Some("v1.0.0"));
    assert_eq!(restarts(&before, &running(&s).await), 0, "no pod restarted");
    assert!(old_api(&s, "CoreProvider").list(&ListParams::default()).await.unwrap().items.is_empty());
    marking.abort();
    s.stop_operator().await;
}
