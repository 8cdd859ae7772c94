//! Storage-version migration. A release that moves a CRD's storage version leaves the objects
//! stored before at the old one, and Kubernetes keeps the old version in the CRD's
//! `status.storedVersions` until someone says they are gone; a later release that drops the
//! version then fails to apply (`status.storedVersions[0]: Invalid value ...: must appear in
//! spec.versions`). So once a provider applied such a CRD, every stored object of it is written
//! again unchanged (an empty merge patch: the API server encodes it anew at the storage version,
//! and a patch that changes nothing can neither conflict nor lose a concurrent change), page by
//! page and paced, one deleted meanwhile skipped; then the list is trimmed to the storage
//! version, tested against what was read. The provider's inventory names the CRDs still to do,
//! so a migration cut short goes on at the next reconcile.

use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

/// Objects listed a page at a time.
const PAGE: u32 = 500;
/// Writes under way at once.
const AT_ONCE: usize = 16;
/// Writes a second at the most, so that a migration leaves room for everyone else.
const PER_SECOND: f64 = 1000.0;

/// A CRD whose stored objects may be at versions other than its storage version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stale {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    pub storage: String,
    pub stored: Vec<String>,
}

/// The CRD (as the API server answered) if its `status.storedVersions` lists more than its
/// storage version.
pub fn stale(crd: &Value) -> Option<Stale> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    let spec = &crd["spec"];
    let storage =
        spec["versions"].as_array()?.iter().find(|v| v["storage"] == true).map(|v| text(&v["name"]))?;
    let stored: Vec<String> = crd["status"]["storedVersions"].as_array()?.iter().map(text).collect();
    if stored.iter().all(|v| *v == storage) {
        return None;
    }
    Some(Stale {
        name: text(&crd["metadata"]["name"]),
        group: text(&spec["group"]),
        kind: text(&spec["names"]["kind"]),
        plural: text(&spec["names"]["plural"]),
        namespaced: spec["scope"] == "Namespaced",
        storage,
        stored,
    })
}

/// What a migration did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Migrated {
    pub rewritten: usize,
    /// Deleted between the list and their write.
    pub gone: usize,
}

/// A migration under way or done, as an upgrade shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    /// The provider whose CRD it is.
    pub provider: crate::controller::vocabulary::ProviderKey,
    /// The storage version the objects are written at.
    pub storage: String,
    pub migrated: Migrated,
    pub done: bool,
}

/// Reads the CRD `name` and migrates it when it is stale, telling `progress` after each page
/// (and with the storage version first); none when it is gone or current.
pub async fn migrate_named(
    client: &kube::Client,
    name: &str,
    progress: &(dyn Fn(&str, Migrated) + Sync),
) -> Result<Option<Migrated>, String> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let found = crds.get_opt(name).await.map_err(|e| {
        format!("reading CustomResourceDefinition {name}: {}", butler_runtime::error::describe(&e))
    })?;
    let Some(crd) = found else { return Ok(None) };
    let value = serde_json::to_value(&crd).map_err(|e| e.to_string())?;
    match stale(&value) {
        Some(stale) => migrate(client, &stale, progress).await.map(Some),
        None => Ok(None),
    }
}

/// Writes every stored object of the CRD again at its storage version, then trims its
/// `status.storedVersions` to that version; `progress` hears the storage version and the
/// count after each page.
pub async fn migrate(
    client: &kube::Client,
    stale: &Stale,
    progress: &(dyn Fn(&str, Migrated) + Sync),
) -> Result<Migrated, String> {
    let what =
        format!("migrating the objects of CustomResourceDefinition {} to {}", stale.name, stale.storage);
    let failed = |e: kube::Error| format!("{what}: {}", butler_runtime::error::describe(&e));
    let gvk = GroupVersionKind::gvk(&stale.group, &stale.storage, &stale.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &stale.plural);
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut migrated = Migrated::default();
    progress(&stale.storage, migrated);
    let mut token: Option<String> = None;
    loop {
        let mut params = ListParams::default().limit(PAGE);
        if let Some(t) = &token {
            params = params.continue_token(t);
        }
        let page = match all.list_metadata(&params).await {
            Ok(page) => page,
            // The list's snapshot expired: list again; objects written already are current,
            // and an empty patch of a current object is no write.
            Err(kube::Error::Api(status)) if status.code == 410 => {
                token = None;
                continue;
            }
            Err(e) => return Err(failed(e)),
        };
        let started = Instant::now();
        let count = page.items.len();
        let writes = futures::stream::iter(page.items)
            .map(|object| {
                let api: Api<DynamicObject> = match (stale.namespaced, object.metadata.namespace.as_deref()) {
                    (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
                    _ => Api::all_with(client.clone(), &resource),
                };
                let name = object.metadata.name.clone().unwrap_or_default();
                async move { api.patch(&name, &PatchParams::default(), &Patch::Merge(json!({}))).await }
            })
            .buffer_unordered(AT_ONCE)
            .collect::<Vec<_>>()
            .await;
        for write in writes {
            match write {
                Ok(_) => migrated.rewritten += 1,
                Err(kube::Error::Api(status)) if status.code == 404 => migrated.gone += 1,
                Err(e) => return Err(failed(e)),
            }
        }
        progress(&stale.storage, migrated);
        let least = Duration::from_secs_f64(count as f64 / PER_SECOND);
        if let Some(rest) = least.checked_sub(started.elapsed()) {
            tokio::time::sleep(rest).await;
        }
        token = page.metadata.continue_.filter(|t| !t.is_empty());
        if token.is_none() {
            break;
        }
    }
    let trim = json!([
        {"op": "test", "path": "/status/storedVersions", "value": stale.stored},
        {"op": "replace", "path": "/status/storedVersions", "value": [stale.storage]},
    ]);
    let trim: json_patch::Patch = serde_json::from_value(trim).expect("a JSON patch");
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch_status(&stale.name, &PatchParams::default(), &Patch::<()>::Json(trim))
        .await
        .map_err(failed)?;
    tracing::info!(crd = %stale.name, storage = %stale.storage, rewritten = migrated.rewritten, gone = migrated.gone, "migrated the stored objects");
    Ok(migrated)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(storage: &str, stored: &[&str]) -> Value {
        json!({
            "metadata": {"name": "gadgets.x.io"},
            "spec": {"group": "x.io", "scope": "Namespaced", "names": {"kind": "Gadget", "plural": "gadgets"},
                     "versions": [{"name": "v1alpha1", "storage": storage == "v1alpha1"}, {"name": "v1beta1", "storage": storage == "v1beta1"}]},
            "status": {"storedVersions": stored},
        })
    }

    #[test]
    fn a_crd_is_stale_while_it_lists_another_stored_version_than_its_storage() {
        assert_eq!(stale(&crd("v1beta1", &["v1beta1"])), None);
        assert_eq!(stale(&crd("v1alpha1", &["v1alpha1"])), None);
        let found = stale(&crd("v1beta1", &["v1alpha1", "v1beta1"])).unwrap();
        assert_eq!((found.storage.as_str(), found.stored.len(), found.namespaced), ("v1beta1", 2, true));
        assert_eq!(
            (found.kind.as_str(), found.plural.as_str(), found.group.as_str()),
            ("Gadget", "gadgets", "x.io")
        );
        assert_eq!(stale(&json!({"spec": {}})), None, "no status yet");
    }
}
