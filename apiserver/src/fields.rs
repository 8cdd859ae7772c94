//! Built-in kinds checked against their OpenAPI schema as the API server checks them: a field the
//! kind does not declare is refused by server-side apply (the typed patch cannot be built) and,
//! on other writes, handled as the request's `fieldValidation` says (Strict refuses, Warn drops
//! it with a warning, Ignore drops it). The schemas are the ones k8s-openapi carries.

use serde_json::Value;
use std::collections::BTreeMap;

use crate::registry::ResourceType;

/// What a write asks the server to do with fields the kind does not declare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Strict,
    /// The server's default when the request names none.
    #[default]
    Warn,
    Ignore,
}

impl FieldValidation {
    /// The `fieldValidation` query parameter.
    pub fn parse(value: Option<&str>) -> Result<FieldValidation, String> {
        match value.unwrap_or_default() {
            "" | "Warn" => Ok(FieldValidation::Warn),
            "Strict" => Ok(FieldValidation::Strict),
            "Ignore" => Ok(FieldValidation::Ignore),
            other => Err(format!(
                "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
            )),
        }
    }
}

/// The definitions the built-in kinds' schemas refer to.
type Definitions = BTreeMap<String, Value>;

/// The schema of a built-in kind, and the definitions it refers to.
fn schema_of(rt: &ResourceType) -> Option<(&'static Definitions, &'static Value)> {
    let schemas = crate::builtin_schemas::json_schema();
    schemas.of(&rt.group, &rt.kind).map(|(_, schema)| (&schemas.definitions, schema))
}

/// The paths of the fields of `object` that its built-in kind does not declare, in the form
/// the API server prints them (`.spec.template.spec.containers[0].bogus`); with `drop`, those
/// fields are removed in the same pass. For custom resources, the fields their CRD's schema
/// prunes (pruning removes them).
pub fn undeclared(rt: &ResourceType, object: &mut Value, drop: bool) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(custom) = &rt.custom {
        // Pruning drops them; the paths are for the refusal or the warnings.
        return crate::schema::unknown_fields(&custom.schema, object)
            .into_iter()
            .map(|p| format!(".{p}"))
            .collect();
    }
    if let Some((definitions, schema)) = schema_of(rt) {
        visit(definitions, schema, object, "", &mut found, drop);
    }
    found
}

/// The lists of built-in kinds that are not `omitempty` (Role's and ClusterRole's `rules`):
/// absent, they read as null.
fn kept_as_null(rt: &ResourceType) -> &'static [&'static str] {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("rbac.authorization.k8s.io", "Role" | "ClusterRole") => &["rules"],
        _ => &[],
    }
}

/// Lists and maps of a built-in kind as kube-apiserver decodes a write: an empty list or map, or
/// a null, is dropped (the Go field is `omitempty`), so that `subjects: []` is no `subjects` at
/// all, for admission as for every read, and a CEL rule that reads the field meets `no such
/// key`. A list that is not `omitempty` is null when absent and stays `[]` when sent empty
/// (until it is stored: [`as_stored`]). Structs stay, empty or not (`status: {}`,
/// `securityContext: {}`). Custom resources keep what they were sent.
pub fn omit_empty(rt: &ResourceType, object: &mut Value) {
    if rt.custom.is_some() {
        return;
    }
    if let Some((definitions, schema)) = schema_of(rt) {
        let kept = kept_as_null(rt);
        if let Some(map) = object.as_object_mut() {
            for key in kept {
                map.entry(key.to_string()).or_insert(Value::Null);
            }
        }
        omit_in(definitions, schema, object, kept, true);
    }
}

/// What storage makes of a list that is not `omitempty`: an empty one reads back as null.
pub fn as_stored(rt: &ResourceType, object: &mut Value) {
    for key in kept_as_null(rt) {
        if let Some(value) = object.get_mut(*key).filter(|v| v.as_array().is_some_and(Vec::is_empty)) {
            *value = Value::Null;
        }
    }
}

fn omit_in(root: &Definitions, schema: &Value, value: &mut Value, kept_as_null: &[&str], top: bool) {
    let schema = resolve(root, schema);
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if let Some(properties) = properties {
                map.retain(|key, child| {
                    let Some(child_schema) = properties.get(key) else { return true };
                    if top && kept_as_null.contains(&key.as_str()) {
                        return true;
                    }
                    omit_in(root, child_schema, child, kept_as_null, false);
                    !is_empty_collection(resolve(root, child_schema), child)
                });
            } else if let Some(item) = additional {
                for child in map.values_mut() {
                    omit_in(root, item, child, kept_as_null, false);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items.iter_mut() {
                    omit_in(root, item_schema, item, kept_as_null, false);
                }
            }
        }
        _ => {}
    }
}

/// A null, an empty list, or an empty map (a schema of `additionalProperties` only).
fn is_empty_collection(schema: &Value, value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(items) => items.is_empty(),
        Value::Object(map) => {
            map.is_empty()
                && schema.get("properties").is_none()
                && schema.get("additionalProperties").is_some_and(Value::is_object)
        }
        _ => false,
    }
}

/// `schema` with its `$ref` followed into the definitions.
fn resolve<'a>(root: &'a Definitions, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => root.get(name).unwrap_or(schema),
        None => schema,
    }
}

fn visit(
    root: &Definitions,
    schema: &Value,
    value: &mut Value,
    path: &str,
    found: &mut Vec<String>,
    drop: bool,
) {
    let schema = resolve(root, schema);
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            // A schema that names neither (RawExtension, JSON, FieldsV1) takes any object.
            if properties.is_none() && additional.is_none() {
                return;
            }
            map.retain(|key, child| match properties.and_then(|p| p.get(key)).or(additional) {
                Some(child_schema) => {
                    visit(root, child_schema, child, &format!("{path}.{key}"), found, drop);
                    true
                }
                None => {
                    found.push(format!("{path}.{key}"));
                    !drop
                }
            });
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    visit(root, item_schema, item, &format!("{path}[{i}]"), found, drop);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::registry::Registry;

    fn rt(group: &str, plural: &str) -> ResourceType {
        let version = "v1";
        Registry::builtin().find(group, version, plural).cloned().expect("built in")
    }

    #[test]
    fn a_field_the_kind_does_not_declare_is_found_at_any_depth() {
        let mut account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"},
            "rules": null, "subjects": []});
        assert_eq!(undeclared(&rt("", "serviceaccounts"), &mut account, false), vec![".rules", ".subjects"]);
        assert!(account.get("rules").is_some(), "found, not dropped");
        let mut deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"any": "x"}, "bogus": 1},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "m", "image": "i", "resources": {"limits": {"cpu": "1"}}},
                                        {"name": "n", "image": "i", "imagePolicy": "x"}]}}}});
        assert_eq!(
            undeclared(&rt("apps", "deployments"), &mut deployment, false),
            vec![".metadata.bogus", ".spec.template.spec.containers[1].imagePolicy"]
        );
    }

    #[test]
    fn declared_fields_maps_and_free_form_parts_pass() {
        let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.x.io", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"group": "x.io", "scope": "Namespaced",
                "names": {"plural": "gadgets", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"spec": {"type": "object", "default": {"any": {"thing": 1}}}}}}}]}});
        assert!(
            undeclared(&rt("apiextensions.k8s.io", "customresourcedefinitions"), &mut crd, false).is_empty()
        );
        let mut role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]},
            "rules": null});
        assert!(undeclared(&rt("rbac.authorization.k8s.io", "clusterroles"), &mut role, false).is_empty());
    }

    #[test]
    fn dropping_keeps_everything_declared() {
        let mut map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"k": "v"}, "rules": null, "spec": {"x": 1}});
        assert_eq!(undeclared(&rt("", "configmaps"), &mut map, true), vec![".rules", ".spec"]);
        assert_eq!(
            map,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn empty_lists_and_maps_are_dropped_as_kube_apiserver_stores_them() {
        let mut binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "b", "labels": {}, "finalizers": []}, "subjects": [],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}});
        omit_empty(&rt("rbac.authorization.k8s.io", "rolebindings"), &mut binding);
        assert_eq!(
            binding,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}})
        );
        let mut role = json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": []});
        omit_empty(&rt("rbac.authorization.k8s.io", "clusterroles"), &mut role);
        assert_eq!(
            role,
            json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": []}),
            "as admission sees it"
        );
        as_stored(&rt("rbac.authorization.k8s.io", "clusterroles"), &mut role);
        assert_eq!(
            role,
            json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": null}),
            "as it reads back"
        );
        let mut role = json!({"kind": "ClusterRole", "metadata": {"name": "r"}});
        omit_empty(&rt("rbac.authorization.k8s.io", "clusterroles"), &mut role);
        assert_eq!(role, json!({"kind": "ClusterRole", "metadata": {"name": "r"}, "rules": null}));
        let mut deployment = json!({"kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "env": [], "ports": [],
                "resources": {}, "securityContext": {}}], "volumes": [], "nodeSelector": {}}}},
            "status": {}});
        omit_empty(&rt("apps", "deployments"), &mut deployment);
        assert_eq!(
            deployment,
            json!({"kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "a", "resources": {}, "securityContext": {}}]}}},
            "status": {}})
        );
    }

    #[test]
    fn the_parameter_reads_as_the_server_reads_it() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse(Some("Strict")), Ok(FieldValidation::Strict));
        assert!(FieldValidation::parse(Some("strict")).unwrap_err().contains("Unsupported value"));
    }
}
