//! Kinds served under two API groups from one storage, as the API server does for Events:
//! `events.k8s.io/v1` Events are `v1` Events in storage, so what the operator records through
//! the new API shows in `kubectl get events` and `kubectl describe`, which read the core one.

use serde_json::{Map, Value};

use super::registry::ResourceType;

/// `events.k8s.io/v1` field ↔ `v1` field, for the fields whose names differ (the rest, such
/// as metadata, reason, type, action, eventTime, series and related, are the same).
const EVENT_FIELDS: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

/// An object of `rt`'s shape in the shape it is stored in.
pub fn to_storage(rt: &ResourceType, object: Value) -> Value {
    match rt.stored_as() {
        Some(_) => rename(object, |new| EVENT_FIELDS.iter().find(|(n, _)| *n == new).map(|(_, c)| *c), "v1"),
        None => object,
    }
}

/// A stored object in `rt`'s shape (apiVersion and kind included).
pub fn from_storage(rt: &ResourceType, object: Value) -> Value {
    let mut object = match rt.stored_as() {
        Some(_) if object["apiVersion"] == "v1" => {
            rename(object, |core| EVENT_FIELDS.iter().find(|(_, c)| *c == core).map(|(n, _)| *n), "")
        }
        _ => object,
    };
    object["apiVersion"] = Value::String(rt.api_version());
    object["kind"] = Value::String(rt.kind.clone());
    object
}

fn rename(object: Value, to: impl Fn(&str) -> Option<&'static str>, api_version: &str) -> Value {
    let Value::Object(fields) = object else { return object };
    let mut out = Map::new();
    for (key, value) in fields {
        let key = to(&key).map_or(key, str::to_string);
        out.insert(key, value);
    }
    if !api_version.is_empty() {
        out.insert("apiVersion".into(), Value::String(api_version.into()));
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    #[test]
    fn an_events_k8s_io_event_is_stored_as_a_core_event_and_read_back_the_same() {
        let registry = Registry::builtin();
        let new = registry.find("events.k8s.io", "v1", "events").unwrap();
        let event = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "e", "namespace": "ns"},
            "regarding": {"kind": "CoreProvider", "name": "butler"},
            "note": "installed v0.1.0", "reason": "Installed", "type": "Normal",
            "reportingController": "butler-operator", "reportingInstance": "a",
            "eventTime": "2026-11-23T00:00:00.000000Z", "action": "Install",
        });
        let stored = to_storage(new, event.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["involvedObject"]["name"], "butler");
        assert_eq!(stored["message"], "installed v0.1.0");
        assert_eq!(stored["reportingComponent"], "butler-operator");
        assert!(stored.get("note").is_none() && stored.get("regarding").is_none());
        assert_eq!(from_storage(new, stored), event);
    }
}
