//! Prometheus metrics of the operator: the reconcile metrics of every controller (reconciles,
//! errors and their durations per provider kind, leadership), and one series per installed
//! provider with its version and contract.

use std::collections::HashMap;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;

use crate::api::KindNames;
use crate::controller::vocabulary::ProviderKey;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    kind: String,
    namespace: String,
    name: String,
    version: String,
    contract: String,
}

/// The operator's metrics: the shared reconcile metrics (through `Deref`) and the providers'.
pub struct Metrics {
    base: Arc<butler_runtime::metrics::Metrics>,
    providers: Family<ProviderLabels, Gauge>,
    /// The series of each installed provider, to remove it when the version changes.
    current: Mutex<HashMap<ProviderKey, ProviderLabels>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Deref for Metrics {
    type Target = butler_runtime::metrics::Metrics;
    fn deref(&self) -> &Self::Target {
        &self.base
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let providers = Family::<ProviderLabels, Gauge>::default();
        let base = butler_runtime::metrics::Metrics::new("butler_operator", |registry| {
            registry.register(
                "provider_info",
                "Installed providers, with their version and contract (value 1)",
                providers.clone(),
            );
        });
        Metrics { base: Arc::new(base), providers, current: Mutex::new(HashMap::new()) }
    }

    /// The shared metrics, for the process that serves them.
    pub fn base(&self) -> Arc<butler_runtime::metrics::Metrics> {
        self.base.clone()
    }

    /// Sets (or, with no version, removes) the series of an installed provider.
    pub fn provider_installed(&self, key: &ProviderKey, installed: Option<(&str, &str)>) {
        let mut current = self.current.lock().expect("not poisoned");
        let wanted = installed.map(|(version, contract)| ProviderLabels {
            kind: key.kind.kind().into(),
            namespace: key.namespace.clone(),
            name: key.name.clone(),
            version: version.into(),
            contract: contract.into(),
        });
        if current.get(key) == wanted.as_ref() {
            return;
        }
        if let Some(old) = current.remove(key) {
            self.providers.remove(&old);
        }
        if let Some(labels) = wanted {
            self.providers.get_or_create(&labels).set(1);
            current.insert(key.clone(), labels);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installed_providers_keep_one_series_each() {
        let metrics = Metrics::new();
        let started = metrics.reconcile_started("CoreProvider");
        metrics.reconcile_finished("CoreProvider", started, Some("Apply"));
        let key = ProviderKey::new(crate::api::ProviderKind::Core, "butler-system", "butler");
        metrics.provider_installed(&key, Some(("v0.1.0", "v1beta1")));
        metrics.provider_installed(&key, Some(("v0.2.0", "v1beta1")));
        let text = metrics.encode();
        assert!(text.contains("butler_operator_reconciles_total{kind=\"CoreProvider\"} 1"), "{text}");
        assert!(
            text.contains("butler_operator_reconcile_errors_total{kind=\"CoreProvider\",reason=\"Apply\"} 1"),
            "{text}"
        );
        assert!(text.contains("version=\"v0.2.0\""), "{text}");
        assert!(!text.contains("version=\"v0.1.0\""), "the old version's series is gone: {text}");
        metrics.provider_installed(&key, None);
        assert!(!metrics.encode().contains("provider_info{"));
    }
}
