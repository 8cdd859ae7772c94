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

/// A tenant cluster: a second in-memory API server (also when the management cluster is a real
/// one: the controllers run in this process) with MetalLB's IPAddressPool kind and namespace.
async fn tenant_server() -> butler_apiserver::MemoryApiServer {
    let server =
        butler_apiserver::MemoryApiServer::start_with(butler_apiserver::ServerOptions::named("tenant")).await;
    butler_apiserver::stand_ins::metallb::install(&server.client()).await.unwrap();
    server
}

/// The Secret `{cluster}-kubeconfig` that reaches `tenant`.
async fn kubeconfig_secret(
    s: &Scenario,
    team: &str,
    cluster: &str,
    tenant: &butler_apiserver::MemoryApiServer,
) {
    use k8s_openapi::api::core::v1::Secret;
    let text = std::fs::read_to_string(tenant.kubeconfig()).unwrap();
    let secret: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": team}, "stringData": {"value": text}}))
    .unwrap();
    Api::<Secret>::namespaced(s.client.clone(), team).create(&PostParams::default(), &secret).await.unwrap();
}

fn metallb(tenant: &butler_apiserver::MemoryApiServer) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool");
    Api::namespaced_with(
        tenant.client(),
        "metallb-system",
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools"),
    )
}

/// Waits until the tenant's default-pool lists exactly `wanted`.
async fn pool_is(tenant: &butler_apiserver::MemoryApiServer, wanted: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = metallb(tenant).get_opt("default-pool").await.unwrap();
        let addresses: Vec<String> = found
            .as_ref()
            .and_then(|p| p.data["spec"]["addresses"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|a| a.as_str().map(String::from))
            .collect();
        if addresses == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "default-pool is {addresses:?}, not {wanted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_tenants_metallb_pool_follows_the_allocations_and_drift_is_reverted() {
    let s = Scenario::start().await;
    let tenant = tenant_server().await;
    let system = s.cluster.namespace("tc-metallb-system").await;
    let team = s.cluster.namespace("tc-metallb-team").await;
    pool(&s, &system, "lab", "10.60.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 4}}),
    )
    .await;
    kubeconfig_secret(&s, &team, "web", &tenant).await;
    cluster(&s, &team, "web", &system).await;
    pool_is(&tenant, &["10.60.0.0-10.60.0.3"]).await;
    // Someone edits it on the tenant: the next reconcile puts it back.
    let edit = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "spec": {"addresses": ["192.168.0.0/24"]}});
    metallb(&tenant)
        .patch(
            "default-pool",
            &kube::api::PatchParams::apply("someone").force(),
            &kube::api::Patch::Apply(edit),
        )
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(61));
    pool_is(&tenant, &["10.60.0.0-10.60.0.3"]).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let web = wait_for(&clusters, "web", "MetalLBSynced", |c| {
        c.and_then(|c| c.status.as_ref())
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "MetalLBSynced" && c.status == "True"))
    })
    .await
    .unwrap();
    assert!(
        web.status
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.message == "metallb-system/default-pool: 10.60.0.0-10.60.0.3")
    );
}

/// LoadBalancer Services on the tenant, as MetalLB would leave them: `ip` assigned or waiting.
async fn lb_service(tenant: &butler_apiserver::MemoryApiServer, name: &str, ip: Option<&str>) {
    use k8s_openapi::api::core::v1::Service;
    let api: Api<Service> = Api::namespaced(tenant.client(), "default");
    let service: Service = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}))
    .unwrap();
    api.create(&PostParams::default(), &service).await.unwrap();
    if let Some(ip) = ip {
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
        api.patch_status(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(status))
            .await
            .unwrap();
    }
}

fn growth_names(list: &[IPAllocation]) -> Vec<String> {
    let mut names: Vec<String> = list
        .iter()
        .filter(|a| {
            a.labels().get("butler.butlerlabs.dev/allocation-role").map(String::as_str) == Some("growth")
        })
        .filter(|a| a.metadata.deletion_timestamp.is_none())
        .map(|a| a.name_any())
        .collect();
    names.sort();
    names
}

async fn growth_is(api: &Api<IPAllocation>, wanted: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names = growth_names(&api.list(&ListParams::default()).await.unwrap().items);
        if names == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "growth allocations {names:?}, not {wanted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn elastic_ipam_grows_for_waiting_services_minus_supply_and_shrinks_after_ten_idle_minutes() {
    let s = Scenario::start().await;
    let tenant = tenant_server().await;
    let system = s.cluster.namespace("tc-elastic-system").await;
    let team = s.cluster.namespace("tc-elastic-team").await;
    pool(&s, &system, "lab", "10.70.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}],
        "loadBalancer": {"allocationMode": "elastic", "initialPoolSize": 2, "growthIncrement": 1},
        "quotaPerTenant": {"maxLoadBalancerIPs": 8}}),
    )
    .await;
    kubeconfig_secret(&s, &team, "app", &tenant).await;
    cluster(&s, &team, "app", &system).await;
    pool_is(&tenant, &["10.70.0.0-10.70.0.1"]).await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let growth = |n: u32| format!("{team}-app-lb-{n}");
    // Both initial addresses in use, a third Service waits: not before 30 seconds.
    lb_service(&tenant, "ingress", Some("10.70.0.0")).await;
    lb_service(&tenant, "web", Some("10.70.0.1")).await;
    lb_service(&tenant, "api", None).await;
    s.clock.advance(Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(300)).await;
    growth_is(&api, &[]).await;
    s.clock.advance(Duration::from_secs(30));
    growth_is(&api, &[growth(1)]).await;
    pool_is(&tenant, &["10.70.0.0-10.70.0.1", "10.70.0.2-10.70.0.2"]).await;
    // Two more wait while the first growth block is still unused (MetalLB has not assigned it):
    // three waiting, one address on its way, two more blocks, in one batch.
    lb_service(&tenant, "b", None).await;
    lb_service(&tenant, "c", None).await;
    s.clock.advance(Duration::from_secs(31));
    growth_is(&api, &[growth(1), growth(2), growth(3)]).await;
    // The Services go; the growth blocks are idle: kept for 10 minutes, then released.
    use k8s_openapi::api::core::v1::Service;
    let services: Api<Service> = Api::namespaced(tenant.client(), "default");
    for name in ["api", "b", "c"] {
        services.delete(name, &DeleteParams::default()).await.unwrap();
    }
    s.clock.advance(Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(30);
    while api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|a| a.annotations().contains_key("butler.butlerlabs.dev/idle-since"))
        .count()
        < 3
    {
        assert!(Instant::now() < deadline, "the idle blocks were not marked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.clock.advance(Duration::from_secs(540));
    tokio::time::sleep(Duration::from_millis(500)).await;
    growth_is(&api, &[growth(1), growth(2), growth(3)]).await;
    s.clock.advance(Duration::from_secs(61));
    growth_is(&api, &[]).await;
    pool_is(&tenant, &["10.70.0.0-10.70.0.1"]).await;
}

#[tokio::test]
async fn a_service_that_metallb_cannot_serve_gets_its_address_without_waiting_out_thirty_seconds() {
    let s = Scenario::start().await;
    let tenant = tenant_server().await;
    let metallb = tokio::spawn(butler_apiserver::stand_ins::metallb::run(tenant.client()));
    let system = s.cluster.namespace("tc-fast-system").await;
    let team = s.cluster.namespace("tc-fast-team").await;
    pool(&s, &system, "lab", "10.80.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}],
        "loadBalancer": {"allocationMode": "elastic", "initialPoolSize": 2, "growthIncrement": 1}}),
    )
    .await;
    kubeconfig_secret(&s, &team, "app", &tenant).await;
    cluster(&s, &team, "app", &system).await;
    pool_is(&tenant, &["10.80.0.0-10.80.0.1"]).await;
    for name in ["ingress", "web", "api"] {
        lb_service(&tenant, name, None).await;
    }
    // MetalLB serves two and reports its pool empty; the third is served once the pool grows,
    // with the clock standing still (no 30 seconds pass).
    use k8s_openapi::api::core::v1::Service;
    let services: Api<Service> = Api::namespaced(tenant.client(), "default");
    let served = wait_for(&services, "api", "an address", |svc| {
        svc.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref())
            .is_some_and(|i| !i.is_empty())
    })
    .await
    .unwrap();
    let ip = served.status.clone().unwrap().load_balancer.unwrap().ingress.unwrap()[0].ip.clone().unwrap();
    assert_eq!(ip, "10.80.0.2");
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    growth_is(&api, &[format!("{team}-app-lb-1")]).await;
    // Grown on MetalLB's word, not after the 30 seconds a waiting Service otherwise needs.
    let grown = api.get(&format!("{team}-app-lb-1")).await.unwrap();
    let waited = grown
        .metadata
        .creation_timestamp
        .unwrap()
        .0
        .duration_since(served.metadata.creation_timestamp.unwrap().0);
    assert!(waited.as_secs() < 20, "grown {waited:?} after the Service was created");
    metallb.abort();
}

#[tokio::test]
async fn a_cluster_that_asks_for_node_addresses_gets_them_within_the_quota() {
    let s = Scenario::start().await;
    let system = s.cluster.namespace("tc-nodes-system").await;
    let team = s.cluster.namespace("tc-nodes-team").await;
    pool(&s, &system, "lab", "10.90.0.0/24").await;
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
        (format!("{team}-db-nodes").as_str(), system.as_str())
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
async fn an_unreachable_tenant_is_skipped_with_a_condition_and_its_cluster_keeps_its_block() {
    let s = Scenario::start().await;
    let system = s.cluster.namespace("tc-down-system").await;
    let team = s.cluster.namespace("tc-down-team").await;
    pool(&s, &system, "lab", "10.95.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"allocationMode": "elastic"}}),
    )
    .await;
    // A tenant that has gone away: its kubeconfig names a port nothing listens on.
    let tenant = tenant_server().await;
    kubeconfig_secret(&s, &team, "gone", &tenant).await;
    drop(tenant);
    cluster(&s, &team, "gone", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let gone = wait_for(&clusters, "gone", "TenantUnreachable", |c| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|s| {
            s.conditions.iter().any(|c| c.type_ == "MetalLBSynced" && c.reason == "TenantUnreachable")
        })
    })
    .await
    .unwrap();
    let status = gone.status.unwrap();
    let message = &status.conditions.iter().find(|c| c.type_ == "MetalLBSynced").unwrap().message;
    assert!(
        message.contains(&format!("through {team}/gone-kubeconfig) does not answer"))
            && message.contains("next in"),
        "{message}"
    );
    assert!(
        status.conditions.iter().any(|c| c.type_ == "IPAMReady" && c.status == "True"),
        "its block stands"
    );
}
