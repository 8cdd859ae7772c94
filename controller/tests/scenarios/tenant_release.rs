//! A deleted cluster's load-balancer addresses go back to the pool only once its tenant's
//! MetalLB no longer lists them: dropped from the tenant's pool first, and held while the
//! tenant refuses (with a condition that says so), so that no other cluster is handed an
//! address this one still announces. The same holds for an idle growth block of elastic IPAM.

use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, TenantCluster};
use k8s_openapi::api::core::v1::Service;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams};
use serde_json::json;

use crate::support::{Scenario, wait_for};
use crate::tenants::{
    allow_pools, cluster, cluster_says, config, growth_is, guarded_tenant, ipam_ready, kubeconfig_secret,
    lb_service, metallb, pool_is, small_ipam, tenant_server, with_pool,
};

/// A system namespace with [`small_ipam`], and a team namespace.
async fn platform(s: &Scenario, base: &str, cidr: &str) -> (String, String) {
    let system = s.namespace(&format!("{base}-system")).await;
    let team = s.namespace(&format!("{base}-team")).await;
    small_ipam(s, &system, cidr).await;
    (system, team)
}

#[tokio::test]
async fn a_deleted_clusters_addresses_leave_the_tenant_before_they_go_back() {
    let s = Scenario::start().await;
    let (system, team) = platform(&s, "tc-release", "10.71.0.0/24").await;
    let tenant = tenant_server().await;
    kubeconfig_secret(&s, &team, "web", &tenant).await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "web", "IPAMReady", ipam_ready).await;
    pool_is(&tenant, &["10.71.0.0-10.71.0.3"]).await;

    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    wait_for(&allocations, &format!("{team}.web-lb"), "released", |a| a.is_none()).await;
    assert!(
        metallb(&tenant).get_opt("default-pool").await.unwrap().is_none(),
        "the tenant's pool, which held the cluster's addresses alone, went before them"
    );
    wait_for(&clusters, "web", "gone", |c| c.is_none()).await;
}

#[tokio::test]
async fn a_tenant_that_refuses_holds_the_addresses_until_it_gives_way() {
    let s = Scenario::start().await;
    let (system, team) = platform(&s, "tc-refuse", "10.72.0.0/24").await;
    // The tenant lets Butler's account read and write its pool, but not delete it.
    let tenant = guarded_tenant(&s, &team, "web", &["get", "list", "watch", "create", "patch"]).await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "web", "IPAMReady", ipam_ready).await;
    pool_is(&tenant, &["10.72.0.0-10.72.0.3"]).await;

    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    let held = cluster_says(&clusters, "web", "MetalLBSynced", "TenantRefusedRelease").await;
    let status = held.status.unwrap();
    let message = &status.conditions.iter().find(|c| c.type_ == "MetalLBSynced").unwrap().message;
    assert!(
        message.starts_with("the tenant refused to drop 10.72.0.0-10.72.0.3 from its MetalLB pool"),
        "{message}"
    );
    assert!(status.lb_allocation_ref.is_some(), "the rest of the status stays");
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let block = format!("{team}.web-lb");
    assert!(allocations.get_opt(&block).await.unwrap().is_some(), "the block stays the cluster's");
    pool_is(&tenant, &["10.72.0.0-10.72.0.3"]).await;

    // The tenant gives way: the addresses leave it, then go back to the pool.
    allow_pools(&tenant, &["*"]).await;
    wait_for(&allocations, &block, "released", |a| a.is_none()).await;
    assert!(metallb(&tenant).get_opt("default-pool").await.unwrap().is_none());
    wait_for(&clusters, "web", "gone", |c| c.is_none()).await;
}

#[tokio::test]
async fn an_idle_growth_block_stays_while_the_tenant_refuses_to_drop_it() {
    let s = Scenario::start().await;
    let (system, team) = with_pool(&s, "tc-shrink", "10.73.0.0/24").await;
    let network = json!({"mode": "ipam", "poolRefs": [{"name": "lab"}],
        "loadBalancer": {"allocationMode": "elastic", "defaultPoolSize": 4, "initialPoolSize": 1, "growthIncrement": 1}});
    config(&s, &system, network).await;
    let tenant = guarded_tenant(&s, &team, "app", &["*"]).await;
    cluster(&s, &team, "app", &system).await;
    pool_is(&tenant, &["10.73.0.0-10.73.0.0"]).await;
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let growth = format!("{team}.app-lb-1");
    lb_service(&tenant, "web", Some("10.73.0.0")).await;
    lb_service(&tenant, "api", None).await;
    s.clock.advance(Duration::from_secs(31));
    growth_is(&allocations, std::slice::from_ref(&growth)).await;
    pool_is(&tenant, &["10.73.0.0-10.73.0.0", "10.73.0.1-10.73.0.1"]).await;

    // The tenant stops letting Butler change its pool; the waiting Service goes and the growth
    // block idles past its 10 minutes.
    allow_pools(&tenant, &["get", "list", "watch"]).await;
    Api::<Service>::namespaced(tenant.client(), "default")
        .delete("api", &DeleteParams::default())
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !allocations
        .get(&growth)
        .await
        .unwrap()
        .annotations()
        .contains_key("butler.butlerlabs.dev/idle-since")
    {
        assert!(Instant::now() < deadline, "the idle block was not marked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.clock.advance(Duration::from_secs(601));
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let refused = cluster_says(&clusters, "app", "MetalLBSynced", "TenantRefused").await;
    let status = refused.status.unwrap();
    let message = &status.conditions.iter().find(|c| c.type_ == "MetalLBSynced").unwrap().message;
    assert!(message.starts_with("the tenant refused to write metallb-system/default-pool"), "{message}");
    assert!(message.contains(&format!("IPAllocation {system}/{growth} stays this cluster's")), "{message}");
    growth_is(&allocations, std::slice::from_ref(&growth)).await;
    pool_is(&tenant, &["10.73.0.0-10.73.0.0", "10.73.0.1-10.73.0.1"]).await;

    // The tenant gives way: the block leaves its pool, then goes back to the NetworkPool.
    allow_pools(&tenant, &["*"]).await;
    s.clock.advance(Duration::from_secs(61));
    growth_is(&allocations, &[]).await;
    pool_is(&tenant, &["10.73.0.0-10.73.0.0"]).await;
}

/// A team admin's kubeconfig Secret is the team's word, not its tenant's: deleted, or pointed
/// at a server that holds no pool, before the cluster is deleted, it gives nothing back early.
#[tokio::test]
async fn a_kubeconfig_secret_deleted_or_repointed_by_the_team_gives_nothing_back_early() {
    use k8s_openapi::api::core::v1::Secret;
    let s = Scenario::start().await;
    let system = s.namespace("tc-word-system").await;
    small_ipam(&s, &system, "10.81.0.0/24").await;
    let admin = "word-admin@example.com";
    let team = format!("team-{}", crate::support::team_with_admin(&s, "tc-word", admin, "").await);
    let alice = s.cluster.client_as_user(admin, &[]);
    let secrets: Api<Secret> = Api::namespaced(alice.clone(), &team);
    let kubeconfig = |name: &str, tenant: &butler_apiserver::MemoryApiServer| -> Secret {
        serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("{name}-kubeconfig"), "namespace": team, "labels": {"cluster.x-k8s.io/cluster-name": name}},
            "type": "cluster.x-k8s.io/secret",
            "stringData": {"value": std::fs::read_to_string(tenant.kubeconfig()).unwrap()}}))
        .unwrap()
    };
    let clusters: Api<TenantCluster> = Api::namespaced(alice.clone(), &team);
    let (gone, moved, liar) = (tenant_server().await, tenant_server().await, tenant_server().await);
    for (name, tenant) in [("gone", &gone), ("moved", &moved)] {
        secrets.create(&Default::default(), &kubeconfig(name, tenant)).await.unwrap();
        let cluster: TenantCluster =
            serde_json::from_value(json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1",
            "kind": "TenantCluster", "metadata": {"name": name, "namespace": team},
            "spec": {"providerConfigRef": {"name": "pc", "namespace": system}}}))
            .unwrap();
        clusters.create(&Default::default(), &cluster).await.unwrap();
        let synced = cluster_says(&clusters, name, "MetalLBSynced", "Synced").await;
        assert_eq!(
            synced.status.unwrap().tenant_servers.len(),
            1,
            "the server given the addresses is recorded"
        );
    }
    let listed = |tenant: &butler_apiserver::MemoryApiServer| {
        let pools = metallb(tenant);
        async move {
            let pool = pools.get_opt("default-pool").await.unwrap();
            pool.and_then(|p| p.data["spec"]["addresses"].as_array().cloned()).unwrap_or_default()
        }
    };
    let (gone_range, moved_range) = (listed(&gone).await, listed(&moved).await);
    assert_eq!((gone_range.len(), moved_range.len()), (1, 1));

    // Alice deletes one Secret and points the other at a server of her own that holds no pool
    // (it would answer "nothing to drop"), then deletes both clusters.
    secrets.delete("gone-kubeconfig", &DeleteParams::default()).await.unwrap();
    let mut repointed = kubeconfig("moved", &liar);
    repointed.metadata.resource_version =
        secrets.get("moved-kubeconfig").await.unwrap().metadata.resource_version;
    secrets.replace("moved-kubeconfig", &Default::default(), &repointed).await.unwrap();
    for name in ["gone", "moved"] {
        clusters.delete(name, &DeleteParams::default()).await.unwrap();
    }
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    for (name, words) in [("gone", "is gone"), ("moved", "names another API server")] {
        let held = cluster_says(&clusters, name, "MetalLBSynced", "WaitingForTenant").await;
        let status = held.status.unwrap();
        let message = &status.conditions.iter().find(|c| c.type_ == "MetalLBSynced").unwrap().message;
        assert!(message.contains(words) && message.contains("after 10 minutes"), "{message}");
        let block = format!("{team}.{name}-lb");
        assert!(allocations.get_opt(&block).await.unwrap().is_some(), "{block} stays the cluster's");
    }
    assert_eq!(listed(&moved).await, moved_range, "the tenant that was given them was never asked");

    // Ten minutes into the deletions, the machines are gone with the clusters: given back.
    s.clock.advance(Duration::from_secs(601));
    for name in ["gone", "moved"] {
        wait_for(&allocations, &format!("{team}.{name}-lb"), "released", |a| a.is_none()).await;
        wait_for(&clusters, name, "gone", |c| c.is_none()).await;
    }
}

#[tokio::test]
async fn a_cluster_re_pointed_at_a_cloud_config_gives_its_block_back_only_once_the_tenant_drops_it() {
    let s = Scenario::start().await;
    let (system, team) = platform(&s, "tc-repoint", "10.83.0.0/24").await;
    // The tenant lets Butler's account read and write its pool, but not delete it.
    let tenant = guarded_tenant(&s, &team, "web", &["get", "list", "watch", "create", "patch"]).await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "web", "IPAMReady", ipam_ready).await;
    pool_is(&tenant, &["10.83.0.0-10.83.0.3"]).await;

    // The team points the cluster at a cloud-mode ProviderConfig: it no longer takes pool
    // addresses, but its block is announced by the tenant until the tenant drops it.
    crate::tenants::make::<butler_core::api::ProviderConfig>(&s, &system, json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "cloud", "namespace": system},
        "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"},
            "network": {"mode": "cloud"}}}))
    .await;
    let patch = json!({"spec": {"providerConfigRef": {"name": "cloud", "namespace": system}}});
    clusters.patch("web", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch)).await.unwrap();
    let held = cluster_says(&clusters, "web", "FormerAddressesReleased", "TenantRefusedRelease").await;
    let message = held
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "FormerAddressesReleased"))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("count against the Team's maxIPAddresses until then"), "{message}");
    assert!(message.contains("the tenant refused to drop 10.83.0.0-10.83.0.3"), "{message}");
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let block = format!("{team}.web-lb");
    assert!(allocations.get_opt(&block).await.unwrap().is_some(), "the block stays the cluster's");

    // The tenant gives way: the addresses leave it, then go back to the pool.
    allow_pools(&tenant, &["*"]).await;
    wait_for(&allocations, &block, "released", |a| a.is_none()).await;
    assert!(metallb(&tenant).get_opt("default-pool").await.unwrap().is_none());
    cluster_says(&clusters, "web", "FormerAddressesReleased", "Released").await;
    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for(&clusters, "web", "gone", |c| c.is_none()).await;
}
