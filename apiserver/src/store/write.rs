//! Writes that create or change an object: create, replace, patch and server-side apply. Each
//! ends in [`Store::save`], which checks what every write must satisfy.

use serde_json::{Value, json};

use super::{Store, WriteOptions, check_applied_fields, check_fields, hooks, name_of, now};
use crate::apply::Applier;
use crate::errors::{self, ApiError};
use crate::patch::{PatchType, apply_patch};
use crate::registry::ResourceType;

impl Store {
    /// `POST`: a new object.
    pub fn create(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        mut body: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if !body.is_object() {
            return Err(ApiError::bad_request("the body of the request is not an object"));
        }
        check_kind(rt, &body)?;
        check_fields(rt, &mut body, opts)?;
        let meta = body["metadata"].as_object().cloned().unwrap_or_default();
        if let Some(ns) = meta.get("namespace").and_then(Value::as_str)
            && rt.namespaced
            && !ns.is_empty()
            && ns != namespace
        {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let name = match (
            meta.get("name").and_then(Value::as_str),
            meta.get("generateName").and_then(Value::as_str),
        ) {
            (Some(name), _) if !name.is_empty() => name.to_string(),
            (_, Some(prefix)) if !prefix.is_empty() => format!("{prefix}{}", self.random_suffix()),
            _ => {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    "",
                    vec![errors::Cause {
                        reason: "FieldValueRequired",
                        message: "Required value: name or generateName is required".into(),
                        field: "metadata.name".into(),
                    }],
                ));
            }
        };
        body["metadata"]["name"] = Value::String(name.clone());
        if rt.namespaced {
            self.check_namespace_accepts(rt, namespace, &name)?;
            body["metadata"]["namespace"] = Value::String(namespace.to_string());
        } else if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("namespace");
        }
        if self.lookup(rt, namespace, &name).is_some() {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
        }
        hooks::check_name(rt, &name)?;
        self.save(rt, None, body, Some(&opts.manager), false, opts.dry_run)
    }

    fn check_namespace_accepts(
        &self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
    ) -> Result<(), ApiError> {
        let namespaces = self.registry.find("", "v1", "namespaces").expect("namespaces are built in");
        match self.lookup(namespaces, "", namespace) {
            None => Err(ApiError::not_found("", "namespaces", namespace)),
            Some(ns) if !ns["metadata"]["deletionTimestamp"].is_null() => {
                Err(ApiError::namespace_terminating(&rt.group, &rt.plural, name, namespace))
            }
            Some(_) => Ok(()),
        }
    }

    /// `PUT`: replaces an object (or its status).
    pub fn replace(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        mut body: Value,
        status_scope: bool,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        check_kind(rt, &body)?;
        check_fields(rt, &mut body, opts)?;
        if body["metadata"]["name"].as_str().is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                name_of(&body)
            )));
        }
        let old = self
            .lookup(rt, namespace, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        check_resource_version(rt, name, &old, &body)?;
        self.save(rt, Some(&old), body, Some(&opts.manager), status_scope, opts.dry_run)
    }

    /// `PATCH`: merge, JSON, strategic merge or server-side apply.
    #[allow(clippy::too_many_arguments)]
    pub fn patch(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        kind: PatchType,
        body: &[u8],
        status_scope: bool,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let old = self.lookup_to_patch(rt, namespace, name);
        if kind == PatchType::Apply {
            return self.server_side_apply(rt, namespace, name, old, body, status_scope, opts);
        }
        let old = old.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let mut patched = apply_patch(rt, kind, &old, body)?;
        check_fields(rt, &mut patched, opts)?;
        check_resource_version(rt, name, &old, &patched)?;
        if name_of(&patched) != name {
            return Err(ApiError::bad_request("a patch cannot change the name of an object"));
        }
        self.save(rt, Some(&old), patched, Some(&opts.manager), status_scope, opts.dry_run)
    }

    #[allow(clippy::too_many_arguments)]
    fn server_side_apply(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        old: Option<Value>,
        body: &[u8],
        status_scope: bool,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if opts.manager.is_empty() {
            return Err(ApiError::bad_request(
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
            ));
        }
        let text =
            std::str::from_utf8(body).map_err(|_| ApiError::bad_request("the apply patch is not UTF-8"))?;
        let mut applied: Value = serde_saphyr::from_str(text)
            .map_err(|e| ApiError::bad_request(format!("the apply patch is not valid YAML or JSON: {e}")))?;
        if !applied.is_object() {
            return Err(ApiError::bad_request("the apply patch is not an object"));
        }
        check_kind(rt, &applied)?;
        if applied["apiVersion"].is_null() || applied["kind"].is_null() {
            return Err(ApiError::bad_request("an apply patch must set apiVersion and kind"));
        }
        check_applied_fields(rt, name, &mut applied)?;
        if applied["metadata"]["name"].as_str().is_some_and(|n| n != name) {
            return Err(ApiError::bad_request(
                "the name in the apply patch does not match the name on the URL",
            ));
        }
        let live = match &old {
            Some(old) => old.clone(),
            None => {
                if status_scope {
                    return Err(ApiError::not_found(&rt.group, &rt.plural, name));
                }
                if rt.namespaced {
                    self.check_namespace_accepts(rt, namespace, name)?;
                }
                hooks::check_name(rt, name)?;
                let mut meta = json!({"name": name});
                if rt.namespaced {
                    meta["namespace"] = Value::String(namespace.to_string());
                }
                json!({"apiVersion": rt.api_version(), "kind": rt.kind, "metadata": meta})
            }
        };
        let now = now();
        let applier = Applier { rt, manager: &opts.manager, force: opts.force, status_scope, now: &now };
        let merged = applier
            .apply(&live, &applied)
            .map_err(|conflicts| ApiError::apply_conflict(&rt.group, &rt.plural, name, &conflicts))?;
        self.save(rt, old.as_ref(), merged, None, status_scope, opts.dry_run)
    }
}

/// A resourceVersion in a write is a precondition: it must be the stored one.
fn check_resource_version(rt: &ResourceType, name: &str, old: &Value, new: &Value) -> Result<(), ApiError> {
    // An empty one is no precondition (an unconditional update).
    match new["metadata"]["resourceVersion"].as_str().filter(|rv| !rv.is_empty()) {
        Some(rv) if rv != old["metadata"]["resourceVersion"].as_str().unwrap_or_default() => {
            Err(ApiError::conflict(
                &rt.group,
                &rt.plural,
                name,
                "the object has been modified; please apply your changes to the latest version and try again",
            ))
        }
        _ => Ok(()),
    }
}

/// The body's apiVersion and kind, when set, must be those of the URL.
fn check_kind(rt: &ResourceType, body: &Value) -> Result<(), ApiError> {
    if let Some(kind) = body["kind"].as_str()
        && kind != rt.kind
    {
        return Err(ApiError::bad_request(format!(
            "the kind of the object ({kind}) does not match the URL ({})",
            rt.kind
        )));
    }
    if let Some(api_version) = body["apiVersion"].as_str()
        && api_version != rt.api_version()
    {
        return Err(ApiError::bad_request(format!(
            "the apiVersion of the object ({api_version}) does not match the URL ({})",
            rt.api_version()
        )));
    }
    Ok(())
}
