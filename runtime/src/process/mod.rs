//! The process around a controller: logs, the health and metrics endpoints, leader election
//! on a Lease, and a graceful shutdown on SIGTERM or Ctrl-C. The controller itself is started
//! by a closure once this replica leads, and runs until the process is asked to stop or loses
//! the lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::routing::get;
use futures::future::BoxFuture;
use kube_lease_manager::LeaseManagerBuilder;
use tokio::sync::watch;

mod args;
mod endpoints;
mod error;
mod memory;

pub use args::{ProcessArgs, Settings, parse_address};
pub use endpoints::serve;
use endpoints::{Probe, healthz, metrics_text, readyz, serve_secure_metrics};
pub use error::RunError;
pub use memory::limit_allocator;

use crate::metrics::Metrics;
use crate::shutdown::{Shutdown, shutdown_on, termination};

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
    let config = kube::Config::infer().await.map_err(|e| RunError::NoCluster(kube::Error::InferConfig(e)))?;
    // Every request counted by verb and resource, on /metrics.
    let client = crate::requests::counted_client(config, metrics.requests()).map_err(RunError::NoCluster)?;
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
