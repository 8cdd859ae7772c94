//! The patch formats: JSON merge patch (RFC 7396), JSON patch (RFC 6902), and strategic merge
//! patch as an approximation: a merge patch whose keyed lists (containers by name, ports,
//! conditions by type, and the list-map lists of CRD schemas) merge element by element, with
//! `$patch: delete` on an element removing it and `$patch: replace` replacing the whole list.
//! Other directives (`$retainKeys`, `$setElementOrder`, `$deleteFromPrimitiveList`) are not
//! supported.

use serde_json::Value;

use super::errors::ApiError;
use super::fieldset::key_of;
use super::registry::{ListType, ResourceType};

/// The patch formats, by content type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PatchType {
    Merge,
    Json,
    Strategic,
    Apply,
}

impl PatchType {
    pub fn from_content_type(content_type: &str) -> Result<PatchType, ApiError> {
        let media = content_type.split(';').next().unwrap_or_default().trim();
        match media {
            "application/merge-patch+json" => Ok(PatchType::Merge),
            "application/json-patch+json" => Ok(PatchType::Json),
            "application/strategic-merge-patch+json" => Ok(PatchType::Strategic),
            "application/apply-patch+yaml" | "application/apply-patch+json" => Ok(PatchType::Apply),
            other => Err(ApiError::unsupported_media_type(other)),
        }
    }
}

/// Applies a merge, JSON or strategic patch to a copy of `current`.
pub fn apply_patch(
    rt: &ResourceType,
    kind: PatchType,
    current: &Value,
    body: &[u8],
) -> Result<Value, ApiError> {
    let mut target = current.clone();
    match kind {
        PatchType::Merge => {
            let patch: Value = parse_json(body)?;
            json_patch::merge(&mut target, &patch);
        }
        PatchType::Json => {
            let patch: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|e| ApiError::bad_request(format!("the JSON patch is not valid: {e}")))?;
            for operation in patch.0 {
                // As in the API server's JSON patch library, a missing value tests equal to null
                // (kube's finalizer helper relies on it).
                if let json_patch::PatchOperation::Test(test) = &operation
                    && test.value.is_null()
                    && target.pointer(test.path.as_str()).is_none()
                {
                    continue;
                }
                json_patch::patch(&mut target, &[operation]).map_err(|e| {
                    let mut error =
                        ApiError::bad_request(format!("the JSON patch could not be applied: {e}"));
                    error.code = 422;
                    error.reason = "Invalid";
                    error
                })?;
            }
        }
        PatchType::Strategic => {
            let patch: Value = parse_json(body)?;
            strategic_merge(rt, &mut target, &patch, &mut Vec::new());
        }
        PatchType::Apply => unreachable!("server-side apply is not a patch of the current object"),
    }
    Ok(target)
}

fn parse_json(body: &[u8]) -> Result<Value, ApiError> {
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))
}

fn strategic_merge(rt: &ResourceType, target: &mut Value, patch: &Value, path: &mut Vec<String>) {
    let Value::Object(patch_map) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Default::default());
    }
    let target_map = target.as_object_mut().expect("made an object above");
    for (key, value) in patch_map {
        // `$deleteFromPrimitiveList/{field}`: values to take out of a merged list of scalars.
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            if let (Some(Value::Array(list)), Value::Array(gone)) = (target_map.get_mut(field), value) {
                list.retain(|v| !gone.contains(v));
            }
            continue;
        }
        if key.starts_with('$') {
            continue;
        }
        if value.is_null() {
            target_map.remove(key);
            continue;
        }
        path.push(key.clone());
        // metadata.finalizers merges (patchStrategy merge): a patch adds to it, never replaces it.
        if path.len() == 2
            && path[0] == "metadata"
            && path[1] == "finalizers"
            && let Value::Array(items) = value
        {
            let slot = target_map.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = slot {
                *list = merge_scalars(list, items);
            }
            path.pop();
            continue;
        }
        match (value, rt.list_type(path)) {
            (Value::Array(items), ListType::Map(keys)) => {
                let slot = target_map.entry(key.clone()).or_insert_with(|| Value::Array(Vec::new()));
                merge_keyed_list(rt, slot, items, &keys, path);
            }
            (Value::Object(_), _) => {
                let slot = target_map.entry(key.clone()).or_insert(Value::Null);
                strategic_merge(rt, slot, value, path);
            }
            _ => {
                target_map.insert(key.clone(), value.clone());
            }
        }
        path.pop();
    }
}

/// A list of scalars with the merge strategy, as Kubernetes merges it (strategicpatch's
/// `mergeSlice` and `mergeSortedSlice`): the patch's items in the patch's order, with the
/// items only the server has put in among them by their order in the live list; where the two
/// cannot be compared, a patch item goes first (so `[b]` onto `[a]` gives `[b, a]`).
fn merge_scalars(live: &[Value], patch: &[Value]) -> Vec<Value> {
    let mut patch_items: Vec<&Value> = Vec::new();
    for item in patch {
        if !patch_items.contains(&item) {
            patch_items.push(item);
        }
    }
    let mut server_only: Vec<&Value> = Vec::new();
    for item in live {
        if !patch.contains(item) && !server_only.contains(&item) {
            server_only.push(item);
        }
    }
    let position = |v: &Value| live.iter().position(|l| l == v);
    let (mut i, mut j) = (0, 0);
    let mut merged = Vec::with_capacity(patch_items.len() + server_only.len());
    while i < server_only.len() || j < patch_items.len() {
        let take_server = match (server_only.get(i), patch_items.get(j)) {
            (Some(_), None) => true,
            (None, _) => false,
            (Some(l), Some(r)) => matches!((position(l), position(r)), (Some(a), Some(b)) if a < b),
        };
        if take_server {
            merged.push(server_only[i].clone());
            i += 1;
        } else {
            merged.push(patch_items[j].clone());
            j += 1;
        }
    }
    merged
}

#[cfg(test)]
#[test]
fn scalars_merge_in_the_order_kubernetes_gives_them() {
    let v = |items: &[&str]| -> Vec<Value> { items.iter().map(|i| Value::from(*i)).collect() };
    for (live, patch, merged) in [
        (&["a"][..], &["b"][..], &["b", "a"][..]),
        (&["a", "b"], &["b"], &["a", "b"]),
        (&["a", "b", "c"], &["c", "d"], &["a", "b", "c", "d"]),
        (&["a", "b"], &["d", "a"], &["d", "a", "b"]),
        (&[], &["x", "x"], &["x"]),
        (&["a", "a"], &[], &["a"]),
    ] {
        assert_eq!(merge_scalars(&v(live), &v(patch)), v(merged), "{live:?} + {patch:?}");
    }
}

fn merge_keyed_list(
    rt: &ResourceType,
    slot: &mut Value,
    items: &[Value],
    keys: &[String],
    path: &mut Vec<String>,
) {
    if items.iter().any(|i| i.get("$patch") == Some(&Value::String("replace".into()))) {
        *slot = Value::Array(items.iter().filter(|i| i.get("$patch").is_none()).cloned().collect());
        return;
    }
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    let list = slot.as_array_mut().expect("made an array above");
    for item in items {
        let key = key_of(item, keys);
        let position = list.iter().position(|existing| key_of(existing, keys) == key);
        let delete = item.get("$patch") == Some(&Value::String("delete".into()));
        match (position, delete) {
            (Some(i), true) => {
                list.remove(i);
            }
            (None, true) => {}
            (Some(i), false) => strategic_merge(rt, &mut list[i], item, path),
            (None, false) => {
                let mut fresh = Value::Object(Default::default());
                strategic_merge(rt, &mut fresh, item, path);
                list.push(fresh);
            }
        }
    }
}
