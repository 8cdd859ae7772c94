//! The structural-schema rules an API server applies to a CRD before it accepts it
//! (apiextensions.k8s.io/v1, "Specifying a structural schema"), plus one rule of our own: an
//! object with neither properties nor additionalProperties must say
//! `x-kubernetes-preserve-unknown-fields`, because the API server would otherwise prune every
//! field written into it.

use std::fmt;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Map, Value};

/// One rule a CRD's schema breaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StructuralError {
    /// `{plural}.{group}` of the CRD.
    pub crd: String,
    /// The version whose schema breaks the rule.
    pub version: String,
    /// Where in the schema, as a path of field names (`.spec.workers.replicas`).
    pub path: String,
    /// What is wrong.
    pub problem: String,
}

impl fmt::Display for StructuralError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = if self.path.is_empty() { "the root" } else { &self.path };
        write!(f, "CRD {} version {}: at {path}: {}", self.crd, self.version, self.problem)
    }
}

impl std::error::Error for StructuralError {}

const JUNCTORS: [&str; 4] = ["allOf", "anyOf", "oneOf", "not"];
const TYPES: [&str; 6] = ["object", "array", "string", "integer", "number", "boolean"];

/// Every rule that `crd` breaks; empty when an API server would accept its schemas.
pub fn check_structural(crd: &CustomResourceDefinition) -> Vec<StructuralError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let mut errors = Vec::new();
    let mut report = |version: &str, path: &str, problem: String| {
        errors.push(StructuralError {
            crd: name.clone(),
            version: version.to_string(),
            path: path.to_string(),
            problem,
        })
    };
    let expected_name = format!("{}.{}", crd.spec.names.plural, crd.spec.group);
    if name != expected_name {
        report("-", "", format!("metadata.name must be {expected_name}"));
    }
    if crd.spec.versions.iter().filter(|v| v.storage).count() != 1 {
        report("-", "", "exactly one version must be the storage version".to_string());
    }
    for version in &crd.spec.versions {
        let schema = version
            .schema
            .as_ref()
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .map(|s| serde_json::to_value(s).expect("a schema always serializes to JSON"));
        let Some(schema) = schema else {
            report(&version.name, "", "the version has no openAPIV3Schema".to_string());
            continue;
        };
        let mut problems = Vec::new();
        check_root(&schema, &mut problems);
        for (path, problem) in problems {
            report(&version.name, &path, problem);
        }
    }
    errors
}

fn check_root(schema: &Value, problems: &mut Vec<(String, String)>) {
    let Some(root) = schema.as_object() else {
        problems.push((String::new(), "the schema is not an object".to_string()));
        return;
    };
    if root.get("type").and_then(Value::as_str) != Some("object") {
        problems.push((String::new(), "the root must have type object".to_string()));
    }
    if let Some(metadata) = root.get("properties").and_then(|p| p.get("metadata")) {
        let allowed = ["type", "properties", "description"];
        let restricted =
            metadata.as_object().is_some_and(|m| m.keys().any(|k| !allowed.contains(&k.as_str())))
                || metadata
                    .get("properties")
                    .and_then(Value::as_object)
                    .is_some_and(|p| p.keys().any(|k| k != "name" && k != "generateName"));
        if restricted {
            problems.push((
                ".metadata".to_string(),
                "only metadata.name and metadata.generateName may be restricted".to_string(),
            ));
        }
    }
    check_node(root, "", problems);
}

fn check_node(node: &Map<String, Value>, path: &str, problems: &mut Vec<(String, String)>) {
    let mut problem = |text: String| problems.push((path.to_string(), text));
    let int_or_string = node.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = node.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    let type_ = node.get("type").and_then(Value::as_str);

    if node.contains_key("$ref") {
        problem("$ref is not allowed; inline the schema".to_string());
    }
    match type_ {
        Some(t) if !TYPES.contains(&t) => problem(format!("unknown type {t:?}")),
        Some(_) if int_or_string => problem("x-kubernetes-int-or-string must not also set type".to_string()),
        None if !int_or_string && !preserve => problem(
            "no type: set type, x-kubernetes-int-or-string or x-kubernetes-preserve-unknown-fields"
                .to_string(),
        ),
        _ => {}
    }
    if node.contains_key("properties") && node.contains_key("additionalProperties") {
        problem("properties and additionalProperties must not both be set".to_string());
    }
    if type_ == Some("object")
        && !preserve
        && !node.contains_key("properties")
        && !node.contains_key("additionalProperties")
    {
        problem("a free-form object must set x-kubernetes-preserve-unknown-fields: true, or its content is pruned".to_string());
    }
    if node.get("uniqueItems") == Some(&Value::Bool(true)) {
        problem("uniqueItems: true is not allowed; use x-kubernetes-list-type: set".to_string());
    }
    if let Some(default) = node.get("default") {
        if let Some(t) = type_.filter(|_| !int_or_string)
            && !value_has_type(default, t)
        {
            problem(format!("default {default} is not of type {t}"));
        }
        if let Some(options) = node.get("enum").and_then(Value::as_array)
            && !options.contains(default)
        {
            problem(format!("default {default} is not one of the enum values"));
        }
    }
    if let (Some(options), Some(t)) = (node.get("enum").and_then(Value::as_array), type_) {
        for option in options.iter().filter(|o| !o.is_null() && !value_has_type(o, t)) {
            problem(format!("enum value {option} is not of type {t}"));
        }
    }
    if type_ == Some("array") && !node.contains_key("items") {
        problem("an array must say what its items are".to_string());
    }

    for junctor in JUNCTORS {
        let Some(value) = node.get(junctor) else { continue };
        let branches: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            other => vec![other],
        };
        for branch in branches {
            check_junctor_branch(branch, node, int_or_string, path, junctor, problems);
        }
    }

    let child = |name: &str, schema: &Value, problems: &mut Vec<(String, String)>| match schema.as_object() {
        Some(map) => check_node(map, name, problems),
        None if schema.is_boolean() => {}
        None => problems.push((name.to_string(), "the schema is not an object".to_string())),
    };
    if let Some(properties) = node.get("properties").and_then(Value::as_object) {
        for (name, schema) in properties {
            child(&format!("{path}.{name}"), schema, problems);
        }
    }
    if let Some(additional) = node.get("additionalProperties").filter(|a| a.is_object()) {
        child(&format!("{path}.*"), additional, problems);
    }
    if let Some(items) = node.get("items") {
        child(&format!("{path}[]"), items, problems);
    }
}

/// Inside allOf/anyOf/oneOf/not only value validations may appear, every field named there must
/// also be named outside, and the one exception is the int-or-string pattern.
fn check_junctor_branch(
    branch: &Value,
    outer: &Map<String, Value>,
    int_or_string: bool,
    path: &str,
    junctor: &str,
    problems: &mut Vec<(String, String)>,
) {
    let Some(branch) = branch.as_object() else { return };
    let int_or_string_branch = int_or_string
        && matches!(branch.get("type").and_then(Value::as_str), Some("integer" | "string"))
        && branch.len() == 1;
    for key in ["description", "type", "default", "additionalProperties", "nullable"] {
        if branch.contains_key(key) && !(key == "type" && int_or_string_branch) {
            problems.push((path.to_string(), format!("{junctor} must not set {key}")));
        }
    }
    let outer_properties = outer.get("properties").and_then(Value::as_object);
    if let Some(properties) = branch.get("properties").and_then(Value::as_object) {
        for name in properties.keys() {
            if !outer_properties.is_some_and(|p| p.contains_key(name)) {
                problems.push((
                    path.to_string(),
                    format!("{junctor} names field {name} that the schema does not define outside it"),
                ));
            }
        }
    }
    if branch.contains_key("items") && !outer.contains_key("items") {
        problems.push((
            path.to_string(),
            format!("{junctor} sets items that the schema does not define outside it"),
        ));
    }
}

fn value_has_type(value: &Value, type_: &str) -> bool {
    match type_ {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn crd_with(schema: Value) -> CustomResourceDefinition {
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "things.example.com"},
            "spec": {
                "group": "example.com",
                "names": {"kind": "Thing", "plural": "things"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true,
                              "schema": {"openAPIV3Schema": schema}}]
            }
        }))
        .unwrap()
    }

    fn problems(schema: Value) -> Vec<String> {
        check_structural(&crd_with(schema))
            .into_iter()
            .map(|e| format!("{}: {}", e.path, e.problem))
            .collect()
    }

    #[test]
    fn a_typed_schema_is_structural() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"x-kubernetes-int-or-string": true},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "list": {"type": "array", "items": {"type": "integer"}}
            }}
        }});
        assert_eq!(problems(schema), Vec::<String>::new());
    }

    #[test]
    fn every_broken_rule_is_named_with_its_path() {
        let schema = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "untyped": {"description": "no type"},
                "map": {"type": "object"},
                "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
                "badDefault": {"type": "integer", "default": "eight"},
                "notInEnum": {"type": "string", "enum": ["a"], "default": "b"},
                "quantity": {"type": "string", "x-kubernetes-int-or-string": true},
                "list": {"type": "array"},
                "junctor": {"type": "object", "properties": {"a": {"type": "string"}},
                            "oneOf": [{"properties": {"b": {"type": "string"}}}, {"description": "x"}]}
            }}
        }});
        let found = problems(schema);
        let expect = [
            ".spec.untyped: no type",
            ".spec.map: a free-form object must set x-kubernetes-preserve-unknown-fields",
            ".spec.both: properties and additionalProperties must not both be set",
            ".spec.badDefault: default \"eight\" is not of type integer",
            ".spec.notInEnum: default \"b\" is not one of the enum values",
            ".spec.quantity: x-kubernetes-int-or-string must not also set type",
            ".spec.list: an array must say what its items are",
            ".spec.junctor: oneOf names field b that the schema does not define outside it",
            ".spec.junctor: oneOf must not set description",
        ];
        for e in expect {
            assert!(found.iter().any(|f| f.starts_with(e)), "missing {e:?} in {found:#?}");
        }
        assert_eq!(found.len(), expect.len(), "{found:#?}");
    }

    #[test]
    fn the_int_or_string_pattern_is_allowed_in_any_of() {
        let schema = json!({"type": "object", "properties": {"port": {
            "x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]
        }}});
        assert_eq!(problems(schema), Vec::<String>::new());
    }

    #[test]
    fn restrictions_on_metadata_other_than_the_name_are_refused() {
        let schema = json!({"type": "object", "properties": {"metadata": {"type": "object", "properties": {
            "labels": {"type": "object", "additionalProperties": {"type": "string"}}
        }}}});
        assert!(problems(schema).iter().any(|p| p.contains("only metadata.name")));
    }
}
