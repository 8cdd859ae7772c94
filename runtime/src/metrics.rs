//! The Prometheus metrics every controller exports: reconciles, failed reconciles by reason
//! and reconcile durations, by kind, and whether this replica leads. A controller registers
//! its own series beside them when it builds them.

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

/// A controller's metrics and their registry.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<KindLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    durations: Family<KindLabels, Histogram>,
    leader: Gauge,
    requests: crate::requests::Requests,
}

impl Metrics {
    /// The reconcile metrics under `prefix` (`butler_operator_reconciles_total`, ...), and what
    /// `extra` registers beside them.
    pub fn new(prefix: &str, extra: impl FnOnce(&mut Registry)) -> Metrics {
        let mut registry = Registry::with_prefix(prefix);
        let reconciles = Family::<KindLabels, Counter>::default();
        let errors = Family::<ErrorLabels, Counter>::default();
        let durations = Family::<KindLabels, Histogram>::new_with_constructor(|| {
            Histogram::new(exponential_buckets(0.005, 2.0, 12))
        });
        let leader = Gauge::default();
        registry.register("reconciles", "Reconciles, by kind", reconciles.clone());
        registry.register("reconcile_errors", "Reconciles that failed, by kind and reason", errors.clone());
        registry.register(
            "reconcile_duration_seconds",
            "How long reconciles take, by kind",
            durations.clone(),
        );
        registry.register("leader", "1 while this replica holds the leader lease", leader.clone());
        let requests = crate::requests::Requests::default();
        registry.register(
            "rest_client_requests",
            "Requests to the API server, by verb and resource (as client-go's rest_client_requests_total)",
            requests.clone(),
        );
        extra(&mut registry);
        Metrics { registry, reconciles, errors, durations, leader, requests }
    }

    /// The counter of requests to the API server, for [`crate::requests::counted_client`].
    pub fn requests(&self) -> crate::requests::Requests {
        self.requests.clone()
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
    fn reconciles_are_counted_by_kind_and_reason() {
        let extra = Gauge::<i64>::default();
        let metrics = Metrics::new("butler_test", |r| r.register("extra", "an extra series", extra.clone()));
        extra.set(7);
        let started = metrics.reconcile_started("Team");
        metrics.reconcile_finished("Team", started, Some("Apply"));
        metrics.set_leader(true);
        let text = metrics.encode();
        assert!(text.contains("butler_test_reconciles_total{kind=\"Team\"} 1"), "{text}");
        assert!(
            text.contains("butler_test_reconcile_errors_total{kind=\"Team\",reason=\"Apply\"} 1"),
            "{text}"
        );
        assert!(text.contains("butler_test_leader 1"), "{text}");
        assert!(text.contains("butler_test_extra 7"), "{text}");
    }
}
