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

/// The provider's inventory. The first call of a process for a provider reads its ConfigMap
/// (by name: nothing else anyone wrote in the namespace is read); from then on this process's
/// record is the truth, since only the leader writes inventories. An inventory counts only
/// where the provider's would be: in its namespace, under its name, labelled for it and owned
/// by the provider object (its UID), so one anyone made can never make the operator delete
/// what it lists.
pub async fn inventory_of(ctx: &Context, key: &ProviderKey, uid: &str) -> Result<Option<Inventory>, Error> {
    let read = ctx.inventories_read.lock().expect("not poisoned").contains(uid);
    if !read {
        let found = ctx.inventory_store.get::<Inventory>(&key.namespace, &name(key)).await.map_err(|e| {
            Error::kube(format!("reading the inventory ConfigMap {}/{}", key.namespace, name(key)), e)
        })?;
        let record = found
            .filter(|f| ProviderKey::from_labels(&f.labels).as_ref() == Some(key) && f.owners == [uid])
            .map(|f| f.record);
        if let Some(record) = record {
            ctx.inventories.lock().expect("not poisoned").entry(uid.to_string()).or_insert(record);
        }
        ctx.inventories_read.lock().expect("not poisoned").insert(uid.to_string());
    }
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
