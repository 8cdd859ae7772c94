use butler_e2e::Cluster;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{widget, widget_api, widgets};

#[tokio::test]
async fn status_and_spec_are_written_through_their_own_doors() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("status").await;
    let resource = widgets(&cluster).await;
    let api = widget_api(&cluster, &resource, &ns);

    let mut body = widget(&resource, "w", json!({"label": "w"}));
    body.data["status"] = json!({"phase": "Ignored"});
    let created = api.create(&PostParams::default(), &body).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    assert!(
        created.data.get("status").is_none() || created.data["status"].is_null(),
        "status is dropped on create"
    );

    let status = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}, "spec": {"size": 50}})),
        )
        .await
        .unwrap();
    assert_eq!(status.data["status"]["phase"], "Ready");
    assert_eq!(status.data["spec"]["size"], 3, "a status write does not change the spec");
    assert_eq!(status.metadata.generation, Some(1));

    let spec = api
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 7}, "status": {"phase": "Changed"}})),
        )
        .await
        .unwrap();
    assert_eq!(spec.data["spec"]["size"], 7);
    assert_eq!(spec.data["status"]["phase"], "Ready", "a main-resource write does not change the status");
    assert_eq!(spec.metadata.generation, Some(2));

    let labelled = api
        .patch("w", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})))
        .await
        .unwrap();
    assert_eq!(labelled.metadata.generation, Some(2), "metadata changes do not count");
}
