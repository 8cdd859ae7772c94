//! Conditions as `metav1.Condition`, kstatus-compatible: set by type, keeping
//! `lastTransitionTime` while the status does not change, each with the observed generation,
//! in an order the controller gives (its condition types, `Ready` usually last).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition every CRD of the workspace has, and that kstatus reads.
pub const READY: &str = "Ready";

/// A condition to set: type, status, reason and message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    pub type_: &'static str,
    pub status: bool,
    pub reason: String,
    pub message: String,
}

impl Wanted {
    pub fn new(type_: &'static str, status: bool, reason: &str, message: impl Into<String>) -> Wanted {
        Wanted { type_, status, reason: reason.to_string(), message: message.into() }
    }
}

/// `existing` with `wanted` set: a condition whose status does not change keeps its
/// lastTransitionTime; every condition gets `generation` as its observedGeneration. The list
/// is sorted by `order` (types it does not name go last, in their previous order).
pub fn merge(
    existing: &[Condition],
    wanted: &[Wanted],
    generation: Option<i64>,
    now: &Time,
    order: &[&str],
) -> Vec<Condition> {
    let mut out: Vec<Condition> =
        existing.iter().filter(|c| !wanted.iter().any(|w| w.type_ == c.type_)).cloned().collect();
    for w in wanted {
        let status = if w.status { "True" } else { "False" }.to_string();
        let previous = existing.iter().find(|c| c.type_ == w.type_);
        let time = match previous {
            Some(p) if p.status == status => p.last_transition_time.clone(),
            _ => now.clone(),
        };
        out.push(Condition {
            type_: w.type_.to_string(),
            status,
            reason: w.reason.clone(),
            message: w.message.clone(),
            last_transition_time: time,
            observed_generation: generation,
        });
    }
    out.sort_by_key(|c| order.iter().position(|t| *t == c.type_).unwrap_or(usize::MAX));
    out
}

/// Whether a list has a condition of this type with status True.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORDER: &[&str] = &["Checked", READY];

    fn time(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn the_transition_time_stays_while_the_status_does() {
        let first = merge(
            &[],
            &[Wanted::new(READY, false, "Installing", "installing")],
            Some(1),
            &time("2026-01-01T00:00:00Z"),
            ORDER,
        );
        let same = merge(
            &first,
            &[Wanted::new(READY, false, "Waiting", "still")],
            Some(2),
            &time("2026-01-01T00:05:00Z"),
            ORDER,
        );
        assert_eq!(same[0].last_transition_time, time("2026-01-01T00:00:00Z"));
        assert_eq!((same[0].reason.as_str(), same[0].observed_generation), ("Waiting", Some(2)));
        let flipped = merge(
            &same,
            &[Wanted::new(READY, true, "Ready", "ok")],
            Some(2),
            &time("2026-01-01T00:09:00Z"),
            ORDER,
        );
        assert_eq!(flipped[0].last_transition_time, time("2026-01-01T00:09:00Z"));
        assert!(is_true(&flipped, READY));
        let more = merge(
            &flipped,
            &[Wanted::new("Checked", true, "Passed", "ok")],
            Some(2),
            &time("2026-01-01T00:10:00Z"),
            ORDER,
        );
        assert_eq!(more.iter().map(|c| c.type_.as_str()).collect::<Vec<_>>(), ["Checked", READY]);
        assert!(!is_true(&more, "Other"));
    }
}
