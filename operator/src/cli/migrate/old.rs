//! cluster-api-operator's side of a migration: its provider objects and its Deployment found,
//! the Deployment scaled to zero (its replicas kept to scale it back by hand), the new objects
//! made, and each old object removed once its provider is Ready here, without its finalizer
//! (the old operator is stopped) and without deleting what it installed.

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use serde_json::{Value, json};

use super::carry::OldProvider;
use super::{INSTALL_ALONE, OLD_FINALIZER, OLD_OPERATOR_LABEL, REPLICAS_BEFORE, describe_new, kind_of};
use crate::api::KindNames;
use crate::cli::apply::{Waits, provider_api};
use crate::controller::install::adopt::CAPI_OPERATOR_GROUP;

/// cluster-api-operator's provider objects, by kind, namespace and name; none when its API is
/// not served.
pub(super) async fn old_providers(
    client: &kube::Client,
    namespace: Option<&str>,
) -> Result<Vec<OldProvider>, String> {
    let discovery =
        kube::Discovery::new(client.clone()).filter(&[CAPI_OPERATOR_GROUP]).run().await.map_err(|e| {
            format!("discovering {CAPI_OPERATOR_GROUP}: {}", butler_runtime::error::describe(&e))
        })?;
    let mut olds = Vec::new();
    for group in discovery.groups() {
        for (resource, _) in group.recommended_resources() {
            if !resource.kind.ends_with("Provider") {
                continue;
            }
            let api: Api<DynamicObject> = match namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let list = api.list(&ListParams::default()).await.map_err(|e| {
                format!(
                    "listing cluster-api-operator's {}: {}",
                    resource.plural,
                    butler_runtime::error::describe(&e)
                )
            })?;
            for item in list.items {
                olds.push(OldProvider {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                    namespace: item.metadata.namespace.clone().unwrap_or_default(),
                    name: item.metadata.name.clone().unwrap_or_default(),
                    uid: item.metadata.uid.clone().unwrap_or_default(),
                    object: serde_json::to_value(&item).map_err(|e| e.to_string())?,
                });
            }
        }
    }
    // The core provider first, as it was installed.
    olds.sort_by_key(|o| (o.kind != "CoreProvider", o.kind.clone(), o.namespace.clone(), o.name.clone()));
    Ok(olds)
}

/// cluster-api-operator's Deployment: the one named, else the one its chart labels.
pub(super) async fn old_operator(
    client: &kube::Client,
    named: Option<&(String, String)>,
) -> Result<Option<Deployment>, String> {
    let read = |e: kube::Error| {
        format!("reading cluster-api-operator's Deployment: {}", butler_runtime::error::describe(&e))
    };
    if let Some((namespace, name)) = named {
        let found =
            Api::<Deployment>::namespaced(client.clone(), namespace).get_opt(name).await.map_err(read)?;
        return found.map(Some).ok_or_else(|| format!("no Deployment {namespace}/{name} (--old-operator)"));
    }
    let mut found = Api::<Deployment>::all(client.clone())
        .list(&ListParams::default().labels(OLD_OPERATOR_LABEL))
        .await
        .map_err(read)?
        .items;
    match found.len() {
        0 | 1 => Ok(found.pop()),
        _ => Err(format!(
            "more than one Deployment is labelled {OLD_OPERATOR_LABEL} ({}); name cluster-api-operator's with --old-operator NAMESPACE/NAME",
            found
                .iter()
                .map(|d| format!(
                    "{}/{}",
                    d.metadata.namespace.as_deref().unwrap_or_default(),
                    d.metadata.name.as_deref().unwrap_or_default()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

pub(super) fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Scales the old operator to 0, keeping its replicas in an annotation, and waits until none
/// of its pods is left: a pod still running would fight this operator.
pub(super) async fn scale_down(
    client: &kube::Client,
    deployment: &Deployment,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), String> {
    let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let failed = |e: kube::Error| {
        format!(
            "scaling cluster-api-operator {namespace}/{name} to 0: {}",
            butler_runtime::error::describe(&e)
        )
    };
    if replicas(deployment) != 0 {
        progress(&format!("Scaling cluster-api-operator {namespace}/{name} to 0..."));
        let body = json!({
            "metadata": {"annotations": {REPLICAS_BEFORE: replicas(deployment).to_string()}},
            "spec": {"replicas": 0},
        });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(body)).await.map_err(failed)?;
    }
    let selector: Vec<String> = deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let started = Instant::now();
    loop {
        let now = api.get(&name).await.map_err(failed)?;
        let counted = now.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let running = match selector.is_empty() {
            true => 0,
            false => pods
                .list(&ListParams::default().labels(&selector.join(",")))
                .await
                .map_err(failed)?
                .items
                .len(),
        };
        if counted == 0 && running == 0 {
            return Ok(());
        }
        if started.elapsed() > waits.timeout {
            return Err(format!(
                "cluster-api-operator {namespace}/{name} still has {running} pods after {:?}; nothing else was changed: run butlerctl migrate again once they are gone",
                waits.timeout
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}

/// This operator's provider object of the name `object` has, if any.
pub(super) async fn existing(client: &kube::Client, object: &Value) -> Result<Option<DynamicObject>, String> {
    let kind = kind_of(object);
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match provider_api(client, kind, namespace).get_opt(name).await {
        Ok(found) => Ok(found),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            Err(format!("this operator's {} are not served here: {INSTALL_ALONE}", kind.plural()))
        }
        Err(e) => Err(format!("reading {}: {}", describe_new(object), butler_runtime::error::describe(&e))),
    }
}

pub(super) async fn create(client: &kube::Client, object: &Value) -> Result<(), String> {
    let kind = kind_of(object);
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let wanted: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    let params = PostParams { field_manager: Some("butlerctl".into()), ..Default::default() };
    provider_api(client, kind, namespace)
        .create(&params, &wanted)
        .await
        .map(|_| ())
        .map_err(|e| format!("creating {}: {}", describe_new(object), butler_runtime::error::describe(&e)))
}

/// Sets `spec.version` of this operator's provider object `object` names.
pub(super) async fn set_version(client: &kube::Client, object: &Value, version: &str) -> Result<(), String> {
    let kind = kind_of(object);
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let patch = kube::api::Patch::Merge(serde_json::json!({"spec": {"version": version}}));
    provider_api(client, kind, namespace)
        .patch(name, &kube::api::PatchParams::default(), &patch)
        .await
        .map(|_| ())
        .map_err(|e| {
            format!(
                "setting the version of {}: {}",
                describe_new(object),
                butler_runtime::error::describe(&e)
            )
        })
}

/// Removes cluster-api-operator's object: its finalizer first (its operator is down, and must
/// not delete what this operator now runs), then the object, orphaning what it owned, and
/// waits until it is gone: the garbage collector disowns its dependents and lets it go a
/// moment after the delete answers.
pub(super) async fn remove_old(client: &kube::Client, old: &OldProvider, waits: Waits) -> Result<(), String> {
    let (group, version) = old.api_version.split_once('/').unwrap_or_default();
    let gvk = kube::api::GroupVersionKind::gvk(group, version, &old.kind);
    let resource = kube::api::ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &old.namespace, &resource);
    let failed = |e: kube::Error| {
        format!("removing cluster-api-operator's {}: {}", old.describe(), butler_runtime::error::describe(&e))
    };
    let Some(now) = api.get_opt(&old.name).await.map_err(failed)? else { return Ok(()) };
    if now.metadata.uid.as_deref() != Some(old.uid.as_str()) {
        return Ok(());
    }
    let finalizers = now.metadata.finalizers.clone().unwrap_or_default();
    if let Some(index) = finalizers.iter().position(|f| f == OLD_FINALIZER) {
        let ops = json!([
            {"op": "test", "path": "/metadata/uid", "value": old.uid},
            {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": OLD_FINALIZER},
            {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
        ]);
        let patch: json_patch::Patch = serde_json::from_value(ops).expect("a JSON patch");
        api.patch(&old.name, &PatchParams::default(), &Patch::<()>::Json(patch)).await.map_err(failed)?;
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        preconditions: Some(Preconditions { uid: Some(old.uid.clone()), resource_version: None }),
        ..Default::default()
    };
    match api.delete(&old.name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(e) => return Err(failed(e)),
    }
    let deadline = tokio::time::Instant::now() + waits.timeout;
    loop {
        let remaining = api.get_opt(&old.name).await.map_err(failed)?;
        let Some(still) = remaining.filter(|o| o.metadata.uid.as_deref() == Some(old.uid.as_str())) else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            let finalizers = still.metadata.finalizers.unwrap_or_default();
            return Err(format!(
                "cluster-api-operator's {} is still there {:?} after its deletion, held by the finalizers {finalizers:?}; the garbage collector (kube-controller-manager) removes `orphan` once it has disowned the dependents: check that it runs, then run butlerctl migrate again",
                old.describe(),
                waits.timeout
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}
