//! Field sets: the fields a manager owns, as `managedFields` records them (`FieldsV1`), and the
//! walks over objects that server-side apply needs.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::registry::{ListType, ResourceType};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Step {
    /// A field of an object (`f:name`).
    Field(String),
    /// The element of a keyed list whose keys are this JSON object (`k:{"name":"manager"}`).
    Key(String),
    /// The element of a set list with this JSON value (`v:"x"`).
    Value(String),
}

pub type Path = Vec<Step>;

/// The owned nodes of one manager.
pub type FieldSet = BTreeSet<Path>;

/// The part of an object whose fields are tracked: labels, annotations, finalizers and owner
/// references of the metadata, and everything but apiVersion and kind; `status` only (for the
/// status subresource) or everything but `status` (for the main resource of a kind with one).
pub fn tracked(object: &Value, rt: &ResourceType, status_scope: bool) -> Value {
    let mut out = Map::new();
    let Some(map) = object.as_object() else { return Value::Object(out) };
    for (key, value) in map {
        match key.as_str() {
            "apiVersion" | "kind" => {}
            "metadata" if !status_scope => {
                let mut meta = Map::new();
                for k in ["labels", "annotations", "finalizers", "ownerReferences"] {
                    if let Some(v) = value.get(k).filter(|v| !v.is_null()) {
                        meta.insert(k.to_string(), v.clone());
                    }
                }
                if !meta.is_empty() {
                    out.insert(key.clone(), Value::Object(meta));
                }
            }
            "metadata" => {}
            "status" if rt.status && !status_scope => {}
            "status" => {
                out.insert(key.clone(), value.clone());
            }
            _ if status_scope && rt.status => {}
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// Every owned node of `value`: scalars, atomic lists and empty objects are leaves; keyed list
/// elements own themselves and their fields; set members own themselves.
pub fn fields_of(value: &Value, rt: &ResourceType) -> FieldSet {
    let mut set = FieldSet::new();
    // An object with nothing tracked owns nothing (kube-apiserver then writes no entry).
    if value.as_object().is_some_and(|m| !m.is_empty()) {
        walk(value, &mut Vec::new(), &mut Vec::new(), rt, &mut set);
    }
    set
}

fn walk(value: &Value, path: &mut Path, names: &mut Vec<String>, rt: &ResourceType, set: &mut FieldSet) {
    match value {
        Value::Object(map) if !map.is_empty() && !rt.atomic_map(names) => {
            for (key, child) in map {
                path.push(Step::Field(key.clone()));
                names.push(key.clone());
                walk_field(child, path, names, rt, set);
                names.pop();
                path.pop();
            }
        }
        _ => {
            set.insert(path.clone());
        }
    }
}

fn walk_field(
    value: &Value,
    path: &mut Path,
    names: &mut Vec<String>,
    rt: &ResourceType,
    set: &mut FieldSet,
) {
    let Value::Array(items) = value else {
        return walk(value, path, names, rt, set);
    };
    match rt.list_type(names) {
        ListType::Atomic => {
            set.insert(path.clone());
        }
        ListType::Set => {
            for item in items {
                path.push(Step::Value(item.to_string()));
                set.insert(path.clone());
                path.pop();
            }
        }
        ListType::Map(keys) => {
            for item in items {
                path.push(Step::Key(key_of(item, &keys)));
                set.insert(path.clone());
                walk(item, path, names, rt, set);
                path.pop();
            }
        }
    }
}

/// The identity of a keyed list element: its key fields as a JSON object with sorted keys.
pub fn key_of(item: &Value, keys: &[String]) -> String {
    let mut map = Map::new();
    for k in keys {
        if let Some(v) = item.get(k) {
            map.insert(k.clone(), v.clone());
        }
    }
    Value::Object(map).to_string()
}

fn element_matches(item: &Value, step: &Step) -> bool {
    match step {
        Step::Key(key) => {
            let Ok(Value::Object(wanted)) = serde_json::from_str::<Value>(key) else { return false };
            wanted.iter().all(|(k, v)| item.get(k) == Some(v))
        }
        Step::Value(v) => serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item),
        Step::Field(_) => false,
    }
}

/// The value at `path`, if there is one.
pub fn value_at<'a>(value: &'a Value, path: &[Step]) -> Option<&'a Value> {
    let mut node = value;
    for step in path {
        node = match (step, node) {
            (Step::Field(name), Value::Object(map)) => map.get(name)?,
            (step, Value::Array(items)) => items.iter().find(|item| element_matches(item, step))?,
            _ => return None,
        };
    }
    Some(node)
}

/// Removes the node at `path`; nothing happens when it is not there.
pub fn remove_at(value: &mut Value, path: &[Step]) {
    let Some((last, parents)) = path.split_last() else { return };
    let mut node = value;
    for step in parents {
        node = match (step, node) {
            (Step::Field(name), Value::Object(map)) => match map.get_mut(name) {
                Some(n) => n,
                None => return,
            },
            (step, Value::Array(items)) => match items.iter_mut().find(|item| element_matches(item, step)) {
                Some(n) => n,
                None => return,
            },
            _ => return,
        };
    }
    match (last, node) {
        (Step::Field(name), Value::Object(map)) => {
            map.remove(name);
        }
        (step, Value::Array(items)) => items.retain(|item| !element_matches(item, step)),
        _ => {}
    }
}

/// The set as `managedFields[].fieldsV1`.
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut node = &mut root;
        for step in path {
            let key = match step {
                Step::Field(name) => format!("f:{name}"),
                Step::Key(k) => format!("k:{k}"),
                Step::Value(v) => format!("v:{v}"),
            };
            let entry = node.entry(key).or_insert_with(|| Value::Object(Map::new()));
            node = entry.as_object_mut().expect("field set nodes are objects");
        }
    }
    // A node that owns itself and has children says so with ".".
    fn mark(node: &mut Map<String, Value>, owned: &FieldSet, prefix: &mut Path) {
        for (key, child) in node.iter_mut() {
            if key == "." {
                continue;
            }
            let step = parse_step(key).expect("keys were written by to_fields_v1");
            prefix.push(step);
            let child = child.as_object_mut().expect("objects");
            if !child.is_empty() && owned.contains(prefix) {
                child.insert(".".to_string(), Value::Object(Map::new()));
            }
            mark(child, owned, prefix);
            prefix.pop();
        }
    }
    mark(&mut root, set, &mut Vec::new());
    Value::Object(root)
}

fn parse_step(key: &str) -> Option<Step> {
    let (kind, rest) = key.split_at_checked(2)?;
    match kind {
        "f:" => Some(Step::Field(rest.to_string())),
        "k:" => Some(Step::Key(rest.to_string())),
        "v:" => Some(Step::Value(rest.to_string())),
        _ => None,
    }
}

/// Reads `managedFields[].fieldsV1` back into a set.
pub fn from_fields_v1(value: &Value) -> FieldSet {
    fn read(node: &Map<String, Value>, prefix: &mut Path, set: &mut FieldSet) {
        for (key, child) in node {
            if key == "." {
                set.insert(prefix.clone());
                continue;
            }
            let Some(step) = parse_step(key) else { continue };
            prefix.push(step);
            match child.as_object() {
                Some(map) if !map.is_empty() => read(map, prefix, set),
                _ => {
                    set.insert(prefix.clone());
                }
            }
            prefix.pop();
        }
    }
    let mut set = FieldSet::new();
    if let Some(map) = value.as_object() {
        read(map, &mut Vec::new(), &mut set);
    }
    set
}

/// A path as a user reads it: `.spec.containers[name="manager"].image`.
pub fn display(path: &[Step]) -> String {
    let mut text = String::new();
    for step in path {
        match step {
            Step::Field(name) => {
                text.push('.');
                text.push_str(name);
            }
            Step::Key(key) => {
                let pairs: Vec<String> = serde_json::from_str::<Map<String, Value>>(key)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={v}")).collect())
                    .unwrap_or_default();
                text.push_str(&format!("[{}]", pairs.join(",")));
            }
            Step::Value(v) => text.push_str(&format!("[={v}]")),
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;
    use serde_json::json;

    fn deployments() -> ResourceType {
        Registry::builtin().find("apps", "v1", "deployments").cloned().unwrap()
    }

    #[test]
    fn fields_v1_round_trips_and_marks_owned_parents() {
        let object = json!({
            "metadata": {"labels": {"app": "x"}, "finalizers": ["a"]},
            "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "manager", "image": "i"}]}}}
        });
        let set = fields_of(&tracked(&object, &deployments(), false), &deployments());
        let encoded = to_fields_v1(&set);
        assert_eq!(
            encoded,
            json!({
                "f:metadata": {"f:labels": {"f:app": {}}, "f:finalizers": {"v:\"a\"": {}}},
                "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {
                    "k:{\"name\":\"manager\"}": {".": {}, "f:image": {}, "f:name": {}}
                }}}}
            })
        );
        assert_eq!(from_fields_v1(&encoded), set);
    }

    #[test]
    fn paths_find_and_remove_keyed_elements() {
        let mut object =
            json!({"spec": {"containers": [{"name": "a", "image": "1"}, {"name": "b", "image": "2"}]}});
        let path = vec![
            Step::Field("spec".into()),
            Step::Field("containers".into()),
            Step::Key("{\"name\":\"b\"}".into()),
            Step::Field("image".into()),
        ];
        assert_eq!(value_at(&object, &path), Some(&json!("2")));
        assert_eq!(display(&path), ".spec.containers[name=\"b\"].image");
        remove_at(&mut object, &path[..3]);
        assert_eq!(object, json!({"spec": {"containers": [{"name": "a", "image": "1"}]}}));
    }
}
