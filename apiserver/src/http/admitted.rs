//! Writes that admission webhooks see: the object that would be stored (a dry run), the
//! webhooks that match, and then the write of what they admitted.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::{HeaderMap, Method};
use serde_json::Value;

use super::{Reply, Target, dispatch, lock, user_agent_manager};
use crate::Shared;
use crate::admission::{call, denied, failed, matching, mutate, review};
use crate::errors::ApiError;
use crate::request::Attributes;
use crate::store::ListOptions;

/// Every object of one admission kind of the store (`admissionregistration.k8s.io/v1`).
fn admission_objects(shared: &Shared, plural: &str) -> Vec<Value> {
    let store = lock(&shared.store);
    let Some(rt) = store.registry.find("admissionregistration.k8s.io", "v1", plural).cloned() else {
        return Vec::new();
    };
    let list = store.list(&rt, None, &ListOptions::default()).unwrap_or_default();
    list["items"].as_array().cloned().unwrap_or_default()
}

/// The webhook configurations of the store, each marked mutating or not.
fn configurations(shared: &Shared) -> Vec<(bool, Value)> {
    let mutating = admission_objects(shared, "mutatingwebhookconfigurations").into_iter().map(|c| (true, c));
    let validating =
        admission_objects(shared, "validatingwebhookconfigurations").into_iter().map(|c| (false, c));
    mutating.chain(validating).collect()
}

fn reply_object(reply: Reply) -> Value {
    match reply {
        Reply::Json(_, value) | Reply::Warned(_, value, _) => value,
        Reply::Stream(_) => Value::Null,
    }
}

/// The ValidatingAdmissionPolicies and their bindings of the store.
fn policies(shared: &Shared) -> (Vec<Value>, Vec<Value>) {
    (
        admission_objects(shared, "validatingadmissionpolicies"),
        admission_objects(shared, "validatingadmissionpolicybindings"),
    )
}

/// A write through the admission webhooks and policies; without a webhook or policy that
/// matches, the write as it is.
pub(super) async fn write(
    shared: &Arc<Shared>,
    target: Target,
    method: &Method,
    query: &HashMap<String, String>,
    headers: &HeaderMap,
    body: &[u8],
    identity: &super::Identity,
) -> Result<Reply, ApiError> {
    let configurations = configurations(shared);
    let (policies, bindings) = policies(shared);
    let plain =
        |target: Target| dispatch(shared, super::Route::Resource(target), method, query, headers, body);
    let nothing_to_ask = configurations.is_empty() && bindings.is_empty();
    if nothing_to_ask || target.name.is_none() && *method != Method::POST {
        return plain(target);
    }
    let rt = lock(&shared.store)
        .registry
        .find(&target.group, &target.version, &target.plural)
        .cloned()
        .ok_or_else(ApiError::no_such_resource)?;
    let namespace = target.namespace.clone().unwrap_or_default();
    let old = match &target.name {
        Some(name) => lock(&shared.store).get(&rt, &namespace, name).unwrap_or(Value::Null),
        None => Value::Null,
    };
    let operation = match (method.clone(), old.is_null()) {
        (Method::DELETE, _) => "DELETE",
        (Method::POST, _) | (Method::PATCH, true) => "CREATE",
        _ => "UPDATE",
    };
    // The object the write would store, learnt by a dry run of it.
    let candidate = if operation == "DELETE" {
        Value::Null
    } else {
        let mut dry = query.clone();
        dry.insert("dryRun".into(), "All".into());
        reply_object(dispatch(shared, super::Route::Resource(clone(&target)), method, &dry, headers, body)?)
    };
    let attributes = Attributes {
        operation,
        group: rt.group.clone(),
        version: target.version.clone(),
        resource: rt.plural.clone(),
        subresource: target.subresource.clone(),
        kind: rt.kind.clone(),
        namespaced: rt.namespaced,
        namespace: target.namespace.clone(),
        name: target
            .name
            .clone()
            .unwrap_or_else(|| candidate["metadata"]["name"].as_str().unwrap_or_default().to_string()),
        user: identity.user.clone(),
        groups: identity.groups.clone(),
        dry_run: query.get("dryRun").is_some_and(|d| d == "All"),
    };
    let hooks = matching(&configurations, &attributes, &candidate, &old);
    if hooks.is_empty() {
        check_policies(shared, &policies, &bindings, &attributes, &candidate, &old)?;
        return plain(target);
    }
    let services = shared.services.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let mut object = candidate.clone();
    for hook in &hooks {
        if hook.mutating && operation == "DELETE" {
            continue;
        }
        let uid = format!("admission-{}", shared.requests.fetch_add(1, Ordering::Relaxed));
        let request = review(&uid, &attributes, &object, &old);
        match call(hook, &request, &services).await {
            Ok(response) if response["allowed"] == true => {
                if hook.mutating {
                    mutate(&mut object, &hook.name, &response)?;
                }
            }
            Ok(response) => return Err(denied(&hook.name, &response)),
            Err(why) if hook.fail => return Err(failed(&hook.name, &why)),
            Err(why) => tracing::debug!(webhook = %hook.name, error = %why, "ignored: failurePolicy Ignore"),
        }
    }
    check_policies(shared, &policies, &bindings, &attributes, &object, &old)?;
    if object == candidate || attributes.dry_run && operation != "DELETE" {
        return match attributes.dry_run {
            true => Ok(Reply::Json(if operation == "CREATE" { 201 } else { 200 }, object)),
            false => plain(target),
        };
    }
    // Write what the mutating webhooks made: created as new, or replaced at the version that
    // was admitted (a change in between is a conflict, as on a real server).
    let mut body = object;
    // The object a dry run stored always has its metadata.
    let Some(metadata) = body.get_mut("metadata") else {
        return Err(crate::errors::ApiError::internal("the admitted object has no metadata"));
    };
    if operation == "CREATE" {
        for field in ["uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"] {
            if let Some(m) = metadata.as_object_mut() {
                m.remove(field);
            }
        }
    } else {
        metadata["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
    }
    let bytes = serde_json::to_vec(&body).map_err(|e| ApiError::bad_request(e.to_string()))?;
    let (method, target) = match operation {
        "CREATE" => (Method::POST, Target { name: None, subresource: None, ..target }),
        _ => (Method::PUT, target),
    };
    let mut query = query.clone();
    if !query.contains_key("fieldManager") {
        query.insert("fieldManager".into(), user_agent_manager(headers));
    }
    query.remove("force");
    dispatch(shared, super::Route::Resource(target), &method, &query, headers, &bytes)
}

/// The bound policies' verdict on the object the write would store (after the mutating
/// webhooks), with its namespace as `namespaceObject`.
fn check_policies(
    shared: &Shared,
    policies: &[Value],
    bindings: &[Value],
    attributes: &Attributes,
    object: &Value,
    old: &Value,
) -> Result<(), ApiError> {
    if bindings.is_empty() {
        return Ok(());
    }
    let namespace = attributes.namespace.as_deref().filter(|_| attributes.namespaced).and_then(|ns| {
        let store = lock(&shared.store);
        let rt = store.registry.find("", "v1", "namespaces").cloned()?;
        store.get(&rt, "", ns).ok()
    });
    crate::policies::check(policies, bindings, attributes, object, old, namespace.as_ref())
}

fn clone(target: &Target) -> Target {
    Target {
        group: target.group.clone(),
        version: target.version.clone(),
        plural: target.plural.clone(),
        namespace: target.namespace.clone(),
        name: target.name.clone(),
        subresource: target.subresource.clone(),
    }
}
