//! The provider objects of a cluster, every kind, as the upgrade planner and the commands that
//! look at them read them: one row each, the core provider first.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, ListParams};
use serde::Serialize;

use crate::api::ProviderStatus;
use crate::api::{
    AddonProvider, BootstrapProvider, ControlPlaneProvider, CoreProvider, IPAMProvider,
    InfrastructureProvider, KindNames, ProviderKind, ProviderSpec, RuntimeExtensionProvider,
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
    /// The status describes the current spec (the operator observed its generation).
    #[serde(skip)]
    pub observed: bool,
    /// The object's annotations.
    #[serde(skip)]
    pub annotations: std::collections::BTreeMap<String, String>,
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

#[cfg(test)]
impl ProviderRow {
    /// A provider in `butler-system` installed at `installed` (contract v1beta1), for tests.
    pub(crate) fn sample(
        kind: ProviderKind,
        name: &str,
        installed: &str,
        conditions: Vec<Condition>,
    ) -> ProviderRow {
        ProviderRow {
            kind: kind.kind().into(),
            namespace: "butler-system".into(),
            name: name.into(),
            version: None,
            installed_version: Some(installed.into()),
            contract: Some("v1beta1".into()),
            paused: false,
            conditions,
            provider_kind: kind,
            spec: ProviderSpec::default(),
            observed: true,
            annotations: Default::default(),
        }
    }
}

impl ProviderRow {
    /// The row of a provider object of `kind`, from its parts.
    fn new(
        kind: ProviderKind,
        meta: &ObjectMeta,
        spec: ProviderSpec,
        status: Option<ProviderStatus>,
    ) -> ProviderRow {
        let status = status.unwrap_or_default();
        let observed = status.observed_generation.is_some() && status.observed_generation == meta.generation;
        ProviderRow {
            observed,
            annotations: meta.annotations.clone().unwrap_or_default(),
            kind: kind.kind().to_string(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            version: spec.version.clone().filter(|v| !v.is_empty()),
            installed_version: status.installed_version,
            contract: status.contract,
            paused: spec.paused.unwrap_or(false),
            conditions: status.conditions,
            provider_kind: kind,
            spec,
        }
    }

    /// The row of a typed provider object.
    pub(crate) fn of<K: ProviderObject>(object: &K) -> ProviderRow {
        let (spec, status) = (object.provider_spec().clone(), object.provider_status().cloned());
        ProviderRow::new(K::KIND, kube::Resource::meta(object), spec, status)
    }

    /// The row of a provider object read as a dynamic object.
    pub fn from_dynamic(kind: ProviderKind, object: &DynamicObject) -> Result<ProviderRow, String> {
        let what = || format!("{} {}", kind.kind(), object.metadata.name.clone().unwrap_or_default());
        let spec: ProviderSpec = serde_json::from_value(object.data["spec"].clone())
            .map_err(|e| format!("{}: spec unreadable: {e}", what()))?;
        let status: Option<ProviderStatus> = match &object.data["status"] {
            serde_json::Value::Null => None,
            status => Some(
                serde_json::from_value(status.clone())
                    .map_err(|e| format!("{}: status unreadable: {e}", what()))?,
            ),
        };
        Ok(ProviderRow::new(kind, &object.metadata, spec, status))
    }
}

/// The provider of `rows` whose label (`butler`, `infrastructure-aws`) is `label`; an error
/// that lists the providers there are.
pub fn by_label<'a>(rows: &'a [ProviderRow], label: &str) -> Result<&'a ProviderRow, String> {
    rows.iter().find(|r| r.label() == label).ok_or_else(|| {
        format!(
            "no provider {label} in the cluster; the providers are {}",
            rows.iter().map(|r| r.label()).collect::<Vec<_>>().join(", ")
        )
    })
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
        .map(|o| ProviderRow::new(K::KIND, o.meta(), o.provider_spec().clone(), o.provider_status().cloned()))
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
    rows.extend(list_kind::<RuntimeExtensionProvider>(client, namespace).await?);
    rows.sort_by(|a, b| {
        (a.provider_kind, &a.namespace, &a.name).cmp(&(b.provider_kind, &b.namespace, &b.name))
    });
    Ok(rows)
}
