//! An admission-webhook server: AdmissionReview v1 over HTTPS (rustls, ring), one route per
//! webhook, each a function from the request to the response, so that the decisions stay pure
//! and the server stays small. The certificate can be replaced while serving ([`Tls::reload`]),
//! for renewal without a restart.

pub mod certificates;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::Json;
use axum::routing::post;
use axum_server::Handle;
use axum_server::tls_rustls::RustlsConfig;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, AdmissionReview};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::shutdown::Shutdown;

/// Why the webhook server cannot start.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("the webhook serving certificate: {0}; give a PEM certificate chain and its PEM private key")]
    Certificate(String),
    #[error("cannot serve webhooks on {address}: {source}")]
    Listen { address: SocketAddr, source: std::io::Error },
}

/// What a webhook decides for one request, its object decoded once, straight into its kind.
pub type Decide<K> = Arc<dyn Fn(&AdmissionRequest<K>) -> AdmissionResponse + Send + Sync>;

/// The reviews a server decodes and decides at once, by default. Each holds its request
/// decoded (a review may be 2 MiB, many times that once decoded); more are shed.
pub const MAX_REVIEWS_AT_ONCE: usize = 4;

/// The webhooks of a server, by path.
pub struct Webhooks {
    router: Router,
    /// Reviews under way, shared by every route.
    permits: Arc<tokio::sync::Semaphore>,
}

impl Default for Webhooks {
    fn default() -> Webhooks {
        Webhooks::at_once(MAX_REVIEWS_AT_ONCE)
    }
}

impl Webhooks {
    pub fn new() -> Webhooks {
        Webhooks::default()
    }

    /// Webhooks that decode and decide at most `reviews` requests at once; one more is
    /// answered 429 with `Retry-After`, which the API server retries, before its body is
    /// decoded.
    pub fn at_once(reviews: usize) -> Webhooks {
        Webhooks { router: Router::new(), permits: Arc::new(tokio::sync::Semaphore::new(reviews)) }
    }

    /// Serves `decide` at `path` (for example `/validate-teams`), the review's objects decoded
    /// once into `K` (never into a JSON tree first: a review may be 2 MiB, and a tree many times
    /// that). An object that does not read as its kind is refused by the path of the field that
    /// does not (the API server's schema comes after mutating webhooks, so such objects do
    /// arrive); a body that is not an AdmissionReview with a request is answered 400, as the
    /// API server expects.
    pub fn route<K>(mut self, path: &str, decide: Decide<K>) -> Webhooks
    where
        K: kube::Resource + serde::de::DeserializeOwned + Send + Sync + 'static,
    {
        let permits = self.permits.clone();
        let handler = move |body: axum::body::Bytes| {
            let (decide, permits) = (decide.clone(), permits.clone());
            async move {
                use axum::response::IntoResponse;
                let Ok(_permit) = permits.try_acquire_owned() else {
                    return busy().into_response();
                };
                match decode::<K>(&body) {
                    Ok(Ok(request)) => Json(decide(&request).into_review()).into_response(),
                    Ok(Err(refusal)) => Json(refusal.into_review()).into_response(),
                    Err(why) => (axum::http::StatusCode::BAD_REQUEST, why).into_response(),
                }
            }
        };
        self.router = self.router.route(path, post(handler));
        self
    }

    pub fn router(self) -> Router {
        self.router
    }
}

/// The answer to a review over [`MAX_REVIEWS_AT_ONCE`]: 429, retried by the API server.
fn busy() -> (axum::http::StatusCode, [(axum::http::HeaderName, &'static str); 1], &'static str) {
    (
        axum::http::StatusCode::TOO_MANY_REQUESTS,
        [(axum::http::header::RETRY_AFTER, "1")],
        "too many reviews at once; retry",
    )
}

/// What kind of JSON error, without the text it quotes.
fn json_error_kind(error: &serde_json::Error) -> &'static str {
    match error.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not JSON",
        serde_json::error::Category::Data => "not of the shape of an AdmissionReview",
        serde_json::error::Category::Eof => "cut short",
    }
}

/// The request of a review, decoded into `K` (what each route does with a body); a refusal
/// (with the request's uid) when its objects do not read as `K`; why, when the body is not an
/// AdmissionReview with a request.
pub fn decode<K>(body: &[u8]) -> Result<Result<AdmissionRequest<K>, AdmissionResponse>, String>
where
    K: kube::Resource + serde::de::DeserializeOwned,
{
    let mut reader = serde_json::Deserializer::from_slice(body);
    let error = match serde_path_to_error::deserialize::<_, AdmissionReview<K>>(&mut reader) {
        Ok(review) => {
            let request: Result<AdmissionRequest<K>, _> = review.try_into();
            return match request {
                Ok(request) => Ok(Ok(request)),
                Err(e) => Err(format!("not an AdmissionReview with a request: {e}")),
            };
        }
        Err(error) => error,
    };
    // The review's envelope, its objects skipped unread: the uid to refuse it with.
    #[derive(serde::Deserialize)]
    struct Envelope {
        request: Option<Uid>,
    }
    #[derive(serde::Deserialize)]
    struct Uid {
        uid: String,
    }
    let path = error.path().to_string();
    let field = ["request.object.", "request.oldObject."].iter().find_map(|p| path.strip_prefix(p));
    match (error.inner().classify(), field, serde_json::from_slice::<Envelope>(body)) {
        (serde_json::error::Category::Data, Some(field), Ok(Envelope { request: Some(Uid { uid }) })) => {
            let mut refusal = AdmissionResponse::invalid(format!(
                "{field} does not read as the object's kind: {}; correct it",
                bounded(&error.inner().to_string(), 200)
            ));
            refusal.uid = uid;
            Ok(Err(refusal))
        }
        _ => Err(format!("not an AdmissionReview: {}", json_error_kind(error.inner()))),
    }
}

/// At most `max` characters of `text`, marked when cut.
fn bounded(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((end, _)) => format!("{}...", &text[..end]),
        None => text.to_string(),
    }
}

/// The serving certificate of a webhook server; clones share it, so a renewal reaches the
/// running server.
#[derive(Clone)]
pub struct Tls {
    config: RustlsConfig,
}

/// A rustls server configuration (ring) for a PEM certificate chain and its PEM key.
pub fn server_config(cert_pem: &str, key_pem: &str) -> Result<Arc<rustls::ServerConfig>, WebhookError> {
    let bad = |what: &str, e: &dyn std::fmt::Display| WebhookError::Certificate(format!("{what}: {e}"));
    let chain = CertificateDer::pem_slice_iter(cert_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("the certificate does not read as PEM", &e))?;
    if chain.is_empty() {
        return Err(WebhookError::Certificate("no certificate in the PEM text".into()));
    }
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(|e| bad("the private key does not read as PEM", &e))?;
    let config =
        rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .map_err(|e| bad("TLS versions", &e))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| bad("the key does not fit the certificate", &e))?;
    Ok(Arc::new(config))
}

impl Tls {
    /// TLS from a PEM certificate chain and its PEM private key.
    pub fn from_pem(cert_pem: &str, key_pem: &str) -> Result<Tls, WebhookError> {
        Ok(Tls { config: RustlsConfig::from_config(server_config(cert_pem, key_pem)?) })
    }

    /// Serves a new certificate from the next connection on.
    pub fn reload(&self, cert_pem: &str, key_pem: &str) -> Result<(), WebhookError> {
        self.config.reload_from_config(server_config(cert_pem, key_pem)?);
        Ok(())
    }
}

/// Serves the webhooks over HTTPS on `address` until `shutdown`; returns the address bound
/// (port 0 picks a free one) and the task.
pub async fn serve(
    address: SocketAddr,
    tls: &Tls,
    webhooks: Webhooks,
    shutdown: Shutdown,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), WebhookError> {
    serve_https("admission webhooks", address, tls, webhooks.router(), shutdown).await
}

/// Serves `router` over HTTPS on `address` until `shutdown`, letting requests under way finish
/// (5 s at the most); returns the address bound and the task.
pub async fn serve_https(
    what: &'static str,
    address: SocketAddr,
    tls: &Tls,
    router: Router,
    shutdown: Shutdown,
) -> Result<(SocketAddr, tokio::task::JoinHandle<()>), WebhookError> {
    let listen = |source| WebhookError::Listen { address, source };
    let listener = std::net::TcpListener::bind(address).map_err(listen)?;
    listener.set_nonblocking(true).map_err(listen)?;
    let bound = listener.local_addr().map_err(listen)?;
    let server = axum_server::from_tcp_rustls(listener, tls.config.clone()).map_err(listen)?;
    let handle: Handle<SocketAddr> = Handle::new();
    let stopper = handle.clone();
    tokio::spawn(async move {
        shutdown.await;
        stopper.graceful_shutdown(Some(std::time::Duration::from_secs(5)));
    });
    let task = tokio::spawn(async move {
        if let Err(e) = server.handle(handle).serve(router.into_make_service()).await {
            tracing::error!(address = %bound, error = %e, "serving {what}");
        }
    });
    tracing::info!(address = %bound, "serving {what} over HTTPS");
    Ok((bound, task))
}
