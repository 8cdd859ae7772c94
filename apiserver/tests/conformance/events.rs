//! Events: one store behind `v1` and `events.k8s.io/v1`, as `kubectl get events` and
//! `kubectl describe` (which read the core API) rely on when controllers write the new one.

use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

#[tokio::test]
async fn events_written_through_either_api_read_through_both() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("events").await;
    let new: Api<Event> = Api::namespaced(cluster.client(), &ns);
    let core: Api<CoreEvent> = Api::namespaced(cluster.client(), &ns);

    let event: Event = serde_json::from_value(json!({
        "metadata": {"name": "installed", "namespace": ns},
        "eventTime": "2026-11-23T00:00:00.000000Z",
        "regarding": {"apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "CoreProvider", "name": "butler", "namespace": ns},
        "note": "installed v0.1.0", "reason": "Installed", "type": "Normal", "action": "Install",
        "reportingController": "butler-operator", "reportingInstance": "butler-operator-0",
    }))
    .unwrap();
    new.create(&PostParams::default(), &event).await.unwrap();

    let selected =
        ListParams::default().fields("involvedObject.kind=CoreProvider,involvedObject.name=butler");
    let seen = core.list(&selected).await.unwrap().items;
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].message.as_deref(), Some("installed v0.1.0"));
    assert_eq!(seen[0].involved_object.kind.as_deref(), Some("CoreProvider"));
    assert_eq!(seen[0].reporting_component.as_deref(), Some("butler-operator"));

    // A series update through the new API shows through the old one.
    new.patch(
        "installed",
        &PatchParams::default(),
        &Patch::Merge(json!({"series": {"count": 2, "lastObservedTime": "2026-11-23T00:01:00.000000Z"}})),
    )
    .await
    .unwrap();
    let updated = core.get("installed").await.unwrap();
    assert_eq!(updated.series.and_then(|s| s.count), Some(2));

    // And the other way round, with the new API's field names in the selector.
    let old_style: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "scaled", "namespace": ns},
        "involvedObject": {"kind": "Deployment", "name": "web", "namespace": ns},
        "message": "scaled to 3", "reason": "Scaled", "type": "Normal",
        "source": {"component": "deployment-controller"},
        "firstTimestamp": "2026-11-23T00:00:00Z", "lastTimestamp": "2026-11-23T00:00:00Z", "count": 1,
    }))
    .unwrap();
    core.create(&PostParams::default(), &old_style).await.unwrap();
    let by_regarding = new.list(&ListParams::default().fields("regarding.name=web")).await.unwrap().items;
    assert_eq!(by_regarding.len(), 1, "{by_regarding:?}");
    assert_eq!(by_regarding[0].note.as_deref(), Some("scaled to 3"));
    assert_eq!(by_regarding[0].deprecated_count, Some(1));
    assert_eq!(new.list(&ListParams::default()).await.unwrap().items.len(), 2);
}
