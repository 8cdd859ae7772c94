//! The operator killed at any point of an upgrade: the next run converges.

use std::time::Duration;

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use crate::fixtures::{Part, components, publish};
use crate::support::Scenario;
use crate::upgrade::{installed, spec};

/// Patch releases that alternately carry the settings ConfigMap and drop it.
fn parts(patch: u32) -> &'static [Part] {
    if patch.is_multiple_of(2) { &[Part::Settings] } else { &[] }
}

#[tokio::test]
async fn an_upgrade_cut_short_by_a_kill_converges_on_the_next_run() {
    let mut s = Scenario::new("restart").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    const STEPS: u32 = 8;
    for patch in 0..=STEPS {
        let version = format!("v1.1.{patch}");
        publish(
            &s,
            "infrastructure-widget",
            "infrastructure-components.yaml",
            &version,
            &components("widget", &version, parts(patch)),
        )
        .await;
    }
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.1.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;

    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    for patch in 1..=STEPS {
        let version: &'static str = Box::leak(format!("v1.1.{patch}").into_boxed_str());
        s.patch_spec::<InfrastructureProvider>("widget", json!({"version": version})).await;
        // Kill at a different point each time: before, during and after the writes.
        tokio::time::sleep(Duration::from_millis(u64::from(patch - 1) * 3)).await;
        s.kill_operator().await;
        s.start_operator();
        s.wait_for::<InfrastructureProvider>("widget", &format!("{version} installed"), installed(version))
            .await;

        let settings = configmaps.get_opt("widget-settings").await.unwrap();
        assert_eq!(
            settings.is_some(),
            !parts(patch).is_empty(),
            "{version}: the settings ConfigMap is there exactly when the release has it"
        );
        let deployment = &s.deployments("InfrastructureProvider", "widget").await[0];
        let image = deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0]
            .image
            .clone()
            .unwrap();
        assert_eq!(image, format!("registry.example.com/widget:{version}"));
        let inventory = configmaps.get("infrastructureproviders-widget-inventory").await.unwrap();
        let recorded = &inventory.data.unwrap()["inventory"];
        assert_eq!(
            recorded.contains("widget-settings"),
            settings.is_some(),
            "{version}: the inventory lists what is installed: {recorded}"
        );
    }
    s.stop_operator().await;
}
