//! Built-in kinds checked against their OpenAPI schema as the API server checks them: a field the
//! kind does not declare is refused by server-side apply (the typed patch cannot be built) and,
//! on other writes, handled as the request's `fieldValidation` says (Strict refuses, Warn drops
//! it with a warning, Ignore drops it). The schemas are the ones k8s-openapi carries.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::JsonSchema;
use serde_json::Value;

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

/// A root schema with its definitions.
struct Root {
    schema: Value,
}

fn root<T: JsonSchema>() -> Root {
    let generated = schemars::SchemaGenerator::default().into_root_schema_for::<T>();
    Root { schema: generated.to_value() }
}

/// The schema of each built-in kind that has one, by (group, kind).
fn schemas() -> &'static BTreeMap<(&'static str, &'static str), Root> {
    use k8s_openapi::api::{admissionregistration, apps, coordination, core, events, policy, rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    static SCHEMAS: OnceLock<BTreeMap<(&'static str, &'static str), Root>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        BTreeMap::from([
            (("", "Namespace"), root::<core::v1::Namespace>()),
            (("", "ConfigMap"), root::<core::v1::ConfigMap>()),
            (("", "Secret"), root::<core::v1::Secret>()),
            (("", "Service"), root::<core::v1::Service>()),
            (("", "ServiceAccount"), root::<core::v1::ServiceAccount>()),
            (("", "Event"), root::<core::v1::Event>()),
            (("", "Pod"), root::<core::v1::Pod>()),
            (("apps", "Deployment"), root::<apps::v1::Deployment>()),
            (("apps", "DaemonSet"), root::<apps::v1::DaemonSet>()),
            (("policy", "PodDisruptionBudget"), root::<policy::v1::PodDisruptionBudget>()),
            (("rbac.authorization.k8s.io", "Role"), root::<rbac::v1::Role>()),
            (("rbac.authorization.k8s.io", "RoleBinding"), root::<rbac::v1::RoleBinding>()),
            (("rbac.authorization.k8s.io", "ClusterRole"), root::<rbac::v1::ClusterRole>()),
            (("rbac.authorization.k8s.io", "ClusterRoleBinding"), root::<rbac::v1::ClusterRoleBinding>()),
            (
                ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
                root::<admissionregistration::v1::ValidatingWebhookConfiguration>(),
            ),
            (
                ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
                root::<admissionregistration::v1::MutatingWebhookConfiguration>(),
            ),
            (("coordination.k8s.io", "Lease"), root::<coordination::v1::Lease>()),
            (("events.k8s.io", "Event"), root::<events::v1::Event>()),
            (("apiextensions.k8s.io", "CustomResourceDefinition"), root::<CustomResourceDefinition>()),
        ])
    })
}

/// The paths of the fields of `object` that its built-in kind does not declare, in the form
/// the API server prints them (`.spec.template.spec.containers[0].bogus`). Custom resources,
/// pruned by their CRD's schema instead, have none.
pub fn undeclared(rt: &ResourceType, object: &Value) -> Vec<String> {
    if rt.custom.is_some() {
        return Vec::new();
    }
    let Some(root) = schemas().get(&(rt.group.as_str(), rt.kind.as_str())) else { return Vec::new() };
    let mut found = Vec::new();
    walk(&root.schema, &root.schema, object, String::new(), &mut found);
    found
}

/// Drops every field [`undeclared`] names (paths as it returns them).
pub fn drop_undeclared(rt: &ResourceType, object: &mut Value) {
    if rt.custom.is_some() {
        return;
    }
    let Some(root) = schemas().get(&(rt.group.as_str(), rt.kind.as_str())) else { return };
    prune(&root.schema, &root.schema, object);
}

/// `schema` with its `$ref` followed into the root's definitions.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => root["$defs"].get(name).unwrap_or(schema),
        None => schema,
    }
}

fn walk(root: &Value, schema: &Value, value: &Value, path: String, found: &mut Vec<String>) {
    let schema = resolve(root, schema);
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            // A schema that names neither (RawExtension, JSON, FieldsV1) takes any object.
            if properties.is_none() && additional.is_none() {
                return;
            }
            for (key, child) in map {
                match properties.and_then(|p| p.get(key)).or(additional) {
                    Some(child_schema) => walk(root, child_schema, child, format!("{path}.{key}"), found),
                    None => found.push(format!("{path}.{key}")),
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter().enumerate() {
                    walk(root, item_schema, item, format!("{path}[{i}]"), found);
                }
            }
        }
        _ => {}
    }
}

fn prune(root: &Value, schema: &Value, value: &mut Value) {
    let schema = resolve(root, schema);
    match value {
        Value::Object(map) => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|a| a.is_object());
            if properties.is_none() && additional.is_none() {
                return;
            }
            map.retain(|key, _| properties.is_some_and(|p| p.contains_key(key)) || additional.is_some());
            for (key, child) in map.iter_mut() {
                if let Some(child_schema) = properties.and_then(|p| p.get(key)).or(additional) {
                    prune(root, child_schema, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                items.iter_mut().for_each(|item| prune(root, item_schema, item));
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
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "a"},
            "rules": null, "subjects": []});
        assert_eq!(undeclared(&rt("", "serviceaccounts"), &account), vec![".rules", ".subjects"]);
        let deployment = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "d", "labels": {"any": "x"}, "bogus": 1},
            "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "m", "image": "i", "resources": {"limits": {"cpu": "1"}}},
                                        {"name": "n", "image": "i", "imagePolicy": "x"}]}}}});
        assert_eq!(
            undeclared(&rt("apps", "deployments"), &deployment),
            vec![".metadata.bogus", ".spec.template.spec.containers[1].imagePolicy"]
        );
    }

    #[test]
    fn declared_fields_maps_and_free_form_parts_pass() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "gadgets.x.io", "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}]},
            "spec": {"group": "x.io", "scope": "Namespaced",
                "names": {"plural": "gadgets", "kind": "Gadget"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                        "properties": {"spec": {"type": "object", "default": {"any": {"thing": 1}}}}}}}]}});
        assert!(undeclared(&rt("apiextensions.k8s.io", "customresourcedefinitions"), &crd).is_empty());
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "r"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]},
            "rules": null});
        assert!(undeclared(&rt("rbac.authorization.k8s.io", "clusterroles"), &role).is_empty());
    }

    #[test]
    fn dropping_keeps_everything_declared() {
        let mut map = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"},
            "data": {"k": "v"}, "rules": null, "spec": {"x": 1}});
        drop_undeclared(&rt("", "configmaps"), &mut map);
        assert_eq!(
            map,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn the_parameter_reads_as_the_server_reads_it() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse(Some("Strict")), Ok(FieldValidation::Strict));
        assert!(FieldValidation::parse(Some("strict")).unwrap_err().contains("Unsupported value"));
    }
}
