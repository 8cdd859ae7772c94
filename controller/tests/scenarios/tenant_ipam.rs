//! The IPAM part of TenantClusters (spec/002 "Static IPAM"): the initial load-balancer block
//! asked from the first pool by priority that has room, the cluster told its addresses, every
//! block given back when the cluster goes, cloud mode untouched, and 200 clusters created at
//! once without one shared address.

use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool, ProviderConfig, TenantCluster};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::{Scenario, wait_for};

async fn make<K>(s: &Scenario, ns: &str, object: Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(s.client.clone(), ns).create(&PostParams::default(), &object).await.unwrap()
}

async fn pool(s: &Scenario, ns: &str, name: &str, cidr: &str) {
    make::<NetworkPool>(
        s,
        ns,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": name, "namespace": ns}, "spec": {"cidr": cidr}}),
    )
    .await;
    // Counted, so that clusters can choose by free addresses.
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), ns);
    wait_for(&pools, name, "counted", |p| {
        p.and_then(|p| p.status.as_ref()).is_some_and(|s| s.available_ips.is_some())
    })
    .await;
}

async fn config(s: &Scenario, ns: &str, network: Value) {
    make::<ProviderConfig>(s, ns, json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "pc", "namespace": ns},
        "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"}, "network": network}})).await;
}

async fn cluster(s: &Scenario, team: &str, name: &str, config_ns: &str) {
    make::<TenantCluster>(
        s,
        team,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": name, "namespace": team},
        "spec": {"providerConfigRef": {"name": "pc", "namespace": config_ns}}}),
    )
    .await;
}

fn ipam_ready(c: Option<&TenantCluster>) -> bool {
    c.and_then(|c| c.status.as_ref())
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "IPAMReady" && c.status == "True"))
}

#[tokio::test]
async fn a_cluster_gets_its_load_balancer_block_from_the_first_pool_with_room_and_gives_it_back() {
    let s = Scenario::start().await;
    let system = s.cluster.namespace("tc-ipam-system").await;
    let team = s.cluster.namespace("tc-ipam-team").await;
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
    let name = format!("{team}-first-lb");
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
async fn cloud_mode_creates_nothing() {
    let s = Scenario::start().await;
    let system = s.cluster.namespace("tc-cloud-system").await;
    let team = s.cluster.namespace("tc-cloud-team").await;
    config(&s, &system, json!({"mode": "cloud"})).await;
    cluster(&s, &team, "web", &system).await;
    // Long enough for the controllers to have acted, had they anything to do.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let web = clusters.get("web").await.unwrap();
    assert!(web.finalizers().is_empty());
    assert!(web.status.is_none_or(|s| s.conditions.is_empty() && s.lb_allocation_ref.is_none()));
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    assert!(allocations.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn two_hundred_clusters_at_once_share_no_address() {
    let s = Scenario::start().await;
    let system = s.cluster.namespace("tc-many-system").await;
    let team = s.cluster.namespace("tc-many-team").await;
    pool(&s, &system, "lab", "10.50.0.0/20").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 4}}),
    )
    .await;
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
