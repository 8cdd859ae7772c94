//! Installing Butler's seven providers (the core provider and the six infrastructure
//! providers, from the embedded repository) on the in-memory API server.
//!
//! Measured: the time from creating the seven provider objects to all of them reporting
//! `ProviderInstalled` (goal: under 2 s), the operator's API requests per applied object
//! (goal: at most 2), and the resident memory of the `butler-operator` process with the seven
//! installed (goal: under 50 MiB). Summary lines print each figure beside its goal.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use butler_apiserver::MemoryApiServer;
use butler_operator::api::{CoreProvider, InfrastructureProvider, KindNames};
use butler_operator::controller::install::inventory::LABEL_INVENTORY;
use butler_operator::controller::{self, Options, ProviderObject};
use butler_operator::metrics::Metrics;
use butler_repository::butler_infrastructure;
use criterion::Criterion;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

const NAMESPACE: &str = "butler-system";
const AGENT: &str = "butler-operator";

/// A server with the provider CRDs, the stand-in cert-manager CRDs and the namespace.
async fn cluster() -> MemoryApiServer {
    let server = MemoryApiServer::start().await;
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut all = butler_operator::crds::operator();
    all.extend(butler_apiserver::stand_ins::cert_manager_crds());
    for crd in all {
        let name = crd.metadata.name.clone().unwrap();
        crds.patch(&name, &PatchParams::apply("bench").force(), &Patch::Apply(&crd)).await.unwrap();
        await_condition(crds.clone(), &name, conditions::is_crd_established()).await.unwrap();
    }
    let namespace = Namespace {
        metadata: kube::api::ObjectMeta { name: Some(NAMESPACE.into()), ..Default::default() },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-variables", "namespace": NAMESPACE}, "stringData": {"AWS_REGION": "eu-west-1"}});
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client, NAMESPACE)
        .patch("aws-variables", &PatchParams::apply("bench"), &Patch::Apply(secret))
        .await
        .unwrap();
    server
}

async fn create<K: ProviderObject>(client: &kube::Client, name: &str, spec: serde_json::Value) {
    let object: K = serde_json::from_value(json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": K::KIND.kind(),
        "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec,
    }))
    .unwrap();
    Api::<K>::namespaced(client.clone(), NAMESPACE).create(&PostParams::default(), &object).await.unwrap();
}

async fn create_all(client: &kube::Client) {
    create::<CoreProvider>(client, "butler", json!({})).await;
    for name in butler_infrastructure() {
        let spec = if name == "aws" { json!({"configSecret": {"name": "aws-variables"}}) } else { json!({}) };
        create::<InfrastructureProvider>(client, name, spec).await;
    }
}

fn installed<K: ProviderObject>(object: &K) -> bool {
    object
        .provider_status()
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "ProviderInstalled" && c.status == "True"))
}

/// Waits (polling every 2 ms) until the seven providers report ProviderInstalled.
async fn all_installed(client: &kube::Client) {
    let core: Api<CoreProvider> = Api::namespaced(client.clone(), NAMESPACE);
    let infra: Api<InfrastructureProvider> = Api::namespaced(client.clone(), NAMESPACE);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cores = core.list(&ListParams::default()).await.unwrap().items;
        let infras = infra.list(&ListParams::default()).await.unwrap().items;
        if cores.iter().all(installed) && infras.len() == 6 && infras.iter().all(installed) {
            return;
        }
        assert!(Instant::now() < deadline, "the providers did not install within 60 s");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// What one install measured.
struct Install {
    elapsed: Duration,
    /// Requests of the operator before any provider existed: its watches.
    startup: usize,
    /// Requests of the operator from creating the providers to all installed.
    install: usize,
    /// Objects applied (the inventories' objects).
    objects: usize,
}

/// One install: the time from creating the providers to all installed, and the operator's
/// requests and applied objects.
async fn install_once() -> Install {
    let server = cluster().await;
    let client = server.client();
    let (stop, shutdown) = controller::shutdown_switch();
    let options = Options::in_process("bench");
    let operator = controller::start(server.client_as(AGENT), Arc::new(Metrics::new()), options, shutdown);
    let running = tokio::spawn(operator.run);
    // Let the operator open its watches first: they do not depend on what it installs.
    let mut startup = 0;
    while startup == 0 || server.requests_from(AGENT).len() != startup {
        startup = server.requests_from(AGENT).len();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let started = Instant::now();
    create_all(&client).await;
    all_installed(&client).await;
    let elapsed = started.elapsed();
    let install = server.requests_from(AGENT).len() - startup;
    let inventories: Api<ConfigMap> = Api::namespaced(client, NAMESPACE);
    let objects: usize = inventories
        .list(&ListParams::default().labels(&format!("{LABEL_INVENTORY}=true")))
        .await
        .unwrap()
        .items
        .iter()
        .map(|cm| {
            let inventory: serde_json::Value =
                serde_json::from_str(&cm.data.as_ref().unwrap()["inventory"]).unwrap();
            inventory["objects"].as_array().unwrap().len()
        })
        .sum();
    let _ = stop.send(true);
    let _ = running.await;
    Install { elapsed, startup, install, objects }
}

/// The `butler-operator` process with the seven providers installed: its resident memory
/// (VmRSS) and peak (VmHWM), in KiB.
async fn process_memory() -> Option<(u64, u64)> {
    let server = cluster().await;
    let cache = std::env::temp_dir().join(format!("butler-bench-cache-{}", std::process::id()));
    let mut child = Command::new(env!("CARGO_BIN_EXE_butler-operator"))
        .args([
            "run",
            "--health-probe-bind-address",
            "127.0.0.1:0",
            "--metrics-bind-address",
            "0",
            "--leader-elect=false",
        ])
        .env("KUBECONFIG", server.kubeconfig())
        .env("BUTLER_CACHE_DIR", &cache)
        .env("RUST_LOG", "error")
        .stdout(Stdio::null())
        .spawn()
        .ok()?;
    create_all(&server.client()).await;
    all_installed(&server.client()).await;
    // Settle: the status writes and watch events that follow the installs.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).ok();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(cache);
    let field = |name: &str| -> Option<u64> {
        let line = status.as_ref()?.lines().find(|l| l.starts_with(name))?.to_string();
        line.split_whitespace().nth(1)?.parse().ok()
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

fn mean_ms() -> Option<f64> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("criterion/install_seven_providers/new/estimates.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64().map(|ns| ns / 1e6)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    let mut criterion = Criterion::default().sample_size(10).configure_from_args();
    criterion.bench_function("install_seven_providers", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                total += runtime.block_on(install_once()).elapsed;
            }
            total
        })
    });
    criterion.final_summary();
    let Install { startup, install, objects, .. } = runtime.block_on(install_once());
    let per_object = install as f64 / objects as f64;
    match mean_ms() {
        Some(ms) => println!(
            "\ncreate seven providers to all ProviderInstalled: {ms:.0} ms (goal: under 2000 ms: {})",
            if ms < 2000.0 { "met" } else { "NOT met" }
        ),
        None => println!("\n(no estimate written: run with `cargo bench`)"),
    }
    println!(
        "operator API requests for the install: {install} for {objects} applied objects, {per_object:.2} per object (goal: at most 2: {}); besides, {startup} requests open the watches at start, whatever is installed ({:.2} per object counting them)",
        if per_object <= 2.0 { "met" } else { "NOT met" },
        (install + startup) as f64 / objects as f64,
    );
    match runtime.block_on(process_memory()) {
        Some((rss, peak)) => println!(
            "butler-operator resident memory with seven providers installed: {:.1} MiB (peak {:.1} MiB; goal: under 50 MiB: {})",
            rss as f64 / 1024.0,
            peak as f64 / 1024.0,
            if rss < 50 * 1024 { "met" } else { "NOT met" }
        ),
        None => println!("butler-operator resident memory: not measured (no /proc on this system)"),
    }
}
