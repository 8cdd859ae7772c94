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

/// A label selector as the API's query text, refused as Kubernetes' `LabelSelectorAsSelector`
/// refuses it: an operator other than the four, values for `Exists`/`DoesNotExist`, none for
/// `In`/`NotIn`. The error names the expression.
pub fn selector_text(selector: &LabelSelector) -> Result<String, String> {
    let mut terms: Vec<String> =
        selector.match_labels.iter().flatten().map(|(k, v)| format!("{k}={v}")).collect();
    for (i, expr) in selector.match_expressions.iter().flatten().enumerate() {
        let values = expr.values.clone().unwrap_or_default();
        let field = format!("matchExpressions[{i}]");
        let joined = values.join(",");
        let term = match expr.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => {
                return Err(format!(
                    "{field}.values: an {} expression needs at least one value",
                    expr.operator
                ));
            }
            "Exists" | "DoesNotExist" if !values.is_empty() => {
                return Err(format!("{field}.values: an {} expression takes no values", expr.operator));
            }
            "In" => format!("{} in ({joined})", expr.key),
            "NotIn" => format!("{} notin ({joined})", expr.key),
            "Exists" => expr.key.clone(),
            "DoesNotExist" => format!("!{}", expr.key),
            other => {
                return Err(format!(
                    "{field}.operator {other:?} is not an operator of label selectors; use In, NotIn, Exists or DoesNotExist"
                ));
            }
        };
        terms.push(term);
    }
    Ok(terms.join(","))
}

impl ConfigMapSource {
    /// The ConfigMaps of `namespace` that `selector` matches; an invalid selector is refused
    /// (see [`selector_text`]).
    pub fn new(
        client: kube::Client,
        namespace: &str,
        selector: &LabelSelector,
    ) -> Result<ConfigMapSource, String> {
        Ok(ConfigMapSource {
            client,
            namespace: namespace.into(),
            selector: selector_text(selector)?,
            max_decompressed: 64 << 20,
            found: Mutex::new(None),
        })
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
        assert_eq!(selector_text(&selector).unwrap(), "provider-components=azure,tier in (a,b),!old");
    }

    #[test]
    fn selectors_kubernetes_refuses_are_refused() {
        let cases = [
            (
                serde_json::json!({"key": "k", "operator": "Gt", "values": ["1"]}),
                "matchExpressions[0].operator \"Gt\" is not an operator of label selectors; use In, NotIn, Exists or DoesNotExist",
            ),
            (
                serde_json::json!({"key": "k", "operator": "In"}),
                "matchExpressions[0].values: an In expression needs at least one value",
            ),
            (
                serde_json::json!({"key": "k", "operator": "Exists", "values": ["x"]}),
                "matchExpressions[0].values: an Exists expression takes no values",
            ),
        ];
        for (expression, wanted) in cases {
            let selector: LabelSelector =
                serde_json::from_value(serde_json::json!({"matchExpressions": [expression]})).unwrap();
            assert_eq!(selector_text(&selector).unwrap_err(), wanted);
        }
    }
}
