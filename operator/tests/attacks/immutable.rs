//! A release that changes a field of its CRD that cannot change: the API server refuses it,
//! and the operator once deleted the CRD and made it anew, which deletes every object of it
//! (all Clusters, and their infrastructure with them). A CRD is never made anew.

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

use crate::fixtures::{Part, components, gadget_crd, publish};
use crate::support::{Scenario, condition, reason};

fn spec(label: &str, version: &str) -> String {
    let mut spec: serde_json::Value = serde_json::from_str(&crate::fixtures::selector(label)).unwrap();
    spec["version"] = json!(version);
    spec.to_string()
}

#[tokio::test]
async fn a_crd_whose_scope_a_release_changes_is_refused_and_keeps_its_objects() {
    let mut s = Scenario::new("attack-immutable").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let before = components("widget", "v1.0.0", &[Part::Crd]);
    let after =
        format!("{}---\n{}", components("widget", "v1.1.0", &[]), gadget_crd("widget.test.io", "Cluster"));
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.0.0", &before).await;
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.1.0", &after).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "installed", |p| {
        reason(p, "ProviderInstalled", "Installed")
    })
    .await;
    let gadgets = ApiResource::from_gvk(&GroupVersionKind::gvk("widget.test.io", "v1", "Gadget"));
    let gadgets: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), &s.namespace, &gadgets);
    let gadget: DynamicObject = serde_json::from_value(
        json!({"apiVersion": "widget.test.io/v1", "kind": "Gadget", "metadata": {"name": "in-use"}}),
    )
    .unwrap();
    gadgets.create(&PostParams::default(), &gadget).await.unwrap();

    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v1.1.0"})).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("widget", "the upgrade refused", |p| {
            reason(p, "ProviderInstalled", "ApplyFailed")
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(message.contains("spec.scope") && message.contains("field is immutable"), "{message}");
    assert!(message.contains("never deleted and made anew"), "{message}");
    assert!(gadgets.get_opt("in-use").await.unwrap().is_some(), "the CRD's objects stay");
    s.stop_operator().await;
}
