//! Upgrades within a contract, from ConfigMaps with several versions under one selector.

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::fixtures::{Part, broken_components, components, publish, selector};
use crate::support::{Scenario, is};

/// The core provider `butler` and the infrastructure provider `widget` from ConfigMaps.
pub async fn publish_releases(s: &Scenario) {
    for version in ["v1.0.0", "v2.0.0"] {
        publish(s, "butler", "core-components.yaml", version, &components("butler", version, &[])).await;
    }
    publish(
        s,
        "infrastructure-widget",
        "infrastructure-components.yaml",
        "v1.0.0",
        &components("widget", "v1.0.0", &[Part::Settings, Part::Crd, Part::Env]),
    )
    .await;
    publish(
        s,
        "infrastructure-widget",
        "infrastructure-components.yaml",
        "v1.1.0",
        &components("widget", "v1.1.0", &[]),
    )
    .await;
    publish(
        s,
        "infrastructure-widget",
        "infrastructure-components.yaml",
        "v2.0.0",
        &components("widget", "v2.0.0", &[]),
    )
    .await;
}

/// A spec that fetches `label` from its ConfigMaps at `version`.
pub fn spec(label: &str, version: &str) -> String {
    let mut spec: serde_json::Value = serde_json::from_str(&selector(label)).unwrap();
    spec["version"] = json!(version);
    spec.to_string()
}

pub fn installed<K: butler_operator::controller::ProviderObject>(
    version: &'static str,
) -> impl Fn(&K) -> bool {
    move |p: &K| {
        p.provider_status().and_then(|s| s.installed_version.as_deref()) == Some(version)
            && is(p, "ProviderInstalled", "True")
    }
}

#[tokio::test]
async fn a_same_contract_upgrade_deletes_what_the_new_version_dropped_but_keeps_crds() {
    let mut s = Scenario::new("upgrade").await;
    publish_releases(&s).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;

    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    assert!(configmaps.get_opt("widget-settings").await.unwrap().is_some());
    assert!(crds.get_opt("gadgets.widget.test.io").await.unwrap().is_some());

    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v1.1.0"})).await;
    let widget =
        s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    assert!(is(&widget, "ProviderUpgraded", "True"));
    assert!(
        configmaps.get_opt("widget-settings").await.unwrap().is_none(),
        "the object v1.1.0 dropped is deleted"
    );
    assert!(
        crds.get_opt("gadgets.widget.test.io").await.unwrap().is_some(),
        "CRDs stay: deleting one deletes its objects"
    );
    let deployment = &s.deployments("InfrastructureProvider", "widget").await[0];
    let container = &deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("registry.example.com/widget:v1.1.0"));
    // A field the new release drops goes too: the operator owns what it created by its applies,
    // not by the create's own entry, which an apply cannot clear.
    assert_eq!(container.env, None, "the variable v1.1.0 dropped stays in the Deployment");

    let events: Api<Event> = Api::namespaced(s.client.clone(), &s.namespace);
    let reasons: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        reasons.contains(&"Installed".to_string()) && reasons.contains(&"Upgraded".to_string()),
        "{reasons:?}"
    );

    // A minor downgrade is refused, and what is installed stays.
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v1.0.0"})).await;
    let widget = s
        .wait_for::<InfrastructureProvider>("widget", "the downgrade refused", |p| {
            crate::support::reason(p, "PreflightCheckPassed", "DowngradeRefused")
        })
        .await;
    assert_eq!(widget.status.unwrap().installed_version.as_deref(), Some("v1.1.0"));
    s.stop_operator().await;
}

#[tokio::test]
async fn an_empty_version_installs_the_newest_release_of_the_core_contract_from_configmaps() {
    let mut s = Scenario::new("configmaps").await;
    publish_releases(&s).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &selector("infrastructure-widget")).await;
    // v2.0.0 is newer, but abides by v1beta2; the core provider abides by v1beta1.
    let widget =
        s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    assert_eq!(widget.spec.version, None, "the version chosen stays out of spec");
    s.stop_operator().await;
}

#[tokio::test]
async fn an_upgrade_that_changes_a_field_that_cannot_change_makes_the_object_anew() {
    let mut s = Scenario::new("immutable").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    let v1 = components("rebuilt", "v1.0.0", &[]);
    // v1.1.0 selects its pods by another label: a Deployment's selector cannot change in place.
    let v11 =
        components("rebuilt", "v1.1.0", &[]).replace("control-plane: rebuilt", "control-plane: rebuilt-v2");
    publish(&s, "infrastructure-rebuilt", "infrastructure-components.yaml", "v1.0.0", &v1).await;
    publish(&s, "infrastructure-rebuilt", "infrastructure-components.yaml", "v1.1.0", &v11).await;
    s.create::<InfrastructureProvider>("rebuilt", &spec("infrastructure-rebuilt", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("rebuilt", "v1.0.0", installed("v1.0.0")).await;
    s.patch_spec::<InfrastructureProvider>("rebuilt", json!({"version": "v1.1.0"})).await;
    s.wait_for::<InfrastructureProvider>("rebuilt", "v1.1.0", installed("v1.1.0")).await;
    let deployments = s.deployments("InfrastructureProvider", "rebuilt").await;
    let selector = deployments[0].spec.as_ref().unwrap().selector.match_labels.clone().unwrap();
    assert_eq!(selector["control-plane"], "rebuilt-v2", "the Deployment was made anew with the new selector");
    s.stop_operator().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_is_never_ready_before_its_own_deployments_are_available() {
    use futures::StreamExt;
    use kube::runtime::{WatchStreamExt, watcher};
    let mut s = Scenario::new("upgrade-rollout").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // v1.1.0's manager never becomes Available.
    let broken = broken_components("widget", "v1.1.0");
    let good = components("widget", "v1.0.0", &[]);
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.0.0", &good).await;
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.1.0", &broken).await;
    s.start_operator();
    // Where no kubelet runs, every provider Deployment but the broken one becomes Available.
    let marking = crate::cli::keep_marking_available(&s);
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready at v1.0.0", |p| {
        installed("v1.0.0")(p) && is(p, "Ready", "True")
    })
    .await;

    // Every state the provider shows from here on.
    let api = s.api::<InfrastructureProvider>();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let watching = {
        let seen = seen.clone();
        tokio::spawn(async move {
            let mut states = watcher(api, watcher::Config::default().fields("metadata.name=widget"))
                .applied_objects()
                .boxed();
            while let Some(Ok(p)) = states.next().await {
                let version = p.status.as_ref().and_then(|st| st.installed_version.clone());
                seen.lock().unwrap().push((version, is(&p, "Ready", "True")));
            }
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v1.1.0"})).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    watching.abort();
    let seen = seen.lock().unwrap().clone();
    assert!(seen.iter().any(|(v, _)| v.as_deref() == Some("v1.1.0")), "{seen:?}");
    assert!(
        !seen.iter().any(|(v, ready)| v.as_deref() == Some("v1.1.0") && *ready),
        "v1.1.0 was said Ready while its Deployment never became Available: {seen:?}"
    );
    marking.abort();
    s.stop_operator().await;
}
