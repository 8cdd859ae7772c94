//! Field ownership: server-side apply, and the ownership that other writes take.
//!
//! Every manager's owned fields are kept in `metadata.managedFields`, one entry per manager,
//! operation (`Apply` or `Update`) and subresource. An apply conflicts with another manager that
//! owns a field the apply sets to a different value (unless forced, which takes the field over);
//! a field that a manager stops applying is removed when nobody else owns it. Other writes take
//! the fields they change away from everyone else without conflicts.

use serde_json::{Map, Value, json};

use super::fieldset::{
    FieldSet, Path, Step, display, fields_of, from_fields_v1, key_of, remove_at, to_fields_v1, tracked,
    value_at,
};
use super::registry::{ListType, ResourceType};

/// One `managedFields` entry.
#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    subresource: String,
    api_version: String,
    time: String,
    fields: FieldSet,
}

fn read(object: &Value) -> Vec<Entry> {
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    object["metadata"]["managedFields"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| Entry {
            manager: text(e, "manager"),
            operation: text(e, "operation"),
            subresource: text(e, "subresource"),
            api_version: text(e, "apiVersion"),
            time: text(e, "time"),
            fields: from_fields_v1(&e["fieldsV1"]),
        })
        .collect()
}

fn write(object: &mut Value, entries: Vec<Entry>) {
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut entry = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                entry["subresource"] = Value::String(e.subresource);
            }
            entry
        })
        .collect();
    let metadata = object.get_mut("metadata").and_then(Value::as_object_mut).expect("objects have metadata");
    if list.is_empty() {
        metadata.remove("managedFields");
    } else {
        metadata.insert("managedFields".into(), Value::Array(list));
    }
}

fn scope_name(status_scope: bool) -> &'static str {
    if status_scope { "status" } else { "" }
}

/// Whether the node at `path` of `value` holds a value that can differ between managers (not a
/// keyed list element or set member, whose identity is its value).
fn is_value(value: &Value, path: &Path) -> bool {
    matches!(path.last(), Some(Step::Field(_))) && value_at(value, path).is_some()
}

/// Whether `path` is a key field of a keyed list element (which stays while the element does).
fn is_key_field(path: &Path) -> bool {
    match path.as_slice() {
        [.., Step::Key(key), Step::Field(name)] => {
            serde_json::from_str::<Map<String, Value>>(key).is_ok_and(|keys| keys.contains_key(name))
        }
        _ => false,
    }
}

/// Who applies, and how.
pub struct Applier<'a> {
    pub rt: &'a ResourceType,
    pub manager: &'a str,
    pub force: bool,
    pub status_scope: bool,
    pub now: &'a str,
}

impl Applier<'_> {
    /// Applies `applied` onto `live` (an empty object of the kind when creating). Conflicts are
    /// returned as (manager, field) pairs, the manager as Kubernetes' messages name it.
    pub fn apply(&self, live: &Value, applied: &Value) -> Result<Value, Vec<(String, String)>> {
        let mut result = live.clone();
        let mut entries = read(&result);
        let scope = scope_name(self.status_scope);
        let intent = tracked(applied, self.rt, self.status_scope);
        let wanted = fields_of(&intent, self.rt);

        let mine = |e: &Entry| e.manager == self.manager && e.operation == "Apply" && e.subresource == scope;
        // A manager is its name with its operation, as Kubernetes counts them: what the same
        // name wrote with an Update is another manager's, and an apply that changes it conflicts.
        let mut conflicts = Vec::new();
        for entry in entries.iter_mut().filter(|e| !mine(e) && e.subresource == scope) {
            let clashing: Vec<Path> = entry
                .fields
                .intersection(&wanted)
                .filter(|p| is_value(&intent, p) && value_at(&result, p) != value_at(&intent, p))
                .cloned()
                .collect();
            for path in clashing {
                if self.force {
                    entry.fields.remove(&path);
                } else {
                    // Kubernetes names an updater with the API version it wrote through.
                    let who = match entry.operation.as_str() {
                        "Apply" => format!("\"{}\"", entry.manager),
                        _ => format!("\"{}\" using {}", entry.manager, entry.api_version),
                    };
                    conflicts.push((who, display(&path)));
                }
            }
        }
        if !conflicts.is_empty() {
            return Err(conflicts);
        }

        let previous = entries.iter().find(|e| mine(e)).map(|e| e.fields.clone()).unwrap_or_default();
        // Outer paths first: a list element goes whole, before its fields are looked at.
        let mut dropped: Vec<&Path> = previous.difference(&wanted).collect();
        dropped.sort_by_key(|p| p.len());
        for path in dropped {
            let owned_elsewhere =
                entries.iter().filter(|e| !mine(e)).any(|e| e.fields.iter().any(|p| p.starts_with(path)));
            if !owned_elsewhere && !is_key_field(path) {
                remove_at(&mut result, path);
            }
        }

        merge(self.rt, &mut result, &intent, &mut Vec::new());

        entries.retain(|e| !mine(e));
        entries.push(Entry {
            manager: self.manager.to_string(),
            operation: "Apply".into(),
            subresource: scope.into(),
            api_version: self.rt.api_version(),
            time: self.now.to_string(),
            fields: wanted,
        });
        write(&mut result, entries);
        Ok(result)
    }
}

/// Records that `manager` wrote `new` over `old` (none on create) with a non-apply request: it
/// takes the fields it changed from every other manager; fields that no longer exist are dropped
/// from every manager.
pub fn record_update(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    status_scope: bool,
    now: &str,
) {
    // A write that sets managedFields itself is taken at its word, as Kubernetes takes it
    // (how a client moves what it made with create or update to server-side apply).
    let written = new["metadata"].get("managedFields");
    let mut entries = match old {
        Some(old) if written.is_some() && written != old["metadata"].get("managedFields") => read(new),
        Some(old) => read(old),
        None => Vec::new(),
    };
    let scope = scope_name(status_scope);
    let mut present = fields_of(&tracked(new, rt, false), rt);
    if rt.status {
        present.extend(fields_of(&tracked(new, rt, true), rt));
    }
    let in_scope = fields_of(&tracked(new, rt, status_scope), rt);
    let changed: FieldSet = in_scope
        .into_iter()
        .filter(|p| match old {
            None => true,
            Some(old) if is_value(new, p) => value_at(old, p) != value_at(new, p),
            Some(old) => value_at(old, p).is_none(),
        })
        .collect();
    let mine = |e: &Entry| e.manager == manager && e.operation == "Update" && e.subresource == scope;
    for entry in entries.iter_mut() {
        entry.fields.retain(|p| present.contains(p));
        if !mine(entry) {
            entry.fields.retain(|p| !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        match entries.iter_mut().find(|e| mine(e)) {
            Some(entry) => {
                entry.fields.extend(changed);
                entry.time = now.to_string();
                entry.api_version = rt.api_version();
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                subresource: scope.into(),
                api_version: rt.api_version(),
                time: now.to_string(),
                fields: changed,
            }),
        }
    }
    write(new, entries);
}

/// Merges applied configuration into an object: objects field by field, keyed lists element by
/// element, sets as a union, everything else replaced.
fn merge(rt: &ResourceType, target: &mut Value, intent: &Value, names: &mut Vec<String>) {
    let Value::Object(fields) = intent else {
        *target = intent.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let target_map = target.as_object_mut().expect("made an object above");
    for (key, value) in fields {
        names.push(key.clone());
        match value {
            Value::Array(items) => match rt.list_type(names) {
                ListType::Atomic => {
                    target_map.insert(key.clone(), value.clone());
                }
                ListType::Set => {
                    let slot = target_map.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
                    if let Value::Array(existing) = slot {
                        for item in items {
                            if !existing.contains(item) {
                                existing.push(item.clone());
                            }
                        }
                    } else {
                        *slot = value.clone();
                    }
                }
                ListType::Map(keys) => {
                    let slot = target_map.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
                    if !slot.is_array() {
                        *slot = Value::Array(Vec::new());
                    }
                    let existing = slot.as_array_mut().expect("made an array above");
                    for item in items {
                        let id = key_of(item, &keys);
                        match existing.iter_mut().find(|e| key_of(e, &keys) == id) {
                            Some(slot) => merge(rt, slot, item, names),
                            None => existing.push(item.clone()),
                        }
                    }
                }
            },
            Value::Object(_) => {
                let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                merge(rt, slot, value, names);
            }
            _ => {
                target_map.insert(key.clone(), value.clone());
            }
        }
        names.pop();
    }
}
