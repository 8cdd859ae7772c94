//! The provider objects of a cluster, every kind, as the commands that look at them read them.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams};
use serde::Serialize;

use crate::api::{
    AddonProvider, BootstrapProvider, ControlPlaneProvider, CoreProvider, IPAMProvider,
    InfrastructureProvider, KindNames, ProviderKind, ProviderSpec,
};
use crate::controller::ProviderObject;

/// One provider object.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderRow {
    pub kind: String,
    pub namespace: String,
    pub name: String,
    /// `spec.version`; empty means the newest of the core contract.
    pub version: Option<String>,
    pub installed_version: Option<String>,
    pub contract: Option<String>,
    pub paused: bool,
    pub conditions: Vec<Condition>,
    #[serde(skip)]
    pub provider_kind: ProviderKind,
    #[serde(skip)]
    pub spec: ProviderSpec,
}

impl ProviderRow {
    /// The provider label (`butler`, `infrastructure-harvester`), as clusterctl names providers.
    pub fn label(&self) -> String {
        self.provider_kind.label(&self.name)
    }

    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }
}

async fn list_kind<K: ProviderObject>(
    client: &kube::Client,
    namespace: Option<&str>,
) -> Result<Vec<ProviderRow>, String> {
    let api: Api<K> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let items = match api.list(&ListParams::default()).await {
        Ok(list) => list.items,
        // The kind is not installed: no objects of it.
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(Vec::new()),
        Err(e) => {
            return Err(format!("cannot list {}: {}", K::KIND.plural(), butler_runtime::error::describe(&e)));
        }
    };
    Ok(items
        .into_iter()
        .map(|object| {
            let spec = object.provider_spec().clone();
            let status = object.provider_status().cloned().unwrap_or_default();
            let meta = object.meta();
            ProviderRow {
                kind: K::KIND.kind().to_string(),
                namespace: meta.namespace.clone().unwrap_or_default(),
                name: meta.name.clone().unwrap_or_default(),
                version: spec.version.clone().filter(|v| !v.is_empty()),
                installed_version: status.installed_version,
                contract: status.contract,
                paused: spec.paused.unwrap_or(false),
                conditions: status.conditions,
                provider_kind: K::KIND,
                spec,
            }
        })
        .collect())
}

/// Every provider object (of `namespace`, or of all), the core provider first, then by kind,
/// namespace and name.
pub async fn list(client: &kube::Client, namespace: Option<&str>) -> Result<Vec<ProviderRow>, String> {
    let mut rows = Vec::new();
    rows.extend(list_kind::<CoreProvider>(client, namespace).await?);
    rows.extend(list_kind::<InfrastructureProvider>(client, namespace).await?);
    rows.extend(list_kind::<BootstrapProvider>(client, namespace).await?);
    rows.extend(list_kind::<ControlPlaneProvider>(client, namespace).await?);
    rows.extend(list_kind::<AddonProvider>(client, namespace).await?);
    rows.extend(list_kind::<IPAMProvider>(client, namespace).await?);
    rows.sort_by(|a, b| {
        (a.provider_kind, &a.namespace, &a.name).cmp(&(b.provider_kind, &b.namespace, &b.name))
    });
    Ok(rows)
}
