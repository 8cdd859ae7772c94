use super::*;
use crate::ipam::networkpool::spec::allocator;
use serde_json::{Value, json};

fn pool(spec: Value, in_flight: Value) -> NetworkPool {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": "lab", "namespace": "butler-system"},
        "spec": spec, "status": {"inFlight": in_flight},
    }))
    .unwrap()
}

fn allocation(name: &str, created: &str, spec: Value, status: Value) -> IPAllocation {
    let mut spec_full = json!({"poolRef": {"name": "lab"}, "tenantClusterRef": {"name": "t", "namespace": "team-a"}, "type": "loadbalancer"});
    spec_full.as_object_mut().unwrap().extend(spec.as_object().unwrap().clone());
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
        "metadata": {"name": name, "namespace": "butler-system", "uid": format!("uid-{name}"),
            "resourceVersion": "7", "creationTimestamp": created, "generation": 1,
            "finalizers": ["butler.butlerlabs.dev/ipallocation"]},
        "spec": spec_full, "status": status,
    }))
    .unwrap()
}

const T0: &str = "2026-11-23T10:00:00Z";
const T1: &str = "2026-11-23T10:00:01Z";

fn run(p: &NetworkPool, all: &[IPAllocation]) -> Served {
    let refs: Vec<&IPAllocation> = all.iter().collect();
    serve(p, allocator(p).unwrap(), &refs, T0.parse().unwrap(), "butler-controller", usize::MAX)
}

fn ranges(served: &Served) -> Vec<(String, String)> {
    served
        .writes
        .iter()
        .map(|w| (w.name.clone(), w.status.cidr.clone().unwrap_or_else(|| format!("{:?}", w.status.phase))))
        .collect()
}

#[test]
fn oldest_first_best_fit_with_defaults_by_type() {
    let p = pool(
        json!({"cidr": "10.0.0.0/24", "tenantAllocation": {"start": "10.0.0.16", "end": "10.0.0.63",
               "defaults": {"nodesPerTenant": 4, "lbPoolPerTenant": 8}}}),
        json!([]),
    );
    let all = [
        allocation("b", T1, json!({}), json!({})),
        allocation("a", T1, json!({"type": "nodes"}), json!({"phase": "Pending"})),
        allocation("old", T0, json!({"count": 16}), json!({"phase": "Failed"})),
    ];
    let served = run(&p, &all);
    assert_eq!(
        ranges(&served),
        [
            ("old".into(), "10.0.0.16/28".into()),
            ("a".into(), "10.0.0.32/30".into()),
            ("b".into(), "10.0.0.36-10.0.0.43".into())
        ]
    );
    let status = &served.writes[1].status;
    assert_eq!(status.addresses.as_deref().unwrap(), ["10.0.0.32", "10.0.0.33", "10.0.0.34", "10.0.0.35"]);
    assert_eq!((status.allocated_count, status.phase), (Some(4), Some(IPAllocationPhase::Allocated)));
    assert_eq!(served.journal.len(), 3);
    assert_eq!(served.journal[0].resource_version, "7");
    assert!(served.problems.is_empty());
}

#[test]
fn exhaustion_fails_with_the_largest_free_block_and_a_release_serves_it() {
    let p = pool(json!({"cidr": "10.0.0.0/28"}), json!([]));
    let holder = allocation(
        "holder",
        T0,
        json!({"count": 12}),
        json!({"phase": "Allocated", "startAddress": "10.0.0.0", "endAddress": "10.0.0.11"}),
    );
    let waiting = allocation("big", T1, json!({"count": 8}), json!({"phase": "Pending"}));
    let served = run(&p, &[holder, waiting.clone()]);
    let status = &served.writes[0].status;
    assert_eq!(status.phase, Some(IPAllocationPhase::Failed));
    let message = &status.conditions[0].message;
    assert!(
        message.starts_with("no contiguous block available in NetworkPool lab: 8 addresses asked, largest free block 4, 4 free"),
        "{message}"
    );
    // The same failure again writes nothing.
    let mut again = waiting.clone();
    again.status = Some(status.clone());
    assert!(
        run(&p, std::slice::from_ref(&again))
            .writes
            .iter()
            .all(|w| w.status.phase == Some(IPAllocationPhase::Allocated))
    );
    // Once the holder is gone, it is served.
    assert_eq!(ranges(&run(&p, &[again])), [("big".into(), "10.0.0.0/29".into())]);
}

#[test]
fn pinned_ranges_are_taken_exactly_or_fail_naming_the_conflict() {
    let p = pool(json!({"cidr": "10.0.0.0/24", "reserved": [{"cidr": "10.0.0.0/28"}]}), json!([]));
    let all = [
        allocation(
            "held",
            T0,
            json!({}),
            json!({"phase": "Allocated", "startAddress": "10.0.0.32", "endAddress": "10.0.0.39"}),
        ),
        allocation(
            "ok",
            T0,
            json!({"pinnedRange": {"startAddress": "10.0.0.64", "endAddress": "10.0.0.71"}}),
            json!({}),
        ),
        allocation(
            "on-held",
            T1,
            json!({"pinnedRange": {"startAddress": "10.0.0.36", "endAddress": "10.0.0.40"}}),
            json!({}),
        ),
        allocation(
            "on-reserved",
            T1,
            json!({"pinnedRange": {"startAddress": "10.0.0.8", "endAddress": "10.0.0.20"}}),
            json!({}),
        ),
        allocation(
            "outside",
            T1,
            json!({"pinnedRange": {"startAddress": "10.0.1.0", "endAddress": "10.0.1.1"}}),
            json!({}),
        ),
        allocation(
            "typo",
            T1,
            json!({"pinnedRange": {"startAddress": "10.0.0", "endAddress": "10.0.0.1"}}),
            json!({}),
        ),
    ];
    let served = run(&p, &all);
    let by_name: HashMap<String, &Write> = served.writes.iter().map(|w| (w.name.clone(), w)).collect();
    assert_eq!(by_name["ok"].status.cidr.as_deref(), Some("10.0.0.64/29"));
    let message = |n: &str| by_name[n].status.conditions[0].message.clone();
    assert!(
        message("on-held").contains("conflicts with allocation 10.0.0.32/29 at address 10.0.0.36"),
        "{}",
        message("on-held")
    );
    assert!(message("on-reserved").contains("conflicts with reserved range 10.0.0.0/28 at address 10.0.0.8"));
    assert!(message("outside").contains("outside the pool 10.0.0.0/24"), "{}", message("outside"));
    assert!(message("typo").starts_with("spec.pinnedRange.startAddress \"10.0.0\" is not an IP address"));
    assert_eq!(by_name["typo"].status.conditions[0].reason, "InvalidSpec");
}

#[test]
fn a_journal_entry_keeps_its_block_until_its_allocation_changes() {
    let entry = json!([{"name": "a", "uid": "uid-a", "resourceVersion": "7", "startAddress": "10.0.0.0", "endAddress": "10.0.0.7"}]);
    let p = pool(json!({"cidr": "10.0.0.0/28"}), entry.clone());
    // `a` still at the version the write needs: written again with the same block, and `b`
    // does not get it.
    let a = allocation("a", T0, json!({}), json!({"phase": "Pending"}));
    let b = allocation("b", T0, json!({}), json!({"phase": "Pending"}));
    let served = run(&p, &[a.clone(), b.clone()]);
    assert_eq!(ranges(&served), [("a".into(), "10.0.0.0/29".into()), ("b".into(), "10.0.0.8/29".into())]);
    assert_eq!(served.journal.len(), 2);
    // `a` moved on (the write landed or never will): the entry goes and its block is free.
    let mut moved = a.clone();
    moved.metadata.resource_version = Some("8".into());
    let served = run(&p, &[moved, b]);
    assert_eq!(ranges(&served)[1], ("b".into(), "10.0.0.8/29".into()));
    assert_eq!(served.journal.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
    // An entry for an object that is gone is dropped.
    let served = run(&p, &[]);
    assert!(served.journal.is_empty());
}

#[test]
fn overlapping_and_stranded_blocks_are_reported_and_kept() {
    let p = pool(json!({"cidr": "10.0.0.0/24", "tenantAllocation": {"start": "10.0.0.16"}}), json!([]));
    let all = [
        allocation(
            "older",
            T0,
            json!({}),
            json!({"phase": "Allocated", "allocatedAt": T0, "startAddress": "10.0.0.16", "endAddress": "10.0.0.23"}),
        ),
        allocation(
            "forged",
            T0,
            json!({}),
            json!({"phase": "Allocated", "allocatedAt": T1, "startAddress": "10.0.0.20", "endAddress": "10.0.0.27"}),
        ),
        allocation(
            "stranded",
            T0,
            json!({}),
            json!({"phase": "Allocated", "startAddress": "10.0.0.0", "endAddress": "10.0.0.7"}),
        ),
        allocation("new", T1, json!({"count": 1}), json!({})),
    ];
    let served = run(&p, &all);
    assert_eq!(served.problems.len(), 2, "{:?}", served.problems);
    let has = |prefix: &str| served.problems.iter().any(|p| p.starts_with(prefix));
    assert!(
        has("forged: 10.0.0.20-10.0.0.27 conflicts with allocation 10.0.0.16/29"),
        "{:?}",
        served.problems
    );
    assert!(has("stranded: 10.0.0.0-10.0.0.7 is outside"), "{:?}", served.problems);
    // Nothing the stranded one holds is handed out again.
    assert_eq!(ranges(&served), [("new".into(), "10.0.0.24/32".into())]);
}

#[test]
fn allocations_being_deleted_are_not_served() {
    let p = pool(json!({"cidr": "10.0.0.0/28"}), json!([]));
    let mut gone = allocation("gone", T0, json!({}), json!({}));
    gone.metadata.deletion_timestamp = Some(Time(T0.parse().unwrap()));
    assert!(run(&p, &[gone]).writes.is_empty());
}

#[test]
fn an_allocation_is_served_once_its_finalizer_is_there() {
    let p = pool(json!({"cidr": "10.0.0.0/28"}), json!([]));
    let mut fresh = allocation("fresh", T0, json!({"count": 1}), json!({}));
    fresh.metadata.finalizers = None;
    assert!(
        run(&p, std::slice::from_ref(&fresh)).writes.is_empty(),
        "the IPAllocation controller writes first"
    );
    fresh.metadata.finalizers = Some(vec!["butler.butlerlabs.dev/ipallocation".into()]);
    assert_eq!(ranges(&run(&p, &[fresh])), [("fresh".to_string(), "10.0.0.0/32".to_string())]);
}

#[test]
fn a_limit_stops_the_round_and_says_more_wait() {
    let p = pool(json!({"cidr": "10.0.0.0/24"}), json!([]));
    let all: Vec<IPAllocation> =
        (0..5).map(|i| allocation(&format!("a{i}"), T0, json!({"count": 1}), json!({}))).collect();
    let refs: Vec<&IPAllocation> = all.iter().collect();
    let served = serve(&p, allocator(&p).unwrap(), &refs, T0.parse().unwrap(), "c", 3);
    assert_eq!((served.writes.len(), served.journal.len(), served.more), (3, 3, true));
    assert_eq!(served.allocator.stats().allocated, 3, "the others took nothing");
    let served = serve(&p, allocator(&p).unwrap(), &refs, T0.parse().unwrap(), "c", 5);
    assert!(!served.more);
}
