//! Never one address twice (spec/002, issue of the Go controllers): not with two replicas whose
//! caches lag, not with a controller killed mid-batch, not with a killed planner's journal; every
//! IPAllocation is read back and compared.

use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::ipam::{all_allocated, allocate, allocation_object, cidr, overlaps, phase, pool, tenant};
use crate::support::{Scenario, wait_for};

/// Creates allocations `a-{i}` of 1 to 4 addresses for tenant `t` in pool `lab`.
async fn many(s: &Scenario, ns: &str, range: std::ops::Range<usize>) {
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), ns);
    let creates = range.map(|i| {
        let api = api.clone();
        let a = allocation_object(ns, &format!("a-{i:03}"), "lab", "t", json!({"count": 1 + (i % 4)}));
        async move { api.create(&PostParams::default(), &a).await.unwrap() }
    });
    futures::future::join_all(creates).await;
}

#[tokio::test]
async fn replicas_with_lagging_caches_never_hand_out_an_address_twice() {
    let mut s = Scenario::start().await;
    s.start_replica("lagging", Duration::from_millis(150)).await;
    s.start_replica("lagging-more", Duration::from_millis(400)).await;
    let ns = s.namespace("ipam-replicas").await;
    pool(&s, &ns, "lab", json!({"cidr": "10.100.0.0/20"})).await;
    tenant(&s, &ns, "t").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    // One by one in reverse order of name: within a second, the allocation created later is the
    // older by spec/002's order (creationTimestamp, then name), which replicas that see the
    // creations at different moments disagree about.
    for i in (0..200).rev() {
        let a = allocation_object(&ns, &format!("a-{i:03}"), "lab", "t", json!({"count": 1 + (i % 4)}));
        api.create(&PostParams::default(), &a).await.unwrap();
    }
    all_allocated(&api, 200, Duration::from_secs(60)).await;
    // Churn: every third released while 100 more arrive.
    let deletes = (0..200).step_by(3).map(|i| {
        let api = api.clone();
        async move { api.delete(&format!("a-{i:03}"), &DeleteParams::default()).await.unwrap() }
    });
    futures::future::join(futures::future::join_all(deletes), many(&s, &ns, 200..300)).await;
    let list = all_allocated(&api, 300 - 67, Duration::from_secs(60)).await;
    assert_eq!(overlaps(&list), Vec::<(String, String)>::new());
}

#[tokio::test]
async fn a_controller_killed_mid_batch_converges_without_overlaps() {
    let mut s = Scenario::start().await;
    let ns = s.namespace("ipam-killed").await;
    pool(&s, &ns, "lab", json!({"cidr": "10.110.0.0/20"})).await;
    tenant(&s, &ns, "t").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    many(&s, &ns, 0..200).await;
    // Killed as soon as some blocks are written, wherever it is.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let list = api.list(&ListParams::default()).await.unwrap().items;
        if list.iter().any(|a| phase(Some(a)) == Some(IPAllocationPhase::Allocated)) {
            break;
        }
        assert!(Instant::now() < deadline, "nothing allocated");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    s.kill_controllers();
    s.start_controllers().await;
    let list = all_allocated(&api, 200, Duration::from_secs(60)).await;
    assert_eq!(overlaps(&list), Vec::<(String, String)>::new());
}

#[tokio::test]
async fn a_block_in_the_journal_of_a_killed_planner_goes_to_its_allocation_only() {
    let mut s = Scenario::start().await;
    s.kill_controllers();
    let ns = s.namespace("ipam-journal").await;
    pool(&s, &ns, "lab", json!({"cidr": "10.120.0.0/24"})).await;
    tenant(&s, &ns, "t").await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    // `older` would get the first block by age; `claimed` was given it by a planner that was
    // killed after its commit, before its write (which may still land).
    allocate(&s, &ns, "older", "lab", "t", json!({"count": 8})).await;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut claimed = allocation_object(&ns, "claimed", "lab", "t", json!({"count": 8}));
    claimed.metadata.finalizers = Some(vec!["butler.butlerlabs.dev/ipallocation".into()]);
    api.create(&PostParams::default(), &claimed).await.unwrap();
    let pending = json!({"status": {"phase": "Pending"}});
    let claimed = api
        .patch_status("claimed", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(pending))
        .await
        .unwrap();
    let journal = json!({"status": {"inFlight": [{
        "name": "claimed", "uid": claimed.metadata.uid, "resourceVersion": claimed.metadata.resource_version,
        "startAddress": "10.120.0.0", "endAddress": "10.120.0.7"}]}});
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    pools
        .patch_status("lab", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(journal))
        .await
        .unwrap();
    s.start_controllers().await;
    let list = all_allocated(&api, 2, Duration::from_secs(30)).await;
    let block = |name: &str| cidr(list.iter().find(|a| a.name_any() == name).unwrap());
    assert_eq!((block("claimed").as_str(), block("older").as_str()), ("10.120.0.0/29", "10.120.0.8/29"));
    wait_for(&pools, "lab", "the journal emptied", |p| {
        p.and_then(|p| p.status.as_ref())
            .is_some_and(|s| s.in_flight.is_empty() && s.allocation_count == Some(2))
    })
    .await;
}

/// The request bill of a new allocation, as the API server counts it: its finalizer and its
/// outcome, two writes (it was three, and a conflict each time the IPAllocation controller's
/// Pending met the NetworkPool controller's block), for allocations made at once and over time.
#[tokio::test]
async fn a_new_allocation_costs_two_writes() {
    let s = Scenario::start().await;
    let Some(server) = s.cluster.server() else {
        println!("skipped on a real cluster: its requests are not counted here");
        return;
    };
    let ns = s.namespace("ipam-bill").await;
    pool(&s, &ns, "lab", json!({"cidr": "10.121.0.0/24"})).await;
    tenant(&s, &ns, "t").await;
    many(&s, &ns, 0..20).await;
    for from in (20..40).step_by(5) {
        many(&s, &ns, from..from + 5).await;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    all_allocated(&api, 40, Duration::from_secs(30)).await;
    let writes = server
        .requests_from(crate::support::AGENT)
        .into_iter()
        .filter(|(m, p)| m == "PATCH" && p.contains(&format!("/namespaces/{ns}/ipallocations/")))
        .count();
    assert_eq!(writes, 80, "two writes per allocation");
}
