//! Provider objects outside the namespaces an operator honours, and inventories anyone who may
//! write ConfigMaps could forge: an operator reads, writes, counts and deletes nothing for a
//! provider object it does not honour, and a deletion removes only what carries the provider's
//! labels. Two operators honouring two namespaces of one cluster never touch each other's.

use std::sync::Arc;
use std::time::Duration;

use butler_operator::api::{CoreProvider, InfrastructureProvider, PROVIDER_FINALIZER};
use butler_operator::controller::{self, Options};
use butler_operator::release::provider_configmap;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::fixtures::{METADATA, components, publish, selector};
use crate::support::{Scenario, is, reason};

fn spec(label: &str) -> String {
    let mut spec: serde_json::Value = serde_json::from_str(&selector(label)).unwrap();
    spec["version"] = json!("v1.0.0");
    spec.to_string()
}

/// Publishes `label` at v1.0.0 into `namespace`.
async fn publish_in(s: &Scenario, namespace: &str, label: &str, file: &str, components: &str) {
    let files =
        [("metadata.yaml".to_string(), METADATA.to_string()), (file.to_string(), components.to_string())];
    let mut cm = provider_configmap(label, "v1.0.0", &files);
    cm.metadata.namespace = Some(namespace.into());
    let name = cm.metadata.name.clone().unwrap();
    Api::<ConfigMap>::namespaced(s.client.clone(), namespace)
        .patch(&name, &PatchParams::apply("scenario").force(), &Patch::Apply(&cm))
        .await
        .unwrap();
}

/// A victim's ConfigMap in a namespace of its own.
async fn precious(s: &Scenario) -> (Api<ConfigMap>, String) {
    let victim = s.cluster.namespace("victim").await;
    let api: Api<ConfigMap> = Api::namespaced(s.client.clone(), &victim);
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "precious"}, "data": {"k": "v"}})).unwrap();
    api.create(&PostParams::default(), &cm).await.unwrap();
    (api, victim)
}

/// An inventory ConfigMap for `provider` listing `listed`, labelled and owned as the operator
/// writes one.
async fn forge_inventory(s: &Scenario, provider: &InfrastructureProvider, listed: serde_json::Value) {
    let namespace = provider.namespace().unwrap();
    let name = provider.name_any();
    let record = json!({"version": "v1.0.0", "contract": "v1beta1", "digest": "forged", "objects": [listed]});
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": format!("infrastructureproviders-{name}-inventory"),
            "namespace": namespace,
            "labels": {
                "operator.butlerlabs.dev/inventory": "true",
                "operator.butlerlabs.dev/provider-kind": "InfrastructureProvider",
                "operator.butlerlabs.dev/provider-name": name,
                "operator.butlerlabs.dev/provider-namespace": namespace,
            },
            "ownerReferences": [{"apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "InfrastructureProvider",
                "name": name, "uid": provider.uid().unwrap(), "controller": true}],
        },
        "data": {"inventory": record.to_string()},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(s.client.clone(), &namespace)
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
}

/// A provider object with the operator's finalizer already set and a forged inventory listing
/// a third namespace's ConfigMap: deleted where the operator does not look, nothing happens at
/// all (not even its finalizer is removed); deleted where it does, the ConfigMap stays, since
/// it does not carry the provider's labels.
#[tokio::test]
async fn a_forged_inventory_deletes_nothing_of_anyone_else() {
    let mut s = Scenario::new("attack-inventory").await;
    let (victims, victim) = precious(&s).await;
    let listed = json!({"apiVersion": "v1", "kind": "ConfigMap", "namespace": victim, "name": "precious"});
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let attacker = s.cluster.namespace("attacker").await;
    let forged = |namespace: &str| -> InfrastructureProvider {
        serde_json::from_value(json!({
            "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "InfrastructureProvider",
            "metadata": {"name": "gcp", "namespace": namespace, "finalizers": [PROVIDER_FINALIZER]},
            "spec": {"version": "v1.0.0"},
        }))
        .unwrap()
    };
    let outside: Api<InfrastructureProvider> = Api::namespaced(s.client.clone(), &attacker);
    let made = outside.create(&PostParams::default(), &forged(&attacker)).await.unwrap();
    forge_inventory(&s, &made, listed.clone()).await;
    let inside = s.api::<InfrastructureProvider>();
    let made = inside.create(&PostParams::default(), &forged(&s.namespace)).await.unwrap();
    forge_inventory(&s, &made, listed).await;

    // The operator watches every namespace and honours the scenario's alone.
    // Under its shipped RBAC, as the attack was run on a real server.
    let honoured = s.namespace.clone();
    s.start_operator_shipped(move |o| {
        o.namespace = None;
        o.policy.provider_namespaces = Some(vec![honoured]);
    })
    .await;
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.wait_for::<CoreProvider>("butler", "installed", |p| reason(p, "ProviderInstalled", "Installed")).await;

    outside.delete("gcp", &Default::default()).await.unwrap();
    inside.delete("gcp", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("gcp").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(victims.get_opt("precious").await.unwrap().is_some(), "the third namespace's ConfigMap stays");
    let left = outside.get("gcp").await.unwrap();
    assert_eq!(left.finalizers(), [PROVIDER_FINALIZER], "nothing is done where the operator does not look");
    assert!(left.status.is_none(), "{:?}", left.status);
    s.stop_operator().await;
    // What the operator did not finish is the scenario's to take away.
    outside
        .patch("gcp", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
}

/// Two operators on one cluster, each honouring its own namespace, each installing and
/// deleting there: a tenant's `gcp` made first in the other namespace is no duplicate, a
/// core being deleted in one waits for its infrastructure provider (the other operator never
/// removes its finalizer), and neither writes anything on the other's objects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_operators_on_one_cluster_never_touch_each_others_providers() {
    let mut s = Scenario::new("two-operators").await;
    let other = s.cluster.namespace("other").await;
    for namespace in [s.namespace.clone(), other.clone()] {
        publish_in(&s, &namespace, "butler", "core-components.yaml", &components("butler", "v1.0.0", &[]))
            .await;
        let gcp = components("gcp", "v1.0.0", &[]);
        publish_in(&s, &namespace, "infrastructure-gcp", "infrastructure-components.yaml", &gcp).await;
    }
    // The other namespace's providers, the tenant's gcp first.
    let theirs = |kind| format!("/namespaces/{other}/{kind}");
    let other_infra: Api<InfrastructureProvider> = Api::namespaced(s.client.clone(), &other);
    let other_core: Api<CoreProvider> = Api::namespaced(s.client.clone(), &other);
    let object = |kind: &str, name: &str, label: &str| {
        json!({"apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": kind,
            "metadata": {"name": name, "namespace": other}, "spec": serde_json::from_str::<serde_json::Value>(&spec(label)).unwrap()})
    };
    other_infra
        .create(
            &PostParams::default(),
            &serde_json::from_value(object("InfrastructureProvider", "gcp", "infrastructure-gcp")).unwrap(),
        )
        .await
        .unwrap();
    other_core
        .create(
            &PostParams::default(),
            &serde_json::from_value(object("CoreProvider", "butler", "butler")).unwrap(),
        )
        .await
        .unwrap();

    let mine = s.namespace.clone();
    s.start_operator_shipped(move |o| {
        o.namespace = None;
        o.policy.provider_namespaces = Some(vec![mine]);
    })
    .await;
    let agent = "butler-operator-other";
    let client = match s.cluster.server() {
        Some(server) => server.client_as(agent),
        None => s.client.clone(),
    };
    let (stop, shutdown) = controller::shutdown_switch();
    let options = Options {
        policy: butler_operator::controller::wanted::policy::Policy {
            provider_namespaces: Some(vec![other.clone()]),
            ..Default::default()
        },
        ..Options::in_process("other")
    };
    let second =
        controller::start(client, Arc::new(butler_operator::metrics::Metrics::new()), options, shutdown);
    let second_context = second.context.clone();
    let second_task = tokio::spawn(second.run);

    s.create::<CoreProvider>("butler", &spec("butler")).await;
    s.create::<InfrastructureProvider>("gcp", &spec("infrastructure-gcp")).await;
    let gcp = s
        .wait_for::<InfrastructureProvider>("gcp", "installed", |p| {
            reason(p, "ProviderInstalled", "Installed")
        })
        .await;
    assert!(!reason(&gcp, "PreflightCheckPassed", "DuplicateProvider"), "{:?}", gcp.status);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let theirs = other_infra.get("gcp").await.unwrap();
        if reason(&theirs, "ProviderInstalled", "Installed") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the other operator installs its gcp: {:?}",
            theirs.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The other namespace's core, deleted while its gcp stays, waits: this operator leaves it.
    other_core.delete("butler", &Default::default()).await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let waiting = other_core.get("butler").await.unwrap();
    assert_eq!(waiting.finalizers(), [PROVIDER_FINALIZER], "{:?}", waiting.status);
    other_infra.delete("gcp", &Default::default()).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while other_core.get_opt("butler").await.unwrap().is_some()
        || other_infra.get_opt("gcp").await.unwrap().is_some()
    {
        assert!(std::time::Instant::now() < deadline, "the other operator deletes its providers");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mine = s.api::<InfrastructureProvider>().get("gcp").await.unwrap();
    assert!(is(&mine, "ProviderInstalled", "True"), "{:?}", mine.status);

    // Neither wrote on the other's objects.
    if let Some(server) = s.cluster.server() {
        let writes = |agent: &str, namespace: &str| -> Vec<String> {
            server
                .requests_from(agent)
                .into_iter()
                .filter(|(method, path)| {
                    method != "GET" && path.contains(&format!("/namespaces/{namespace}/"))
                })
                .map(|(method, path)| format!("{method} {path}"))
                .collect()
        };
        assert_eq!(writes(crate::support::OPERATOR_AGENT, &other), Vec::<String>::new(), "{}", theirs("*"));
        assert_eq!(writes(agent, &s.namespace), Vec::<String>::new());
    }
    s.api::<InfrastructureProvider>().delete("gcp", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("gcp").await;
    s.api::<CoreProvider>().delete("butler", &Default::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    let _ = stop.send(true);
    let _ = tokio::time::timeout(Duration::from_secs(30), second_task).await;
    second_context.watches.stop();
    s.stop_operator().await;
}

/// cluster-api-operator's layouts put providers in `capi-system`, `capa-system` and the like: a
/// namespace is honoured once it carries the operator's namespace label (as `butlerctl init`
/// and `migrate` set it), with no change to the operator's flags, and left alone again once the
/// label goes (what was installed stays; nothing more is written for it).
#[tokio::test]
async fn a_namespace_is_honoured_once_labelled_for_providers_and_left_alone_once_not() {
    use butler_operator::controller::wanted::policy::NAMESPACE_LABEL;
    use k8s_openapi::api::core::v1::Namespace;
    let mut s = Scenario::new("labelled").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // Under its shipped RBAC (which must let it watch namespaces), honouring another namespace
    // by name and the labelled ones.
    s.start_operator_shipped(|o| {
        o.policy.provider_namespaces = Some(vec!["butler-system".into()]);
        o.policy.namespace_label = Some(NAMESPACE_LABEL.into());
    })
    .await;
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left = s.api::<CoreProvider>().get("butler").await.unwrap();
    assert!(left.status.is_none(), "not honoured before the label: {:?}", left.status);
    assert!(left.finalizers().is_empty(), "no finalizer before the label");

    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    let label = |value: serde_json::Value| json!({"metadata": {"labels": {NAMESPACE_LABEL: value}}});
    namespaces
        .patch(&s.namespace, &PatchParams::default(), &Patch::Merge(label(json!("true"))))
        .await
        .unwrap();
    s.wait_for::<CoreProvider>("butler", "installed", |p| reason(p, "ProviderInstalled", "Installed")).await;

    // Label gone: the provider object is left as it is, and a change to it is not acted on.
    namespaces.patch(&s.namespace, &PatchParams::default(), &Patch::Merge(label(json!(null)))).await.unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let installed = s.api::<CoreProvider>().get("butler").await.unwrap();
    publish(&s, "butler", "core-components.yaml", "v1.1.0", &components("butler", "v1.1.0", &[])).await;
    s.patch_spec::<CoreProvider>("butler", json!({"version": "v1.1.0"})).await;
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let after = s.api::<CoreProvider>().get("butler").await.unwrap();
    assert_eq!(after.status, installed.status, "nothing is written for it");
    assert_eq!(after.status.as_ref().and_then(|st| st.installed_version.as_deref()), Some("v1.0.0"));
    assert!(is(&after, "ProviderInstalled", "True"), "what was installed stays");
    s.stop_operator().await;
    // Given back to an operator so that the scenario's clean-up can delete it.
    namespaces
        .patch(&s.namespace, &PatchParams::default(), &Patch::Merge(label(json!("true"))))
        .await
        .unwrap();
    s.start_operator_shipped(|o| {
        o.policy.provider_namespaces = Some(vec!["butler-system".into()]);
        o.policy.namespace_label = Some(NAMESPACE_LABEL.into());
    })
    .await;
    s.api::<CoreProvider>().delete("butler", &Default::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    s.stop_operator().await;
}

/// Anyone who may write Deployments could label one as the operator, with flags that honour
/// every namespace, so that `butlerctl describe` and `migrate` say provider objects are
/// honoured where no operator looks: a Deployment is taken for an operator only when it runs
/// as a ServiceAccount bound to the operator's ClusterRole, which only an administrator binds.
#[tokio::test]
async fn a_deployment_labelled_as_the_operator_is_not_taken_for_one() {
    use k8s_openapi::api::apps::v1::Deployment;
    let s = Scenario::new("attack-spoofed-operator").await;
    let labels = json!({"app.kubernetes.io/name": "butler-operator"});
    let spoof: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "butler-operator", "labels": labels},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
            "template": {"metadata": {"labels": labels},
                "spec": {"containers": [{"name": "operator", "image": "registry.example.com/o:v1", "args": ["run", "--provider-namespace=*"]}]}}},
    }))
    .unwrap();
    Api::<Deployment>::namespaced(s.client.clone(), &s.namespace)
        .create(&PostParams::default(), &spoof)
        .await
        .unwrap();
    let operators = butler_operator::cli::honoured::operators(&s.client).await.expect("readable");
    let spoofed = format!("{}/butler-operator", s.namespace);
    assert!(!operators.found.iter().any(|o| o.name == spoofed), "{:?}", operators.found);
}

/// An operator that honours some namespaces (those it names and those labelled) watches the
/// Deployments of those alone, one watch each, started as a namespace is labelled: anyone may
/// label a Deployment elsewhere as a provider's, and it is never listed, decoded or held.
#[tokio::test]
async fn the_deployments_of_the_honoured_namespaces_alone_are_watched() {
    use k8s_openapi::api::core::v1::Namespace;
    let mut s = Scenario::new("honoured-deployments").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // A label of this scenario's own: on a shared cluster, other scenarios label namespaces with
    // the operator's default one, and this operator must not honour theirs.
    let label_key = format!("scenario.butlerlabs.dev/{}", s.cluster.unique("providers"));
    let (named, key) = (s.namespace.clone(), label_key.clone());
    s.start_operator_shipped(move |o| {
        o.namespace = None;
        o.policy.provider_namespaces = Some(vec![named]);
        o.policy.namespace_label = Some(key);
    })
    .await;
    let labelled = s.cluster.namespace("honoured-labelled").await;
    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    let label = json!({"metadata": {"labels": {label_key: "true"}}});
    namespaces.patch(&labelled, &PatchParams::default(), &Patch::Merge(label)).await.unwrap();
    s.create::<CoreProvider>("butler", &spec("butler")).await;
    // Its Deployments are seen: it becomes Ready once they are available.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        s.mark_available().await;
        let core = s.api::<CoreProvider>().get("butler").await.unwrap();
        if is(&core, "Ready", "True") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "Ready: {:?}", core.status);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let followed = s.context().deployments.namespaces();
    assert!(followed.contains(&s.namespace) && followed.contains(&labelled), "{followed:?}");
    if let Some(server) = s.cluster.server() {
        let deployments: Vec<String> = server
            .requests_from(crate::support::OPERATOR_AGENT)
            .into_iter()
            .map(|(_, path)| path)
            .filter(|path| path.starts_with("/apis/apps/v1/") && path.contains("deployments"))
            .collect();
        assert!(
            !deployments.iter().any(|p| p.starts_with("/apis/apps/v1/deployments")),
            "a watch of every namespace's Deployments: {deployments:?}"
        );
        assert!(
            deployments
                .iter()
                .any(|p| p.starts_with(&format!("/apis/apps/v1/namespaces/{labelled}/deployments")))
        );
    }
    s.api::<CoreProvider>().delete("butler", &Default::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    s.stop_operator().await;
}
