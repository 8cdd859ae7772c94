//! Inputs that would exhaust the operator, each bounded: anyone may label a Deployment as a
//! provider's (the label the operator's Deployment cache selects), and such Deployments once
//! sat whole in its memory (200 of 1.5 MB ended it under its 256 Mi limit).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::support::Scenario;

#[tokio::test]
async fn deployments_labelled_as_a_providers_are_cached_without_their_bulk() {
    let mut s = Scenario::new("attack-bulk").await;
    // Within what Kubernetes takes (annotations hold 256 KiB; a pod template the rest of an
    // object's 1.5 MiB).
    let bulk = "x".repeat(900 * 1024);
    // Labels too: a label's value holds 63 characters, but their number is bounded only by
    // the object's size.
    let mut bulky_labels = json!({"operator.butlerlabs.dev/provider-name": "nobody"});
    for i in 0..2000 {
        bulky_labels[format!("bulk.example.com/l{i}")] = json!("x".repeat(63));
    }
    let api: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    for i in 0..4 {
        let name = format!("bulky-{i}");
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": bulky_labels.clone(),
                "annotations": {"bulk": "x".repeat(200 * 1024)}},
            "spec": {"selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}},
                    "spec": {"containers": [{"name": "c", "image": "registry.example.com/c:v1",
                        "env": [{"name": "BULK", "value": bulk}]}]}}}
        }))
        .unwrap();
        api.create(&PostParams::default(), &deployment).await.unwrap();
    }
    s.start_operator();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let cached = loop {
        let cached = s.context().deployments.state();
        if cached.len() >= 4 {
            break cached;
        }
        assert!(std::time::Instant::now() < deadline, "the cache never listed them");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for deployment in cached {
        let size = serde_json::to_vec(deployment.as_ref()).unwrap().len();
        assert!(
            size < 4096,
            "{} is kept at {size} bytes",
            deployment.metadata.name.clone().unwrap_or_default()
        );
    }
    s.stop_operator().await;
}
