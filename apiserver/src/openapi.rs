//! The OpenAPI documents kube-apiserver serves, made from what the server holds: the built-in
//! kinds' schemas (k8s-openapi's) and every served CRD version's `openAPIV3Schema`, so they
//! follow CRDs as they come and go.
//!
//! - `/openapi/v3`: an index of one document per group-version, each URL carrying a hash of
//!   its document (clients cache by it);
//! - `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`: OpenAPI 3.0 documents with
//!   the paths of each resource (the operations kubectl's field-validation check reads: each
//!   carries `x-kubernetes-group-version-kind` and the write parameters) and the schemas;
//! - `/openapi/v2`: one Swagger 2.0 document of everything, in JSON.
//!
//! What kubectl does with them: `apply` sees that the server validates fields
//! (`fieldValidation` on PATCH) and leaves validation to it; `explain` reads the schemas.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value, json};

use crate::builtin_schemas::{self, Schemas};
use crate::registry::{Registry, ResourceType};

/// The schemas' reference prefix of each document kind.
#[derive(Clone, Copy, PartialEq)]
enum Form {
    V2,
    V3,
}

impl Form {
    fn prefix(self) -> &'static str {
        match self {
            Form::V2 => "#/definitions/",
            Form::V3 => "#/components/schemas/",
        }
    }

    fn builtins(self) -> &'static Schemas {
        match self {
            Form::V2 => builtin_schemas::openapi_v2(),
            Form::V3 => builtin_schemas::openapi_v3(),
        }
    }
}

/// `/openapi/v3/{path}` of a group-version: `api/v1` or `apis/{group}/{version}`.
fn v3_path(group: &str, version: &str) -> String {
    match group {
        "" => format!("api/{version}"),
        _ => format!("apis/{group}/{version}"),
    }
}

/// The group-versions the server serves.
fn group_versions(registry: &Registry) -> BTreeSet<(String, String)> {
    registry.all().map(|rt| (rt.group.clone(), rt.version.clone())).collect()
}

/// `/openapi/v3`: where each group-version's document is, with its hash.
pub fn v3_index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, version) in group_versions(registry) {
        let Some(document) = v3_document(registry, &group, &version) else { continue };
        let path = v3_path(&group, &version);
        let url = format!("/openapi/v3/{path}?hash={}", hash(&document));
        paths.insert(path, json!({"serverRelativeURL": url}));
    }
    json!({"paths": paths})
}

/// The document of `/openapi/v3/{path}`, when the server serves that group-version.
pub fn v3_at(registry: &Registry, path: &str) -> Option<Value> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match segments.as_slice() {
        ["api", version] => v3_document(registry, "", version),
        ["apis", group, version] => v3_document(registry, group, version),
        _ => None,
    }
}

fn v3_document(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<&ResourceType> =
        registry.all().filter(|rt| rt.group == group && rt.version == version).collect();
    if types.is_empty() {
        return None;
    }
    let (paths, schemas) = paths_and_schemas(&types, Form::V3);
    let title = match types.iter().all(|rt| rt.custom.is_some()) {
        true => json!({"title": "Kubernetes CRD Swagger", "version": "v0.1.0"}),
        false => json!({"title": "Kubernetes", "version": crate::discovery::GIT_VERSION}),
    };
    Some(json!({"openapi": "3.0.0", "info": title, "paths": paths, "components": {"schemas": schemas}}))
}

/// `/openapi/v2`: every served kind in one Swagger 2.0 document.
pub fn v2(registry: &Registry) -> Value {
    let types: Vec<&ResourceType> = registry.all().collect();
    let (paths, definitions) = paths_and_schemas(&types, Form::V2);
    json!({
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": crate::discovery::GIT_VERSION},
        "paths": paths,
        "definitions": definitions,
    })
}

fn hash(document: &Value) -> String {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    document.to_string().hash(&mut hasher);
    format!("{:016X}", hasher.finish())
}

/// The definition name of a custom kind, as kube-apiserver makes it: the group reversed, then
/// version and kind (`com.example.transcript.v1.Widget`).
fn custom_definition(rt: &ResourceType) -> String {
    let reversed: Vec<&str> = rt.group.split('.').rev().collect();
    format!("{}.{}.{}", reversed.join("."), rt.version, rt.kind)
}

/// The paths of `types` and the schemas they use (with every definition those refer to).
fn paths_and_schemas(types: &[&ResourceType], form: Form) -> (Map<String, Value>, Map<String, Value>) {
    let builtins = form.builtins();
    let mut paths = Map::new();
    let mut schemas: BTreeMap<String, Value> = BTreeMap::new();
    let object_meta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
    for rt in types {
        let gvk = json!({"group": rt.group, "version": rt.version, "kind": rt.kind});
        let definition = match &rt.custom {
            Some(custom) => {
                let name = custom_definition(rt);
                let mut schema = custom.schema.clone();
                if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
                    properties.insert(
                        "metadata".into(),
                        json!({"$ref": format!("{}{object_meta}", form.prefix())}),
                    );
                }
                schema["x-kubernetes-group-version-kind"] = json!([gvk]);
                schemas.insert(name.clone(), schema);
                name
            }
            None => {
                // events.k8s.io's Event and the core one are different kinds of one storage.
                let Some((kind, schema)) = builtins.of(&rt.group, &rt.kind) else { continue };
                let mut schema = schema.clone();
                schema["x-kubernetes-group-version-kind"] = json!([gvk]);
                schemas.insert(kind.definition.clone(), schema);
                kind.definition.clone()
            }
        };
        for (path, item) in resource_paths(rt, &definition, form) {
            paths.insert(path, item);
        }
    }
    // Everything the kinds refer to, however deep.
    let mut due: Vec<String> = schemas.values().flat_map(|s| references(s, form)).collect();
    while let Some(name) = due.pop() {
        if schemas.contains_key(&name) {
            continue;
        }
        if let Some(schema) = builtins.definitions.get(&name) {
            due.extend(references(schema, form));
            schemas.insert(name, schema.clone());
        }
    }
    (paths, schemas.into_iter().collect())
}

/// The definition names a schema refers to.
fn references(schema: &Value, form: Form) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(name) =
                    map.get("$ref").and_then(Value::as_str).and_then(|r| r.strip_prefix(form.prefix()))
                {
                    found.push(name.to_string());
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}

/// The write parameters kube-apiserver documents on PATCH (kubectl reads `fieldValidation`
/// here to know the server checks fields itself).
fn query(name: &str, description: &str, form: Form) -> Value {
    match form {
        Form::V3 => {
            json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
        }
        Form::V2 => {
            json!({"name": name, "in": "query", "description": description, "type": "string", "uniqueItems": true})
        }
    }
}

fn write_parameters(form: Form, patch: bool) -> Vec<Value> {
    let mut parameters = vec![
        query("dryRun", "When present, indicates that modifications should not be persisted.", form),
        query(
            "fieldManager",
            "fieldManager is a name associated with the actor or entity that is making these changes.",
            form,
        ),
        query(
            "fieldValidation",
            "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields. Valid values are: Ignore, Warn (the default) and Strict.",
            form,
        ),
    ];
    if patch {
        parameters.push(match form {
            Form::V3 => json!({"name": "force", "in": "query", "description": "Force is going to \"force\" Apply requests.", "schema": {"type": "boolean", "uniqueItems": true}}),
            Form::V2 => json!({"name": "force", "in": "query", "description": "Force is going to \"force\" Apply requests.", "type": "boolean", "uniqueItems": true}),
        });
    }
    parameters
}

/// One operation of a resource path.
fn operation(rt: &ResourceType, action: &str, definition: &str, form: Form, parameters: Vec<Value>) -> Value {
    let reference = json!({"$ref": format!("{}{definition}", form.prefix())});
    let ok = match form {
        Form::V3 => {
            json!({"200": {"description": "OK", "content": {"application/json": {"schema": reference}}}})
        }
        Form::V2 => json!({"200": {"description": "OK", "schema": reference}}),
    };
    let mut op = json!({
        "operationId": format!("{action}{}", rt.kind),
        "parameters": parameters,
        "responses": ok,
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": {"group": rt.group, "version": rt.version, "kind": rt.kind},
    });
    let body = match action {
        "post" | "put" => Some(vec!["application/json", "application/yaml"]),
        "patch" => Some(vec![
            "application/json-patch+json",
            "application/merge-patch+json",
            "application/strategic-merge-patch+json",
            "application/apply-patch+yaml",
        ]),
        _ => None,
    };
    if let Some(types) = body {
        match form {
            Form::V3 => {
                let schema = match action {
                    "patch" => json!({"type": "object"}),
                    _ => reference.clone(),
                };
                let content: Map<String, Value> =
                    types.iter().map(|t| (t.to_string(), json!({"schema": schema}))).collect();
                op["requestBody"] = json!({"content": content, "required": true});
            }
            Form::V2 => {
                op["consumes"] = json!(types);
                let schema = match action {
                    "patch" => json!({"type": "object"}),
                    _ => reference.clone(),
                };
                if let Some(parameters) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                    parameters
                        .push(json!({"name": "body", "in": "body", "required": true, "schema": schema}));
                }
            }
        }
    }
    op
}

/// The paths of one resource: the collection, the object, and its subresources.
fn resource_paths(rt: &ResourceType, definition: &str, form: Form) -> Vec<(String, Value)> {
    let base = match rt.group.as_str() {
        "" => format!("/api/{}", rt.version),
        group => format!("/apis/{group}/{}", rt.version),
    };
    let scoped = match rt.namespaced {
        true => format!("{base}/namespaces/{{namespace}}/{}", rt.plural),
        false => format!("{base}/{}", rt.plural),
    };
    let op = |action: &str, parameters: Vec<Value>| operation(rt, action, definition, form, parameters);
    let mut paths = vec![
        (
            scoped.clone(),
            json!({"get": op("list", vec![]), "post": op("post", write_parameters(form, false)), "delete": op("deletecollection", vec![])}),
        ),
        (
            format!("{scoped}/{{name}}"),
            json!({"get": op("get", vec![]), "put": op("put", write_parameters(form, false)),
                   "patch": op("patch", write_parameters(form, true)), "delete": op("delete", vec![])}),
        ),
    ];
    if rt.status {
        paths.push((
            format!("{scoped}/{{name}}/status"),
            json!({"get": op("get", vec![]), "put": op("put", write_parameters(form, false)), "patch": op("patch", write_parameters(form, true))}),
        ));
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry_with_widgets() -> Registry {
        let mut registry = Registry::builtin();
        let crd = json!({"metadata": {"name": "widgets.x.example.com"}, "spec": {"group": "x.example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object",
                "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]}});
        registry.register("x.example.com", "widgets", Registry::types_of_crd(&crd).unwrap());
        registry
    }

    #[test]
    fn the_index_names_every_group_version_with_a_hash() {
        let registry = registry_with_widgets();
        let index = v3_index(&registry);
        let url = index["paths"]["apis/x.example.com/v1"]["serverRelativeURL"].as_str().unwrap();
        assert!(url.starts_with("/openapi/v3/apis/x.example.com/v1?hash="), "{url}");
        assert!(index["paths"]["api/v1"].is_object());
        assert!(index["paths"]["apis/apps/v1"].is_object());
    }

    #[test]
    fn a_patch_says_the_server_validates_fields_and_the_schemas_are_complete() {
        let registry = registry_with_widgets();
        let document = v3_at(&registry, "apis/apps/v1").unwrap();
        let patch = &document["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(patch["x-kubernetes-group-version-kind"]["kind"], "Deployment");
        assert!(patch["parameters"].as_array().unwrap().iter().any(|p| p["name"] == "fieldValidation"));
        let schemas = document["components"]["schemas"].as_object().unwrap();
        let deployment = &schemas["io.k8s.api.apps.v1.Deployment"];
        assert_eq!(deployment["x-kubernetes-group-version-kind"][0]["kind"], "Deployment");
        for name in references(&document, Form::V3) {
            assert!(schemas.contains_key(&name), "{name} is referred to and missing");
        }
        let widgets = v3_at(&registry, "apis/x.example.com/v1").unwrap();
        let widget = &widgets["components"]["schemas"]["com.example.x.v1.Widget"];
        assert_eq!(widget["properties"]["spec"]["properties"]["size"]["type"], "integer");
        assert!(
            widgets["components"]["schemas"]["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"].is_object()
        );
        assert!(v3_at(&registry, "apis/nonexistent.example.com/v1").is_none());
    }
}
