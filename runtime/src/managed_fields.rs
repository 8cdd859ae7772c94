//! Moving what a field manager wrote by create or update to its server-side apply entry, as
//! kubectl moves objects from client-side to server-side apply: Kubernetes tracks a manager by
//! name and operation, so fields a manager created with a plain `create` (an `Update` entry)
//! are not its applies' to remove, and a field a later release drops would stay forever.

use serde_json::{Map, Value, json};

/// The managedFields of an object with `manager`'s `Update` entry (of the object itself, not a
/// subresource) folded into its `Apply` entry; `None` when there is none to fold.
pub fn moved_to_apply(entries: &[Value], manager: &str, now: &str) -> Option<Vec<Value>> {
    let is = |e: &Value, operation: &str| {
        e["manager"] == manager
            && e["operation"] == operation
            && e.get("subresource").and_then(Value::as_str).is_none_or(str::is_empty)
    };
    let updated = entries.iter().find(|e| is(e, "Update"))?;
    let mut fields = updated.get("fieldsV1").cloned().unwrap_or_else(|| json!({}));
    if let Some(applied) = entries.iter().find(|e| is(e, "Apply")) {
        union(&mut fields, applied.get("fieldsV1").unwrap_or(&Value::Null));
    }
    let mut moved: Vec<Value> =
        entries.iter().filter(|e| !is(e, "Update") && !is(e, "Apply")).cloned().collect();
    moved.push(json!({
        "manager": manager,
        "operation": "Apply",
        "apiVersion": updated["apiVersion"],
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields,
    }));
    Some(moved)
}

/// `into` with every field `other` owns besides (fieldsV1 trees are objects all the way down).
fn union(into: &mut Value, other: &Value) {
    let (Some(into), Some(other)) = (into.as_object_mut(), other.as_object()) else { return };
    for (key, value) in other {
        let slot = into.entry(key.clone()).or_insert_with(|| Value::Object(Map::new()));
        union(slot, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_becomes_the_managers_apply_and_others_stay() {
        let entries = vec![
            json!({"manager": "op", "operation": "Update", "apiVersion": "v1", "time": "t0", "fieldsType": "FieldsV1",
                   "fieldsV1": {"f:data": {"f:a": {}, "f:b": {}}}}),
            json!({"manager": "op", "operation": "Apply", "apiVersion": "v1", "time": "t1", "fieldsType": "FieldsV1",
                   "fieldsV1": {"f:data": {"f:c": {}}}}),
            json!({"manager": "op", "operation": "Update", "subresource": "status", "fieldsV1": {"f:status": {}}}),
            json!({"manager": "kubectl", "operation": "Update", "fieldsV1": {"f:metadata": {}}}),
        ];
        let moved = moved_to_apply(&entries, "op", "t2").unwrap();
        assert_eq!(moved.len(), 3);
        let apply = moved.iter().find(|e| e["operation"] == "Apply").unwrap();
        assert_eq!(apply["fieldsV1"], json!({"f:data": {"f:a": {}, "f:b": {}, "f:c": {}}}));
        assert_eq!(apply["time"], "t2");
        assert!(moved.iter().any(|e| e["subresource"] == "status"), "a subresource's entry stays");
        assert!(moved_to_apply(&moved, "op", "t3").is_none(), "nothing more to move");
    }
}
