use butler_e2e::Cluster;
use kube::api::PostParams;
use serde_json::{Value, json};

use crate::support::{api_error, widget, widget_api, widgets};

#[tokio::test]
async fn defaults_are_applied_and_unknown_fields_pruned() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("schema").await;
    let resource = widgets(&cluster).await;
    let api = widget_api(&cluster, &resource, &ns);
    let mut body = widget(
        &resource,
        "w",
        json!({"label": "w", "bogus": true, "extra": {"free": {"form": 1}}, "loose": {"kept": 1, "nested": {"gone": 2}}}),
    );
    body.data["topLevelBogus"] = json!(1);
    let created = api.create(&PostParams::default(), &body).await.unwrap();
    assert_eq!(created.data["spec"]["size"], 3);
    assert_eq!(created.data["spec"]["color"], "red");
    assert!(created.data["spec"].get("bogus").is_none());
    assert!(created.data.get("topLevelBogus").is_none());
    assert_eq!(
        created.data["spec"]["extra"],
        json!({"free": {"form": 1}}),
        "preserve-unknown-fields keeps it"
    );
    assert_eq!(
        created.data["spec"]["loose"],
        json!({"kept": 1, "nested": {}}),
        "additionalProperties: true keeps the keys, but values have no schema: nested objects are emptied"
    );
}

#[tokio::test]
async fn invalid_objects_are_refused_with_one_cause_per_field() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("invalid").await;
    let resource = widgets(&cluster).await;
    let api = widget_api(&cluster, &resource, &ns);
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"label": "w", "size": 0}),
            "spec.size: Invalid value: 0: spec.size in body should be greater than or equal to 1",
        ),
        (
            json!({"label": "w", "color": "purple"}),
            "spec.color: Unsupported value: \"purple\": supported values: \"red\", \"green\", \"blue\"",
        ),
        (
            json!({"label": "UPPER"}),
            "spec.label: Invalid value: \"UPPER\": spec.label in body should match '^[a-z]+$'",
        ),
        (json!({}), "spec.label: Required value"),
        (
            json!({"label": "w", "size": "big"}),
            "spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\"",
        ),
        (json!({"label": "w", "size": 500}), "only blue widgets may be larger than 100"),
    ];
    for (i, (spec, expect)) in cases.into_iter().enumerate() {
        let error =
            api_error(api.create(&PostParams::default(), &widget(&resource, &format!("w{i}"), spec)).await);
        assert_eq!((error.code, error.reason.as_str()), (422, "Invalid"));
        assert!(error.message.contains(expect), "{}\nwanted: {expect}", error.message);
        assert!(
            error.message.starts_with(&format!("Widget.{} \"w{i}\" is invalid", resource.group)),
            "{}",
            error.message
        );
    }
    let blue = widget(&resource, "blue", json!({"label": "w", "size": 500, "color": "blue"}));
    api.create(&PostParams::default(), &blue).await.unwrap();
}

#[tokio::test]
async fn a_list_map_with_a_key_twice_is_refused_not_merged() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("dupes").await;
    let resource = widgets(&cluster).await;
    let api = widget_api(&cluster, &resource, &ns);
    let body = widget(
        &resource,
        "w",
        json!({"label": "w", "parts": [{"name": "a", "count": 1}, {"name": "a", "count": 2}]}),
    );
    let status = api_error(api.create(&PostParams::default(), &body).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(status.message.contains("spec.parts[1]: Duplicate value"), "{}", status.message);
}
