//! The pool addresses a team takes, as its Team's `maxIPAddresses` counts them: what its
//! clusters' allocations hold or wait for, read from the allocations themselves, whatever
//! ProviderConfig a cluster names now. A cluster re-pointed at a cloud-mode ProviderConfig
//! keeps its blocks until they are given back, and elastic growth adds blocks: both count.

use butler_core::api::{IPAllocation, IPAllocationPhase};

/// The addresses one allocation counts for: the block it holds (while it is released too, until
/// it is gone), or what it asks for while it waits; none once it failed (it holds nothing).
pub fn counted(a: &IPAllocation) -> i64 {
    let status = a.status.as_ref();
    let asked = i64::from(a.spec.count.unwrap_or(0));
    match status.and_then(|s| s.phase) {
        Some(IPAllocationPhase::Failed) => 0,
        Some(IPAllocationPhase::Allocated | IPAllocationPhase::Released) => {
            status.and_then(|s| s.allocated_count).unwrap_or(asked)
        }
        _ => asked,
    }
    .max(0)
}

/// The addresses a set of allocations counts for.
pub fn total<'a>(allocations: impl IntoIterator<Item = &'a IPAllocation>) -> i64 {
    allocations.into_iter().map(counted).fold(0i64, i64::saturating_add)
}

/// What a cluster counts for: the addresses its allocations hold, or those its ProviderConfig
/// will give it (`planned`, before its allocations exist), whichever is more.
pub fn cluster(held: i64, planned: i64) -> i64 {
    held.max(planned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn allocation(count: i32, status: serde_json::Value) -> IPAllocation {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": "a", "namespace": "infra"},
            "spec": {"poolRef": {"name": "p"}, "tenantClusterRef": {"name": "c", "namespace": "team-a"},
                "type": "loadbalancer", "count": count},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn held_blocks_count_what_they_hold_and_waiting_ones_what_they_ask() {
        let held = allocation(4, json!({"phase": "Allocated", "allocatedCount": 8}));
        let waiting = allocation(2, json!({}));
        let failed = allocation(16, json!({"phase": "Failed"}));
        let releasing = allocation(4, json!({"phase": "Released", "allocatedCount": 4}));
        assert_eq!([&held, &waiting, &failed, &releasing].map(counted), [8, 2, 0, 4]);
        assert_eq!(total([&held, &waiting, &failed, &releasing]), 14);
        assert_eq!(cluster(14, 10), 14, "blocks held past what the config plans count");
        assert_eq!(cluster(0, 10), 10, "a new cluster counts what it will take");
    }
}
