//! The releases cluster-api-operator cached: it keeps each provider's fetched release in a
//! ConfigMap beside the provider (labelled with its name, type and version, and
//! `managed-by.operator.cluster.x-k8s.io`; `metadata` and `components`, gzip when annotated
//! compressed), the format this operator's ConfigMap repositories read. A carried-over provider
//! that had no `fetchConfig` reads the cached release of the version that runs: the move needs
//! no network, meets no rate limit, and renders the very release that runs.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams};
use serde_json::{Value, json};

/// The label cluster-api-operator puts on the ConfigMaps it made.
pub const MANAGED_LABEL: &str = "managed-by.operator.cluster.x-k8s.io";
const NAME_LABEL: &str = "provider.cluster.x-k8s.io/name";
const TYPE_LABEL: &str = "provider.cluster.x-k8s.io/type";
const VERSION_LABEL: &str = butler_repository::VERSION_LABEL;

/// The selector of the cached release of provider `name` in `namespace` at `version`, and the
/// ConfigMap that holds it, if cluster-api-operator cached it.
pub async fn find(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    version: &str,
) -> Result<Option<(Value, String)>, String> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().labels(&format!("{MANAGED_LABEL}=true,{NAME_LABEL}={name}"));
    let listed = api.list_metadata(&params).await.map_err(|e| {
        format!(
            "reading cluster-api-operator's cached releases in {namespace}: {}",
            butler_runtime::error::describe(&e)
        )
    })?;
    Ok(listed.items.into_iter().find_map(|cm| {
        let labels = cm.metadata.labels.unwrap_or_default();
        (labels.get(VERSION_LABEL).map(String::as_str) == Some(version)).then(|| {
            let mut matched = json!({MANAGED_LABEL: "true", NAME_LABEL: name});
            if let Some(kind) = labels.get(TYPE_LABEL) {
                matched[TYPE_LABEL] = json!(kind);
            }
            (json!({"selector": {"matchLabels": matched}}), cm.metadata.name.unwrap_or_default())
        })
    }))
}
