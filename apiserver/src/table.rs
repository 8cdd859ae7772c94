//! Server-side printing: objects and lists as `meta.k8s.io/v1` Tables, which kubectl asks for
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`). Custom resources print their
//! `additionalPrinterColumns` (or Age), as the API server does; a few built-in kinds print the
//! columns kubectl users know; the others print Name and Age.

use jsonpath_rust::JsonPath;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Value, json};

use super::registry::ResourceType;

/// Whether the client asked for a Table.
pub fn wanted(accept: &str) -> bool {
    accept.contains("as=Table")
}

/// One column: its definition, and how a cell is made from an object.
struct Column {
    name: String,
    kind: String,
    priority: i64,
    cell: Cell,
}

enum Cell {
    Name,
    Age,
    /// A JSONPath of a custom resource column, typed as the column says.
    Path(String),
    Builtin(fn(&Value, Timestamp) -> Value),
}

/// `value` (an object or a list of `rt`) as a Table; `include` is the `includeObject` query
/// parameter (`None`, `Object`, or `Metadata`, the default).
pub fn convert(rt: &ResourceType, value: &Value, include: Option<&str>, now: Timestamp) -> Value {
    let columns = columns_of(rt);
    let definitions: Vec<Value> = columns
        .iter()
        .map(|c| {
            let format = if matches!(c.cell, Cell::Name) { "name" } else { "" };
            json!({"name": c.name, "type": c.kind, "format": format, "description": "", "priority": c.priority})
        })
        .collect();
    let is_list = value["items"].is_array();
    let objects: Vec<&Value> = match value["items"].as_array() {
        Some(items) => items.iter().collect(),
        None => vec![value],
    };
    let rows: Vec<Value> = objects
        .into_iter()
        .map(|object| {
            let cells: Vec<Value> = columns.iter().map(|c| cell(c, object, now)).collect();
            let mut row = json!({"cells": cells});
            match include.unwrap_or("Metadata") {
                "None" => {}
                "Object" => row["object"] = object.clone(),
                _ => {
                    row["object"] = json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": object["metadata"]});
                }
            }
            row
        })
        .collect();
    let mut metadata = json!({});
    if is_list {
        for key in ["resourceVersion", "continue", "remainingItemCount"] {
            if let Some(v) = value["metadata"].get(key) {
                metadata[key] = v.clone();
            }
        }
    }
    json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata,
        "columnDefinitions": definitions, "rows": rows,
    })
}

/// The columns of `rt`.
fn columns_of(rt: &ResourceType) -> Vec<Column> {
    let plain = |name: &str, kind: &str, priority, cell| Column {
        name: name.into(),
        kind: kind.into(),
        priority,
        cell,
    };
    let name = || plain("Name", "string", 0, Cell::Name);
    let age = || plain("Age", "string", 0, Cell::Age);
    if let Some(custom) = &rt.custom {
        let mut columns = vec![name()];
        if custom.columns.is_empty() {
            columns.push(age());
        }
        for c in &custom.columns {
            let kind = c["type"].as_str().unwrap_or("string");
            let path = c["jsonPath"].as_str().unwrap_or_default().to_string();
            let priority = c["priority"].as_i64().unwrap_or(0);
            let cell = Cell::Path(path);
            columns.push(plain(c["name"].as_str().unwrap_or_default(), kind, priority, cell));
        }
        return columns;
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("apps", "Deployment") => vec![
            name(),
            plain("Ready", "string", 0, Cell::Builtin(deployment_ready)),
            plain("Up-to-date", "integer", 0, Cell::Builtin(|o, _| number(&o["status"]["updatedReplicas"]))),
            plain("Available", "integer", 0, Cell::Builtin(|o, _| number(&o["status"]["availableReplicas"]))),
            age(),
            plain("Containers", "string", 1, Cell::Builtin(|o, _| containers(o, "name"))),
            plain("Images", "string", 1, Cell::Builtin(|o, _| containers(o, "image"))),
            plain("Selector", "string", 1, Cell::Builtin(selector)),
        ],
        ("" | "events.k8s.io", "Event") => vec![
            plain("Last Seen", "string", 0, Cell::Builtin(event_last_seen)),
            plain("Type", "string", 0, Cell::Builtin(|o, _| text(&o["type"]))),
            plain("Reason", "string", 0, Cell::Builtin(|o, _| text(&o["reason"]))),
            plain("Object", "string", 0, Cell::Builtin(event_object)),
            plain("Message", "string", 0, Cell::Builtin(|o, _| text(o.get("message").unwrap_or(&o["note"])))),
            plain("Name", "string", 1, Cell::Name),
        ],
        ("", "ConfigMap") => vec![name(), plain("Data", "integer", 0, Cell::Builtin(data_count)), age()],
        ("", "Secret") => vec![
            name(),
            plain("Type", "string", 0, Cell::Builtin(|o, _| text(&o["type"]))),
            plain("Data", "integer", 0, Cell::Builtin(data_count)),
            age(),
        ],
        ("", "Namespace") => {
            vec![
                name(),
                plain("Status", "string", 0, Cell::Builtin(|o, _| text(&o["status"]["phase"]))),
                age(),
            ]
        }
        _ => vec![name(), age()],
    }
}

fn cell(column: &Column, object: &Value, now: Timestamp) -> Value {
    match &column.cell {
        Cell::Name => text(&object["metadata"]["name"]),
        Cell::Age => age(&object["metadata"]["creationTimestamp"], now),
        Cell::Builtin(f) => f(object, now),
        Cell::Path(path) => path_cell(object, path, &column.kind, now),
    }
}

/// A custom resource column: the first JSONPath result, typed as the column says.
fn path_cell(object: &Value, path: &str, kind: &str, now: Timestamp) -> Value {
    let query = format!("${}", path.trim_start_matches('$'));
    let Some(found) = object.query(&query).ok().and_then(|r| r.first().copied().cloned()) else {
        return Value::Null;
    };
    match (kind, &found) {
        ("date", Value::String(_)) => age(&found, now),
        ("string", Value::String(s)) => Value::String(s.clone()),
        ("string", other) => Value::String(other.to_string()),
        ("integer", Value::Number(n)) => n.as_i64().map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(_)) | ("boolean", Value::Bool(_)) => found,
        _ => Value::Null,
    }
}

fn text(value: &Value) -> Value {
    Value::String(value.as_str().unwrap_or_default().to_string())
}

fn number(value: &Value) -> Value {
    json!(value.as_i64().unwrap_or(0))
}

fn data_count(object: &Value, _: Timestamp) -> Value {
    let count = |v: &Value| v.as_object().map_or(0, |m| m.len());
    json!(count(&object["data"]) + count(&object["binaryData"]))
}

fn deployment_ready(object: &Value, _: Timestamp) -> Value {
    let ready = object["status"]["readyReplicas"].as_i64().unwrap_or(0);
    let wanted = object["spec"]["replicas"].as_i64().unwrap_or(1);
    Value::String(format!("{ready}/{wanted}"))
}

fn containers(object: &Value, field: &str) -> Value {
    let list = object["spec"]["template"]["spec"]["containers"].as_array();
    let values: Vec<&str> = list.into_iter().flatten().filter_map(|c| c[field].as_str()).collect();
    Value::String(values.join(","))
}

fn selector(object: &Value, _: Timestamp) -> Value {
    let labels = object["spec"]["selector"]["matchLabels"].as_object();
    let pairs: Vec<String> = labels
        .into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
        .collect();
    Value::String(pairs.join(","))
}

fn event_object(event: &Value, _: Timestamp) -> Value {
    let regarding = event.get("involvedObject").unwrap_or(&event["regarding"]);
    let kind = regarding["kind"].as_str().unwrap_or_default().to_lowercase();
    Value::String(format!("{kind}/{}", regarding["name"].as_str().unwrap_or_default()))
}

/// The series' last observation, else the last timestamp, else the event time.
fn event_last_seen(event: &Value, now: Timestamp) -> Value {
    let candidates = [
        &event["series"]["lastObservedTime"],
        event.get("lastTimestamp").unwrap_or(&event["deprecatedLastTimestamp"]),
        &event["eventTime"],
    ];
    match candidates.into_iter().find(|v| v.as_str().is_some_and(|s| !s.is_empty())) {
        Some(time) => age(time, now),
        None => Value::String("<unknown>".into()),
    }
}

/// A timestamp as the API server prints an age ("41s", "5m12s", "3h", "12d").
fn age(value: &Value, now: Timestamp) -> Value {
    let Some(then) = value.as_str().and_then(|s| s.parse::<Timestamp>().ok()) else {
        return Value::String("<unknown>".into());
    };
    let seconds = now.as_second() - then.as_second();
    Value::String(butler_runtime::age::human_duration(seconds))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn custom_resources_print_their_columns() {
        let crd = json!({
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                    "additionalPrinterColumns": [
                        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ]}]}
        });
        let rt = Registry::types_of_crd(&crd).unwrap().remove(0);
        let now: Timestamp = "2026-11-23T00:01:00Z".parse().unwrap();
        let list = json!({"metadata": {"resourceVersion": "7"}, "items": [{
            "metadata": {"name": "w", "namespace": "ns", "creationTimestamp": "2026-11-23T00:00:00Z"},
            "spec": {"size": 3},
            "status": {"conditions": [{"type": "Synced", "status": "False"}, {"type": "Ready", "status": "True"}]},
        }]});
        let table = convert(&rt, &list, None, now);
        let names: Vec<&str> = table["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Ready", "Size", "Age"]);
        assert_eq!(table["rows"][0]["cells"], json!(["w", "True", 3, "60s"]));
        assert_eq!(table["rows"][0]["object"]["metadata"]["name"], "w");
        assert_eq!(table["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn events_print_what_kubectl_get_events_shows() {
        let registry = Registry::builtin();
        let rt = registry.find("", "v1", "events").unwrap();
        let now: Timestamp = "2026-11-23T00:00:30Z".parse().unwrap();
        let event = json!({"metadata": {"name": "e"}, "type": "Normal", "reason": "Installed",
            "involvedObject": {"kind": "CoreProvider", "name": "butler"}, "message": "installed v0.1.0",
            "eventTime": "2026-11-23T00:00:00.000000Z"});
        let table = convert(rt, &event, Some("None"), now);
        assert_eq!(
            table["rows"][0]["cells"],
            json!(["30s", "Normal", "Installed", "coreprovider/butler", "installed v0.1.0", "e"])
        );
        assert!(table["rows"][0].get("object").is_none());
    }
}
