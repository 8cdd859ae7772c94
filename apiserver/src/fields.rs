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
            (("", "ResourceQuota"), root::<core::v1::ResourceQuota>()),
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
            (
                ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
                root::<admissionregistration::v1::ValidatingAdmissionPolicy>(),
            ),
            (
                ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
                root::<admissionregistration::v1::ValidatingAdmissionPolicyBinding>(),
            ),
            (("coordination.k8s.io", "Lease"), root::<coordination::v1::Lease>()),
            (("events.k8s.io", "Event"), root::<events::v1::Event>()),
            (("apiextensions.k8s.io", "CustomResourceDefinition"), root::<CustomResourceDefinition>()),
        ])
    })
}

/// The paths of the fields of `object` that its built-in kind does not declare, in the form
/// the API server prints them (`.spec.template.spec.containers[0].bogus`); with `drop`, those
/// fields are removed in the same pass. Custom resources, pruned by their CRD's schema
/// instead, have none.
pub fn undeclared(rt: &ResourceType, object: &mut Value, drop: bool) -> Vec<String> {
    let mut found = Vec::new();
    if rt.custom.is_some() {
        return found;
    }
    if let Some(root) = schemas().get(&(rt.group.as_str(), rt.kind.as_str())) {
        visit(&root.schema, &root.schema, object, "", &mut found, drop);
    }
    found
}

/// `schema` with its `$ref` followed into the root's definitions.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix("#/$defs/")) {
        Some(name) => root["$defs"].get(name).unwrap_or(schema),
        None => schema,
    }
}

fn visit(root: &Value, schema: &Value, value: &mut Value, path: &str, found: &mut Vec<String>, drop: bool) {
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
    fn the_parameter_reads_as_the_server_reads_it() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        assert_eq!(FieldValidation::parse(Some("Strict")), Ok(FieldValidation::Strict));
        assert!(FieldValidation::parse(Some("strict")).unwrap_err().contains("Unsupported value"));
    }
}
