//! The health and metrics endpoints: `/healthz`, `/readyz` (ok once the services are ready
//! and, on the leader, the caches), and `/metrics` over HTTP or, secured, over HTTPS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use tokio::sync::watch;

use super::args::Settings;
use super::error::RunError;
use crate::metrics::Metrics;
use crate::shutdown::shutdown_on;

/// State shared with the HTTP endpoints.
#[derive(Clone)]
pub(super) struct Probe {
    pub(super) ready: Arc<AtomicBool>,
    pub(super) services_ready: Arc<AtomicBool>,
    pub(super) metrics: Arc<Metrics>,
}

pub(super) async fn healthz() -> &'static str {
    "ok"
}

pub(super) async fn readyz(State(probe): State<Probe>) -> impl IntoResponse {
    match (probe.services_ready.load(Ordering::Relaxed), probe.ready.load(Ordering::Relaxed)) {
        (true, true) => (StatusCode::OK, "ok"),
        (false, _) => (StatusCode::SERVICE_UNAVAILABLE, "the services (webhooks) are not ready yet"),
        (true, false) => (StatusCode::SERVICE_UNAVAILABLE, "the caches are not synced yet"),
    }
}

pub(super) async fn metrics_text(State(probe): State<Probe>) -> impl IntoResponse {
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
pub(super) async fn serve_secure_metrics(
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
