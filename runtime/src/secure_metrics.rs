//! `/metrics` as controller-runtime's secure metrics serve it: over HTTPS, to a bearer token
//! that the API server authenticates (TokenReview) and authorizes for `get` on the path
//! (SubjectAccessReview, as RBAC's `nonResourceURLs: [/metrics]` grants it). A decision is kept
//! for [`KEEP_DECISION`] by the token's digest, so that a scraper every few seconds costs the API
//! server two requests now and then, not two a scrape.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

use crate::webhook::Tls;
use crate::webhook::certificates;

/// How long a decision about a token is kept (controller-runtime's delegating authenticator
/// keeps its answers 10 s).
pub const KEEP_DECISION: Duration = Duration::from_secs(10);
/// Decisions kept at the most; past it the expired ones go, then all.
const MOST_DECISIONS: usize = 1024;

/// What the API server said about a token and a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allowed,
    /// Not a token the API server knows (or none): 401.
    Unauthenticated,
    /// A known user without `get` on the path: 403, naming the user.
    Forbidden(String),
}

/// Asks the API server, and remembers its answers a moment.
pub struct Guard {
    client: kube::Client,
    decisions: Mutex<HashMap<[u8; 32], (Instant, Decision)>>,
}

impl Guard {
    pub fn new(client: kube::Client) -> Arc<Guard> {
        Arc::new(Guard { client, decisions: Mutex::new(HashMap::new()) })
    }

    /// The decision for a request's `Authorization` header on `path`.
    pub async fn decide(&self, authorization: Option<&str>, path: &str) -> Result<Decision, String> {
        let Some(token) =
            authorization.and_then(|a| a.strip_prefix("Bearer ")).map(str::trim).filter(|t| !t.is_empty())
        else {
            return Ok(Decision::Unauthenticated);
        };
        let key: [u8; 32] =
            Sha256::new().chain_update(token).chain_update([0]).chain_update(path).finalize().into();
        if let Some((at, decision)) = self.decisions.lock().expect("not poisoned").get(&key)
            && at.elapsed() < KEEP_DECISION
        {
            return Ok(decision.clone());
        }
        let decision = self.ask(token, path).await?;
        let mut decisions = self.decisions.lock().expect("not poisoned");
        if decisions.len() >= MOST_DECISIONS {
            decisions.retain(|_, (at, _)| at.elapsed() < KEEP_DECISION);
            if decisions.len() >= MOST_DECISIONS {
                decisions.clear();
            }
        }
        decisions.insert(key, (Instant::now(), decision.clone()));
        Ok(decision)
    }

    async fn ask(&self, token: &str, path: &str) -> Result<Decision, String> {
        let failed = |what: &str, e: kube::Error| {
            format!("asking the API server {what}: {}", crate::error::describe(&e))
        };
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_string()), ..Default::default() },
            ..Default::default()
        };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| failed("who a token is (TokenReview)", e))?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Ok(Decision::Unauthenticated),
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username.clone(),
                uid: user.uid.clone(),
                groups: user.groups.clone(),
                extra: user.extra.clone(),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some("get".into()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| failed("what a user may do (SubjectAccessReview)", e))?;
        let name = user.username.unwrap_or_default();
        Ok(match decided.status.is_some_and(|s| s.allowed) {
            true => Decision::Allowed,
            false => Decision::Forbidden(name),
        })
    }
}

/// The middleware in front of `/metrics`: 401 without a known token, 403 without `get` on the
/// path, 503 when the API server cannot say.
pub async fn check(State(guard): State<Arc<Guard>>, request: Request, next: Next) -> Response {
    let authorization = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let path = request.uri().path().to_string();
    match guard.decide(authorization, &path).await {
        Ok(Decision::Allowed) => next.run(request).await,
        Ok(Decision::Unauthenticated) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "Unauthorized: send a ServiceAccount token (Authorization: Bearer ...)\n",
        )
            .into_response(),
        Ok(Decision::Forbidden(user)) => (
            StatusCode::FORBIDDEN,
            format!("Forbidden: {user} may not get {path}; bind it a ClusterRole with nonResourceURLs [{path}], verbs [get]\n"),
        )
            .into_response(),
        Err(message) => {
            tracing::warn!(error = %message, "cannot decide a metrics request");
            (StatusCode::SERVICE_UNAVAILABLE, format!("{message}\n")).into_response()
        }
    }
}

/// The serving certificate: `tls.crt` and `tls.key` of `dir`, read again when they change (a
/// cert-manager renewal), or, without a folder, one signed by a CA made at start, as
/// controller-runtime does (scrapers then skip verification, or trust nothing but the token).
pub fn certificate(dir: Option<&Path>) -> Result<Tls, String> {
    let Some(dir) = dir else {
        let now = jiff::Timestamp::now();
        let ca = certificates::new_ca("butler-metrics-ca", now, 365).map_err(|e| e.to_string())?;
        let names = ["localhost".to_string(), "127.0.0.1".to_string()];
        let pem = certificates::issue(&ca, &names, now, 365).map_err(|e| e.to_string())?;
        return Tls::from_pem(&pem.cert, &pem.key).map_err(|e| e.to_string());
    };
    let (cert, key) = read_pair(dir)?;
    let tls = Tls::from_pem(&cert, &key).map_err(|e| format!("{}: {e}", dir.display()))?;
    tokio::spawn(reload_on_change(dir.to_path_buf(), tls.clone()));
    Ok(tls)
}

fn read_pair(dir: &Path) -> Result<(String, String), String> {
    let read = |name: &str| {
        std::fs::read_to_string(dir.join(name))
            .map_err(|e| format!("reading {} (--metrics-cert-dir): {e}", dir.join(name).display()))
    };
    Ok((read("tls.crt")?, read("tls.key")?))
}

fn modified(dir: &Path) -> Option<(SystemTime, SystemTime)> {
    let at = |name: &str| std::fs::metadata(dir.join(name)).and_then(|m| m.modified()).ok();
    Some((at("tls.crt")?, at("tls.key")?))
}

/// Serves the files anew once they change (checked every 10 s).
async fn reload_on_change(dir: PathBuf, tls: Tls) {
    let mut seen = modified(&dir);
    loop {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let now = modified(&dir);
        if now == seen {
            continue;
        }
        match read_pair(&dir).and_then(|(cert, key)| tls.reload(&cert, &key).map_err(|e| e.to_string())) {
            Ok(()) => {
                tracing::info!(dir = %dir.display(), "serving the renewed metrics certificate");
                seen = now;
            }
            // Half-written (a renewal under way): read again at the next look.
            Err(e) => tracing::warn!(error = %e, "the metrics certificate does not read yet"),
        }
    }
}
