//! The process around a controller: logs, the health and metrics endpoints, leader election
//! on a Lease, and a graceful shutdown on SIGTERM or Ctrl-C. The controller itself is started
//! by a closure once this replica leads, and runs until the process is asked to stop or loses
//! the lease.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use futures::future::BoxFuture;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::shutdown::{Shutdown, shutdown_on, termination};

/// The flags every controller binary shares (`run` subcommands). Each also takes the name a
/// Cluster API manager gives it (`--metrics-bind-addr`, `--health-addr`, `--leader-elect`
/// without a value, `--v`), so that the provider operator's `manager` settings work on it.
#[derive(clap::Args, Clone, Debug)]
pub struct ProcessArgs {
    /// Where Prometheus metrics are served (`/metrics`), as `host:port` or `:port`; `0` turns
    /// them off. Cluster API managers call it `--diagnostics-address` (and, before v1.9,
    /// `--metrics-bind-addr`).
    #[arg(
        long,
        alias = "metrics-bind-addr",
        alias = "diagnostics-address",
        env = "BUTLER_METRICS_BIND_ADDRESS",
        default_value = "0.0.0.0:8443"
    )]
    pub metrics_bind_address: String,
    /// Serve `/metrics` over HTTPS to bearer tokens the API server authenticates (TokenReview)
    /// and authorizes for `get` on `/metrics` (SubjectAccessReview), as controller-runtime's
    /// secure metrics do; `false` serves plain HTTP to whoever reaches the port.
    #[arg(long, env = "BUTLER_METRICS_SECURE", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub metrics_secure: bool,
    /// Cluster API managers' spelling of `--metrics-secure=false`.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub insecure_diagnostics: bool,
    /// A folder holding `tls.crt` and `tls.key` for the metrics server (a mounted Secret; read
    /// again when they change); without it a certificate made at start.
    #[arg(long, env = "BUTLER_METRICS_CERT_DIR", value_name = "DIR")]
    pub metrics_cert_dir: Option<std::path::PathBuf>,
    /// Where `/healthz` and `/readyz` are served, as `host:port` or `:port`.
    #[arg(
        long,
        alias = "health-addr",
        env = "BUTLER_HEALTH_PROBE_BIND_ADDRESS",
        default_value = "0.0.0.0:8081"
    )]
    pub health_probe_bind_address: String,
    /// Elect a leader among replicas on a Lease named after the binary; only the leader
    /// reconciles.
    #[arg(long, env = "BUTLER_LEADER_ELECT", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// The namespace of the Lease; default: the pod's namespace (POD_NAMESPACE), else the
    /// kubeconfig's.
    #[arg(long, env = "BUTLER_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// How long the leader's lease lasts without renewal, in seconds: how long a standby
    /// replica waits when the leader dies without letting go.
    #[arg(long, env = "BUTLER_LEADER_ELECTION_LEASE_DURATION", default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..))]
    pub leader_election_lease_duration: u64,
    /// Log format: `text` or `json` (one JSON object a line). RUST_LOG sets the filter.
    #[arg(long, env = "BUTLER_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Log verbosity when RUST_LOG is not set: 0 to 2 info, 3 to 4 debug, 5 and more trace.
    #[arg(long = "v", value_name = "LEVEL")]
    pub verbosity: Option<u8>,
}

/// An address as Go managers write it: `host:port`, or `:port` for every interface.
pub fn parse_address(flag: &str, text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.parse::<SocketAddr>().map_err(|_| {
        format!("{flag} {text:?} is not host:port (for example 0.0.0.0:8080, or :8080 for every interface)")
    })
}

impl ProcessArgs {
    /// The settings of a process named `name` (its Lease and field manager for the lease), or
    /// what is wrong with the flags.
    pub fn settings(&self, name: &str) -> Result<Settings, String> {
        let metrics_address = match self.metrics_bind_address.as_str() {
            "0" => None,
            text => Some(
                parse_address("--metrics-bind-address", text)
                    .map_err(|e| format!("{e}, nor 0 to turn metrics off"))?,
            ),
        };
        Ok(Settings {
            name: name.into(),
            metrics_address,
            metrics_secure: self.metrics_secure && !self.insecure_diagnostics,
            metrics_cert_dir: self.metrics_cert_dir.clone(),
            health_address: parse_address("--health-probe-bind-address", &self.health_probe_bind_address)?,
            leader_elect: self.leader_elect,
            leader_election_namespace: self.leader_election_namespace.clone(),
            lease_duration: self.leader_election_lease_duration,
            json_logs: self.log_format == "json",
            verbosity: self.verbosity,
            identity: None,
        })
    }
}

/// How the process runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The controller's name: the Lease's, and the start of its field manager.
    pub name: String,
    /// Where `/metrics` is served; `None` turns it off.
    pub metrics_address: Option<SocketAddr>,
    /// `/metrics` over HTTPS, to tokens the API server authorizes ([`crate::secure_metrics`]).
    pub metrics_secure: bool,
    /// The metrics server's `tls.crt` and `tls.key`; one made at start when `None`.
    pub metrics_cert_dir: Option<std::path::PathBuf>,
    /// Where `/healthz` and `/readyz` are served.
    pub health_address: SocketAddr,
    /// Elect a leader among replicas on a Lease.
    pub leader_elect: bool,
    /// The namespace of the Lease; the pod's namespace when empty.
    pub leader_election_namespace: Option<String>,
    /// How long a leader's lease lasts without renewal, in seconds (at least 3): how long a
    /// standby waits when the leader dies without letting go.
    pub lease_duration: u64,
    /// Log lines as JSON objects.
    pub json_logs: bool,
    /// The `--v` level, for the log filter when RUST_LOG is not set.
    pub verbosity: Option<u8>,
    /// This replica's name in the Lease and in events; `None`: the pod's name (POD_NAME), else
    /// the host's name and the process ID.
    pub identity: Option<String>,
}

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no cluster to talk to: {0}. Run in a pod, or set KUBECONFIG")]
    NoCluster(#[source] kube::Error),
    #[error("cannot serve {what} on {address}: {source}")]
    Listen { what: &'static str, address: SocketAddr, source: std::io::Error },
    #[error("leader election on the Lease {namespace}/{name}: {message}")]
    LeaderElection { namespace: String, name: String, message: String },
    #[error("lost the leader lease; stopping so that another replica takes over")]
    LostLeadership,
    #[error("the metrics server's certificate: {0}")]
    MetricsCertificate(String),
}

/// What the controller gets once this replica leads.
pub struct Leading {
    pub client: kube::Client,
    /// Resolves when the process stops: the controller finishes what is under way.
    pub shutdown: Shutdown,
    /// This replica's name, for events.
    pub instance: String,
}

/// A started controller: the future that drives it, and one that resolves once its caches
/// are filled (then `/readyz` answers ok).
pub struct Started {
    pub run: BoxFuture<'static, ()>,
    pub ready: BoxFuture<'static, ()>,
}

/// The log level of a `--v` verbosity, as Kubernetes components count it.
pub fn level(verbosity: Option<u8>) -> &'static str {
    match verbosity.unwrap_or(0) {
        0..=2 => "info",
        3..=4 => "debug",
        _ => "trace",
    }
}

/// Sets up logging: `RUST_LOG` filters (default: the level of `--v`, else `info`), text or JSON
/// lines.
pub fn init_logging(json: bool, verbosity: Option<u8>) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level(verbosity)));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    // A second initialisation (tests) keeps the first.
    let _ = if json { builder.json().flatten_event(true).try_init() } else { builder.try_init() };
}

/// A name for this replica: the pod's name, else the host's with the process id.
pub fn instance(name: &str) -> String {
    std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| name.into());
        format!("{}-{}", host.trim(), std::process::id())
    })
}

/// State shared with the HTTP endpoints.
#[derive(Clone)]
struct Probe {
    ready: Arc<AtomicBool>,
    services_ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(probe): State<Probe>) -> impl IntoResponse {
    match (probe.services_ready.load(Ordering::Relaxed), probe.ready.load(Ordering::Relaxed)) {
        (true, true) => (StatusCode::OK, "ok"),
        (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "the services (webhooks) are not ready yet"),
        (true, false) => (StatusCode::SERVICE_UNAVAILABLE, "the caches are not synced yet"),
    }
}

async fn metrics_text(State(probe): State<Probe>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        probe.metrics.encode(),
    )
}

/// Binds an address (so that a taken port fails the start) and serves it until the stop.
pub async fn serve(
    what: &'static str,
    address: SocketAddr,
    router: Router,
    mut stop: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, RunError> {
    let listener = tokio::net::TcpListener::bind(address).await.map_err(|source| RunError::Listen {
        what,
        address,
        source,
    })?;
    let address = listener.local_addr().unwrap_or(address);
    tracing::info!(%address, "serving {what}");
    Ok(tokio::spawn(async move {
        let served = axum::serve(listener, router).with_graceful_shutdown(async move {
            let _ = stop.wait_for(|s| *s).await;
        });
        if let Err(e) = served.await {
            tracing::error!(%address, error = %e, "serving {what}");
        }
    }))
}

/// Serves the metrics router over HTTPS behind [`crate::secure_metrics::check`].
async fn serve_secure_metrics(
    client: &kube::Client,
    settings: &Settings,
    address: SocketAddr,
    router: Router,
    stop: watch::Receiver<bool>,
) -> Result<tokio::task::JoinHandle<()>, RunError> {
    use crate::secure_metrics::{Guard, certificate, check};
    let tls = certificate(settings.metrics_cert_dir.as_deref()).map_err(RunError::MetricsCertificate)?;
    let guarded = router.layer(axum::middleware::from_fn_with_state(Guard::new(client.clone()), check));
    let stopped = {
        let mut stop = stop;
        async move {
            let _ = stop.wait_for(|s| *s).await;
        }
    };
    let (_, task) = crate::webhook::serve_https("metrics", address, &tls, guarded, shutdown_on(stopped))
        .await
        .map_err(|e| match e {
            crate::webhook::WebhookError::Listen { address, source } => {
                RunError::Listen { what: "metrics", address, source }
            }
            other => RunError::MetricsCertificate(other.to_string()),
        })?;
    Ok(task)
}

impl Started {
    /// Nothing to run, ready at once.
    pub fn nothing() -> Started {
        Started { run: Box::pin(std::future::ready(())), ready: Box::pin(std::future::ready(())) }
    }
}

/// Runs a controller until the process is asked to stop: serves the probes and metrics, starts
/// `services` on every replica (what must answer whether or not this replica leads, such as
/// admission webhooks), waits for the leader lease (when elected), then calls `start` and
/// drives what it returns. `/readyz` answers ok once the services are ready and, on the
/// leader, the controller's caches too.
pub async fn run<S, F>(
    settings: Settings,
    metrics: Arc<Metrics>,
    services: S,
    start: F,
) -> Result<(), RunError>
where
    S: FnOnce(kube::Client, Shutdown) -> Started,
    F: FnOnce(Leading) -> Started,
{
    let client = kube::Client::try_default().await.map_err(RunError::NoCluster)?;
    run_with(client, termination(), settings, metrics, services, start).await
}

/// [`run`] with a client of the caller's and a future that asks the process to stop (a
/// process embedded in another, such as a scenario's replicas, which share a cluster).
pub async fn run_with<S, F>(
    client: kube::Client,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
    settings: Settings,
    metrics: Arc<Metrics>,
    services: S,
    start: F,
) -> Result<(), RunError>
where
    S: FnOnce(kube::Client, Shutdown) -> Started,
    F: FnOnce(Leading) -> Started,
{
    let ready = Arc::new(AtomicBool::new(false));
    let services_ready = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn({
        let stop_tx = stop_tx.clone();
        async move {
            stop.await;
            tracing::info!("stopping: finishing the reconciles under way");
            let _ = stop_tx.send(true);
        }
    });
    let stopped = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };

    let probe =
        Probe { ready: ready.clone(), services_ready: services_ready.clone(), metrics: metrics.clone() };
    let health =
        Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).with_state(probe.clone());
    let mut servers = vec![serve("health probes", settings.health_address, health, stop_rx.clone()).await?];
    if let Some(address) = settings.metrics_address {
        let router = Router::new().route("/metrics", get(metrics_text)).with_state(probe);
        servers.push(match settings.metrics_secure {
            true => serve_secure_metrics(&client, &settings, address, router, stop_rx.clone()).await?,
            false => serve("metrics", address, router, stop_rx.clone()).await?,
        });
    }
    let instance = settings.identity.clone().unwrap_or_else(|| instance(&settings.name));
    let services_stopped = {
        let mut rx = stop_rx.clone();
        async move {
            let _ = rx.wait_for(|s| *s).await;
        }
    };
    let services = services(client.clone(), shutdown_on(services_stopped));
    let services_task = tokio::spawn(services.run);
    tokio::spawn({
        let services_ready = services_ready.clone();
        async move {
            services.ready.await;
            services_ready.store(true, Ordering::Relaxed);
        }
    });

    // Leadership: wait for the lease (or for the stop), and stop when it is lost.
    let mut leadership = None;
    if settings.leader_elect {
        let namespace = settings
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| client.default_namespace().to_string());
        let failed = |message: String| RunError::LeaderElection {
            namespace: namespace.clone(),
            name: settings.name.clone(),
            message,
        };
        let duration = settings.lease_duration.max(3);
        let manager = LeaseManagerBuilder::new(client.clone(), &settings.name)
            .with_namespace(namespace.clone())
            .with_identity(instance.clone())
            .with_duration(duration)
            .with_grace((duration / 3).max(1))
            .with_field_manager(format!("{}/leader-election", settings.name))
            .build()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let (mut leader, task) = manager.watch().await;
        // A standby replica is healthy and ready: it serves by waiting.
        ready.store(true, Ordering::Relaxed);
        tracing::info!(%namespace, identity = %instance, "waiting for the leader lease");
        let mut stop = stop_rx.clone();
        let won = tokio::select! {
            won = leader.wait_for(|l| *l) => Some(won.map(|_| ()).map_err(|e| failed(e.to_string()))),
            _ = stop.wait_for(|s| *s) => None,
        };
        match won {
            Some(won) => won?,
            None => {
                drop(leader);
                let _ = task.await;
                let _ = services_task.await;
                return Ok(());
            }
        }
        tracing::info!("acquired the leader lease");
        leadership = Some((leader, task));
    }
    metrics.set_leader(true);
    ready.store(false, Ordering::Relaxed);

    let started = start(Leading { client, shutdown: shutdown_on(stopped), instance });
    tokio::spawn({
        let ready = ready.clone();
        async move {
            started.ready.await;
            ready.store(true, Ordering::Relaxed);
        }
    });
    let lost = async {
        match &mut leadership {
            Some((leader, _)) => {
                let _ = leader.wait_for(|l| !*l).await;
            }
            None => std::future::pending().await,
        }
    };
    let outcome = tokio::select! {
        _ = started.run => Ok(()),
        _ = lost => Err(RunError::LostLeadership),
    };
    let _ = stop_tx.send(true);
    metrics.set_leader(false);
    if let Some((leader, task)) = leadership {
        // Closing the channel releases the lease, so a standby takes over at once.
        drop(leader);
        let _ = task.await;
    }
    let _ = services_task.await;
    for server in servers {
        let _ = server.await;
    }
    tracing::info!("stopped");
    outcome
}

/// A binary's `run` from start to exit code: logging as the settings say, an async runtime,
/// [`run`], and the error (if any) logged.
pub fn execute<S, F>(
    settings: Settings,
    metrics: Arc<Metrics>,
    services: S,
    start: F,
) -> std::process::ExitCode
where
    S: FnOnce(kube::Client, Shutdown) -> Started,
    F: FnOnce(Leading) -> Started,
{
    init_logging(settings.json_logs, settings.verbosity);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(settings, metrics, services, start)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        process: ProcessArgs,
    }

    #[test]
    fn metrics_can_be_turned_off_and_bad_addresses_are_named() {
        let off = Cli::parse_from(["x", "--metrics-bind-address", "0"]).process.settings("x").unwrap();
        assert_eq!(off.metrics_address, None);
        let bad = Cli::parse_from(["x", "--metrics-bind-address", "8080"]).process.settings("x").unwrap_err();
        assert!(bad.contains("--metrics-bind-address \"8080\" is not host:port"), "{bad}");
        let json = Cli::parse_from(["x", "--log-format", "json"]).process.settings("x").unwrap();
        assert!(json.json_logs && json.leader_elect);
    }

    #[test]
    fn the_flags_a_cluster_api_manager_gets_are_understood() {
        let go = Cli::parse_from([
            "x",
            "--leader-elect",
            "--metrics-bind-addr=:8080",
            "--health-addr=:9440",
            "--v=5",
        ])
        .process
        .settings("x")
        .unwrap();
        assert!(go.leader_elect);
        assert_eq!(go.metrics_address, Some("0.0.0.0:8080".parse().unwrap()));
        assert_eq!(go.health_address, "0.0.0.0:9440".parse().unwrap());
        assert_eq!(level(go.verbosity), "trace");
        let off = Cli::parse_from(["x", "--leader-elect=false"]).process.settings("x").unwrap();
        assert!(!off.leader_elect);
        assert_eq!(level(None), "info");
    }
}
