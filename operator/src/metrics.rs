//! Prometheus metrics of the operator: reconciles, errors and their durations per provider
//! kind, and one series per installed provider with its version and contract.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabels {
    kind: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ErrorLabels {
    kind: String,
    reason: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProviderLabels {
    kind: String,
    namespace: String,
    name: String,
    version: String,
    contract: String,
}

/// The operator's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: Family<KindLabels, Histogram>,
    providers: Family<ProviderLabels, Gauge>,
    leader: Gauge,
    /// The series of each installed provider, to remove it when the version changes.
    current: Mutex<HashMap<(String, String, String), ProviderLabels>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("butler_operator");
        let reconciles = Family::<KindLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let durations = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 12))
        });
        let providers = Family::<ProviderLabels, Gauge>::default();
        let leader = Gauge::default();
        registry.register("reconciles", "Provider reconciles, by provider kind", reconciles.clone());
        registry.register(
            "reconcile_errors",
            "Provider reconciles that failed, by kind and reason",
            errors.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "How long provider reconciles take, by kind",
            durations.clone(),
        );
        registry.register(
            "provider_info",
            "Installed providers, with their version and contract (value 1)",
            providers.clone(),
        );
        registry.register("leader", "1 while this replica holds the leader lease", leader.clone());
        Metrics {
            registry,
            reconciles,
            errors,
            durations,
            providers,
            leader,
            current: Mutex::new(HashMap::new()),
        }
    }

    /// Starts timing a reconcile of a kind.
    pub fn reconcile_started(&self, kind: &str) -> Instant {
        self.reconciles.get_or_create(&KindLabels { kind: kind.into() }).inc();
        Instant::now()
    }

    /// Ends timing a reconcile; `error` is the reason when it failed.
    pub fn reconcile_finished(&self, kind: &str, started: Instant, error: Option<&str>) {
        self.durations
            .get_or_create(&KindLabels { kind: kind.into() })
            .observe(started.elapsed().as_secs_f64());
        if let Some(reason) = error {
            self.errors.get_or_create(&ErrorLabels { kind: kind.into(), reason: reason.into() }).inc();
        }
    }

    /// Sets (or, with no version, removes) the series of an installed provider.
    pub fn provider_installed(
        &self,
        kind: &str,
        namespace: &str,
        name: &str,
        installed: Option<(&str, &str)>,
    ) {
        let key = (kind.to_string(), namespace.to_string(), name.to_string());
        let mut current = self.current.lock().expect("not poisoned");
        let wanted = installed.map(|(version, contract)| ProviderLabels {
            kind: kind.into(),
            namespace: namespace.into(),
            name: name.into(),
            version: version.into(),
            contract: contract.into(),
        });
        if current.get(&key) == wanted.as_ref() {
            return;
        }
        if let Some(old) = current.remove(&key) {
            self.providers.remove(&old);
        }
        if let Some(labels) = wanted {
            self.providers.get_or_create(&labels).set(1);
            current.insert(key, labels);
        }
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)
            .expect("writing to a String cannot fail");
        out
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
        metrics.provider_installed("CoreProvider", "butler-system", "butler", Some(("v0.1.0", "v1beta1")));
        metrics.provider_installed("CoreProvider", "butler-system", "butler", Some(("v0.2.0", "v1beta1")));
        let text = metrics.encode();
        assert!(text.contains("butler_operator_reconciles_total{kind=\"CoreProvider\"} 1"), "{text}");
        assert!(
            text.contains("butler_operator_reconcile_errors_total{kind=\"CoreProvider\",reason=\"Apply\"} 1"),
            "{text}"
        );
        assert!(text.contains("version=\"v0.2.0\""), "{text}");
        assert!(!text.contains("version=\"v0.1.0\""), "the old version's series is gone: {text}");
        metrics.provider_installed("CoreProvider", "butler-system", "butler", None);
        assert!(!metrics.encode().contains("provider_info{"));
    }
}
