//! The NetworkPool and IPAllocation controllers (spec/002): blocks served oldest first and best
//! fit, refused when the pool is exhausted and served once space frees, pinned ranges and their
//! conflicts, capacity tiers and their events under a moved clock, orphans collected, and a pool
//! held while allocations use it. Races are in `ipam_races`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool, TenantCluster};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::{Scenario, wait_for};

pub(crate) async fn pool(s: &Scenario, ns: &str, name: &str, spec: Value) -> NetworkPool {
    let pool: NetworkPool = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": name, "namespace": ns}, "spec": spec,
    }))
    .unwrap();
    Api::<NetworkPool>::namespaced(s.client.clone(), ns).create(&PostParams::default(), &pool).await.unwrap()
}

pub(crate) async fn tenant(s: &Scenario, ns: &str, name: &str) {
    let tc: TenantCluster = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": name, "namespace": ns}, "spec": {},
    }))
    .unwrap();
    Api::<TenantCluster>::namespaced(s.client.clone(), ns).create(&PostParams::default(), &tc).await.unwrap();
}

pub(crate) fn allocation_object(
    ns: &str,
    name: &str,
    pool: &str,
    tenant: &str,
    extra: Value,
) -> IPAllocation {
    let mut spec = json!({"poolRef": {"name": pool}, "tenantClusterRef": {"name": tenant, "namespace": ns}, "type": "loadbalancer"});
    spec.as_object_mut().unwrap().extend(extra.as_object().cloned().unwrap_or_default());
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
        "metadata": {"name": name, "namespace": ns}, "spec": spec,
    }))
    .unwrap()
}

pub(crate) async fn allocate(s: &Scenario, ns: &str, name: &str, pool: &str, tenant: &str, extra: Value) {
    let a = allocation_object(ns, name, pool, tenant, extra);
    Api::<IPAllocation>::namespaced(s.client.clone(), ns).create(&PostParams::default(), &a).await.unwrap();
}

pub(crate) fn phase(a: Option<&IPAllocation>) -> Option<IPAllocationPhase> {
    a?.status.as_ref()?.phase
}

pub(crate) fn cidr(a: &IPAllocation) -> String {
    a.status.as_ref().and_then(|s| s.cidr.clone()).unwrap_or_default()
}

fn ready_message(a: &IPAllocation) -> String {
    let status = a.status.as_ref();
    status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn pool_condition(p: Option<&NetworkPool>, type_: &str) -> Option<(String, String)> {
    let c = p?.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn ready_of(p: &NetworkPool) -> String {
    let status = p.status.as_ref();
    status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

async fn allocated(api: &Api<IPAllocation>, name: &str) -> IPAllocation {
    wait_for(api, name, "Allocated", |a| phase(a) == Some(IPAllocationPhase::Allocated)).await.unwrap()
}

/// Waits until every IPAllocation of the namespace is Allocated; returns them.
pub(crate) async fn all_allocated(
    api: &Api<IPAllocation>,
    count: usize,
    within: Duration,
) -> Vec<IPAllocation> {
    let deadline = Instant::now() + within;
    loop {
        let list = api.list(&ListParams::default()).await.unwrap().items;
        let done = list.iter().filter(|a| phase(Some(a)) == Some(IPAllocationPhase::Allocated)).count();
        if list.len() == count && done == count {
            return list;
        }
        assert!(Instant::now() < deadline, "{done} of {count} allocated after {within:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Pairs of allocations whose blocks share an address.
pub(crate) fn overlaps(list: &[IPAllocation]) -> Vec<(String, String)> {
    let mut blocks: Vec<(u32, u32, String)> = list
        .iter()
        .filter_map(|a| {
            let s = a.status.as_ref()?;
            let ip = |v: &Option<String>| match v.as_ref()?.parse::<IpAddr>().ok()? {
                IpAddr::V4(v4) => Some(u32::from(v4)),
                IpAddr::V6(_) => None,
            };
            Some((ip(&s.start_address)?, ip(&s.end_address)?, a.name_any()))
        })
        .collect();
    blocks.sort();
    blocks.windows(2).filter(|w| w[1].0 <= w[0].1).map(|w| (w[0].2.clone(), w[1].2.clone())).collect()
}

#[tokio::test]
async fn blocks_are_served_best_fit_released_on_deletion_and_counted_on_the_pool() {
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-static").await;
    pool(&s, &ns, "lab", json!({"cidr": "10.40.0.0/22", "reserved": [{"cidr": "10.40.0.0/28"}, {"cidr": "10.40.0.16/28"}],
        "tenantAllocation": {"start": "10.40.1.0", "end": "10.40.3.254", "defaults": {"nodesPerTenant": 5, "lbPoolPerTenant": 8}}})).await;
    tenant(&s, &ns, "prod").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    allocate(&s, &ns, "prod-lb", "lab", "prod", json!({})).await;
    let lb = allocated(&api, "prod-lb").await;
    let status = lb.status.clone().unwrap();
    assert_eq!((cidr(&lb).as_str(), status.allocated_count), ("10.40.1.0/29", Some(8)));
    assert_eq!(status.addresses.unwrap().len(), 8);
    assert!(lb.finalizers().contains(&"butler.butlerlabs.dev/ipallocation".to_string()));
    allocate(&s, &ns, "prod-nodes", "lab", "prod", json!({"type": "nodes"})).await;
    let nodes = allocated(&api, "prod-nodes").await;
    assert_eq!(cidr(&nodes), "10.40.1.8-10.40.1.12");
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    let counted = wait_for(&pools, "lab", "two allocations counted", |p| {
        p.and_then(|p| p.status.as_ref()).and_then(|s| s.allocation_count) == Some(2)
    })
    .await
    .unwrap();
    let st = counted.status.clone().unwrap();
    assert_eq!((st.total_ips, st.allocated_ips, st.available_ips), (Some(767), Some(13), Some(754)));
    assert_eq!(st.largest_free_block, Some(754));
    let ready = st.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.message, "754/767 IPs available (2 allocations)");
    assert_eq!(st.conditions.len(), 4, "three capacity tiers and Ready, always present");
    assert!(counted.finalizers().contains(&"butler.butlerlabs.dev/networkpool".to_string()));

    // Deleted: Released on the way out (the finalizer records it), then the block is free.
    api.delete("prod-lb", &DeleteParams::default()).await.unwrap();
    wait_for(&api, "prod-lb", "gone", |a| a.is_none()).await;
    wait_for(&pools, "lab", "the block back", |p| {
        p.and_then(|p| p.status.as_ref()).and_then(|s| s.available_ips) == Some(762)
    })
    .await;
}

#[tokio::test]
async fn an_exhausted_pool_fails_a_request_and_serves_it_once_space_frees() {
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-exhausted").await;
    pool(&s, &ns, "small", json!({"cidr": "10.50.0.0/28"})).await;
    tenant(&s, &ns, "a").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    allocate(&s, &ns, "first", "small", "a", json!({"count": 12})).await;
    allocated(&api, "first").await;
    allocate(&s, &ns, "second", "small", "a", json!({"count": 8})).await;
    let failed =
        wait_for(&api, "second", "Failed", |a| phase(a) == Some(IPAllocationPhase::Failed)).await.unwrap();
    assert!(
        ready_message(&failed).starts_with("no contiguous block available in NetworkPool small: 8 addresses asked, largest free block 4, 4 free"),
        "{}",
        ready_message(&failed)
    );
    api.delete("first", &DeleteParams::default()).await.unwrap();
    let served = allocated(&api, "second").await;
    assert_eq!(cidr(&served), "10.50.0.0/29");
}

#[tokio::test]
async fn pinned_ranges_are_taken_exactly_and_conflicts_are_named() {
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-pinned").await;
    pool(
        &s,
        &ns,
        "lab",
        json!({"cidr": "10.60.0.0/24", "reserved": [{"cidr": "10.60.0.0/28", "description": "gateways"}]}),
    )
    .await;
    tenant(&s, &ns, "api").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    allocate(
        &s,
        &ns,
        "stable",
        "lab",
        "api",
        json!({"pinnedRange": {"startAddress": "10.60.0.64", "endAddress": "10.60.0.71"}}),
    )
    .await;
    assert_eq!(cidr(&allocated(&api, "stable").await), "10.60.0.64/29");
    allocate(
        &s,
        &ns,
        "clash",
        "lab",
        "api",
        json!({"pinnedRange": {"startAddress": "10.60.0.70", "endAddress": "10.60.0.72"}}),
    )
    .await;
    allocate(
        &s,
        &ns,
        "gateway",
        "lab",
        "api",
        json!({"pinnedRange": {"startAddress": "10.60.0.1", "endAddress": "10.60.0.2"}}),
    )
    .await;
    for (name, wanted) in [
        ("clash", "conflicts with allocation 10.60.0.64/29 at address 10.60.0.70"),
        ("gateway", "conflicts with reserved range 10.60.0.0/28 at address 10.60.0.1"),
    ] {
        let failed =
            wait_for(&api, name, "Failed", |a| phase(a) == Some(IPAllocationPhase::Failed)).await.unwrap();
        assert!(ready_message(&failed).contains(wanted), "{name}: {}", ready_message(&failed));
    }
}

#[tokio::test]
async fn capacity_tiers_are_conditions_with_events_at_most_every_ten_minutes() {
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-capacity").await;
    pool(&s, &ns, "tiny", json!({"cidr": "10.70.0.0/28"})).await;
    tenant(&s, &ns, "t").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    allocate(&s, &ns, "most", "tiny", "t", json!({"count": 12})).await; // 75 %
    allocated(&api, "most").await;
    wait_for(&pools, "tiny", "CapacityWarning", |p| {
        pool_condition(p, "CapacityWarning") == Some(("True".into(), "UtilizationAboveThreshold".into()))
            && pool_condition(p, "CapacityCritical")
                == Some(("False".into(), "UtilizationBelowThreshold".into()))
    })
    .await;
    let events: Api<Event> = Api::namespaced(s.client.clone(), &ns);
    let count = |reason: &'static str| {
        let events = events.clone();
        async move {
            let list = events.list(&ListParams::default()).await.unwrap().items;
            list.iter()
                .filter(|e| e.reason.as_deref() == Some(reason))
                .map(|e| e.series.as_ref().map_or(1, |s| s.count))
                .sum::<i32>()
        }
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while count("PoolCapacityWarning").await < 1 {
        assert!(Instant::now() < deadline, "no PoolCapacityWarning event");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Five minutes on: no second event. Eleven: reminded.
    s.clock.advance(Duration::from_secs(300));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(count("PoolCapacityWarning").await, 1);
    s.clock.advance(Duration::from_secs(360));
    let deadline = Instant::now() + Duration::from_secs(10);
    while count("PoolCapacityWarning").await < 2 {
        assert!(Instant::now() < deadline, "no reminder after ten minutes");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Released a moment after the reminder: the recovery is news of its own, not held back.
    api.delete("most", &DeleteParams::default()).await.unwrap();
    wait_for(&pools, "tiny", "recovered", |p| {
        pool_condition(p, "CapacityWarning").is_some_and(|c| c.0 == "False")
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    while count("PoolCapacityRecovered").await < 1 {
        assert!(Instant::now() < deadline, "no PoolCapacityRecovered event");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn orphans_are_collected_and_a_pool_is_held_while_allocations_use_it() {
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-orphans").await;
    pool(&s, &ns, "lab", json!({"cidr": "10.80.0.0/24"})).await;
    tenant(&s, &ns, "alive").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    allocate(&s, &ns, "kept", "lab", "alive", json!({"count": 2})).await;
    // Made ahead of its cluster (spec/002's stable addresses), and never claimed.
    allocate(&s, &ns, "orphan", "lab", "never-came", json!({"count": 2})).await;
    // Made by the TenantCluster controller for its cluster, which is gone.
    let labels = json!({"butler.butlerlabs.dev/allocation-role": "initial"});
    let mut made = crate::ipam::allocation_object(&ns, "made", "lab", "deleted", json!({"count": 2}));
    made.metadata.labels = serde_json::from_value(labels).unwrap();
    api.create(&PostParams::default(), &made).await.unwrap();
    allocated(&api, "kept").await;
    wait_for(&api, "made", "collected at once", |a| a.is_none()).await;
    // Within the grace the cluster may still come.
    allocated(&api, "orphan").await;
    s.clock.advance(Duration::from_secs(540));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(api.get_opt("orphan").await.unwrap().is_some(), "collected within the grace");
    s.clock.advance(Duration::from_secs(61));
    wait_for(&api, "orphan", "collected after the grace", |a| a.is_none()).await;
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    pools.delete("lab", &DeleteParams::default()).await.unwrap();
    let held = wait_for(&pools, "lab", "deletion blocked", |p| {
        pool_condition(p, "Ready") == Some(("False".into(), "DeletionBlocked".into()))
    })
    .await
    .unwrap();
    let message = ready_of(&held);
    assert_eq!(
        message,
        "deletion waits: 1 IPAllocations use this pool: kept; delete their TenantClusters or the allocations"
    );
    assert!(api.get_opt("kept").await.unwrap().is_some(), "nothing is deallocated to let a pool go");
    api.delete("kept", &DeleteParams::default()).await.unwrap();
    wait_for(&pools, "lab", "gone", |p| p.is_none()).await;
}

#[tokio::test]
async fn a_spec_change_that_strands_an_allocation_is_reported_and_nothing_is_released() {
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-stranded").await;
    pool(&s, &ns, "lab", json!({"cidr": "10.90.0.0/24"})).await;
    tenant(&s, &ns, "t").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    allocate(&s, &ns, "low", "lab", "t", json!({"count": 4})).await;
    assert_eq!(cidr(&allocated(&api, "low").await), "10.90.0.0/30");
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    let patch = json!({"spec": {"reserved": [{"cidr": "10.90.0.0/29"}]}});
    pools.patch("lab", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await.unwrap();
    let reported = wait_for(&pools, "lab", "AllocationsConflict", |p| {
        pool_condition(p, "Ready") == Some(("False".into(), "AllocationsConflict".into()))
    })
    .await
    .unwrap();
    let message = ready_of(&reported);
    assert!(
        message.contains(
            "low: 10.90.0.0-10.90.0.3 conflicts with reserved range 10.90.0.0/29 at address 10.90.0.0"
        ),
        "{message}"
    );
    assert_eq!(cidr(&api.get("low").await.unwrap()), "10.90.0.0/30");
}

#[tokio::test]
async fn controllers_narrowed_to_some_namespaces_leave_the_others_alone() {
    let mut s = Scenario::start().await;
    s.kill_controllers();
    let ours = s.namespace("scope-ours").await;
    let theirs = s.namespace("scope-theirs").await;
    let keep = ours.clone();
    s.start_controllers_in(move |ns| ns == keep).await;
    pool(&s, &ours, "lab", json!({"cidr": "10.11.0.0/24"})).await;
    pool(&s, &theirs, "lab", json!({"cidr": "10.12.0.0/24"})).await;
    let mine: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ours);
    wait_for(&mine, "lab", "counted", |p| {
        p.and_then(|p| p.status.as_ref()).is_some_and(|s| s.total_ips == Some(256))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let other = Api::<NetworkPool>::namespaced(s.client.clone(), &theirs).get("lab").await.unwrap();
    assert!(
        other.status.is_none() && other.finalizers().is_empty(),
        "another namespace's pool was touched: {other:?}"
    );
}

/// `--watch-namespace-selector`: the controllers act in the namespaces the selector picks, and
/// take up one that comes to carry the labels at once.
#[tokio::test]
async fn controllers_scoped_by_a_label_selector_follow_the_namespaces_labels() {
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Patch, PatchParams};
    let mut s = Scenario::start().await;
    s.kill_controllers();
    let ours = s.namespace("select-ours").await;
    let later = s.namespace("select-later").await;
    // A label of this scenario alone: on a shared real cluster no other namespace carries it.
    let (key, value) = ("scenario.butlerlabs.dev/environment", s.cluster.unique("env"));
    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    let label = |ns: &str| {
        let namespaces = namespaces.clone();
        let patch = json!({"metadata": {"labels": {key: value.clone()}}});
        let ns = ns.to_string();
        async move { namespaces.patch(&ns, &PatchParams::default(), &Patch::Merge(&patch)).await.unwrap() }
    };
    label(&ours).await;
    s.start_controllers_selecting(&format!("{key}={value}")).await;
    pool(&s, &ours, "lab", json!({"cidr": "10.13.0.0/24"})).await;
    pool(&s, &later, "lab", json!({"cidr": "10.14.0.0/24"})).await;
    let counted =
        |p: Option<&NetworkPool>| p.and_then(|p| p.status.as_ref()).is_some_and(|s| s.total_ips == Some(256));
    wait_for(&Api::<NetworkPool>::namespaced(s.client.clone(), &ours), "lab", "counted", counted).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let theirs: Api<NetworkPool> = Api::namespaced(s.client.clone(), &later);
    assert!(theirs.get("lab").await.unwrap().status.is_none(), "an unselected namespace's pool was touched");
    // The namespace comes to carry the label: its pool is taken up without a change of its own.
    label(&later).await;
    wait_for(&theirs, "lab", "counted once selected", counted).await;

    // A Team is selected by its own labels (its namespace is the controller's to make).
    use butler_core::api::Team;
    let teams: Api<Team> = Api::all(s.client.clone());
    let (picked, left) = (s.cluster.unique("picked"), s.cluster.unique("left"));
    for (name, labels) in [(&picked, format!("{{{key}: {value}}}")), (&left, "{}".to_string())] {
        crate::support::create(
            &teams,
            &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {name}, labels: {labels}}}\nspec:\n  access:\n    users: [{{name: a@example.com, role: admin}}]\n"),
        )
        .await;
    }
    let ready = |t: Option<&Team>| {
        t.and_then(|t| t.status.as_ref()).is_some_and(|s| s.phase == Some(butler_core::api::TeamPhase::Ready))
    };
    wait_for(&teams, &picked, "Ready", ready).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(teams.get(&left).await.unwrap().status.is_none(), "an unselected Team was touched");
    for name in [&picked, &left] {
        teams.delete(name, &Default::default()).await.unwrap();
    }
    for name in [&picked, &left] {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while teams.get_opt(name).await.unwrap().is_some() {
            assert!(std::time::Instant::now() < deadline, "Team {name} is not gone");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

#[tokio::test]
async fn an_allocations_spec_cannot_be_moved_to_another_pool_or_resized() {
    use kube::api::{Patch, PatchParams};
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-immutable").await;
    pool(&s, &ns, "first", json!({"cidr": "10.64.0.0/28"})).await;
    pool(&s, &ns, "second", json!({"cidr": "10.65.0.0/28"})).await;
    tenant(&s, &ns, "web").await;
    allocate(&s, &ns, "web-lb", "first", "web", json!({"count": 4})).await;
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    wait_for(&allocations, "web-lb", "Allocated", |a| phase(a) == Some(IPAllocationPhase::Allocated)).await;
    for change in [json!({"spec": {"poolRef": {"name": "second"}}}), json!({"spec": {"count": 8}})] {
        let refused = allocations.patch("web-lb", &PatchParams::default(), &Patch::Merge(&change)).await;
        match refused {
            Err(kube::Error::Api(e)) if e.code == 422 => {
                assert!(e.message.contains("spec is immutable"), "{}", e.message)
            }
            other => panic!("{change}: an allocation's spec changed: {other:?}"),
        }
    }
    let labelled = json!({"metadata": {"labels": {"team": "a"}}});
    allocations
        .patch("web-lb", &PatchParams::default(), &Patch::Merge(&labelled))
        .await
        .expect("metadata stays mutable");
}

#[tokio::test]
async fn a_large_ipv6_block_is_allocated_with_its_cidr_as_the_record() {
    let s = Scenario::start().await;
    let ns = s.namespace("ipam-large-v6").await;
    pool(&s, &ns, "v6", json!({"cidr": "fd12:3456:789a:bcde::/64"})).await;
    tenant(&s, &ns, "big").await;
    // 65,536 addresses: listed, they would take some 2 MB, more than etcd keeps of an object.
    allocate(&s, &ns, "big-lb", "v6", "big", json!({"count": 65_536})).await;
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    let done =
        wait_for(&allocations, "big-lb", "Allocated", |a| phase(a) == Some(IPAllocationPhase::Allocated))
            .await
            .unwrap();
    let status = done.status.unwrap();
    assert_eq!(status.cidr.as_deref(), Some("fd12:3456:789a:bcde::/112"));
    assert_eq!(status.allocated_count, Some(65_536));
    assert!(status.addresses.is_none(), "the CIDR is the record");
}

#[tokio::test]
async fn of_two_overlapping_pools_the_newer_serves_nothing_unless_both_allow_it() {
    use kube::api::{Patch, PatchParams};
    let s = Scenario::start().await;
    let first = s.namespace("ipam-overlap-a").await;
    let second = s.namespace("ipam-overlap-b").await;
    pool(&s, &first, "lab", json!({"cidr": "10.71.0.0/24"})).await;
    // Made a moment later, within the first pool's block.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    pool(&s, &second, "lab", json!({"cidr": "10.71.0.128/25"})).await;
    tenant(&s, &first, "t").await;
    tenant(&s, &second, "t").await;
    allocate(&s, &first, "a", "lab", "t", json!({"count": 4})).await;
    allocate(&s, &second, "b", "lab", "t", json!({"count": 4})).await;
    allocated(&Api::<IPAllocation>::namespaced(s.client.clone(), &first), "a").await;
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &second);
    let refused = wait_for(&pools, "lab", "refused", |p| {
        ready_of_opt(p).is_some_and(|m| m.contains("overlaps NetworkPool"))
    })
    .await
    .unwrap();
    assert!(
        ready_of(&refused).contains(&format!(
            "spec.cidr 10.71.0.128/25 overlaps NetworkPool {first}/lab (10.71.0.0/24); pools hand out the same addresses only when both set spec.allowOverlap"
        )),
        "{}",
        ready_of(&refused)
    );
    let second_allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &second);
    wait_for(&second_allocations, "b", "Failed", |a| phase(a) == Some(IPAllocationPhase::Failed)).await;
    // Both opt in: the newer serves (its tenant range is its own half).
    let share = json!({"spec": {"allowOverlap": true}});
    for ns in [&first, &second] {
        Api::<NetworkPool>::namespaced(s.client.clone(), ns)
            .patch("lab", &PatchParams::default(), &Patch::Merge(&share))
            .await
            .unwrap();
    }
    allocated(&second_allocations, "b").await;
}

fn ready_of_opt(p: Option<&NetworkPool>) -> Option<String> {
    p.map(ready_of)
}
