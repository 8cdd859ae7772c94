//! The `butler-operator` process with Cluster API's four providers (core, kubeadm bootstrap
//! and control plane, Docker) in the shapes of Cluster API's releases (a core over 1 MiB, two
//! dozen CRDs with conversion webhooks, cert-manager objects, aggregated ClusterRoles), each in
//! its own namespace as their users lay them out, served from ConfigMaps: installed at
//! v1.10.10, then moved to v1.11.0's contract (every version bumped, every provider paused),
//! then unpaused.
//!
//! The operator runs as the install manifest runs it: over HTTPS to the API server with a
//! bearer token, leader election on, JSON logs at info, `/metrics` served over HTTPS behind
//! TokenReview and SubjectAccessReview and scraped, the probes asked, stopped by SIGTERM.
//!
//! Measured: the time of that whole run, the process's peak memory (VmHWM; goal: under
//! 30 MiB) and resident memory at the end (VmRSS, and how much of it is mapped files: the
//! binary's code), and its API requests by verb and resource as its own
//! `rest_client_requests_total` metric counts them (what a user reads on a cluster).
//!
//! With `BUTLER_RECORD_HOT_CODE=FILE` (`make hot-code`), one run instead, the operator under
//! callgrind, whose executed functions are written to FILE as the linker script of the
//! release build (`butler_e2e::hot_code`).

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use butler_apiserver::MemoryApiServer;
use butler_operator::api::{BootstrapProvider, ControlPlaneProvider, CoreProvider, InfrastructureProvider};
use butler_operator::release::{CONFIGMAP_PROVIDER_LABEL, provider_configmap};
use criterion::Criterion;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

#[allow(dead_code)]
#[path = "../tests/shapes/cluster_api.rs"]
mod shapes;

/// Each provider object: its kind's plural, name, repository label and namespace.
const PROVIDERS: [(&str, &str, &str, &str); 4] = [
    ("coreproviders", "cluster-api", "cluster-api", "capi-system"),
    ("bootstrapproviders", "kubeadm", "bootstrap-kubeadm", "capi-kubeadm-bootstrap-system"),
    ("controlplaneproviders", "kubeadm", "control-plane-kubeadm", "capi-kubeadm-control-plane-system"),
    ("infrastructureproviders", "docker", "infrastructure-docker", "capd-system"),
];

/// A server with the provider CRDs, the stand-in cert-manager CRDs, the four namespaces and
/// each provider's releases published in its namespace.
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
    let releases = shapes::releases();
    for (_, _, label, namespace) in PROVIDERS {
        let object: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace}})).unwrap();
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &object).await.unwrap();
        for release in releases.iter().filter(|r| r.label == label) {
            let files = [
                ("metadata.yaml".to_string(), release.metadata.to_string()),
                (release.file.to_string(), release.components.clone()),
            ];
            let mut cm = provider_configmap(label, release.version, &files);
            cm.metadata.namespace = Some(namespace.into());
            let name = cm.metadata.name.clone().unwrap();
            Api::<ConfigMap>::namespaced(client.clone(), namespace)
                .patch(&name, &PatchParams::apply("bench").force(), &Patch::Apply(&cm))
                .await
                .unwrap();
        }
    }
    server
}

fn api(client: &kube::Client, plural: &str, namespace: &str) -> Api<kube::api::DynamicObject> {
    let kind = match plural {
        "coreproviders" => kube::api::ApiResource::erase::<CoreProvider>(&()),
        "bootstrapproviders" => kube::api::ApiResource::erase::<BootstrapProvider>(&()),
        "controlplaneproviders" => kube::api::ApiResource::erase::<ControlPlaneProvider>(&()),
        _ => kube::api::ApiResource::erase::<InfrastructureProvider>(&()),
    };
    Api::namespaced_with(client.clone(), namespace, &kind)
}

/// Sets the spec fields of every provider object (creating them the first time).
async fn set_all(client: &kube::Client, spec: serde_json::Value) {
    for (plural, name, label, namespace) in PROVIDERS {
        let mut whole = spec.clone();
        whole["fetchConfig"] = json!({"selector": {"matchLabels": {CONFIGMAP_PROVIDER_LABEL: label}}});
        let object = json!({
            "apiVersion": "operator.butlerlabs.dev/v1alpha1",
            "kind": kind_of(plural),
            "metadata": {"name": name, "namespace": namespace},
            "spec": whole,
        });
        api(client, plural, namespace)
            .patch(name, &PatchParams::apply("bench"), &Patch::Apply(&object))
            .await
            .unwrap();
    }
}

fn kind_of(plural: &str) -> &'static str {
    match plural {
        "coreproviders" => "CoreProvider",
        "bootstrapproviders" => "BootstrapProvider",
        "controlplaneproviders" => "ControlPlaneProvider",
        _ => "InfrastructureProvider",
    }
}

/// Waits until every provider reports `version` installed (and, with `running`, its
/// Deployments running), rolling out the Deployments as kube-controller-manager would.
async fn all_at(server: &MemoryApiServer, version: &str, running: bool) {
    let client = server.client();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut done = 0;
        for (plural, name, _, namespace) in PROVIDERS {
            butler_apiserver::stand_ins::roll_out_deployments(&client, namespace, "").await.unwrap();
            let object = api(&client, plural, namespace).get(name).await.unwrap();
            let status = &object.data["status"];
            let installed = status["installedVersion"] == version;
            let runs = status["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Paused" && c["status"] == "False");
            if installed && (runs || !running) {
                done += 1;
            }
        }
        if done == PROVIDERS.len() {
            return;
        }
        assert!(Instant::now() < deadline, "the providers did not reach {version} within 120 s");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one run measured.
struct Run {
    elapsed: Duration,
    /// VmHWM, VmRSS and RssFile (the binary's code, mostly) of the operator, in KiB.
    peak: u64,
    resident: u64,
    files: u64,
    /// `rest_client_requests_total` by (verb, resource).
    requests: BTreeMap<(String, String), u64>,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Where the operator listens and what it reads.
struct Ports<'a> {
    health: u16,
    metrics: u16,
    kubeconfig: &'a std::path::Path,
    cache: &'a std::path::Path,
}

/// The operator as the manifest runs it (its flags and environment), under callgrind when
/// recording into `record`.
fn spawn_operator(ports: &Ports<'_>, record: Option<&std::path::Path>) -> Child {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_butler-operator"));
    let mut command = match record {
        Some(folder) => butler_e2e::hot_code::under_callgrind(binary, folder),
        None => Command::new(binary),
    };
    command
        .args(["run", "--health-probe-bind-address", &format!("127.0.0.1:{}", ports.health)])
        .args(["--metrics-bind-address", &format!("127.0.0.1:{}", ports.metrics)])
        .arg("--provider-namespace=*")
        .env("KUBECONFIG", ports.kubeconfig)
        .env("POD_NAMESPACE", "default")
        .env("POD_NAME", "butler-operator-bench")
        .env("BUTLER_CACHE_DIR", ports.cache)
        .env("BUTLER_LOG_FORMAT", "json")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("the butler-operator binary runs")
}

/// The probes, as the kubelet asks them.
async fn probe(port: u16) {
    for path in ["/healthz", "/readyz"] {
        let response = reqwest::get(format!("http://127.0.0.1:{port}{path}")).await.unwrap();
        assert!(response.status().is_success(), "{path}: {}", response.status());
    }
}

/// The operator's request counter, read from its metrics endpoint as Prometheus scrapes it
/// (over HTTPS, with a token the operator reviews).
async fn requests_metric(port: u16, token: &str) -> BTreeMap<(String, String), u64> {
    let client = reqwest::Client::builder().danger_accept_invalid_certs(true).build().unwrap();
    let response =
        client.get(format!("https://127.0.0.1:{port}/metrics")).bearer_auth(token).send().await.unwrap();
    assert!(response.status().is_success(), "/metrics: {}", response.status());
    let text = response.text().await.unwrap();
    let mut counts = BTreeMap::new();
    // Under the process's prefix: butler_operator_rest_client_requests_total{...}.
    for line in text.lines().filter_map(|l| l.split_once("rest_client_requests_total{").map(|(_, l)| l)) {
        let (labels, value) = line.rsplit_once(' ').unwrap();
        let label = |name: &str| {
            let from = labels.find(&format!("{name}=\"")).map(|i| i + name.len() + 2)?;
            labels[from..].split('"').next().map(String::from)
        };
        if let (Some(verb), Some(resource)) = (label("verb"), label("resource")) {
            counts.insert((verb, resource), value.parse::<f64>().unwrap() as u64);
        }
    }
    counts
}

/// VmHWM, VmRSS and RssFile of the process, in KiB.
fn memory_of(child: &Child) -> (u64, u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let field = |name: &str| -> u64 {
        let line = status.lines().find(|l| l.starts_with(name));
        line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok()).unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"), field("RssFile:"))
}

/// Stops the operator as the kubelet does (SIGTERM), and waits for it.
fn stop(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().ok().flatten().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

async fn run_once(record: Option<&std::path::Path>) -> Run {
    let server = cluster().await;
    let client = server.client();
    let cache = std::env::temp_dir().join(format!("butler-bench-capi-{}", std::process::id()));
    let upstream = server.url().trim_start_matches("http://").parse().unwrap();
    let front = butler_e2e::tls::TlsFront::start(upstream).await;
    let token = server.administrator_token();
    let kubeconfig = cache.with_extension("kubeconfig");
    std::fs::write(&kubeconfig, butler_e2e::clients::https_kubeconfig(&front.addr, &front.ca_pem, &token))
        .unwrap();
    let ports = Ports { health: free_port(), metrics: free_port(), kubeconfig: &kubeconfig, cache: &cache };
    let mut child = spawn_operator(&ports, record);
    let started = Instant::now();
    set_all(&client, json!({"version": "v1.10.10"})).await;
    all_at(&server, "v1.10.10", true).await;
    // The contract move the natural way: versions bumped, every provider paused, unpaused.
    set_all(&client, json!({"version": "v1.11.0", "paused": true})).await;
    all_at(&server, "v1.11.0", false).await;
    set_all(&client, json!({"version": "v1.11.0", "paused": false})).await;
    all_at(&server, "v1.11.0", true).await;
    let elapsed = started.elapsed();
    // Settle: the status writes and watch events that follow.
    tokio::time::sleep(Duration::from_secs(2)).await;
    probe(ports.health).await;
    let requests = requests_metric(ports.metrics, &token).await;
    let (peak, resident, files) = memory_of(&child);
    stop(&mut child);
    let _ = std::fs::remove_dir_all(&cache);
    let _ = std::fs::remove_file(&kubeconfig);
    Run { elapsed, peak, resident, files, requests }
}

/// One run under callgrind, its executed functions written to `script` as a linker script.
fn record(runtime: &tokio::runtime::Runtime, script: &std::path::Path) {
    let folder = std::env::temp_dir().join(format!("butler-hot-code-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    runtime.block_on(run_once(Some(&folder)));
    let functions = butler_e2e::hot_code::recorded(&folder, "butler-operator");
    assert!(
        !functions.is_empty(),
        "callgrind recorded no function of butler-operator in {}",
        folder.display()
    );
    std::fs::write(script, butler_e2e::hot_code::linker_script("butler-operator", &functions)).unwrap();
    let _ = std::fs::remove_dir_all(&folder);
    println!("{} functions of butler-operator ran; their layout is in {}", functions.len(), script.display());
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    if let Some(script) = std::env::var_os(butler_e2e::hot_code::RECORD_VARIABLE) {
        return record(&runtime, std::path::Path::new(&script));
    }
    let mut criterion = Criterion::default().sample_size(10).configure_from_args();
    let mut peaks = Vec::new();
    criterion.bench_function("cluster_api_install_and_contract_move", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let run = runtime.block_on(run_once(None));
                peaks.push(run.peak);
                total += run.elapsed;
            }
            total
        })
    });
    criterion.final_summary();
    let run = runtime.block_on(run_once(None));
    peaks.push(run.peak);
    let highest = peaks.iter().copied().max().unwrap_or_default();
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "\nbutler-operator with Cluster API's four providers, installed then moved across a contract in {:.2} s: peak memory {:.1} MiB (highest of {} runs {:.1} MiB; goal: under 30 MiB: {}), resident at the end {:.1} MiB ({:.1} MiB of it mapped files, the binary's code)",
        run.elapsed.as_secs_f64(),
        mib(run.peak),
        peaks.len(),
        mib(highest),
        if highest < 30 * 1024 { "met" } else { "NOT met" },
        mib(run.resident),
        mib(run.files),
    );
    let total: u64 = run.requests.values().sum();
    println!("its API requests, from its rest_client_requests_total metric: {total}");
    for ((verb, resource), count) in &run.requests {
        println!("  {verb:>6} {resource}: {count}");
    }
}
