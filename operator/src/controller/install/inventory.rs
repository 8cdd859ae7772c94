//! The record of what a provider installed: a ConfigMap `{plural}-{name}-inventory` beside the
//! provider object, owned by it, holding the applied objects, their digest, the version and
//! the contract.

use butler_runtime::inventory::InventoryStore;
use kube::Resource;

use super::installed::Inventory;
use crate::api::KindNames;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::vocabulary::ProviderKey;

/// The label every inventory ConfigMap carries, so that one list finds them all.
pub const LABEL_INVENTORY: &str = "operator.butlerlabs.dev/inventory";

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
    let uid = crate::controller::vocabulary::uid_of(owner);
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
