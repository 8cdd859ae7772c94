//! Custom resources checked against their CRD's schema as the API server does: unknown fields
//! pruned, nulls of non-nullable fields dropped, defaults applied, then the value validations
//! (type, required, enum, bounds, lengths, pattern) and the CEL rules.

use regex::Regex;
use serde_json::{Map, Value};

use super::errors::Cause;
use super::registry::CustomSchema;

/// Prunes and defaults `object` in place.
pub fn prune_and_default(schema: &Value, object: &mut Value) {
    let Some(map) = object.as_object_mut() else { return };
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, value) in map.iter_mut() {
        // apiVersion, kind and metadata belong to the API machinery, not to the schema.
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        if let Some(child) = properties.and_then(|p| p.get(key)) {
            prune_node(child, value);
        }
    }
    // A root that preserves unknown fields (CRDs that ship no schema, as MetalLB's once did)
    // keeps every top-level field, as the API server does.
    let keep_all = preserves(schema);
    map.retain(|key, _| {
        keep_all
            || matches!(key.as_str(), "apiVersion" | "kind" | "metadata")
            || properties.is_some_and(|p| p.contains_key(key))
    });
    default_object(schema, map);
}

/// The fields of `object` that pruning drops (paths as `spec.bogus`), for `fieldValidation`:
/// what [`prune_and_default`] removes, nulls aside.
pub fn unknown_fields(schema: &Value, object: &Value) -> Vec<String> {
    let mut found = Vec::new();
    let Some(map) = object.as_object() else { return found };
    let properties = schema.get("properties").and_then(Value::as_object);
    for (key, value) in map {
        if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        match properties.and_then(|p| p.get(key)) {
            Some(child) => unknown_in(child, value, key, &mut found),
            None if !preserves(schema) => found.push(key.clone()),
            None => {}
        }
    }
    found
}

/// What an object schema says of the fields it holds.
struct Fields<'a> {
    properties: Option<&'a Map<String, Value>>,
    /// The schema of every other key (`additionalProperties` as a schema).
    additional: Option<&'a Value>,
    /// `additionalProperties: true`: any key, with a value no schema describes.
    any_key: bool,
    /// `x-kubernetes-embedded-resource`: apiVersion, kind and metadata are the object's own.
    embedded: bool,
}

fn fields_of(schema: &Value) -> Fields<'_> {
    Fields {
        properties: schema.get("properties").and_then(Value::as_object),
        additional: schema.get("additionalProperties").filter(|a| a.is_object()),
        any_key: schema.get("additionalProperties") == Some(&Value::Bool(true)),
        embedded: schema.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)),
    }
}

fn unknown_in(schema: &Value, value: &Value, path: &str, found: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            let Fields { properties, additional, any_key, embedded } = fields_of(schema);
            for (key, child) in map {
                let at = format!("{path}.{key}");
                match properties.and_then(|p| p.get(key)).or(additional) {
                    Some(child_schema) => unknown_in(child_schema, child, &at, found),
                    None if any_key || preserves(schema) || child.is_null() => {}
                    None if embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") => {}
                    None => found.push(at),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    unknown_in(item_schema, item, &format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

fn preserves(schema: &Value) -> bool {
    schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true))
}

fn nullable(schema: &Value) -> bool {
    schema.get("nullable") == Some(&Value::Bool(true))
}

/// Prunes a value that no schema describes, as the API server does under
/// `additionalProperties: true`: objects lose every field (at any depth), scalars stay.
fn prune_unschematized(value: &mut Value) {
    match value {
        Value::Object(map) => map.clear(),
        Value::Array(items) => items.iter_mut().for_each(prune_unschematized),
        _ => {}
    }
}

fn prune_node(schema: &Value, value: &mut Value) {
    match value {
        Value::Object(map) => {
            // `additionalProperties: true` keeps the keys but gives their values no schema.
            let Fields { properties, additional, any_key, embedded } = fields_of(schema);
            map.retain(|key, child| {
                let child_schema = properties.and_then(|p| p.get(key)).or(additional);
                if child.is_null() && !child_schema.is_some_and(nullable) && !any_key {
                    return false;
                }
                child_schema.is_some()
                    || any_key
                    || preserves(schema)
                    || (embedded && matches!(key.as_str(), "apiVersion" | "kind" | "metadata"))
            });
            for (key, child) in map.iter_mut() {
                match properties.and_then(|p| p.get(key)).or(additional) {
                    Some(child_schema) => prune_node(child_schema, child),
                    None if any_key => prune_unschematized(child),
                    None => {}
                }
            }
            default_object(schema, map);
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items.iter_mut() {
                    prune_node(item_schema, item);
                }
            }
        }
        _ => {}
    }
}

fn default_object(schema: &Value, map: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return };
    for (key, child_schema) in properties {
        if !map.contains_key(key)
            && let Some(default) = child_schema.get("default")
        {
            let mut value = default.clone();
            prune_node(child_schema, &mut value);
            map.insert(key.clone(), value);
        }
    }
}

/// Every value validation `object` breaks, then every CEL rule it breaks (given the old object
/// on update).
pub fn validate(custom: &CustomSchema, object: &Value, old: Option<&Value>) -> Vec<Cause> {
    let mut causes = Vec::new();
    if let Some(map) = object.as_object() {
        let properties = custom.schema.get("properties").and_then(Value::as_object);
        for (key, value) in map {
            if matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
                continue;
            }
            if let Some(child) = properties.and_then(|p| p.get(key)) {
                check(child, value, key, &mut causes);
            }
        }
        required(&custom.schema, map, "", &mut causes);
    }
    if causes.is_empty()
        && let Err(errors) = kube_cel::Validator::new().validate_compiled(&custom.cel, object, old)
    {
        for error in errors.iter() {
            causes.push(Cause {
                reason: "FieldValueInvalid",
                message: format!("Invalid value: \"object\": {}", error.message),
                field: if error.field_path.is_empty() {
                    "<root>".to_string()
                } else {
                    error.field_path.clone()
                },
            });
        }
    }
    causes
}

fn required(schema: &Value, map: &Map<String, Value>, path: &str, causes: &mut Vec<Cause>) {
    for name in
        schema.get("required").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str)
    {
        if !map.contains_key(name) {
            let field = if path.is_empty() { name.to_string() } else { format!("{path}.{name}") };
            causes.push(Cause { reason: "FieldValueRequired", message: "Required value".into(), field });
        }
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check(schema: &Value, value: &Value, path: &str, causes: &mut Vec<Cause>) {
    let mut invalid = |reason: &'static str, message: String| {
        causes.push(Cause { reason, message, field: path.to_string() });
    };
    if value.is_null() {
        return; // Only nullable fields keep a null after pruning.
    }
    let shown = value.to_string();
    if schema.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true)) {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            invalid(
                "FieldValueTypeInvalid",
                format!(
                    "Invalid value: \"{}\": {path} in body must be of type int-or-string: \"{}\"",
                    type_name(value),
                    type_name(value)
                ),
            );
            return;
        }
        // The value checks below apply as to either type: a pattern to a string, bounds to
        // an integer.
    } else if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let ok = actual == expected || (expected == "number" && actual == "integer");
        if !ok {
            invalid(
                "FieldValueTypeInvalid",
                format!(
                    "Invalid value: \"{actual}\": {path} in body must be of type {expected}: \"{actual}\""
                ),
            );
            return;
        }
    }
    if let Some(options) = schema.get("enum").and_then(Value::as_array)
        && !options.contains(value)
    {
        let supported: Vec<String> = options.iter().filter(|o| !o.is_null()).map(Value::to_string).collect();
        invalid(
            "FieldValueNotSupported",
            format!("Unsupported value: {shown}: supported values: {}", supported.join(", ")),
        );
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            let exclusive = schema.get("exclusiveMinimum") == Some(&Value::Bool(true));
            if n < min || (exclusive && n == min) {
                let word = if exclusive { "greater than" } else { "greater than or equal to" };
                invalid(
                    "FieldValueInvalid",
                    format!("Invalid value: {shown}: {path} in body should be {word} {}", number(min)),
                );
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            let exclusive = schema.get("exclusiveMaximum") == Some(&Value::Bool(true));
            if n > max || (exclusive && n == max) {
                let word = if exclusive { "less than" } else { "less than or equal to" };
                invalid(
                    "FieldValueInvalid",
                    format!("Invalid value: {shown}: {path} in body should be {word} {}", number(max)),
                );
            }
        }
    }
    if let Some(text) = value.as_str() {
        let len = text.chars().count() as u64;
        if let Some(min) = schema.get("minLength").and_then(Value::as_u64).filter(|m| len < *m) {
            invalid(
                "FieldValueInvalid",
                format!("Invalid value: {shown}: {path} in body should be at least {min} chars long"),
            );
        }
        if let Some(max) = schema.get("maxLength").and_then(Value::as_u64).filter(|m| len > *m) {
            invalid("FieldValueTooLong", format!("Too long: may not be more than {max} bytes"));
        }
        if let Some(pattern) = schema.get("pattern").and_then(Value::as_str) {
            match Regex::new(pattern) {
                Ok(re) if !re.is_match(text) => invalid(
                    "FieldValueInvalid",
                    format!("Invalid value: {shown}: {path} in body should match '{pattern}'"),
                ),
                _ => {}
            }
        }
    }
    match value {
        Value::Array(items) => {
            let len = items.len() as u64;
            if let Some(min) = schema.get("minItems").and_then(Value::as_u64).filter(|m| len < *m) {
                invalid(
                    "FieldValueInvalid",
                    format!("Invalid value: {len}: {path} in body should have at least {min} items"),
                );
            }
            if let Some(max) = schema.get("maxItems").and_then(Value::as_u64).filter(|m| len > *m) {
                invalid("FieldValueTooMany", format!("Too many: {len}: must have at most {max} items"));
            }
            // A list-map holds one item per key, a set one of each value: duplicates are
            // refused, as the API server refuses them (never merged).
            match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
                Some("map") => {
                    let keys: Vec<&str> = schema
                        .get("x-kubernetes-list-map-keys")
                        .and_then(Value::as_array)
                        .map(|k| k.iter().filter_map(Value::as_str).collect())
                        .unwrap_or_default();
                    for (i, item) in items.iter().enumerate() {
                        let key: Vec<&Value> = keys.iter().map(|k| &item[*k]).collect();
                        if items[..i]
                            .iter()
                            .any(|earlier| keys.iter().map(|k| &earlier[*k]).collect::<Vec<_>>() == key)
                        {
                            let shown: Vec<String> =
                                keys.iter().zip(&key).map(|(k, v)| format!("\"{k}\":{v}")).collect();
                            causes.push(Cause {
                                reason: "FieldValueDuplicate",
                                message: format!(
                                    "Duplicate value: map[string]interface {{}}{{{}}}",
                                    shown.join(", ")
                                ),
                                field: format!("{path}[{i}]"),
                            });
                        }
                    }
                }
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].contains(item) {
                            causes.push(Cause {
                                reason: "FieldValueDuplicate",
                                message: format!("Duplicate value: {item}"),
                                field: format!("{path}[{i}]"),
                            });
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    check(item_schema, item, &format!("{path}[{i}]"), causes);
                }
            }
        }
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            for (key, child) in map {
                if let Some(child_schema) = properties.and_then(|p| p.get(key)).or(additional) {
                    check(child_schema, child, &format!("{path}.{key}"), causes);
                }
            }
            required(schema, map, path, causes);
        }
        _ => {}
    }
}

/// Bounds as the API server prints them: integers without a fraction.
fn number(n: f64) -> String {
    if n.fract() == 0.0 { format!("{}", n as i64) } else { n.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_root_that_preserves_unknown_fields_keeps_them_at_every_depth() {
        let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        let mut object = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "metadata": {"name": "p"},
            "spec": {"addresses": ["10.0.0.0-10.0.0.3"], "autoAssign": true}, "status": {"availableIPv4": 4}});
        let before = object.clone();
        prune_and_default(&schema, &mut object);
        assert_eq!(object, before);
        let strict = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {"a": {"type": "integer"}}}}});
        let mut object = json!({"spec": {"a": 1, "b": 2}, "other": 1});
        prune_and_default(&strict, &mut object);
        assert_eq!(object, json!({"spec": {"a": 1}}));
    }
}
