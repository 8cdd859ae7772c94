//! 1,000 TenantClusters in IPAM mode across 20 teams, the controllers in this process on the
//! in-memory API server: 500 there when they start, then 500 more arriving over time (25 every
//! 100 ms). Prints the time until every one is IPAMReady, the requests the controllers made
//! (their watches of TenantClusters among them), and how long their reconciles took in all,
//! by kind, from the controllers' own metrics: what the caches' indexes and the single watch
//! of TenantClusters are measured by (issue 27.20).

use std::time::{Duration, Instant};

use butler_apiserver::MemoryApiServer;
use butler_core::api::{NetworkPool, ProviderConfig, Team, TenantCluster};
use butler_runtime::metrics::Metrics;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};
use support::{cluster, controllers};

mod support;

const AGENT: &str = "butler-controller";
const TEAMS: usize = 20;
const CLUSTERS: usize = 1_000;

fn object<K: serde::de::DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).unwrap()
}

fn team_namespace(i: usize) -> String {
    format!("team-t{:02}", i % TEAMS)
}

/// The teams (made by a first run of the controllers, uncounted), the platform's pool and
/// IPAM ProviderConfig.
async fn platform(server: &MemoryApiServer) {
    let client = server.client();
    let (_, stop, running) = controllers(server, "bench-setup");
    for t in 0..TEAMS {
        let team: Team = object(json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "Team",
            "metadata": {"name": format!("t{t:02}")}, "spec": {"access": {}}}));
        Api::<Team>::all(client.clone()).create(&PostParams::default(), &team).await.unwrap();
    }
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let deadline = Instant::now() + Duration::from_secs(60);
    for t in 0..TEAMS {
        while namespaces.get_opt(&team_namespace(t)).await.unwrap().is_none() {
            assert!(Instant::now() < deadline, "the team namespaces were not made");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let _ = stop.send(true);
    running.abort();
    let ns: Namespace =
        object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench-system"}}));
    namespaces.create(&PostParams::default(), &ns).await.unwrap();
    let pool: NetworkPool =
        object(json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": "lab", "namespace": "bench-system"}, "spec": {"cidr": "10.0.0.0/16"}}));
    Api::<NetworkPool>::namespaced(client.clone(), "bench-system")
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
    let config: ProviderConfig = object(
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "pc", "namespace": "bench-system"},
        "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"},
            "network": {"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 2}}}}),
    );
    Api::<ProviderConfig>::namespaced(client, "bench-system")
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
}

async fn make_clusters(server: &MemoryApiServer, range: std::ops::Range<usize>) {
    let client = server.client();
    futures::stream::iter(range)
        .map(|i| {
            let client = client.clone();
            async move {
                let ns = team_namespace(i);
                let cluster: TenantCluster =
                    object(json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
                    "metadata": {"name": format!("c{i:04}"), "namespace": ns},
                    "spec": {"providerConfigRef": {"name": "pc", "namespace": "bench-system"}}}));
                Api::<TenantCluster>::namespaced(client, &ns)
                    .create(&PostParams::default(), &cluster)
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

/// The clusters not IPAMReady, with their conditions.
async fn not_ready(server: &MemoryApiServer) -> Vec<(String, String)> {
    let list = Api::<TenantCluster>::all(server.client()).list(&ListParams::default()).await.unwrap();
    list.items
        .iter()
        .filter(|c| {
            !c.status
                .as_ref()
                .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "IPAMReady" && c.status == "True"))
        })
        .map(|c| {
            let conditions = c.status.iter().flat_map(|s| &s.conditions);
            let said: Vec<String> =
                conditions.map(|c| format!("{}={} {}: {}", c.type_, c.status, c.reason, c.message)).collect();
            (format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()), said.join("; "))
        })
        .collect()
}

/// The sum and count of a kind's reconcile durations, from the metrics' text.
fn reconcile_time(metrics: &Metrics, kind: &str) -> (f64, u64) {
    let text = metrics.encode();
    let value = |name: &str| -> f64 {
        let prefix = format!("butler_controller_reconcile_duration_seconds_{name}{{kind=\"{kind}\"}} ");
        text.lines().find_map(|l| l.strip_prefix(&prefix)).and_then(|v| v.trim().parse().ok()).unwrap_or(0.0)
    };
    (value("sum"), value("count") as u64)
}

async fn clusters_at_scale() {
    let server = cluster().await;
    platform(&server).await;
    make_clusters(&server, 0..CLUSTERS / 2).await;
    let started = Instant::now();
    let (metrics, stop, running) = controllers(&server, AGENT);
    // The other half arrives while the controllers run.
    for batch in (CLUSTERS / 2..CLUSTERS).step_by(25) {
        make_clusters(&server, batch..batch + 25).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    let late = loop {
        let late = not_ready(&server).await;
        if late.is_empty() || Instant::now() > deadline {
            break late;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let elapsed = started.elapsed();
    for (name, conditions) in &late {
        println!("NOT IPAMReady after {:.0} s: {name}: {conditions}", elapsed.as_secs_f64());
    }
    // A moment for the reconciles the last changes wake, then the bill.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _ = stop.send(true);
    running.abort();
    let requests = server.requests_from(AGENT);
    let watches = |plural: &str| {
        requests
            .iter()
            .filter(|(m, p)| m == "GET" && p.contains(&format!("/{plural}?")) && p.contains("watch=true"))
            .count()
    };
    println!(
        "{} of {CLUSTERS} TenantClusters in {TEAMS} teams ({} there at the start, {} arriving over 2 s) IPAMReady {:.2} s after the controllers' start",
        CLUSTERS - late.len(),
        CLUSTERS / 2,
        CLUSTERS / 2,
        elapsed.as_secs_f64()
    );
    println!(
        "requests of the controllers: {} in all; watches of TenantClusters: {}, of IPAllocations: {}",
        requests.len(),
        watches("tenantclusters"),
        watches("ipallocations")
    );
    for kind in ["TenantCluster", "Team", "ProviderConfig", "IPAllocation", "NetworkPool"] {
        let (sum, count) = reconcile_time(&metrics, kind);
        println!(
            "{kind} reconciles: {count}, {:.2} s in all, {:.2} ms each on average",
            sum,
            if count == 0 { 0.0 } else { sum * 1000.0 / count as f64 }
        );
    }
}

/// What one reconcile reads, with 1,000 TenantClusters and 2,000 IPAllocations cached: a
/// cluster's allocations and a namespace's clusters, by a scan of the cache (as before the
/// indexes) and through the indexes.
fn reads_per_reconcile() {
    use butler_controller::clusters::ClusterIndex;
    use butler_controller::ipam::index::AllocationIndex;
    use butler_core::api::IPAllocation;
    use kube::runtime::watcher::Event;
    let (cluster_store, mut cluster_writer) = kube::runtime::reflector::store::<TenantCluster>();
    let clusters = ClusterIndex::new(cluster_store.clone());
    let (allocation_store, mut allocation_writer) = kube::runtime::reflector::store::<IPAllocation>();
    let allocations = AllocationIndex::new(allocation_store.clone());
    let mut feed_cluster = |event: Event<TenantCluster>| {
        cluster_writer.apply_watcher_event(&event);
        clusters.apply(&event);
    };
    let mut feed_allocation = |event: Event<IPAllocation>| {
        allocation_writer.apply_watcher_event(&event);
        allocations.apply(&event);
    };
    feed_cluster(Event::Init);
    feed_allocation(Event::Init);
    for i in 0..CLUSTERS {
        let ns = team_namespace(i);
        let name = format!("c{i:04}");
        feed_cluster(Event::InitApply(object(
            json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": name, "namespace": ns}, "spec": {"providerConfigRef": {"name": "pc", "namespace": "bench-system"}}}),
        )));
        for role in ["lb", "nodes"] {
            feed_allocation(Event::InitApply(object(
                json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
                "metadata": {"name": format!("{ns}.{name}-{role}"), "namespace": "bench-system"},
                "spec": {"poolRef": {"name": "lab"}, "tenantClusterRef": {"name": name, "namespace": ns}, "type": "loadbalancer", "count": 2}}),
            )));
        }
    }
    feed_cluster(Event::InitDone);
    feed_allocation(Event::InitDone);
    let time = |what: &str, read: &dyn Fn(usize) -> usize| {
        let started = Instant::now();
        let mut found = 0;
        for i in 0..CLUSTERS {
            found += read(i);
        }
        let each = started.elapsed().as_secs_f64() * 1e6 / CLUSTERS as f64;
        println!("{what}: {each:.1} µs per reconcile ({found} found over {CLUSTERS})");
    };
    time("a cluster's allocations, scanning 2,000", &|i| {
        let (ns, name) = (team_namespace(i), format!("c{i:04}"));
        let all = allocation_store.state();
        all.iter()
            .filter(|a| a.spec.tenant_cluster_ref.namespace == ns && a.spec.tenant_cluster_ref.name == name)
            .count()
    });
    time("a cluster's allocations, through the index", &|i| {
        allocations.of_cluster(&team_namespace(i), &format!("c{i:04}")).len()
    });
    time("a namespace's clusters (Team usage), scanning 1,000", &|i| {
        let ns = team_namespace(i);
        cluster_store.state().iter().filter(|c| c.namespace().as_deref() == Some(ns.as_str())).count()
    });
    time("a namespace's clusters, through the index", &|i| clusters.in_namespace(&team_namespace(i)).len());
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reads_per_reconcile();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(clusters_at_scale());
}
