//! The IPAM controllers on the in-memory API server:
//! - 1,000 IPAllocations in one pool, made before the controllers start or while they run (50
//!   every 100 ms): the time until every one is Allocated and every request the controllers
//!   made, as the API server counts them (the goal: at most 2 writes per allocation, its
//!   finalizer and its status);
//! - elastic IPAM against a tenant cluster (a second in-memory server with a MetalLB stand-in):
//!   the time from a LoadBalancer Service created, with MetalLB out of addresses, to its address
//!   assigned (Butler's Go controller: 37 s; the goal: under 3 s);
//! - `butler-controller` as a process serving allocations that arrive while it runs: its
//!   resident memory at 1,000, 5,000 and 10,000, the time from the last create to all Allocated,
//!   its writes per allocation, and what its caches keep of one allocation (the goals at 10,000:
//!   under 50 MiB, within 5 s, at most 2.1 writes each).

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use butler_apiserver::{MemoryApiServer, ServerOptions};
use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool, TenantCluster};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ListParams, PostParams};
use serde_json::json;
use support::cluster;

mod support;

const AGENT: &str = "butler-controller";
/// The benchmark's own requests.
const BENCH: &str = "bench";
/// The agent of a client that sends no User-Agent (the butler-controller process).
const NO_AGENT: &str = "unknown";

/// A namespace `bench` with pool `lab` (`cidr`) and TenantCluster `t`.
async fn pool(server: &MemoryApiServer, cidr: &str) {
    let client = server.client();
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}),
    )
    .unwrap();
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await.unwrap();
    let pool: NetworkPool = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": "lab", "namespace": "bench", "finalizers": ["butler.butlerlabs.dev/networkpool"]},
        "spec": {"cidr": cidr},
    }))
    .unwrap();
    Api::<NetworkPool>::namespaced(client.clone(), "bench")
        .create(&PostParams::default(), &pool)
        .await
        .unwrap();
    let tenant: TenantCluster = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "t", "namespace": "bench"}, "spec": {},
    }))
    .unwrap();
    Api::<TenantCluster>::namespaced(client.clone(), "bench")
        .create(&PostParams::default(), &tenant)
        .await
        .unwrap();
}

/// IPAllocations `a{from}` to `a{to - 1}` of 1 to 4 addresses in pool `lab`, as users and the
/// TenantCluster controller make them (no finalizer, no status).
async fn allocations(server: &MemoryApiServer, from: usize, to: usize) {
    let api: Api<IPAllocation> = Api::namespaced(server.client_as(BENCH), "bench");
    futures::stream::iter(from..to)
        .map(|i| {
            let api = api.clone();
            async move {
                let a: IPAllocation = serde_json::from_value(json!({
                    "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
                    "metadata": {"name": format!("a{i:05}"), "namespace": "bench"},
                    "spec": {"poolRef": {"name": "lab"}, "tenantClusterRef": {"name": "t", "namespace": "bench"}, "type": "loadbalancer", "count": 1 + i % 4},
                }))
                .unwrap();
                api.create(&PostParams::default(), &a).await.unwrap();
            }
        })
        .buffer_unordered(32)
        .collect::<Vec<()>>()
        .await;
}

/// The pool and `count` IPAllocations, made before the controllers start.
async fn pending(server: &MemoryApiServer, cidr: &str, count: usize) {
    pool(server, cidr).await;
    allocations(server, 0, count).await;
}

/// The controllers in this process, their requests counted under [`AGENT`].
fn controllers_in_process(
    server: &MemoryApiServer,
) -> (tokio::sync::watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (_, stop, running) = support::controllers(server, AGENT);
    (stop, running)
}

/// Waits until all `count` are Allocated, listing every `every`.
async fn wait_all_allocated(server: &MemoryApiServer, count: usize, within: Duration, every: Duration) {
    let api: Api<IPAllocation> = Api::namespaced(server.client(), "bench");
    let deadline = Instant::now() + within;
    loop {
        let list = api.list(&ListParams::default()).await.unwrap();
        let done = list
            .items
            .iter()
            .filter(|a| a.status.as_ref().and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated))
            .count();
        if done == count {
            return;
        }
        assert!(Instant::now() < deadline, "{done} of {count} allocated within {within:?}");
        tokio::time::sleep(every).await;
    }
}

/// How the allocations of [`serving_speed`] come.
#[derive(Clone, Copy, Debug)]
enum Arrival {
    /// All made before the controllers start.
    AtOnce,
    /// Made while they run, 50 every 100 ms.
    OverTime,
}

async fn serving_speed(arrival: Arrival) {
    const COUNT: usize = 1_000;
    let server = cluster().await;
    pool(&server, "10.0.0.0/16").await;
    if let Arrival::AtOnce = arrival {
        allocations(&server, 0, COUNT).await;
    }
    let started = Instant::now();
    let (stop, running) = controllers_in_process(&server);
    if let Arrival::OverTime = arrival {
        for from in (0..COUNT).step_by(50) {
            allocations(&server, from, from + 50).await;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    wait_all_allocated(&server, COUNT, Duration::from_secs(60), Duration::from_millis(20)).await;
    let elapsed = started.elapsed();
    let _ = stop.send(true);
    running.abort();
    // Every request the server answered for the controllers, refused ones too, by path.
    let requests: Vec<(String, String)> = server
        .requests_from(AGENT)
        .into_iter()
        .map(|(m, path)| (m, path.split('?').next().unwrap_or_default().to_string()))
        .collect();
    let count = |method: &str, part: &str| {
        requests.iter().filter(|(m, path)| m == method && path.contains(part)).count()
    };
    let finalizers = requests
        .iter()
        .filter(|(m, path)| m == "PATCH" && path.contains("/ipallocations/") && !path.ends_with("/status"))
        .count();
    let statuses = requests
        .iter()
        .filter(|(m, path)| m == "PATCH" && path.contains("/ipallocations/") && path.ends_with("/status"))
        .count();
    let writes = finalizers + statuses;
    let pool_statuses = count("PATCH", "/networkpools/lab/status");
    let lists = requests.iter().filter(|(m, path)| m == "GET" && path.ends_with("/ipallocations")).count();
    println!(
        "{COUNT} IPAllocations ({arrival:?}) to Allocated: {:.2} s from the controllers' start",
        elapsed.as_secs_f64()
    );
    println!(
        "  requests of the controllers: {} in all ({:.2} per allocation); IPAllocation writes {writes} ({finalizers} finalizer, {statuses} status: {:.2} per allocation; goal: at most 2: {}); NetworkPool status writes {pool_statuses}; lists of IPAllocations {lists}",
        requests.len(),
        requests.len() as f64 / COUNT as f64,
        writes as f64 / COUNT as f64,
        if writes <= 2 * COUNT { "met" } else { "NOT met" }
    );
}

/// VmRSS and VmHWM of a process, in KiB.
fn resident(pid: u32) -> Option<(u64, u64)> {
    Some((status_field(pid, "VmRSS:")?, status_field(pid, "VmHWM:")?))
}

/// One figure of `/proc/{pid}/status`, in KiB.
fn status_field(pid: u32, name: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find(|l| l.starts_with(name))?.split_whitespace().nth(1)?.parse().ok()
}

/// The CPU time a process has used (user and system), in seconds.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command (which may hold spaces), from the third: utime is the 14th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

fn controller_process(server: &MemoryApiServer) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_butler-controller"))
        .args([
            "run",
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--metrics-bind-address",
            "0",
            "--leader-elect=false",
        ])
        .args(["--namespace", "default", "--webhook-port", "0"])
        .env("KUBECONFIG", server.kubeconfig())
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .expect("the butler-controller binary runs")
}

/// The count of Allocated IPAllocations of namespace `bench`, kept from a watch.
fn allocated_count(server: &MemoryApiServer) -> tokio::sync::watch::Receiver<usize> {
    use kube::runtime::{WatchStreamExt, watcher};
    let api: Api<IPAllocation> = Api::namespaced(server.client_as(BENCH), "bench");
    let (tx, rx) = tokio::sync::watch::channel(0);
    tokio::spawn(async move {
        let mut allocated = std::collections::HashSet::new();
        let events = watcher(api, watcher::Config::default()).default_backoff().applied_objects();
        futures::pin_mut!(events);
        while let Some(Ok(a)) = events.next().await {
            if a.status.as_ref().and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated) {
                allocated.insert(a.metadata.name.unwrap_or_default());
                let _ = tx.send(allocated.len());
            }
        }
    });
    rx
}

/// Resident memory and time with allocations arriving while the controller process runs: 250
/// every 50 ms up to 1,000, 5,000 and 10,000, each stage waited on until all are Allocated.
async fn memory() {
    const STAGES: [usize; 3] = [1_000, 5_000, 10_000];
    const BATCH: usize = 250;
    let server = cluster().await;
    pool(&server, "10.0.0.0/14").await;
    let mut counted = allocated_count(&server);
    let before = server.requests_from(NO_AGENT).len();
    let mut serving = controller_process(&server);
    let mib = |kib: u64| kib as f64 / 1024.0;
    let mut made = 0;
    let mut figures = Vec::new();
    for stage in STAGES {
        while made < stage {
            allocations(&server, made, made + BATCH).await;
            made += BATCH;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let last_created = Instant::now();
        let wait = counted.wait_for(|n| *n >= stage);
        tokio::time::timeout(Duration::from_secs(300), wait)
            .await
            .expect("all Allocated within 5 minutes")
            .unwrap();
        let after_last = last_created.elapsed();
        tokio::time::sleep(Duration::from_secs(2)).await;
        let rss = resident(serving.id()).map(|(rss, _)| rss);
        // What the process allocated, apart from its program's pages (shared with every
        // process that maps the binary).
        let anonymous = status_field(serving.id(), "RssAnon:");
        figures.push((stage, after_last, rss, anonymous, cpu_seconds(serving.id())));
    }
    let requests: Vec<(String, String)> = server.requests_from(NO_AGENT).split_off(before);
    let _ = serving.kill();
    let _ = serving.wait();
    let writes = requests
        .iter()
        .filter(|(m, path)| {
            m == "PATCH" && path.split('?').next().unwrap_or_default().contains("/ipallocations/")
        })
        .count();
    // The batches' consistent reads of the pool's allocations (the watch lists all namespaces).
    let lists = requests
        .iter()
        .filter(|(m, path)| {
            m == "GET"
                && path.split('?').next().unwrap_or_default().ends_with("/namespaces/bench/ipallocations")
        })
        .count();
    // A restart: the steady state of a controller that finds them all Allocated.
    let mut restarted = controller_process(&server);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let steady = resident(restarted.id());
    let _ = restarted.kill();
    let _ = restarted.wait();
    // What the caches hold of one allocation, as the API server sends it and as kept.
    let list = Api::<IPAllocation>::namespaced(server.client_as(BENCH), "bench")
        .list(&ListParams::default().limit(100))
        .await
        .unwrap();
    let sent: usize = list.items.iter().map(|a| serde_json::to_vec(a).unwrap().len()).sum();
    let kept: usize = list
        .items
        .into_iter()
        .map(|a| serde_json::to_vec(&butler_controller::caches::kept_allocation(a)).unwrap().len())
        .sum();
    for (stage, after_last, rss, anonymous, cpu) in &figures {
        let memory = match (rss, anonymous) {
            (Some(rss), Some(anonymous)) => {
                format!(
                    "{:.1} MiB ({:.1} MiB of it allocated, the rest the program's pages)",
                    mib(*rss),
                    mib(*anonymous)
                )
            }
            _ => "not measured (no /proc)".to_string(),
        };
        let cpu = cpu.map_or(String::new(), |s| format!(" ({s:.1} s of CPU so far)"));
        println!(
            "{stage} IPAllocations arriving {BATCH} every 50 ms: all Allocated {:.2} s after the last create; butler-controller resident memory {memory}{cpu}",
            after_last.as_secs_f64()
        );
    }
    let (_, last_wait, last_rss, _, _) = figures[figures.len() - 1];
    let count = STAGES[STAGES.len() - 1];
    println!(
        "  goals at {count}: under 50 MiB: {}; all Allocated within 5 s of the last create: {}; IPAllocation writes {writes} ({:.2} per allocation; at most 2.1: {}); requests of the controller in all {} ({lists} consistent lists of the pool's allocations)",
        if last_rss.is_some_and(|kib| kib < 50 * 1024) { "met" } else { "NOT met" },
        if last_wait < Duration::from_secs(5) { "met" } else { "NOT met" },
        writes as f64 / count as f64,
        if writes as f64 <= 2.1 * count as f64 { "met" } else { "NOT met" },
        requests.len()
    );
    println!(
        "  the caches keep {:.0} bytes of an allocation (JSON) of the {:.0} the API server sends",
        kept as f64 / 100.0,
        sent as f64 / 100.0
    );
    if let Some((rss, _)) = steady {
        println!("  restarted with {count} Allocated: {:.1} MiB resident", mib(rss));
    }
}

async fn elastic_latency() {
    use k8s_openapi::api::core::v1::{Secret, Service};
    const SERVICES: usize = 10;
    let server = cluster().await;
    let tenant = MemoryApiServer::start_with(ServerOptions::named("bench-tenant")).await;
    butler_apiserver::stand_ins::metallb::install(&tenant.client()).await.unwrap();
    let metallb = tokio::spawn(butler_apiserver::stand_ins::metallb::run(tenant.client()));
    pending(&server, "10.0.0.0/24", 0).await;
    let client = server.client();
    let config: butler_core::api::ProviderConfig = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "pc", "namespace": "bench"},
        "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"},
            "network": {"mode": "ipam", "poolRefs": [{"name": "lab"}],
                "loadBalancer": {"allocationMode": "elastic", "initialPoolSize": 1, "growthIncrement": 1, "defaultPoolSize": 16}}},
    }))
    .unwrap();
    Api::<butler_core::api::ProviderConfig>::namespaced(client.clone(), "bench")
        .create(&PostParams::default(), &config)
        .await
        .unwrap();
    let secret: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-kubeconfig", "namespace": "bench", "labels": {"cluster.x-k8s.io/cluster-name": "app"}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": std::fs::read_to_string(tenant.kubeconfig()).unwrap()}}))
    .unwrap();
    Api::<Secret>::namespaced(client.clone(), "bench").create(&PostParams::default(), &secret).await.unwrap();
    let app: TenantCluster = serde_json::from_value(
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "app", "namespace": "bench"}, "spec": {"providerConfigRef": {"name": "pc"}}}),
    )
    .unwrap();
    Api::<TenantCluster>::namespaced(client.clone(), "bench")
        .create(&PostParams::default(), &app)
        .await
        .unwrap();
    let (stop, running) = controllers_in_process(&server);
    let services: Api<Service> = Api::namespaced(tenant.client(), "default");
    let served = |name: String| {
        let services = services.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let s = services.get(&name).await.unwrap();
                let ingress =
                    s.status.and_then(|s| s.load_balancer).and_then(|l| l.ingress).unwrap_or_default();
                if !ingress.is_empty() {
                    return;
                }
                assert!(Instant::now() < deadline, "{name} got no address");
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        }
    };
    let service = |name: &str| -> Service {
        serde_json::from_value(
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}),
        )
        .unwrap()
    };
    // The initial address goes to a first Service; each one after needs the pool to grow.
    services.create(&PostParams::default(), &service("first")).await.unwrap();
    served("first".into()).await;
    let mut times = Vec::new();
    for i in 0..SERVICES {
        let name = format!("s{i}");
        let started = Instant::now();
        services.create(&PostParams::default(), &service(&name)).await.unwrap();
        served(name).await;
        times.push(started.elapsed());
    }
    let _ = stop.send(true);
    running.abort();
    metallb.abort();
    times.sort();
    let (median, max) = (times[SERVICES / 2], times[SERVICES - 1]);
    println!(
        "a LoadBalancer Service to its address with MetalLB out of addresses (elastic growth): median {:.0} ms, max {:.0} ms over {SERVICES} (goal: under 3 s: {})",
        median.as_secs_f64() * 1000.0,
        max.as_secs_f64() * 1000.0,
        if max < Duration::from_secs(3) { "met" } else { "NOT met" }
    );
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        if std::env::var("ONLY_MEMORY").is_err() {
            serving_speed(Arrival::AtOnce).await;
            serving_speed(Arrival::OverTime).await;
            if std::env::var("ONLY_SERVING").is_ok() {
                return;
            }
            elastic_latency().await;
        }
        memory().await;
    });
}
