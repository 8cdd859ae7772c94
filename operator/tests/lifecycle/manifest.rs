//! The install manifest of `make release` applies to a cluster as it is.

use butler_operator::manifest;
use butler_runtime::apply::Applier;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;

use crate::support::Scenario;

#[tokio::test]
async fn the_install_manifest_applies_and_runs_the_operator_with_probes() {
    let s = Scenario::new("manifest").await;
    if !s.cluster.is_in_memory() {
        println!("skipped: the manifest would install the operator into the real cluster");
        return;
    }
    let text = manifest::render("v0.1.0");
    let objects: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).expect("the manifest is YAML");
    assert_eq!(objects.len(), manifest::objects("v0.1.0").len());
    let applier = Applier::new(s.client.clone(), "butler-operator");
    for object in &objects {
        applier.apply(object, false).await.unwrap_or_else(|e| panic!("{e}"));
    }
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), manifest::NAMESPACE);
    let operator = deployments.get("butler-operator").await.unwrap();
    let container = &operator.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(container.args.as_deref(), Some(&["run".to_string()][..]));
    assert_eq!(container.image.as_deref(), Some("ghcr.io/butlerdotdev/butler-operator:v0.1.0"));
    assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
}
