//! The IPAM part of TenantClusters (spec/002 "Static IPAM"): the initial load-balancer block
//! asked from the first pool by priority that has room, the cluster told its addresses, every
//! block given back when the cluster goes, node addresses when asked, cloud mode allocating nothing (and saying so), and
//! 200 clusters created at once without one shared address. The tenant's side is in
//! `tenant_elastic`.

use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool, TenantCluster};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

use crate::support::{Scenario, wait_for};
use crate::tenants::{cluster, cluster_says, config, ipam_ready, make, pool, small_ipam, with_pool};

#[tokio::test]
async fn a_cluster_gets_its_load_balancer_block_from_the_first_pool_with_room_and_gives_it_back() {
    let s = Scenario::start().await;
    let system = s.namespace("tc-ipam-system").await;
    let team = s.namespace("tc-ipam-team").await;
    pool(&s, &system, "small", "10.40.0.0/29").await; // 8 addresses
    pool(&s, &system, "big", "10.41.0.0/24").await;
    config(&s, &system, json!({"mode": "ipam", "poolRefs": [{"name": "small", "priority": 0}, {"name": "big", "priority": 10}],
        "loadBalancer": {"defaultPoolSize": 8}})).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    // The first fits the small pool exactly.
    cluster(&s, &team, "first", &system).await;
    let first = wait_for(&clusters, "first", "IPAMReady", ipam_ready).await.unwrap();
    let status = first.status.clone().unwrap();
    assert_eq!(status.load_balancer_addresses.as_deref(), Some(&["10.40.0.0-10.40.0.7".to_string()][..]));
    let name = format!("{team}.first-lb");
    assert_eq!(
        status.lb_allocation_ref.as_ref().map(|r| (r.name.clone(), r.namespace.clone())),
        Some((name.clone(), system.clone()))
    );
    assert!(first.finalizers().contains(&"butler.butlerlabs.dev/tenantcluster".to_string()));
    let block = allocations.get(&name).await.unwrap();
    let labels = block.labels();
    assert_eq!(labels["butler.butlerlabs.dev/team"], team);
    assert_eq!(labels["butler.butlerlabs.dev/tenant"], "first");
    assert_eq!(labels["butler.butlerlabs.dev/network-pool"], "small");
    assert_eq!(labels["butler.butlerlabs.dev/allocation-role"], "initial");
    // The small pool is full: the second falls through to the big one.
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &system);
    wait_for(&pools, "small", "full", |p| {
        p.and_then(|p| p.status.as_ref()).and_then(|s| s.available_ips) == Some(0)
    })
    .await;
    cluster(&s, &team, "second", &system).await;
    let second = wait_for(&clusters, "second", "IPAMReady", ipam_ready).await.unwrap();
    assert_eq!(second.status.unwrap().load_balancer_addresses.unwrap(), ["10.41.0.0-10.41.0.7"]);
    // Deleted: its block goes with it.
    clusters.delete("first", &DeleteParams::default()).await.unwrap();
    wait_for(&clusters, "first", "gone", |c| c.is_none()).await;
    wait_for(&allocations, &name, "released", |a| a.is_none()).await;
}

#[tokio::test]
async fn cloud_mode_creates_nothing_and_says_the_cluster_is_ready() {
    let s = Scenario::start().await;
    let system = s.namespace("tc-cloud-system").await;
    let team = s.namespace("tc-cloud-team").await;
    config(&s, &system, json!({"mode": "cloud"})).await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    // Its generation seen, and nothing of IPAM holding it back.
    let web = wait_for(&clusters, "web", "Ready for the generation seen", |c| {
        let Some(c) = c else { return false };
        let status = c.status.as_ref();
        let ready =
            status.into_iter().flat_map(|s| &s.conditions).any(|c| c.type_ == "Ready" && c.status == "True");
        ready && status.and_then(|s| s.observed_generation) == c.metadata.generation
    })
    .await
    .unwrap();
    assert!(web.finalizers().is_empty());
    let status = web.status.unwrap();
    let ipam = status.conditions.iter().find(|c| c.type_ == "IPAMReady").expect("IPAMReady");
    assert_eq!((ipam.status.as_str(), ipam.reason.as_str()), ("True", "CloudLoadBalancers"));
    assert!(status.lb_allocation_ref.is_none() && status.load_balancer_addresses.is_none());
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    assert!(allocations.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn two_hundred_clusters_at_once_share_no_address() {
    let s = Scenario::start().await;
    let system = s.namespace("tc-many-system").await;
    let team = s.namespace("tc-many-team").await;
    small_ipam(&s, &system, "10.50.0.0/20").await;
    let creates = (0..200).map(|i| {
        let (s, team, system) = (&s, team.clone(), system.clone());
        async move { cluster(s, &team, &format!("c{i:03}"), &system).await }
    });
    futures::future::join_all(creates).await;
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let deadline = Instant::now() + Duration::from_secs(60);
    let list = loop {
        let list = allocations.list(&ListParams::default()).await.unwrap().items;
        let done = list
            .iter()
            .filter(|a| a.status.as_ref().and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated))
            .count();
        if list.len() == 200 && done == 200 {
            break list;
        }
        assert!(Instant::now() < deadline, "{done} of 200 allocated ({} made)", list.len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let mut blocks: Vec<(u32, u32)> = list
        .iter()
        .map(|a| {
            let s = a.status.as_ref().unwrap();
            let ip =
                |v: &Option<String>| u32::from(v.as_ref().unwrap().parse::<std::net::Ipv4Addr>().unwrap());
            (ip(&s.start_address), ip(&s.end_address))
        })
        .collect();
    blocks.sort();
    assert!(blocks.windows(2).all(|w| w[0].1 < w[1].0), "overlapping blocks");
    assert_eq!(blocks.iter().map(|(s, e)| e - s + 1).sum::<u32>(), 800);
}

#[tokio::test]
async fn a_cluster_that_asks_for_node_addresses_gets_them_within_the_quota() {
    let s = Scenario::start().await;
    let (system, team) = with_pool(&s, "tc-nodes", "10.90.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 4},
        "quotaPerTenant": {"maxNodeIPs": 3}}),
    )
    .await;
    make::<TenantCluster>(
        &s,
        &team,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "db", "namespace": team},
        "spec": {"providerConfigRef": {"name": "pc", "namespace": system}, "networking": {"nodeIPs": 5}}}),
    )
    .await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let db = wait_for(&clusters, "db", "IPAMReady", ipam_ready).await.unwrap();
    let status = db.status.unwrap();
    let nodes = status.ip_allocation_ref.unwrap();
    assert_eq!(
        (nodes.name.as_str(), nodes.namespace.as_str()),
        (format!("{team}.db-nodes").as_str(), system.as_str())
    );
    let allocation =
        Api::<IPAllocation>::namespaced(s.client.clone(), &system).get(&nodes.name).await.unwrap();
    let st = allocation.status.clone().unwrap();
    assert_eq!(
        (st.allocated_count, allocation.labels()["butler.butlerlabs.dev/allocation-type"].as_str()),
        (Some(3), "nodes")
    );
    assert_eq!(
        status.load_balancer_addresses.unwrap().len(),
        1,
        "node blocks are not load-balancer addresses"
    );
}

#[tokio::test]
async fn the_status_keeps_other_writers_conditions_and_says_ready_for_its_generation() {
    use kube::api::{Patch, PatchParams};
    let s = Scenario::start().await;
    let system = s.namespace("tc-status-system").await;
    let team = s.namespace("tc-status-team").await;
    small_ipam(&s, &system, "10.67.0.0/24").await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "web", "IPAMReady", ipam_ready).await;
    // A provisioner writes a condition of its own, with its own field manager.
    let theirs = json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "web"}, "status": {"conditions": [{"type": "ControlPlaneReady", "status": "True",
        "reason": "Provisioned", "message": "the control plane answers", "lastTransitionTime": "2026-11-25T00:00:00Z"}]}});
    clusters
        .patch_status("web", &PatchParams::apply("provisioner").force(), &Patch::Apply(theirs))
        .await
        .unwrap();
    // A spec change: the controller reconciles and writes its status for the new generation.
    clusters
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kubernetesVersion": "1.31.2"}})),
        )
        .await
        .unwrap();
    let seen = wait_for(&clusters, "web", "its status for generation 2", |c| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|st| st.observed_generation == Some(2))
    })
    .await
    .unwrap();
    let status = seen.status.unwrap();
    let types: Vec<(&str, &str)> =
        status.conditions.iter().map(|c| (c.type_.as_str(), c.status.as_str())).collect();
    assert!(types.contains(&("ControlPlaneReady", "True")), "the provisioner's condition stays: {types:?}");
    assert!(types.contains(&("IPAMReady", "True")) && types.contains(&("Ready", "False")), "{types:?}");
    let ready = status.conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "WaitingForKubeconfig", "MetalLB waits for the tenant's kubeconfig");
    assert_eq!(ready.observed_generation, Some(2));
}

#[tokio::test]
async fn an_allocation_name_taken_by_another_cluster_is_an_error_not_a_success() {
    let s = Scenario::start().await;
    let system = s.namespace("tc-taken-system").await;
    let team = s.namespace("tc-taken-team").await;
    small_ipam(&s, &system, "10.68.0.0/24").await;
    // The name this cluster's block would have, held by a block of another cluster.
    let other = s.namespace("tc-taken-other").await;
    crate::ipam::tenant(&s, &other, "other").await;
    make::<IPAllocation>(
        &s,
        &system,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": format!("{team}.web-lb"), "namespace": system},
            "spec": {"poolRef": {"name": "lab"}, "tenantClusterRef": {"name": "other", "namespace": other},
                "type": "loadbalancer", "count": 4}}),
    )
    .await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let refused = cluster_says(&clusters, "web", "IPAMReady", "AllocationNameTaken").await;
    let status = refused.status.unwrap();
    let message = &status.conditions.iter().find(|c| c.type_ == "IPAMReady").unwrap().message;
    assert_eq!(
        message,
        &format!(
            "IPAllocation {system}/{team}.web-lb exists and serves TenantCluster {other}/other, not this one; rename one of the clusters"
        )
    );
    assert!(status.load_balancer_addresses.is_none(), "no addresses of another cluster's block");
}

#[tokio::test]
async fn clusters_whose_names_joined_alike_get_blocks_of_their_own() {
    let s = Scenario::start().await;
    let system = s.namespace("tc-join-system").await;
    small_ipam(&s, &system, "10.69.0.0/24").await;
    // `{first}` with the cluster `x-{run}-web`, and `{first}-x-{run}` with `web`: joined with
    // '-', both are `{first}-x-{run}-web`.
    let first = s.namespace("tcj").await;
    let second = s.namespace(&format!("{first}-x")).await;
    let first_name = format!("{}-web", &second[first.len() + 1..]);
    cluster(&s, &first, &first_name, &system).await;
    cluster(&s, &second, "web", &system).await;
    let mut blocks = Vec::new();
    for (ns, name) in [(&first, first_name.as_str()), (&second, "web")] {
        let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), ns);
        let ready = wait_for(&clusters, name, "IPAMReady", ipam_ready).await.unwrap().status.unwrap();
        blocks.push((ready.lb_allocation_ref.unwrap().name, ready.load_balancer_addresses.unwrap()));
    }
    assert_eq!(blocks[0].0, format!("{first}.{first_name}-lb"));
    assert_eq!(blocks[1].0, format!("{second}.web-lb"));
    assert_ne!(blocks[0].1, blocks[1].1, "each has addresses of its own");
}

#[tokio::test]
async fn a_block_an_earlier_version_named_stays_its_clusters_and_goes_with_it() {
    let s = Scenario::start().await;
    let system = s.namespace("tc-legacy-system").await;
    let team = s.namespace("tc-legacy-team").await;
    small_ipam(&s, &system, "10.70.0.0/24").await;
    // The block an earlier version made for `web`, named `{namespace}-{name}-lb`.
    let legacy = format!("{team}-web-lb");
    make::<IPAllocation>(
        &s,
        &system,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": legacy, "namespace": system, "labels": {
                "butler.butlerlabs.dev/team": team, "butler.butlerlabs.dev/tenant": "web"}},
            "spec": {"poolRef": {"name": "lab"}, "tenantClusterRef": {"name": "web", "namespace": team},
                "type": "loadbalancer", "count": 4}}),
    )
    .await;
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let held = wait_for(&allocations, &legacy, "Allocated", |a| {
        a.and_then(|a| a.status.as_ref()).is_some_and(|st| st.start_address.is_some())
    })
    .await
    .unwrap();
    let start = held.status.unwrap().start_address.unwrap();
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let ready = wait_for(&clusters, "web", "IPAMReady", ipam_ready).await.unwrap().status.unwrap();
    assert_eq!(ready.lb_allocation_ref.unwrap().name, legacy, "the block it has stays its own");
    assert!(ready.load_balancer_addresses.unwrap()[0].starts_with(&format!("{start}-")));
    assert!(allocations.get_opt(&format!("{team}.web-lb")).await.unwrap().is_none(), "no second block");
    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for(&clusters, "web", "gone", |c| c.is_none()).await;
    wait_for(&allocations, &legacy, "released", |a| a.is_none()).await;
}
