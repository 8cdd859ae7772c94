//! The `butler-operator run` process: logs, the health and metrics endpoints, leader election
//! on a Lease, the controllers, and a graceful shutdown on SIGTERM or Ctrl-C.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use butler_repository::{Cache, RemoteOptions};
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

use crate::api::FIELD_MANAGER;
use crate::controller::{self, Options};
use crate::metrics::Metrics;

/// How the process runs; the flags of `butler-operator run`.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where `/metrics` is served; `None` turns it off.
    pub metrics_address: Option<SocketAddr>,
    /// Where `/healthz` and `/readyz` are served.
    pub health_address: SocketAddr,
    /// Elect a leader among replicas on a Lease.
    pub leader_elect: bool,
    /// The namespace of the Lease; the pod's namespace when empty.
    pub leader_election_namespace: Option<String>,
    /// How long a leader's lease lasts without renewal, in seconds (at least 3): how long a
    /// standby waits when the leader dies without letting go.
    pub lease_duration: u64,
    /// Never touch the network for repositories; serve from the cache.
    pub offline: bool,
    /// The repository cache folder.
    pub cache_dir: Option<PathBuf>,
    /// Reconciles of one kind at once (0: no limit).
    pub concurrency: u16,
    /// The operator's clusterctl config file (providers, images, variables).
    pub config: Option<PathBuf>,
}

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no cluster to talk to: {0}. Run in a pod, or set KUBECONFIG")]
    NoCluster(#[source] kube::Error),
    #[error("cannot serve {what} on {address}: {source}")]
    Listen { what: &'static str, address: SocketAddr, source: std::io::Error },
    #[error("leader election on the Lease {namespace}/{FIELD_MANAGER}: {message}")]
    LeaderElection { namespace: String, message: String },
    #[error("lost the leader lease; stopping so that another replica takes over")]
    LostLeadership,
}

/// Sets up logging: `RUST_LOG` filters (default `info`), text or JSON lines.
pub fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_target(false);
    // A second initialisation (tests) keeps the first.
    let _ = if json { builder.json().flatten_event(true).try_init() } else { builder.try_init() };
}

/// State shared with the HTTP endpoints.
#[derive(Clone)]
struct Probe {
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(probe): State<Probe>) -> impl IntoResponse {
    match probe.ready.load(Ordering::Relaxed) {
        true => (StatusCode::OK, "ok"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "the caches are not synced yet"),
    }
}

async fn metrics_text(State(probe): State<Probe>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/openmetrics-text; version=1.0.0; charset=utf-8")],
        probe.metrics.encode(),
    )
}

/// Binds an address (so that a taken port fails the start) and serves it until the stop.
async fn serve(
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

/// A name for this replica: the pod's name, else the host's, with the process id.
fn instance() -> String {
    std::env::var("POD_NAME").ok().filter(|n| !n.is_empty()).unwrap_or_else(|| {
        let host =
            std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_else(|_| "butler-operator".into());
        format!("{}-{}", host.trim(), std::process::id())
    })
}

/// Resolves when the process is asked to stop.
async fn termination() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

/// Runs the operator until it is asked to stop.
pub async fn run(settings: Settings) -> Result<(), RunError> {
    let client = kube::Client::try_default().await.map_err(RunError::NoCluster)?;
    let metrics = Arc::new(Metrics::new());
    let ready = Arc::new(AtomicBool::new(false));
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn({
        let stop_tx = stop_tx.clone();
        async move {
            termination().await;
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

    let probe = Probe { ready: ready.clone(), metrics: metrics.clone() };
    let health =
        Router::new().route("/healthz", get(healthz)).route("/readyz", get(readyz)).with_state(probe.clone());
    let mut servers = vec![serve("health probes", settings.health_address, health, stop_rx.clone()).await?];
    if let Some(address) = settings.metrics_address {
        let router = Router::new().route("/metrics", get(metrics_text)).with_state(probe);
        servers.push(serve("metrics", address, router, stop_rx.clone()).await?);
    }

    let mut remote = RemoteOptions::from_env();
    remote.http.offline = settings.offline;
    if let Some(dir) = &settings.cache_dir {
        remote.http.cache =
            Some(Cache::new(dir.clone(), remote.http.cache.as_ref().map(Cache::max_age).unwrap_or_default()));
    }
    let options = Options {
        remote,
        instance: instance(),
        concurrency: settings.concurrency,
        config: settings.config.clone(),
    };

    // Leadership: wait for the lease (or for the stop), and stop when it is lost.
    let mut leadership = None;
    if settings.leader_elect {
        let namespace = settings
            .leader_election_namespace
            .clone()
            .or_else(|| std::env::var("POD_NAMESPACE").ok())
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| client.default_namespace().to_string());
        let failed = |message: String| RunError::LeaderElection { namespace: namespace.clone(), message };
        let manager = LeaseManagerBuilder::new(client.clone(), FIELD_MANAGER)
            .with_namespace(namespace.clone())
            .with_identity(options.instance.clone())
            .with_duration(settings.lease_duration.max(3))
            .with_grace((settings.lease_duration.max(3) / 3).max(1))
            .with_field_manager(format!("{FIELD_MANAGER}/leader-election"))
            .build()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let (mut leader, task) = manager.watch().await;
        // A standby replica is healthy and ready: it serves by waiting.
        ready.store(true, Ordering::Relaxed);
        tracing::info!(%namespace, identity = %options.instance, "waiting for the leader lease");
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
                return Ok(());
            }
        }
        tracing::info!("acquired the leader lease");
        leadership = Some((leader, task));
    }
    metrics.set_leader(true);
    ready.store(false, Ordering::Relaxed);

    let operator = controller::start(client, metrics.clone(), options, controller::shutdown_on(stopped));
    let ctx = operator.context.clone();
    tokio::spawn({
        let ready = ready.clone();
        async move {
            controller::caches_ready(&ctx).await;
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
        _ = operator.run => Ok(()),
        _ = lost => Err(RunError::LostLeadership),
    };
    let _ = stop_tx.send(true);
    metrics.set_leader(false);
    if let Some((leader, task)) = leadership {
        // Closing the channel releases the lease, so a standby takes over at once.
        drop(leader);
        let _ = task.await;
    }
    for server in servers {
        let _ = server.await;
    }
    tracing::info!("stopped");
    outcome
}
