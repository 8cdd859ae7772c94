//! The record of an applied object set: a ConfigMap beside the object that owns the set, owned
//! by it (so it goes with it), holding the record as JSON. Writing the old and the new objects
//! before the first apply ([`while_applying`]) means a controller killed at any line finds every
//! object again; [`dropped_out`] is what to delete once the new set is applied.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::not_found_ok;
use crate::objects::ObjectRef;

/// The data key of the record.
const KEY: &str = "inventory";

/// Inventory ConfigMaps of one controller: its field manager writes them, labelled (`"true"`)
/// as its own.
pub struct InventoryStore {
    client: kube::Client,
    field_manager: String,
    label: String,
}

/// An inventory as read: where its ConfigMap is, its labels and owners, and the record.
pub struct Found<T> {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The UIDs of its controller owner references: whose record it is.
    pub owners: Vec<String>,
    pub record: T,
}

impl InventoryStore {
    pub fn new(client: kube::Client, field_manager: &str, label: &str) -> InventoryStore {
        InventoryStore { client, field_manager: field_manager.into(), label: label.into() }
    }

    /// Writes the record into the ConfigMap `name` in the owner's namespace, owned by `owner`
    /// and labelled with `labels` besides the store's own.
    pub async fn write<K, T>(
        &self,
        owner: &K,
        name: &str,
        labels: &BTreeMap<String, String>,
        record: &T,
    ) -> Result<(), kube::Error>
    where
        K: Resource<DynamicType = ()>,
        T: Serialize,
    {
        let namespace = owner.namespace().unwrap_or_default();
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &namespace);
        let owner_ref = owner.controller_owner_ref(&()).map(|r| vec![r]).unwrap_or_default();
        let mut all_labels = labels.clone();
        all_labels.insert("app.kubernetes.io/managed-by".into(), self.field_manager.clone());
        all_labels.insert(self.label.clone(), "true".into());
        let cm = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "ownerReferences": owner_ref, "labels": all_labels},
            "data": {KEY: serde_json::to_string(record).map_err(kube::Error::SerdeError)?},
        });
        api.patch(name, &PatchParams::apply(&self.field_manager).force(), &Patch::Apply(cm)).await.map(|_| ())
    }

    /// The inventory `name` in `namespace`, when there is one whose record reads as `T`: one
    /// request, and nothing but that ConfigMap decoded (whatever else anyone wrote there).
    pub async fn get<T: DeserializeOwned>(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<Option<Found<T>>, kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        Ok(api.get_opt(name).await?.and_then(found))
    }

    /// Deletes an inventory; one that is gone already is fine.
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<(), kube::Error> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        not_found_ok(api.delete(name, &Default::default()).await).map(|_| ())
    }
}

/// An inventory ConfigMap as read, when its record reads as `T`.
fn found<T: DeserializeOwned>(cm: ConfigMap) -> Option<Found<T>> {
    let record = serde_json::from_str(cm.data.as_ref()?.get(KEY)?).ok()?;
    let owners =
        cm.owner_references().iter().filter(|r| r.controller == Some(true)).map(|r| r.uid.clone()).collect();
    Some(Found {
        namespace: cm.namespace().unwrap_or_default(),
        name: cm.name_any(),
        labels: cm.metadata.labels.clone().unwrap_or_default(),
        owners,
        record,
    })
}

/// What the inventory lists while a new set is applied: the new objects, then those of the
/// previous set that the new one lacks, so that a crash at any point leaves each findable.
pub fn while_applying(previous: &[ObjectRef], wanted: &[ObjectRef]) -> Vec<ObjectRef> {
    // Looked up in a set: a release may hold 10,000 objects.
    let listed: std::collections::HashSet<&ObjectRef> = wanted.iter().collect();
    let mut during = wanted.to_vec();
    during.extend(previous.iter().filter(|o| !listed.contains(o)).cloned());
    during
}

/// The objects of the previous set that the new one dropped, except those of the `kept`
/// kinds (CRDs, whose deletion deletes every object of them; Namespaces).
pub fn dropped_out(previous: &[ObjectRef], wanted: &[ObjectRef], kept: &[&str]) -> Vec<ObjectRef> {
    let listed: std::collections::HashSet<&ObjectRef> = wanted.iter().collect();
    previous.iter().filter(|o| !listed.contains(o) && !kept.contains(&o.kind.as_str())).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(kind: &str, name: &str) -> ObjectRef {
        ObjectRef { api_version: "v1".into(), kind: kind.into(), namespace: None, name: name.into() }
    }

    #[test]
    fn the_old_set_stays_findable_until_the_new_one_is_applied() {
        let previous =
            [object("Service", "a"), object("CustomResourceDefinition", "c"), object("Service", "b")];
        let wanted = [object("Service", "b"), object("Service", "d")];
        assert_eq!(
            while_applying(&previous, &wanted),
            [
                object("Service", "b"),
                object("Service", "d"),
                object("Service", "a"),
                object("CustomResourceDefinition", "c")
            ]
        );
        assert_eq!(
            dropped_out(&previous, &wanted, &["CustomResourceDefinition", "Namespace"]),
            [object("Service", "a")]
        );
    }
}
