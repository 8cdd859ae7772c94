//! ConfigMaps in the cluster, one per version, for air-gapped clusters: data keys `metadata`
//! and `components` (or gzip in `binaryData.components` when annotated
//! `provider.cluster.x-k8s.io/compressed: "true"`), the version from the label
//! `provider.cluster.x-k8s.io/version` or else from the ConfigMap's name. Several versions
//! under one selector are fine.

use std::collections::BTreeMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};

use super::Source;
use crate::digest::gunzip;
use crate::error::{RepositoryError, Result};
use crate::metadata::METADATA_FILE;
use crate::version::Version;

/// The label that names a ConfigMap's version.
pub const VERSION_LABEL: &str = "provider.cluster.x-k8s.io/version";
/// The annotation that says `binaryData.components` is gzip.
pub const COMPRESSED_ANNOTATION: &str = "provider.cluster.x-k8s.io/compressed";

pub struct ConfigMapSource {
    client: kube::Client,
    namespace: String,
    selector: String,
    max_decompressed: u64,
    found: Mutex<Option<BTreeMap<Version, ConfigMap>>>,
}

/// A label selector as the API's query text.
pub fn selector_text(selector: &LabelSelector) -> String {
    let mut terms: Vec<String> =
        selector.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for expr in selector.match_expressions.iter().flatten() {
        let values = expr.values.clone().unwrap_or_default().join(",");
        terms.push(match expr.operator.as_str() {
            "In" => format!("{} in ({values})", expr.key),
            "NotIn" => format!("{} notin ({values})", expr.key),
            "Exists" => expr.key.clone(),
            _ => format!("!{}", expr.key),
        });
    }
    terms.join(",")
}

impl ConfigMapSource {
    /// The ConfigMaps of `namespace` that `selector` matches.
    pub fn new(client: kube::Client, namespace: &str, selector: &LabelSelector) -> ConfigMapSource {
        ConfigMapSource {
            client,
            namespace: namespace.into(),
            selector: selector_text(selector),
            max_decompressed: 64 << 20,
            found: Mutex::new(None),
        }
    }

    /// Limits the size of decompressed components.
    pub fn with_max_decompressed(mut self, bytes: u64) -> ConfigMapSource {
        self.max_decompressed = bytes;
        self
    }

    fn error(&self, problem: String) -> RepositoryError {
        RepositoryError::ConfigMap {
            selector: self.selector.clone(),
            namespace: self.namespace.clone(),
            problem,
        }
    }

    /// Every selected ConfigMap by version, listed once.
    async fn by_version(&self) -> Result<BTreeMap<Version, ConfigMap>> {
        if let Some(found) = self.found.lock().expect("not poisoned").clone() {
            return Ok(found);
        }
        if self.selector.is_empty() {
            return Err(
                self.error("the selector is empty; it must select the provider's ConfigMaps by label".into())
            );
        }
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
        let list = api
            .list(&ListParams::default().labels(&self.selector))
            .await
            .map_err(|e| RepositoryError::Kube(e.to_string()))?;
        if list.items.is_empty() {
            return Err(self.error("none found; create one ConfigMap per version with these labels".into()));
        }
        let mut found = BTreeMap::new();
        for cm in list.items {
            let name = cm.metadata.name.clone().unwrap_or_default();
            let (text, origin) = match cm.metadata.labels.as_ref().and_then(|l| l.get(VERSION_LABEL)) {
                Some(label) => (label.clone(), format!("the label {VERSION_LABEL} of ConfigMap {name}")),
                None => {
                    (name.clone(), format!("the name of ConfigMap {name} (it has no {VERSION_LABEL} label)"))
                }
            };
            let version = Version::parse(&text, &origin).map_err(|e| self.error(e.to_string()))?;
            if let Some(other) = found.insert(version.clone(), cm) {
                return Err(self.error(format!(
                    "ConfigMaps {} and {name} both hold version {version}; keep one",
                    other.metadata.name.unwrap_or_default()
                )));
            }
        }
        *self.found.lock().expect("not poisoned") = Some(found.clone());
        Ok(found)
    }
}

impl Source for ConfigMapSource {
    fn location(&self) -> String {
        format!("the ConfigMaps selected by {:?} in namespace {}", self.selector, self.namespace)
    }

    async fn versions(&self) -> Result<Vec<Version>> {
        Ok(self.by_version().await?.into_keys().collect())
    }

    async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        let found = self.by_version().await?;
        let cm = found.get(version).ok_or_else(|| {
            let available: Vec<Version> = found.keys().cloned().collect();
            self.error(format!(
                "no ConfigMap holds version {version}; the versions are {}",
                crate::version::list(&available)
            ))
        })?;
        let cm_name = cm.metadata.name.clone().unwrap_or_default();
        let data = |key: &str| cm.data.as_ref().and_then(|d| d.get(key)).map(|v| v.clone().into_bytes());
        if name == METADATA_FILE || name == "metadata" {
            return data("metadata")
                .ok_or_else(|| self.error(format!("ConfigMap {cm_name} has no data key \"metadata\"")));
        }
        if name.ends_with("components.yaml") || name == "components" {
            let compressed = cm
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(COMPRESSED_ANNOTATION))
                .is_some_and(|v| v == "true");
            if compressed {
                let bytes = cm.binary_data.as_ref().and_then(|b| b.get("components")).ok_or_else(|| {
                    self.error(format!("ConfigMap {cm_name} is annotated {COMPRESSED_ANNOTATION}: \"true\" but has no binaryData key \"components\""))
                })?;
                return gunzip(
                    &bytes.0,
                    self.max_decompressed,
                    &format!("the components of ConfigMap {cm_name}"),
                )
                .map_err(|e| self.error(e.to_string()));
            }
            return data("components")
                .ok_or_else(|| self.error(format!("ConfigMap {cm_name} has no data key \"components\"")));
        }
        data(name).ok_or_else(|| RepositoryError::NotFound {
            what: name.to_string(),
            location: format!("ConfigMap {cm_name} ({})", self.location()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_become_query_text() {
        let selector: LabelSelector = serde_json::from_value(serde_json::json!({
            "matchLabels": {"provider-components": "azure"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["a", "b"]},
                {"key": "old", "operator": "DoesNotExist"}
            ]
        }))
        .unwrap();
        assert_eq!(selector_text(&selector), "provider-components=azure,tier in (a,b),!old");
    }
}
