//! Serving the webhooks on every replica: the certificate (the controller's own CA and serving
//! certificate kept in a Secret and renewed before they expire, or certificates mounted from a
//! folder, reloaded when they change), the HTTPS server, and the webhook configurations with
//! the matching CA bundle (the components' filled in, or whole ones by URL): failing open, and
//! failing closed once a review that came through the API server reached the server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use butler_core::api::labels::FIELD_MANAGER;
use butler_runtime::apply::Applier;
use butler_runtime::error::{describe, not_found_ok};
use butler_runtime::shutdown::Shutdown;
use butler_runtime::webhook::certificates::{Pem, issue, needs_renewal, new_ca};
use butler_runtime::webhook::{Tls, serve};
use futures::FutureExt;
use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::Resource;
use kube::api::{Api, DynamicObject, PostParams};

use super::registration::{Endpoint, MUTATING, VALIDATING, configurations, fails_closed, fill_in, reached};
use super::{Caches, routes};

/// The CA lives ten years and is made anew in its last year; the serving certificate lives a
/// year and is made anew in its last thirty days.
const CA_DAYS: i64 = 3650;
const CA_RENEW_DAYS: i64 = 365;
const SERVING_DAYS: i64 = 365;
const SERVING_RENEW_DAYS: i64 = 30;

/// How the webhooks are served.
#[derive(Debug, Clone)]
pub struct ServingOptions {
    /// Where the HTTPS server listens (`0.0.0.0:9443`; port 0 picks a free one).
    pub address: SocketAddr,
    /// Serve `tls.crt` and `tls.key` of this folder (cert-manager's); its `ca.crt`, when there,
    /// is the CA bundle.
    pub cert_dir: Option<PathBuf>,
    /// Where the API server reaches the server.
    pub endpoint: Endpoint,
    /// Where the controller keeps its own certificates: namespace and Secret name.
    pub namespace: String,
    pub secret: String,
    /// The ClusterRole that owns the webhook configurations a controller outside the cluster
    /// registers (they go with it), if it exists.
    pub owner: Option<String>,
    /// How often the certificates are looked at again (mounted files change when cert-manager
    /// renews them; the controller's own are renewed long before they expire).
    pub recheck: Duration,
}

impl ServingOptions {
    /// How often to look at the certificates again by default: a minute for mounted ones, an
    /// hour for the controller's own.
    pub fn default_recheck(cert_dir: Option<&std::path::Path>) -> Duration {
        if cert_dir.is_some() { Duration::from_secs(60) } else { Duration::from_secs(3600) }
    }
}

/// The running webhook server.
pub struct Serving {
    /// The address the server is bound to.
    pub address: SocketAddr,
    pub run: BoxFuture<'static, ()>,
    pub ready: BoxFuture<'static, ()>,
}

/// The certificate served and the CA bundle that trusts it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Material {
    serving: Pem,
    ca_bundle: String,
}

/// The names the serving certificate covers.
fn names(options: &ServingOptions) -> Vec<String> {
    match &options.endpoint {
        Endpoint::Service { namespace, name } => {
            vec![format!("{name}.{namespace}.svc"), format!("{name}.{namespace}.svc.cluster.local")]
        }
        Endpoint::Url(url) => {
            let host = url.split("://").nth(1).unwrap_or(url).split(['/', ':']).next().unwrap_or_default();
            vec![host.to_string()]
        }
    }
}

fn text(secret: &Secret, key: &str) -> Option<String> {
    secret.data.as_ref()?.get(key).and_then(|v| String::from_utf8(v.0.clone()).ok())
}

/// The certificates of the Secret, made or renewed as needed. Replicas that race write with
/// the Secret's resourceVersion; the loser reads what the winner wrote.
async fn own_certificates(client: &kube::Client, options: &ServingOptions) -> Result<Material, String> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &options.namespace);
    let names = names(options);
    for _ in 0..5 {
        let now = jiff::Timestamp::now();
        let existing = not_found_ok(api.get(&options.secret).await).map_err(|e| {
            format!("reading the Secret {}/{}: {}", options.namespace, options.secret, describe(&e))
        })?;
        let stored = |key: &str| existing.as_ref().and_then(|s| text(s, key));
        let mut ca = match (stored("ca.crt"), stored("ca.key")) {
            (Some(cert), Some(key)) => Pem { cert, key },
            _ => Pem { cert: String::new(), key: String::new() },
        };
        let mut changed = false;
        if needs_renewal(&ca.cert, &[], now, CA_RENEW_DAYS) {
            ca = new_ca("butler-controller-webhook-ca", now, CA_DAYS).map_err(|e| e.to_string())?;
            changed = true;
        }
        let mut serving = match (stored("tls.crt"), stored("tls.key")) {
            (Some(cert), Some(key)) if !changed => Pem { cert, key },
            _ => Pem { cert: String::new(), key: String::new() },
        };
        if needs_renewal(&serving.cert, &names, now, SERVING_RENEW_DAYS) {
            serving = issue(&ca, &names, now, SERVING_DAYS).map_err(|e| e.to_string())?;
            changed = true;
        }
        let material = Material { serving: serving.clone(), ca_bundle: ca.cert.clone() };
        if !changed {
            return Ok(material);
        }
        let data = [
            ("ca.crt", &ca.cert),
            ("ca.key", &ca.key),
            ("tls.crt", &serving.cert),
            ("tls.key", &serving.key),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.clone().into_bytes())))
        .collect();
        let params = PostParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() };
        let written = match existing {
            Some(mut secret) => {
                secret.data = Some(data);
                api.replace(&options.secret, &params, &secret).await
            }
            None => {
                let mut secret = Secret::default();
                secret.metadata.name = Some(options.secret.clone());
                secret.metadata.namespace = Some(options.namespace.clone());
                secret.metadata.labels =
                    Some([("app.kubernetes.io/managed-by".to_string(), FIELD_MANAGER.to_string())].into());
                secret.data = Some(data);
                api.create(&params, &secret).await
            }
        };
        match written {
            Ok(_) => {
                tracing::info!(secret = %format!("{}/{}", options.namespace, options.secret), "made the webhook certificates");
                return Ok(material);
            }
            // Another replica wrote first: use what it wrote.
            Err(kube::Error::Api(status)) if status.code == 409 => continue,
            Err(e) => {
                return Err(format!(
                    "writing the Secret {}/{}: {}",
                    options.namespace,
                    options.secret,
                    describe(&e)
                ));
            }
        }
    }
    Err(format!(
        "the Secret {}/{} keeps changing under the controller; retrying later",
        options.namespace, options.secret
    ))
}

/// The certificates of the mounted folder.
fn mounted_certificates(dir: &std::path::Path) -> Result<Material, String> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("reading {}: {e}", dir.join(name).display()))
    };
    let serving = Pem { cert: read("tls.crt")?, key: read("tls.key")? };
    // cert-manager puts the CA beside; without it the chain's last certificate is the anchor.
    let ca_bundle = read("ca.crt").unwrap_or_else(|_| serving.cert.clone());
    Ok(Material { serving, ca_bundle })
}

async fn certificates(client: &kube::Client, options: &ServingOptions) -> Result<Material, String> {
    match &options.cert_dir {
        Some(dir) => mounted_certificates(dir),
        None => own_certificates(client, options).await,
    }
}

/// Registers the webhooks with `ca_bundle`; fails closed when `fail`, or when they did already.
/// Through a Service the configurations are the components' and only filled in; by URL the
/// controller applies whole ones.
async fn register(
    client: &kube::Client,
    options: &ServingOptions,
    ca_bundle: &str,
    fail: bool,
) -> Result<(), String> {
    match options.endpoint {
        Endpoint::Service { .. } => fill_in_shipped(client, ca_bundle, fail).await,
        Endpoint::Url(_) => register_whole(client, options, ca_bundle, fail).await,
    }
}

/// Fills in the CA bundle and failure policy of the configurations the components ship. One
/// that does not exist is not made: the controller has no right to, and a configuration of
/// its own would escape the components' owner.
async fn fill_in_shipped(client: &kube::Client, ca_bundle: &str, fail: bool) -> Result<(), String> {
    let applier = Applier::new(client.clone(), FIELD_MANAGER);
    for (kind, name) in
        [("ValidatingWebhookConfiguration", VALIDATING), ("MutatingWebhookConfiguration", MUTATING)]
    {
        let reference = butler_runtime::objects::ObjectRef::of(&serde_json::json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
        }));
        let Some(current) = applier.get(&reference).await? else {
            return Err(format!(
                "the {kind} {name} does not exist: the core components ship it (install or upgrade the core provider), or run the controller with --webhook-url to register its own"
            ));
        };
        let current = serde_json::to_value(&current).map_err(|e| e.to_string())?;
        let wanted = fill_in(&current, ca_bundle, fail || reached(&current));
        if !butler_runtime::objects::holds(&current, &wanted) {
            applier.apply_in_place(&wanted).await?;
        }
    }
    Ok(())
}

/// Applies whole configurations (a controller outside the cluster, by URL).
async fn register_whole(
    client: &kube::Client,
    options: &ServingOptions,
    ca_bundle: &str,
    fail: bool,
) -> Result<(), String> {
    let owner = match &options.owner {
        Some(name) => not_found_ok(Api::<ClusterRole>::all(client.clone()).get(name).await)
            .map_err(|e| format!("reading the ClusterRole {name}: {}", describe(&e)))?
            .and_then(|role| role.controller_owner_ref(&()))
            .map(|mut r| {
                r.controller = Some(false);
                r.block_owner_deletion = Some(false);
                r
            }),
        None => None,
    };
    let applier = Applier::new(client.clone(), FIELD_MANAGER);
    for wanted in configurations(&options.endpoint, ca_bundle, fail, owner.as_ref()) {
        let reference = butler_runtime::objects::ObjectRef::of(&wanted);
        let current: Option<DynamicObject> = applier.get(&reference).await?;
        let closed =
            fail || current.is_some_and(|c| fails_closed(&serde_json::to_value(&c).unwrap_or_default()));
        let [validating, mutating] = configurations(&options.endpoint, ca_bundle, closed, owner.as_ref());
        let object = if wanted["kind"] == "ValidatingWebhookConfiguration" { validating } else { mutating };
        applier.apply(&object, false).await?;
    }
    Ok(())
}

/// How long the webhooks may go unreached before the controller says so.
const NOT_REACHED_AFTER: Duration = Duration::from_secs(60);

/// Says (a log line and a Warning event on the validating configuration) that the API server
/// has not reached the webhooks, so they stay failing open, and where to look.
async fn not_reached(client: &kube::Client, options: &ServingOptions) {
    use kube::runtime::events::{Event, EventType, Recorder, Reporter};
    let where_ = match &options.endpoint {
        Endpoint::Service { namespace, name } => format!(
            "the Service {namespace}/{name}: check that it exists and has endpoints (a controller outside the cluster needs --webhook-url)"
        ),
        Endpoint::Url(url) => format!("{url}: check that the API server can reach it"),
    };
    let note = format!(
        "the API server has not called the webhooks in {} s, so they stay failurePolicy Ignore (Butler's objects are admitted without them when the call fails); they are reached at {where_}",
        NOT_REACHED_AFTER.as_secs()
    );
    tracing::warn!("{note}");
    let recorder =
        Recorder::new(client.clone(), Reporter { controller: FIELD_MANAGER.into(), instance: None });
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some("admissionregistration.k8s.io/v1".into()),
        kind: Some("ValidatingWebhookConfiguration".into()),
        name: Some(super::registration::VALIDATING.into()),
        ..Default::default()
    };
    let event = Event {
        type_: EventType::Warning,
        reason: "WebhooksNotReached".into(),
        note: Some(note),
        action: "Register".into(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &reference).await {
        tracing::warn!(error = %e, "cannot publish an event");
    }
}

/// Starts the webhook server: certificates, caches, HTTPS, then the registration and the
/// renewal loop (driven by `run`).
pub async fn start(
    client: kube::Client,
    options: ServingOptions,
    shutdown: Shutdown,
) -> Result<Serving, String> {
    let material = certificates(&client, &options).await?;
    let tls = Tls::from_pem(&material.serving.cert, &material.serving.key).map_err(|e| e.to_string())?;
    let (caches, caches_run, ready) = Caches::start(&client);
    let reached = Arc::new(AtomicBool::new(false));
    let (address, server) = serve(options.address, &tls, routes(caches, reached.clone()), shutdown.clone())
        .await
        .map_err(|e| e.to_string())?;
    let check_every = options.recheck;
    let keeper = async move {
        let mut current = material;
        let mut closed = false;
        let started = std::time::Instant::now();
        let mut told = false;
        loop {
            // Fail closed only once a review came through the API server: a server that answers
            // here may still be out of the API server's reach (a Service that does not exist, a
            // controller outside the cluster without --webhook-url), and failing closed then
            // would refuse every write of Butler's kinds in the cluster.
            if !closed {
                closed = reached.load(Ordering::Relaxed);
                if !closed && !told && started.elapsed() >= NOT_REACHED_AFTER {
                    told = true;
                    not_reached(&client, &options).await;
                }
            }
            if let Err(e) = register(&client, &options, &current.ca_bundle, closed).await {
                tracing::warn!(error = %e, "registering the webhook configurations; trying again");
                closed = false;
            }
            let wait = if closed { check_every } else { Duration::from_secs(2) };
            tokio::select! {
                _ = shutdown.clone() => return,
                _ = tokio::time::sleep(wait) => {}
            }
            match certificates(&client, &options).await {
                Ok(fresh) if fresh != current => {
                    match tls.reload(&fresh.serving.cert, &fresh.serving.key) {
                        Ok(()) => tracing::info!("serving the renewed webhook certificate"),
                        Err(e) => {
                            tracing::warn!(error = %e, "the renewed webhook certificate cannot be served")
                        }
                    }
                    current = fresh;
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "checking the webhook certificates"),
            }
        }
    };
    let run = async move {
        tokio::select! {
            _ = caches_run => {}
            _ = keeper => {}
        }
        let _ = server.await;
    }
    .boxed();
    Ok(Serving { address, run, ready })
}
