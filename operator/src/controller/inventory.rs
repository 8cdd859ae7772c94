//! The record of what a provider installed: a ConfigMap `{plural}-{name}-inventory` beside the
//! provider object, owned by it, holding the applied objects, their digest, the version and
//! the contract.

use butler_runtime::inventory::InventoryStore;
use butler_runtime::objects::ObjectRef;
use kube::Resource;
use serde::{Deserialize, Serialize};

use super::context::Context;
use super::error::Error;
use super::vocabulary::ProviderKey;
use crate::api::KindNames;

/// The label every inventory ConfigMap carries, so that one list finds them all.
pub const LABEL_INVENTORY: &str = "operator.butlerlabs.dev/inventory";

/// What was installed, recorded so that the next change can delete what dropped out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub version: String,
    pub contract: String,
    /// The digest of the rendered objects; empty while an install is under way.
    pub digest: String,
    pub objects: Vec<ObjectRef>,
    /// Objects of `objects` that an install under way has not made yet: whether they are this
    /// provider's is known only once made (one of that name may be someone else's), so they
    /// are created, never applied over, and deleted only when they carry its labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<ObjectRef>,
    /// CRDs of `objects` that existed before the provider and that it applies over (a CRD is
    /// one API for the whole cluster, as clusterctl treats it): never deleted by the provider,
    /// whatever its `crdDeletionPolicy`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopted: Vec<ObjectRef>,
    /// CRDs whose stored objects are being written again at a new storage version
    /// ([`super::storage`]): named before the first write, dropped once the CRD's
    /// `storedVersions` is trimmed, so that a migration cut short goes on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrating: Vec<String>,
    /// CRDs this provider made that a later release no longer ships (renamed, say): kept, as
    /// clusterctl keeps them on an upgrade, since objects of theirs may be stored, but still
    /// the provider's, so that its deletion with `crdDeletionPolicy: Delete` removes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<ObjectRef>,
}

/// The CRDs kept after an upgrade from `previous` to a release of `objects`: those kept
/// before and those this provider made that the release no longer ships, less any it ships
/// again. A CRD that was there before the provider, or that an install never finished
/// making, was never the provider's to keep.
pub fn kept_crds(previous: &Inventory, objects: &[ObjectRef]) -> Vec<ObjectRef> {
    let dropped = previous.objects.iter().filter(|o| {
        o.kind == "CustomResourceDefinition" && !previous.adopted.contains(o) && !previous.pending.contains(o)
    });
    let mut kept: Vec<ObjectRef> = Vec::new();
    for crd in previous.kept.iter().chain(dropped) {
        if !objects.contains(crd) && !kept.contains(crd) {
            kept.push(crd.clone());
        }
    }
    kept
}

/// The inventory ConfigMap's name: `{plural}-{name}-inventory`.
pub fn name(key: &ProviderKey) -> String {
    format!("{}-{}-inventory", key.kind.plural(), key.name)
}

/// The provider's inventory. The first call of a process lists every inventory ConfigMap
/// (one request for all providers); from then on this process's records are the truth, since
/// only the leader writes inventories. An inventory counts only where the provider's would be:
/// in its namespace, under its name, owned by the provider object (its UID). One anyone made
/// elsewhere is never read, so it can never make the operator delete what it lists.
pub async fn inventory_of(ctx: &Context, uid: &str) -> Result<Option<Inventory>, Error> {
    ctx.inventories_loaded
        .get_or_try_init(|| async {
            let all = ctx
                .inventory_store
                .list::<Inventory>(ctx.namespace.as_deref())
                .await
                .map_err(|e| Error::kube("listing the inventory ConfigMaps", e))?;
            let mut known = ctx.inventories.lock().expect("not poisoned");
            for found in all {
                let Some(labelled) = ProviderKey::from_labels(&found.labels) else { continue };
                let in_place = found.namespace == labelled.namespace && found.name == name(&labelled);
                if let (true, [owner]) = (in_place, found.owners.as_slice()) {
                    known.entry(owner.clone()).or_insert(found.record);
                }
            }
            Ok::<(), Error>(())
        })
        .await?;
    Ok(ctx.inventories.lock().expect("not poisoned").get(uid).cloned())
}

/// Writes the provider's inventory and remembers it.
pub async fn write<K: Resource<DynamicType = ()>>(
    ctx: &Context,
    owner: &K,
    key: &ProviderKey,
    inventory: &Inventory,
) -> Result<(), String> {
    let uid = super::vocabulary::uid_of(owner);
    let name = name(key);
    ctx.inventory_store.write(owner, &name, &key.labels(), inventory).await.map_err(|e| {
        format!(
            "writing the inventory ConfigMap {}/{name}: {}",
            key.namespace,
            butler_runtime::error::describe(&e)
        )
    })?;
    ctx.inventories.lock().expect("not poisoned").insert(uid, inventory.clone());
    Ok(())
}

/// Deletes the provider's inventory.
pub async fn delete(ctx: &Context, key: &ProviderKey) -> Result<(), Error> {
    let name = name(key);
    ctx.inventory_store
        .delete(&key.namespace, &name)
        .await
        .map_err(|e| Error::kube(format!("deleting the inventory ConfigMap {}/{name}", key.namespace), e))
}

/// The store of the operator's inventories.
pub fn store(client: kube::Client) -> InventoryStore {
    InventoryStore::new(client, crate::api::FIELD_MANAGER, LABEL_INVENTORY)
}
