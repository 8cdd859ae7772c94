//! The controllers' caches: one watch of each kind they read, and what they keep of an object
//! (the statuses they wrote, probes, failures, tenant clients and watches) goes with it, so a
//! management cluster whose teams and clusters come and go does not grow their memory for ever.

use std::time::{Duration, Instant};

use butler_controller::keys::Gone;
use butler_core::api::{ProviderConfig, Team, TenantCluster};
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::support::{Scenario, wait_for};
use crate::team::ready_team;
use crate::tenants::{
    cluster, cluster_says, config, ipam_ready, kubeconfig_secret, tenant_server, with_pool,
};

/// Waits until the controllers keep of `object` exactly what `wanted` names.
async fn keeps(s: &Scenario, object: &Gone, wanted: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let kept = s.context.as_ref().expect("the controllers run").keeps(object);
        if kept == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "{object:?}: the controllers keep {kept:?}, not {wanted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_controllers_watch_each_kind_once() {
    let s = Scenario::start().await;
    let Some(server) = s.cluster.server() else {
        println!("skipped on a real cluster: its requests are not counted here");
        return;
    };
    // Synced: every watch is open.
    let team = s.namespace("watches").await;
    cluster(&s, &team, "app", "nowhere").await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "app", "seen", |c| c.and_then(|c| c.status.as_ref()).is_some()).await;
    let requests = server.requests_from(crate::support::AGENT);
    for plural in
        ["tenantclusters", "networkpools", "ipallocations", "providerconfigs", "teams", "namespaces"]
    {
        let watches = requests
            .iter()
            .filter(|(m, p)| m == "GET" && p.contains(&format!("/{plural}?")) && p.contains("watch=true"))
            .count();
        assert_eq!(watches, 1, "{plural}: {watches} watches");
    }
}

#[tokio::test]
async fn a_deleted_team_leaves_nothing_behind_in_the_controller() {
    let s = Scenario::start().await;
    let name = s.cluster.unique("forgotten");
    let teams: Api<Team> = Api::all(s.client.clone());
    let team = ready_team(&teams, &name, "[{name: alice@example.com, role: admin}]").await;
    let gone = Gone::of(&team);
    keeps(&s, &gone, &["team statuses"]).await;
    teams.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&teams, &name, "gone", |t| t.is_none()).await;
    keeps(&s, &gone, &[]).await;
}

#[tokio::test]
async fn a_cluster_leaves_its_tenant_when_it_stops_being_elastic_and_nothing_once_deleted() {
    let s = Scenario::start().await;
    let (system, team) = with_pool(&s, "forget", "10.74.0.0/24").await;
    let elastic = |mode: &str| {
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}],
            "loadBalancer": {"allocationMode": mode, "defaultPoolSize": 4, "initialPoolSize": 1}})
    };
    config(&s, &system, elastic("elastic")).await;
    let tenant = tenant_server().await;
    kubeconfig_secret(&s, &team, "app", &tenant).await;
    cluster(&s, &team, "app", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let synced = cluster_says(&clusters, "app", "MetalLBSynced", "True").await;
    let gone = Gone::of(&synced);
    keeps(&s, &gone, &["tenant clients", "tenant watches"]).await;

    // Static now: the tenant is no longer watched (its pool is still written).
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &system);
    let patch = json!({"spec": {"network": elastic("static")}});
    configs.patch("pc", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    s.clock.advance(Duration::from_secs(1));
    keeps(&s, &gone, &["tenant clients"]).await;

    clusters.delete("app", &DeleteParams::default()).await.unwrap();
    wait_for(&clusters, "app", "gone", |c| c.is_none()).await;
    keeps(&s, &gone, &[]).await;
    let config = configs.get("pc").await.unwrap();
    configs.delete("pc", &DeleteParams::default()).await.unwrap();
    wait_for(&configs, "pc", "gone", |c| c.is_none()).await;
    keeps(&s, &Gone::of(&config), &[]).await;
}

/// A cluster made before its ProviderConfig waits on the cache, not on the API server (no read
/// of the missing config at each of its events), and is served as soon as the config comes.
#[tokio::test]
async fn a_cluster_made_before_its_provider_config_is_served_when_it_comes() {
    let s = Scenario::start().await;
    let (system, team) = with_pool(&s, "early", "10.75.0.0/24").await;
    cluster(&s, &team, "app", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    cluster_says(&clusters, "app", "IPAMReady", "ProviderConfigNotFound").await;
    // Read once before the cluster said it was missing, never at its events after.
    let reads = || {
        s.cluster.server().map(|server| {
            server
                .requests_from(crate::support::AGENT)
                .into_iter()
                .filter(|(m, p)| m == "GET" && p.contains("/providerconfigs/pc"))
                .count()
        })
    };
    let before = reads();
    for i in 0..5 {
        let label = json!({"metadata": {"labels": {"touched": i.to_string()}}});
        clusters.patch("app", &PatchParams::default(), &Patch::Merge(label)).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(reads(), before, "the missing ProviderConfig was read at the cluster's events");
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 4}}),
    )
    .await;
    // Well within the 30 s after which a cluster whose config is missing looks again.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ipam_ready(clusters.get_opt("app").await.unwrap().as_ref()) {
        assert!(Instant::now() < deadline, "the cluster was not served when its ProviderConfig came");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
