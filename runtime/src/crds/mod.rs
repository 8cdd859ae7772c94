//! The rendering and checking of CRDs that every crate of the workspace shares: one YAML file
//! per CRD, named as controller-gen names them, descriptions that `kubectl explain` wraps, and a
//! check that a schema is structural so that a real API server accepts it.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

mod structural;

pub use structural::{StructuralError, check_structural};

/// The file a CRD is written to: `{group}_{plural}.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// A CRD as the YAML document that is committed under `crds/`.
pub fn render(crd: &CustomResourceDefinition) -> String {
    let mut value = serde_json::to_value(crd).expect("a CRD always serializes to JSON");
    tidy_value(&mut value);
    serde_saphyr::to_string(&value).expect("JSON values always serialize to YAML")
}

/// Several CRDs as one multi-document YAML stream.
pub fn render_all(crds: &[CustomResourceDefinition]) -> String {
    crds.iter().map(|crd| format!("---\n{}", render(crd))).collect()
}

/// The schema paths (`.spec.workers.replicas`) of the fields of `crd` that have no description,
/// so that `kubectl explain` has something to say about every field.
pub fn undocumented_fields(crd: &CustomResourceDefinition) -> Vec<String> {
    fn walk(node: &Value, path: &str, found: &mut Vec<String>) {
        let Some(map) = node.as_object() else { return };
        if let Some(properties) = map.get("properties").and_then(Value::as_object) {
            for (name, child) in properties {
                let child_path = format!("{path}.{name}");
                let described =
                    child.get("description").and_then(Value::as_str).is_some_and(|d| !d.trim().is_empty());
                // apiVersion, kind and metadata are described by Kubernetes itself.
                let builtin = path.is_empty() && ["apiVersion", "kind", "metadata"].contains(&name.as_str());
                if !described && !builtin {
                    found.push(child_path.clone());
                }
                walk(child, &child_path, found);
            }
        }
        if let Some(items) = map.get("items") {
            walk(items, &format!("{path}[]"), found);
        }
        if let Some(additional) = map.get("additionalProperties") {
            walk(additional, &format!("{path}.*"), found);
        }
    }
    let mut found = Vec::new();
    for version in &crd.spec.versions {
        if let Some(schema) = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()) {
            walk(&serde_json::to_value(schema).expect("a schema always serializes to JSON"), "", &mut found);
        }
    }
    found
}

/// Joins the hard-wrapped lines of doc comments into paragraphs, so that `kubectl explain`
/// wraps them to the terminal.
pub fn tidy(crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let mut value = serde_json::to_value(&crd).expect("a CRD always serializes to JSON");
    tidy_value(&mut value);
    serde_json::from_value(value).expect("tidying keeps a CRD a CRD")
}

fn tidy_value(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (key, child) in map.iter_mut() {
                match (key.as_str(), &child) {
                    ("description", Value::String(text)) => *child = Value::String(unwrap_lines(text)),
                    // k8s-openapi keeps bounds as floats; a whole number reads better as one.
                    ("minimum" | "maximum", Value::Number(n)) => {
                        if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                            *child = Value::from(f as i64);
                        }
                    }
                    _ => tidy_value(child),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(tidy_value),
        _ => {}
    }
}

/// Replaces single line breaks with spaces and keeps paragraph breaks.
fn unwrap_lines(text: &str) -> String {
    text.split("\n\n")
        .map(|paragraph| paragraph.lines().map(str::trim).collect::<Vec<_>>().join(" "))
        .collect::<Vec<_>>()
        .join("\n\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwrap_lines_joins_lines_and_keeps_paragraphs() {
        assert_eq!(unwrap_lines("one\ntwo\n\nthree"), "one two\n\nthree");
        assert_eq!(unwrap_lines("single"), "single");
    }

    fn crd() -> CustomResourceDefinition {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object", "description": "A gadget,\nwrapped.",
                    "properties": {"size": {"type": "integer", "minimum": 1.0}}}}}]}
        }))
        .unwrap()
    }

    #[test]
    fn file_names_follow_controller_gen() {
        assert_eq!(file_name(&crd()), "example.com_gadgets.yaml");
    }

    #[test]
    fn whole_number_bounds_render_as_integers_and_lines_join() {
        let yaml = render(&crd());
        assert!(yaml.contains("minimum: 1\n"), "{yaml}");
        assert!(!yaml.contains("minimum: 1.0"));
        assert!(yaml.contains("A gadget, wrapped."), "{yaml}");
        assert_eq!(undocumented_fields(&crd()), [".size"]);
    }
}
