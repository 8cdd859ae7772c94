//! Objects of any kind as a controller applies them: a reference that names one, and the order
//! a set of them is applied and deleted in.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A reference to an object of any kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    /// The reference of an object as JSON.
    pub fn of(object: &Value) -> ObjectRef {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        ObjectRef {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            namespace: object["metadata"]["namespace"].as_str().map(String::from),
            name: text(&object["metadata"]["name"]),
        }
    }

    /// The API group (empty for the core group).
    pub fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(g, _)| g)
    }

    /// `Kind name` or `Kind namespace/name`, for messages.
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// Where an object goes when a set is applied: CRDs first, so their kinds are served before
/// objects of them; webhook configurations last, so that no webhook points at a Service before
/// it exists. Sort with it (stably).
pub fn apply_order(object: &Value) -> u8 {
    match object["kind"].as_str().unwrap_or_default() {
        "CustomResourceDefinition" => 0,
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => 2,
        _ => 1,
    }
}

/// Where an object goes when a set is deleted: controllers first, so nothing acts on objects
/// that are going away; CRDs last, since deleting a CRD deletes every object of it.
pub fn delete_order(object: &ObjectRef) -> u8 {
    match object.kind.as_str() {
        "Deployment" | "StatefulSet" | "DaemonSet" => 0,
        "CustomResourceDefinition" => 2,
        _ => 1,
    }
}

/// `{group}/{kind}` of the kind a CRD (as JSON) defines; `None` for other objects.
pub fn defined_kind(object: &Value) -> Option<String> {
    let crd = object["kind"] == "CustomResourceDefinition"
        && object["apiVersion"].as_str().is_some_and(|v| v.starts_with("apiextensions.k8s.io/"));
    crd.then(|| {
        let spec = &object["spec"];
        format!(
            "{}/{}",
            spec["group"].as_str().unwrap_or_default(),
            spec["names"]["kind"].as_str().unwrap_or_default()
        )
    })
}

/// Whether `actual` holds everything `desired` says: every key of an object with a value that
/// holds the desired one, arrays of the same length element by element, other values equal.
/// What the API server adds (defaults, status, other managers' fields) does not count, so a
/// controller can tell from its cache whether an apply would change anything. An empty list or
/// map (or a null) is held by its absence or a null: the API server keeps no empty collection
/// of a built-in kind (`subjects: []` reads back as nothing, a Role's `rules: []` as null).
pub fn holds(actual: &Value, desired: &Value) -> bool {
    let empty = |v: &Value| {
        v.is_null() || v.as_array().is_some_and(Vec::is_empty) || v.as_object().is_some_and(|m| m.is_empty())
    };
    match (actual, desired) {
        (Value::Object(a), Value::Object(d)) => d.iter().all(|(k, v)| match a.get(k) {
            None | Some(Value::Null) => empty(v),
            Some(x) => holds(x, v),
        }),
        (Value::Array(a), Value::Array(d)) => a.len() == d.len() && a.iter().zip(d).all(|(x, y)| holds(x, y)),
        _ => actual == desired,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn references_and_orders() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "names": {"kind": "Gadget"}}});
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "manager", "namespace": "system"}});
        let webhook = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "w"}});
        let mut set = vec![webhook.clone(), deployment.clone(), crd.clone()];
        set.sort_by_key(apply_order);
        assert_eq!(set, [crd.clone(), deployment.clone(), webhook]);
        assert_eq!(defined_kind(&crd).as_deref(), Some("example.com/Gadget"));
        assert_eq!(defined_kind(&deployment), None);
        let d = ObjectRef::of(&deployment);
        assert_eq!((d.group(), d.describe().as_str()), ("apps", "Deployment system/manager"));
        assert_eq!(ObjectRef::of(&crd).describe(), "CustomResourceDefinition gadgets.example.com");
        assert!(delete_order(&d) < delete_order(&ObjectRef::of(&crd)));
    }

    #[test]
    fn an_object_holds_what_was_applied_plus_what_the_server_added() {
        let desired = json!({"metadata": {"labels": {"a": "1"}}, "rules": [{"verbs": ["get"]}]});
        let actual = json!({"metadata": {"labels": {"a": "1", "b": "2"}, "uid": "u"}, "rules": [{"verbs": ["get"], "apiGroups": [""]}]});
        assert!(holds(&actual, &desired));
        assert!(!holds(
            &json!({"metadata": {"labels": {"a": "2"}}, "rules": [{"verbs": ["get"]}]}),
            &desired
        ));
        assert!(!holds(
            &json!({"metadata": {"labels": {"a": "1"}}, "rules": [{"verbs": ["get"]}, {"verbs": []}]}),
            &desired
        ));
        assert!(!holds(&json!({"metadata": {"labels": {"a": "1"}}}), &desired), "a missing list");
        // What kube-apiserver stores of empty collections.
        let empty = json!({"subjects": [], "rules": [], "data": {}});
        assert!(holds(&json!({"rules": null}), &empty));
        assert!(!holds(&json!({"subjects": [{"name": "a"}]}), &empty));
    }
}
