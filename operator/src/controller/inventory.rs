//! The record of what a provider installed: a ConfigMap beside the provider object, owned by
//! it, holding the applied objects, their digest, the version and the contract.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::plan::{Inventory, LABEL_KIND, LABEL_NAME, LABEL_NAMESPACE};
use crate::api::{FIELD_MANAGER, KindNames, ProviderKind};

/// The label every inventory ConfigMap carries, so that one list finds them all.
pub const LABEL_INVENTORY: &str = "operator.butlerlabs.dev/inventory";

/// The inventory ConfigMap's name: `{plural}-{name}-inventory`.
pub fn name(plural: &str, provider: &str) -> String {
    format!("{plural}-{provider}-inventory")
}

/// Every inventory of the cluster, by the provider it belongs to.
pub async fn list_all(
    client: &kube::Client,
) -> Result<Vec<((ProviderKind, String, String), Inventory)>, kube::Error> {
    let api: Api<ConfigMap> = Api::all(client.clone());
    let list = api.list(&ListParams::default().labels(&format!("{LABEL_INVENTORY}=true"))).await?;
    Ok(list
        .items
        .iter()
        .filter_map(|cm| {
            let labels = cm.labels();
            let kind = ProviderKind::from_kind(labels.get(LABEL_KIND)?)?;
            let key = (kind, labels.get(LABEL_NAMESPACE)?.clone(), labels.get(LABEL_NAME)?.clone());
            let inventory = serde_json::from_str(cm.data.as_ref()?.get("inventory")?).ok()?;
            Some((key, inventory))
        })
        .collect())
}

pub async fn write<K: Resource<DynamicType = ()>>(
    client: &kube::Client,
    owner: &K,
    kind: ProviderKind,
    name: &str,
    inventory: &Inventory,
) -> Result<(), kube::Error> {
    let namespace = owner.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &namespace);
    let owner_ref = owner.controller_owner_ref(&()).map(|r| vec![r]).unwrap_or_default();
    let cm = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": owner_ref,
            "labels": {
                "app.kubernetes.io/managed-by": FIELD_MANAGER,
                LABEL_INVENTORY: "true",
                LABEL_KIND: kind.kind(),
                LABEL_NAMESPACE: namespace,
                LABEL_NAME: owner.name_any(),
            },
        },
        "data": {"inventory": serde_json::to_string(inventory).expect("inventories serialize")},
    });
    api.patch(name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(cm)).await.map(|_| ())
}

pub async fn delete(client: &kube::Client, namespace: &str, name: &str) -> Result<(), kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}
