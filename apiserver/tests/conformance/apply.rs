use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use crate::support::api_error;

fn cm(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "owned"}, "data": data})
}

/// The data keys that `manager` owns through `operation`, from managedFields.
fn owned(cm: &ConfigMap, manager: &str, operation: &str) -> Vec<String> {
    let entries = cm.metadata.managed_fields.clone().unwrap_or_default();
    let Some(entry) = entries
        .iter()
        .find(|e| e.manager.as_deref() == Some(manager) && e.operation.as_deref() == Some(operation))
    else {
        return Vec::new();
    };
    let fields = serde_json::to_value(&entry.fields_v1).unwrap();
    let mut keys: Vec<String> = fields["f:data"]
        .as_object()
        .map(|m| m.keys().map(|k| k.trim_start_matches("f:").to_string()).collect())
        .unwrap_or_default();
    keys.sort();
    keys
}

#[tokio::test]
async fn server_side_apply_tracks_ownership_conflicts_and_removal() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("apply").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let apply = |manager: &'static str| PatchParams::apply(manager);

    let created =
        api.patch("owned", &apply("alpha"), &Patch::Apply(cm(json!({"a": "1", "b": "2"})))).await.unwrap();
    assert_eq!(owned(&created, "alpha", "Apply"), ["a", "b"]);

    // Another manager setting a field alpha owns, to another value, conflicts.
    let conflict =
        api_error(api.patch("owned", &apply("beta"), &Patch::Apply(cm(json!({"a": "other"})))).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("conflict with \"alpha\"") && conflict.message.contains(".data.a"),
        "{}",
        conflict.message
    );

    // The same value is shared ownership, not a conflict.
    let shared = api.patch("owned", &apply("beta"), &Patch::Apply(cm(json!({"b": "2"})))).await.unwrap();
    assert_eq!(owned(&shared, "beta", "Apply"), ["b"]);
    assert_eq!(owned(&shared, "alpha", "Apply"), ["a", "b"]);

    // Forcing takes the field over.
    let forced = api
        .patch("owned", &apply("beta").force(), &Patch::Apply(cm(json!({"a": "other", "b": "2"}))))
        .await
        .unwrap();
    assert_eq!(forced.data.as_ref().unwrap()["a"], "other");
    assert_eq!(owned(&forced, "alpha", "Apply"), ["b"]);
    assert_eq!(owned(&forced, "beta", "Apply"), ["a", "b"]);

    // alpha stops applying b: beta still owns it, so it stays. Then alpha adds c, and drops it.
    let kept = api.patch("owned", &apply("alpha"), &Patch::Apply(cm(json!({"c": "3"})))).await.unwrap();
    assert_eq!(kept.data.as_ref().unwrap()["b"], "2");
    let dropped = api.patch("owned", &apply("alpha"), &Patch::Apply(cm(json!({})))).await.unwrap();
    let keys: Vec<&String> = dropped.data.as_ref().unwrap().keys().collect();
    assert_eq!(keys, ["a", "b"], "c was removed when its only owner stopped applying it");

    // A plain patch takes the fields it changes, without conflicts.
    let edited = api
        .patch(
            "owned",
            &PatchParams { field_manager: Some("editor".into()), ..Default::default() },
            &Patch::Merge(json!({"data": {"a": "edited"}})),
        )
        .await
        .unwrap();
    assert_eq!(owned(&edited, "editor", "Update"), ["a"]);
    assert_eq!(owned(&edited, "beta", "Apply"), ["b"]);
}

#[tokio::test]
async fn keyed_lists_merge_by_key_under_apply() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("applylist").await;
    let resource = crate::support::widgets(&cluster).await;
    let api = crate::support::widget_api(&cluster, &resource, &ns);
    let widget = |parts: Value| json!({"apiVersion": resource.api_version, "kind": "Widget", "metadata": {"name": "w"}, "spec": {"label": "w", "parts": parts}});
    api.patch("w", &PatchParams::apply("one"), &Patch::Apply(widget(json!([{"name": "a", "count": 1}]))))
        .await
        .unwrap();
    let both = api
        .patch("w", &PatchParams::apply("two"), &Patch::Apply(widget(json!([{"name": "b", "count": 2}]))))
        .await
        .unwrap();
    let parts = both.data["spec"]["parts"].as_array().unwrap();
    let names: Vec<&str> = parts.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a", "b"], "each manager's element is kept");
    let one_gone =
        api.patch("w", &PatchParams::apply("one"), &Patch::Apply(widget(json!([])))).await.unwrap();
    let names: Vec<&str> = one_gone.data["spec"]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["b"]);
}

#[tokio::test]
async fn an_apply_that_changes_nothing_keeps_the_resource_version() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("noop").await;
    let api: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let body = serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "same", "namespace": ns}, "data": {"k": "v"}});
    let params = kube::api::PatchParams::apply("noop-test").force();
    let first = api.patch("same", &params, &kube::api::Patch::Apply(&body)).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = api.patch("same", &params, &kube::api::Patch::Apply(&body)).await.unwrap();
    assert_eq!(
        again.metadata.resource_version, first.metadata.resource_version,
        "nothing changed, nothing written"
    );
    assert_eq!(
        again.metadata.managed_fields, first.metadata.managed_fields,
        "not even the time of the manager's entry"
    );
}

#[tokio::test]
async fn a_managers_own_update_is_another_manager_to_its_apply() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("operation").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let apply = PatchParams::apply("same-name");
    api.patch("owned", &apply, &Patch::Apply(cm(json!({"a": "1"})))).await.unwrap();
    // The same name, through an Update: Kubernetes keeps it as a manager of its own.
    let update = PatchParams { field_manager: Some("same-name".into()), ..Default::default() };
    let edited = api.patch("owned", &update, &Patch::Merge(json!({"data": {"a": "edited"}}))).await.unwrap();
    assert_eq!(owned(&edited, "same-name", "Update"), ["a"]);

    let conflict = api_error(api.patch("owned", &apply, &Patch::Apply(cm(json!({"a": "1"})))).await);
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("conflict with \"same-name\" using v1")
            && conflict.message.contains(".data.a"),
        "{}",
        conflict.message
    );
    // Forced, the apply takes the field back from the Update entry.
    let forced = api.patch("owned", &apply.force(), &Patch::Apply(cm(json!({"a": "1"})))).await.unwrap();
    assert_eq!(owned(&forced, "same-name", "Apply"), ["a"]);
    assert_eq!(owned(&forced, "same-name", "Update"), Vec::<String>::new());
}
