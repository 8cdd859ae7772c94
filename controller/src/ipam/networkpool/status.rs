//! A NetworkPool's status from what serving left: figures, `Ready`, the three capacity tiers
//! (always present) and their events, at most one per tier per 10 minutes, the times kept on
//! the object so that a restart does not repeat them.

use std::time::Duration;

use butler_core::api::{NetworkPool, NetworkPoolStatus};
use butler_core::ipam::PoolStats;
use butler_runtime::conditions::{self, READY, Wanted};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// The condition types in the order they are listed.
pub const ORDER: &[&str] = &["CapacityWarning", "CapacityCritical", "CapacityExhausted", READY];

/// The least time between two events of one tier of one pool.
pub const EVENT_INTERVAL: Duration = Duration::from_secs(600);

/// A capacity tier: its condition, the utilization that sets it, its event.
pub struct Tier {
    pub condition: &'static str,
    pub percent: u128,
    pub event: &'static str,
}

pub const TIERS: [Tier; 3] = [
    Tier { condition: "CapacityWarning", percent: 70, event: "PoolCapacityWarning" },
    Tier { condition: "CapacityCritical", percent: 85, event: "PoolCapacityCritical" },
    Tier { condition: "CapacityExhausted", percent: 95, event: "PoolCapacityExhausted" },
];

/// An event to publish on the pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapacityEvent {
    pub warning: bool,
    pub reason: &'static str,
    pub message: String,
}

/// What the pool looks like now: its figures and what breaks its spec, or why its spec is invalid.
pub enum Shape<'a> {
    Valid { stats: &'a PoolStats, problems: &'a [String] },
    Invalid(&'a str),
}

/// `floor(used * 100 / total)`, 0 for an empty pool; exact unless `used * 100` overflows 128
/// bits (IPv6 pools of more than 2^121 addresses), then within a point.
fn utilization(used: u128, total: u128) -> u128 {
    match used.checked_mul(100) {
        Some(scaled) => scaled.checked_div(total).unwrap_or(0),
        None => used / (total / 100).max(1),
    }
}

fn clamp(n: u128) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The pool's status (its journal left as it is) and the events to publish once it is written.
pub fn plan(pool: &NetworkPool, shape: Shape<'_>, now: Timestamp) -> (NetworkPoolStatus, Vec<CapacityEvent>) {
    let existing = pool.status.clone().unwrap_or_default();
    let generation = pool.metadata.generation;
    let mut wanted = Vec::new();
    let mut events = Vec::new();
    let mut capacity_events = existing.capacity_events.clone();
    let mut status = NetworkPoolStatus {
        observed_generation: generation,
        in_flight: existing.in_flight.clone(),
        ..NetworkPoolStatus::default()
    };
    match shape {
        Shape::Invalid(why) => {
            for tier in &TIERS {
                let kept = existing.conditions.iter().find(|c| c.type_ == tier.condition);
                let (on, reason, message) = match kept {
                    Some(c) => (c.status == "True", c.reason.clone(), c.message.clone()),
                    None => (false, "UtilizationUnknown".into(), "the pool's spec is invalid".into()),
                };
                wanted.push(Wanted::new(tier.condition, on, &reason, message));
            }
            wanted.push(Wanted::new(
                READY,
                false,
                "InvalidSpec",
                format!("{why}; no addresses are handed out until it is corrected"),
            ));
            status.total_ips = existing.total_ips;
            status.allocated_ips = existing.allocated_ips;
            status.available_ips = existing.available_ips;
            status.allocation_count = existing.allocation_count;
            status.fragmentation_percent = existing.fragmentation_percent;
            status.largest_free_block = existing.largest_free_block;
        }
        Shape::Valid { stats, problems } => {
            let (used, total) = (stats.allocated, stats.total);
            let percent = utilization(used, total);
            let figure = format!("Pool utilization is {percent}% ({used}/{total} IPs)");
            for tier in &TIERS {
                // floor(used * 100 / total) >= p exactly when used * 100 >= total * p.
                let on = total > 0 && percent >= tier.percent;
                let was = conditions::is_true(&existing.conditions, tier.condition);
                let reason = if on { "UtilizationAboveThreshold" } else { "UtilizationBelowThreshold" };
                wanted.push(Wanted::new(tier.condition, on, reason, figure.clone()));
                // A tier's warnings and its recoveries are limited apart: a reminder sent a
                // minute ago must not swallow the news that the pool recovered.
                let key =
                    if on { tier.condition.to_string() } else { format!("{}Recovered", tier.condition) };
                let last = capacity_events.get(&key).map(|t| t.0);
                let due = last.is_none_or(|t| now.duration_since(t).unsigned_abs() >= EVENT_INTERVAL);
                let event = match (on, was) {
                    (true, _) => Some(CapacityEvent {
                        warning: true,
                        reason: tier.event,
                        message: format!(
                            "{figure}, at or above the {}% threshold of {}",
                            tier.percent, tier.condition
                        ),
                    }),
                    (false, true) => Some(CapacityEvent {
                        warning: false,
                        reason: "PoolCapacityRecovered",
                        message: format!(
                            "{figure}, below the {}% threshold of {}",
                            tier.percent, tier.condition
                        ),
                    }),
                    (false, false) => None,
                };
                if let Some(event) = event.filter(|_| due) {
                    capacity_events.insert(key, Time(now));
                    events.push(event);
                }
            }
            if problems.is_empty() {
                let message =
                    format!("{}/{total} IPs available ({} allocations)", stats.available, stats.allocations);
                wanted.push(Wanted::new(READY, true, "Ready", message));
            } else {
                const LISTED: usize = 10;
                let mut listed = problems.iter().take(LISTED).cloned().collect::<Vec<_>>().join("; ");
                if problems.len() > LISTED {
                    listed.push_str(&format!("; and {} more", problems.len() - LISTED));
                }
                let message = format!(
                    "{} allocations hold blocks that break the pool's spec or each other: {listed}; restore the spec or delete those allocations (the controller releases nothing by itself)",
                    problems.len()
                );
                wanted.push(Wanted::new(READY, false, "AllocationsConflict", message));
            }
            status.total_ips = Some(clamp(total));
            status.allocated_ips = Some(clamp(used));
            status.available_ips = Some(clamp(stats.available));
            status.allocation_count = Some(i32::try_from(stats.allocations).unwrap_or(i32::MAX));
            status.fragmentation_percent = Some(i32::from(stats.fragmentation_percent));
            status.largest_free_block = Some(clamp(stats.largest_free_block));
        }
    }
    status.capacity_events = capacity_events;
    status.conditions = conditions::merge(&existing.conditions, &wanted, generation, &Time(now), ORDER);
    (status, events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(status: serde_json::Value) -> NetworkPool {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
            "metadata": {"name": "lab", "namespace": "butler-system", "generation": 2},
            "spec": {"cidr": "10.0.0.0/24"}, "status": status,
        }))
        .unwrap()
    }

    fn stats(total: u128, allocated: u128) -> PoolStats {
        PoolStats {
            total,
            allocated,
            available: total - allocated,
            allocations: 3,
            largest_free_block: total - allocated,
            free_blocks: 1,
            fragmentation_percent: 0,
        }
    }

    fn at(minutes: i64) -> Timestamp {
        "2026-11-23T10:00:00Z".parse::<Timestamp>().unwrap() + jiff::SignedDuration::from_mins(minutes)
    }

    fn tiers(status: &NetworkPoolStatus) -> Vec<(String, String)> {
        status.conditions.iter().map(|c| (c.type_.clone(), c.status.clone())).collect()
    }

    #[test]
    fn figures_and_conditions_follow_the_document() {
        let (status, events) =
            plan(&pool(json!({})), Shape::Valid { stats: &stats(1791, 48), problems: &[] }, at(0));
        assert_eq!(
            (status.total_ips, status.available_ips, status.allocated_ips),
            (Some(1791), Some(1743), Some(48))
        );
        assert_eq!(status.observed_generation, Some(2));
        let ready = status.conditions.last().unwrap();
        assert_eq!(
            (ready.type_.as_str(), ready.message.as_str()),
            ("Ready", "1743/1791 IPs available (3 allocations)")
        );
        assert_eq!(status.conditions[0].message, "Pool utilization is 2% (48/1791 IPs)");
        assert_eq!(status.conditions[0].reason, "UtilizationBelowThreshold");
        assert!(events.is_empty());
    }

    #[test]
    fn tiers_fire_at_their_thresholds_with_events_at_most_every_ten_minutes() {
        let (s, events) =
            plan(&pool(json!({})), Shape::Valid { stats: &stats(100, 85), problems: &[] }, at(0));
        assert_eq!(
            tiers(&s)[..3],
            [
                ("CapacityWarning".into(), "True".into()),
                ("CapacityCritical".into(), "True".into()),
                ("CapacityExhausted".into(), "False".into())
            ]
        );
        assert_eq!(
            events.iter().map(|e| e.reason).collect::<Vec<_>>(),
            ["PoolCapacityWarning", "PoolCapacityCritical"]
        );
        // Five minutes later, still high: nothing new; the times are on the object.
        let later = pool(serde_json::to_value(&s).unwrap());
        let (s2, events) = plan(&later, Shape::Valid { stats: &stats(100, 90), problems: &[] }, at(5));
        assert!(events.is_empty());
        assert_eq!(s2.conditions[0].last_transition_time, s.conditions[0].last_transition_time);
        // Eleven minutes: reminded.
        let (s3, events) = plan(
            &pool(serde_json::to_value(&s2).unwrap()),
            Shape::Valid { stats: &stats(100, 90), problems: &[] },
            at(11),
        );
        assert_eq!(events.len(), 2);
        // Down below 70 % a minute later: recovered at once (limited apart from the warnings).
        let (s4, events) = plan(
            &pool(serde_json::to_value(&s3).unwrap()),
            Shape::Valid { stats: &stats(100, 10), problems: &[] },
            at(12),
        );
        assert_eq!(
            events.iter().map(|e| (e.reason, e.warning)).collect::<Vec<_>>(),
            [("PoolCapacityRecovered", false), ("PoolCapacityRecovered", false)]
        );
        assert_eq!(tiers(&s4)[0].1, "False");
        // Flapping: above again two minutes later, the warning waits out its ten minutes, and so
        // does the next recovery.
        let (s5, events) = plan(
            &pool(serde_json::to_value(&s4).unwrap()),
            Shape::Valid { stats: &stats(100, 75), problems: &[] },
            at(14),
        );
        assert!(events.is_empty());
        let (_, events) = plan(
            &pool(serde_json::to_value(&s5).unwrap()),
            Shape::Valid { stats: &stats(100, 10), problems: &[] },
            at(15),
        );
        assert!(events.is_empty());
    }

    #[test]
    fn utilization_is_exact_and_never_overflows() {
        assert_eq!(utilization(7, 10), 70);
        assert_eq!(utilization(699, 1000), 69);
        assert_eq!(utilization(0, 0), 0);
        assert!((49..=50).contains(&utilization(u128::MAX / 2, u128::MAX)), "within a point");
        assert_eq!(utilization(u128::MAX, u128::MAX), 100);
    }

    #[test]
    fn the_exact_threshold_counts_and_an_empty_pool_is_not_full() {
        let (s, _) = plan(&pool(json!({})), Shape::Valid { stats: &stats(20, 19), problems: &[] }, at(0));
        assert!(tiers(&s)[..3].iter().all(|(_, v)| v == "True"));
        let (s, _) = plan(&pool(json!({})), Shape::Valid { stats: &stats(0, 0), problems: &[] }, at(0));
        assert!(tiers(&s)[..3].iter().all(|(_, v)| v == "False"));
    }

    #[test]
    fn problems_and_invalid_specs_make_it_not_ready_keeping_the_figures() {
        let problems =
            vec!["a: 10.0.0.0/29 is outside the pool's allocatable range 10.0.0.16-10.0.0.255".to_string()];
        let (s, _) =
            plan(&pool(json!({})), Shape::Valid { stats: &stats(100, 8), problems: &problems }, at(0));
        let ready = s.conditions.last().unwrap();
        assert_eq!((ready.status.as_str(), ready.reason.as_str()), ("False", "AllocationsConflict"));
        assert!(ready.message.contains("a: 10.0.0.0/29 is outside"));
        let (invalid, _) = plan(
            &pool(serde_json::to_value(&s).unwrap()),
            Shape::Invalid("spec.cidr \"x\" is not a CIDR"),
            at(1),
        );
        assert_eq!(invalid.total_ips, Some(100));
        assert_eq!(invalid.conditions.len(), 4);
        assert_eq!(invalid.conditions.last().unwrap().reason, "InvalidSpec");
    }
}
