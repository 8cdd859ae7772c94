//! What the scenarios share: a test CRD in a group of the scenario's own, and polling.

use std::future::Future;
use std::time::Duration;

use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResource;
use kube::CustomResourceExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::core::Status;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// A test kind with a bit of every schema feature.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(group = "e2e.butlerlabs.dev", version = "v1", kind = "Widget", namespaced, status = "WidgetStatus")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.size <= 100 || self.color == 'blue'", "message": "only blue widgets may be larger than 100"}]))]
pub struct WidgetSpec {
    /// Size, at least 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 3))]
    pub size: Option<i32>,
    /// Colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "red"))]
    pub color: Option<Color>,
    /// Label: lowercase letters.
    #[schemars(pattern(r"^[a-z]+$"))]
    pub label: String,
    /// Free-form extra data: an object that keeps whatever it holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "free_form")]
    pub extra: Option<serde_json::Map<String, Value>>,
    /// Loose data: any keys, but values without a schema (`additionalProperties: true`), whose
    /// nested objects the API server empties.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loose: Option<serde_json::Map<String, Value>>,
    /// Parts, keyed by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub parts: Option<Vec<Part>>,
}

/// `{type: object, x-kubernetes-preserve-unknown-fields: true}`: what keeps nested data.
fn free_form(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({"type": "object", "nullable": true, "x-kubernetes-preserve-unknown-fields": true})
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Color {
    Red,
    Green,
    Blue,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
pub struct Part {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<i32>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct WidgetStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// The Widget CRD in the group `{run}.e2e.butlerlabs.dev`, so that concurrent scenarios on a
/// real cluster never share it; installed and Established.
pub async fn widgets(cluster: &Cluster) -> ApiResource {
    let mut crd: CustomResourceDefinition = Widget::crd();
    let group = cluster.unique("g").replace('-', "") + ".e2e.butlerlabs.dev";
    crd.spec.group = group.clone();
    crd.metadata.name = Some(format!("widgets.{group}"));
    cluster.install_own_crd(&crd).await;
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Widget"), "widgets")
}

/// A Widget object as JSON.
pub fn widget(resource: &ApiResource, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": resource.api_version,
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .expect("a widget")
}

pub fn widget_api(cluster: &Cluster, resource: &ApiResource, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(cluster.client(), namespace, resource)
}

/// The label of every ConfigMap a scenario makes: a namespace also holds what the cluster and
/// other controllers publish in every one (`kube-root-ca.crt`, a distribution's or a service
/// mesh's CA), so scenarios count only what they made.
pub const MADE_BY: (&str, &str) = ("e2e.butlerlabs.dev/made-by", "scenario");

/// Whether the scenario made this ConfigMap.
pub fn made(object: &ConfigMap) -> bool {
    object.metadata.labels.as_ref().and_then(|l| l.get(MADE_BY.0)).is_some_and(|v| v == MADE_BY.1)
}

/// A ConfigMap with labels (and [`MADE_BY`]) and data.
pub fn config_map(name: &str, labels: &[(&str, &str)], data: &[(&str, &str)]) -> ConfigMap {
    let mut all: serde_json::Map<String, Value> =
        labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    all.insert(MADE_BY.0.into(), json!(MADE_BY.1));
    serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "labels": all,
        },
        "data": data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .expect("a config map")
}

/// The API error of a failed call.
pub fn api_error<T: std::fmt::Debug>(result: Result<T, kube::Error>) -> Status {
    match result {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Polls `check` until it returns Some, for at most 30 seconds (a real cluster's garbage
/// collector and namespace controller work asynchronously).
pub async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("timed out waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Prints why a check is skipped on a real cluster.
pub fn skip_on_real_cluster(cluster: &Cluster, why: &str) -> bool {
    if !cluster.is_in_memory() {
        println!("skipped on a real cluster: {why}");
    }
    !cluster.is_in_memory()
}
