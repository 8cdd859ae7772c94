//! The API reference of the book, generated from the CRDs: every kind, every field with its
//! type, default, validation and description. `make crds` writes it with `crds/`, and a test
//! fails when it differs from the code.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// Fields below this depth (under `spec` or `status`) are mostly Kubernetes' own types
/// (affinity, tolerations, ...): the reference stops there and says where to look.
const DEPTH: usize = 6;

/// The reference page of `crds`.
pub fn api_reference(crds: &[CustomResourceDefinition]) -> String {
    let mut out = String::from(
        "# API reference\n\n<!-- Generated from the CRDs by `make crds`; a test fails when it is stale. -->\n\n\
         Every kind of the workspace's CRDs, and every field: its type, its default, what the API \
         server checks of it, and what it means. `kubectl explain` shows the same descriptions.\n",
    );
    // Kinds of one shape (the seven provider kinds) are described once.
    let mut described: Vec<(Value, String)> = Vec::new();
    for crd in crds {
        let names = &crd.spec.names;
        for version in &crd.spec.versions {
            let schema = serde_json::to_value(&version.schema).unwrap_or_default();
            let root = &schema["openAPIV3Schema"];
            out.push_str(&format!("\n## {}\n\n", names.kind));
            out.push_str(&format!(
                "`{}/{}`, {}{}; `kubectl get {}`{}.\n\n",
                crd.spec.group,
                version.name,
                match crd.spec.scope.as_str() {
                    "Namespaced" => "namespaced",
                    _ => "cluster-wide",
                },
                if version.storage { "" } else { " (served, not stored)" },
                names.plural,
                names
                    .short_names
                    .as_ref()
                    .filter(|s| !s.is_empty())
                    .map(|s| format!(" (short: `{}`)", s.join("`, `")))
                    .unwrap_or_default(),
            ));
            if let Some(text) = root["description"].as_str() {
                out.push_str(&format!("{}\n\n", one_line(text)));
            }
            let shape = serde_json::json!([root["properties"]["spec"], root["properties"]["status"]]);
            if let Some((_, kind)) = described.iter().find(|(s, _)| *s == shape) {
                let anchor = kind.to_lowercase();
                out.push_str(&format!("Its `spec` and `status` are those of [{kind}](#{anchor}).\n"));
                continue;
            }
            described.push((shape, names.kind.clone()));
            out.push_str("| Field | Type | Default | Checked | Description |\n|---|---|---|---|---|\n");
            for part in ["spec", "status"] {
                let node = &root["properties"][part];
                if node.is_object() {
                    let required = required_of(root).contains(&part.to_string());
                    rows(&names.singular.clone().unwrap_or_default(), part, node, required, 0, &mut out);
                }
            }
        }
    }
    out
}

fn required_of(node: &Value) -> Vec<String> {
    node["required"]
        .as_array()
        .map(|r| r.iter().filter_map(|v| v.as_str().map(String::from)).collect())
        .unwrap_or_default()
}

/// The row of `node` at `path`, then its fields'.
fn rows(kind: &str, path: &str, node: &Value, required: bool, depth: usize, out: &mut String) {
    let mut checks = checks(node);
    if required {
        checks.insert(0, "required".into());
    }
    let deeper = depth + 1 < DEPTH;
    let children = fields(node);
    let mut description = node["description"].as_str().map(one_line).unwrap_or_default();
    if !deeper && !children.is_empty() {
        let field = path.replace("[]", "").replace("{key}", "");
        description.push_str(&format!(" (its fields: `kubectl explain {kind}.{field} --recursive`)"));
    }
    out.push_str(&format!(
        "| `{path}` | {} | {} | {} | {} |\n",
        type_of(node),
        node.get("default").map(|d| format!("`{d}`")).unwrap_or_default(),
        cell(&checks.join("; ")),
        cell(&description),
    ));
    if !deeper {
        return;
    }
    for (joined, child, required) in children {
        rows(kind, &format!("{path}{joined}"), child, required, depth + 1, out);
    }
}

/// The fields under a node, each with what joins it to the node's path: its properties
/// (`.name`), those of its array's items (`[].name`), of its map's values (`{key}.name`).
fn fields(node: &Value) -> Vec<(String, &Value, bool)> {
    let (holder, join) = match node["type"].as_str() {
        Some("array") => (&node["items"], "[]."),
        _ if node["additionalProperties"].is_object() => (&node["additionalProperties"], "{key}."),
        _ => (node, "."),
    };
    let required = required_of(holder);
    holder["properties"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, child)| (format!("{join}{name}"), child, required.contains(name)))
        .collect()
}

fn type_of(node: &Value) -> String {
    if node["x-kubernetes-int-or-string"] == true {
        return "int or string".into();
    }
    match node["type"].as_str() {
        Some("array") => format!("[]{}", type_of(&node["items"])),
        Some("object") if node["additionalProperties"].is_object() => {
            format!("map[string]{}", type_of(&node["additionalProperties"]))
        }
        Some("object") if node["x-kubernetes-preserve-unknown-fields"] == true => "object (any)".into(),
        Some(t) => match node["format"].as_str() {
            Some(f) => format!("{t} ({f})"),
            None => t.into(),
        },
        None if node["x-kubernetes-preserve-unknown-fields"] == true => "any".into(),
        None => "object".into(),
    }
}

/// What the API server checks of a node.
fn checks(node: &Value) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(values) = node["enum"].as_array() {
        let values: Vec<String> =
            values.iter().map(|v| v.as_str().map(|s| format!("`{s}`")).unwrap_or(v.to_string())).collect();
        out.push(format!("one of {}", values.join(", ")));
    }
    for (key, said) in [
        ("minimum", "at least"),
        ("maximum", "at most"),
        ("minLength", "length at least"),
        ("maxLength", "length at most"),
        ("minItems", "items at least"),
        ("maxItems", "items at most"),
    ] {
        if let Some(v) = node.get(key) {
            out.push(format!("{said} {v}"));
        }
    }
    if let Some(p) = node["pattern"].as_str() {
        out.push(format!("matches `{p}`"));
    }
    for rule in node["x-kubernetes-validations"].as_array().into_iter().flatten() {
        let message = rule["message"].as_str().or(rule["rule"].as_str()).unwrap_or_default();
        out.push(message.to_string());
    }
    out
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Text safe inside a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_field_shows_its_type_default_checks_and_description() {
        let node = serde_json::json!({
            "type": "object",
            "required": ["follow"],
            "properties": {
                "follow": {"type": "string", "enum": ["Pin", "Patch"], "description": "Which | releases."},
                "approval": {"type": "string", "default": "Manual"},
                "targets": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string", "minLength": 1}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            }
        });
        let mut out = String::new();
        rows("providerupgrade", "spec", &node, true, 0, &mut out);
        assert!(
            out.contains(
                "| `spec.follow` | string |  | required; one of `Pin`, `Patch` | Which \\| releases. |"
            ),
            "{out}"
        );
        assert!(out.contains("| `spec.approval` | string | `\"Manual\"` |"), "{out}");
        assert!(out.contains("| `spec.targets` | []object |"), "{out}");
        assert!(out.contains("| `spec.targets[].name` | string |  | length at least 1 |"), "{out}");
        assert!(out.contains("| `spec.labels` | map[string]string |"), "{out}");
    }
}
