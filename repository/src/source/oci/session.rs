//! Reading from a registry as the distribution specification describes (`GET` of tags,
//! manifests and blobs, the token handshake of its `401` answers), through the repository
//! client's own HTTP: every hop of a redirect (registries send blobs to object stores) is checked
//! as the first URL is (its addresses, no step down from https), credentials never leave the
//! registry's host or its named token service, never travel over plain HTTP, and every answer is
//! read through a size limit. oci-client follows redirects with its own client and reads
//! manifests whole, so it publishes (the command line's) but does not read here.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use base64::Engine;
use http::{HeaderMap, HeaderValue, header};
use oci_client::secrets::RegistryAuth;

use super::OciOptions;
use super::credentials::{Login, login_material, refused};
use super::refresh::{self, Challenge};
use crate::digest::sha256_hex;
use crate::error::{RepositoryError, Result};
use crate::http::{HttpOptions, SendError, follow, read_within};

/// How long a user and password that a registry took by `Basic` are sent without asking first.
const BASIC_LIFETIME: Duration = Duration::from_secs(3600);

/// What is sent as `Authorization`, kept per registry, repository and credentials until it
/// expires, so a reconcile does not start each read with a refused request.
type Key = (String, String, String);
static AUTHORIZATIONS: Mutex<BTreeMap<Key, (HeaderValue, Instant)>> = Mutex::new(BTreeMap::new());
/// More than this and the store starts again (rotated credentials leave old entries).
const MOST: usize = 256;

/// One repository of one registry, as a source reads it.
pub(super) struct Session {
    client: reqwest::Client,
    http: HttpOptions,
    /// `https://registry` (or `http://` for a registry the options list as plain HTTP).
    base: String,
    registry: String,
    repository: String,
    login: Login,
    plain_http: bool,
    token_hosts: Vec<String>,
    options: OciOptions,
}

/// A body read within its limit, and the status it came with.
pub(super) struct Received {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Session {
    /// A session for `registry/repository`; credentials over plain HTTP are refused here,
    /// before anything is sent.
    pub fn new(
        options: &OciOptions,
        http: &HttpOptions,
        registry: &str,
        repository: &str,
        plain_http: bool,
    ) -> Result<Session> {
        let plain_http = plain_http || options.is_insecure(registry);
        let reference = format!("oci://{registry}/{repository}");
        let login = options.login_for(registry);
        if plain_http && !matches!(login, Login::Auth(RegistryAuth::Anonymous)) {
            return Err(RepositoryError::Oci {
                reference,
                message: "the registry is reached over plain HTTP, where credentials are never sent; serve it over HTTPS (with OCI_CA_CERT for a private CA) or read it without credentials".into(),
            });
        }
        let client = crate::http::shared_client(http, &options.ca_certificates).map_err(|message| {
            RepositoryError::Oci {
                reference: reference.clone(),
                message: format!("{message}; check the CA certificates ({})", super::CA_VARIABLE),
            }
        })?;
        Ok(Session {
            client,
            http: http.clone(),
            base: format!("{}://{registry}", if plain_http { "http" } else { "https" }),
            registry: registry.to_string(),
            repository: repository.to_string(),
            login,
            plain_http,
            token_hosts: options.token_hosts.clone(),
            options: options.clone(),
        })
    }

    fn reference(&self) -> String {
        format!("oci://{}/{}", self.registry, self.repository)
    }

    fn key(&self) -> Key {
        (self.registry.clone(), self.repository.clone(), sha256_hex(login_material(&self.login).as_bytes()))
    }

    /// `GET {base}/v2/{repository}/{path}`, answered within `limit` bytes: a 2xx answer or
    /// 404; any other status is an error that says what to do (the registry's words go to the
    /// log only). Retried as the other sources' requests are.
    pub async fn get(&self, path: &str, accept: &[&str], limit: u64, what: &str) -> Result<Received> {
        let url = format!("{}/v2/{}/{path}", self.base, self.repository);
        let mut attempt = 0;
        loop {
            match self.get_once(&url, accept, limit, what).await {
                Err(Retry::Again(message)) if attempt < self.http.retries => {
                    tracing::debug!(%url, %message, "retrying a registry read");
                    tokio::time::sleep(self.http.backoff * 2u32.pow(attempt)).await;
                    attempt += 1;
                }
                Err(Retry::Again(message)) => {
                    return Err(RepositoryError::Network { url, message: format!("{what}: {message}") });
                }
                Err(Retry::Never(e)) => return Err(e),
                Ok(received) => return Ok(received),
            }
        }
    }

    async fn get_once(
        &self,
        url: &str,
        accept: &[&str],
        limit: u64,
        what: &str,
    ) -> std::result::Result<Received, Retry> {
        let mut headers = HeaderMap::new();
        if let Some(value) =
            (!accept.is_empty()).then(|| HeaderValue::from_str(&accept.join(", ")).ok()).flatten()
        {
            headers.insert(header::ACCEPT, value);
        }
        // A token or password that worked before goes first; else a given token; else the
        // registry's challenge says what it wants.
        let stored = self.stored();
        let given = match stored {
            Some(_) => None,
            None => self.given().await.map_err(Retry::Never)?,
        };
        let mut response = self.send(url, &headers, stored.clone().or(given.clone())).await?;
        if response.status() == 401 && given.is_none() {
            if stored.is_some() {
                self.forget();
            }
            let challenge = response
                .headers()
                .get(header::WWW_AUTHENTICATE)
                .and_then(|h| h.to_str().ok())
                .map(String::from);
            let authorization = self.answer(challenge.as_deref(), what).await?;
            response = self.send(url, &headers, Some(authorization)).await?;
        }
        let status = response.status().as_u16();
        match status {
            200..=299 => {
                let body = read_within(response, limit).await.map_err(Retry::from)?.ok_or_else(|| {
                    Retry::Never(RepositoryError::TooLarge {
                        what: format!("{what} from {}", self.reference()),
                        limit,
                    })
                })?;
                Ok(Received { status, body })
            }
            404 => Ok(Received { status, body: Vec::new() }),
            401 | 403 => {
                self.forget();
                Err(Retry::Never(refused(&self.reference(), what)))
            }
            500.. => Err(Retry::Again(format!("HTTP {status}"))),
            _ => Err(Retry::Never(RepositoryError::Oci {
                reference: self.reference(),
                message: format!("{what}: the registry answered HTTP {status}"),
            })),
        }
    }

    async fn send(
        &self,
        url: &str,
        headers: &HeaderMap,
        authorization: Option<HeaderValue>,
    ) -> std::result::Result<reqwest::Response, Retry> {
        let mut headers = headers.clone();
        if let Some(value) = authorization {
            headers.insert(header::AUTHORIZATION, value);
        }
        follow(&self.client, &self.http.network, url, headers).await.map_err(Retry::from)
    }

    /// What worked before for these credentials, while it lives.
    fn stored(&self) -> Option<HeaderValue> {
        let store = AUTHORIZATIONS.lock().expect("not poisoned");
        let (value, until) = store.get(&self.key())?;
        (Instant::now() < *until).then(|| value.clone())
    }

    /// A token the credentials are: the given access token, or one traded for the refresh
    /// token.
    async fn given(&self) -> Result<Option<HeaderValue>> {
        let token = match &self.login {
            Login::Auth(RegistryAuth::Bearer(token)) => token.clone(),
            Login::Refresh(token) => {
                refresh::access_token(
                    &self.options,
                    &self.http,
                    &self.registry,
                    &self.repository,
                    self.plain_http,
                    false,
                    token,
                )
                .await?
            }
            Login::Auth(_) => return Ok(None),
        };
        Ok(Some(bearer(&token)))
    }

    fn remember(&self, value: &HeaderValue, lifetime: Duration) {
        let mut store = AUTHORIZATIONS.lock().expect("not poisoned");
        if store.len() >= MOST {
            store.clear();
        }
        store.insert(self.key(), (value.clone(), Instant::now() + lifetime));
    }

    fn forget(&self) {
        AUTHORIZATIONS.lock().expect("not poisoned").remove(&self.key());
    }

    /// The `Authorization` that answers a `401`'s challenge: the user and password for
    /// `Basic`; for `Bearer`, a token from the registry's token service (asked with the user
    /// and password only when it is on the registry's host or one `OCI_TOKEN_HOSTS` names).
    async fn answer(&self, challenge: Option<&str>, what: &str) -> std::result::Result<HeaderValue, Retry> {
        let basic = match &self.login {
            Login::Auth(RegistryAuth::Basic(user, password)) => Some(basic(user, password)),
            _ => None,
        };
        let bearer_challenge = challenge.and_then(refresh::parse_challenge);
        let asks_basic = challenge.is_some_and(|c| c.trim_start().to_ascii_lowercase().starts_with("basic"));
        let (value, lifetime) = match (bearer_challenge, basic) {
            (Some(challenge), credentials) => self.token(&challenge, credentials, what).await?,
            (None, Some(credentials)) if asks_basic => (credentials, BASIC_LIFETIME),
            (None, _) => return Err(Retry::Never(refused(&self.reference(), what))),
        };
        self.remember(&value, lifetime);
        Ok(value)
    }

    /// A token from the token service of `challenge`, scoped to pull this repository.
    async fn token(
        &self,
        challenge: &Challenge,
        credentials: Option<HeaderValue>,
        what: &str,
    ) -> std::result::Result<(HeaderValue, Duration), Retry> {
        let fail =
            |message: String| Retry::Never(RepositoryError::Oci { reference: self.reference(), message });
        let hosts: &[String] = &self.token_hosts;
        match &credentials {
            Some(_) => refresh::check_realm(&challenge.realm, &self.registry, hosts, self.plain_http),
            // Nothing of ours goes along: any host, but still https unless the registry is not.
            None => refresh::check_realm_scheme(&challenge.realm, self.plain_http),
        }
        .map_err(fail)?;
        let mut url = reqwest::Url::parse(&challenge.realm).map_err(|e| {
            fail(format!("the registry's token service {:?} is not a URL: {e}", challenge.realm))
        })?;
        {
            let mut query = url.query_pairs_mut();
            if let Some(service) = &challenge.service {
                query.append_pair("service", service);
            }
            query.append_pair("scope", &refresh::scope(&self.repository, false));
        }
        let mut headers = HeaderMap::new();
        if let Some(value) = credentials {
            headers.insert(header::AUTHORIZATION, value);
        }
        let response =
            follow(&self.client, &self.http.network, url.as_str(), headers).await.map_err(Retry::from)?;
        let status = response.status().as_u16();
        if status == 401 || status == 403 {
            return Err(Retry::Never(refused(&self.reference(), what)));
        }
        if status >= 500 {
            return Err(Retry::Again(format!("the token service answered HTTP {status}")));
        }
        let body = read_within(response, 1 << 20)
            .await
            .map_err(Retry::from)?
            .ok_or_else(|| fail("the token service's answer is larger than 1 MiB".into()))?;
        if status != 200 {
            return Err(fail(format!("the token service {} answered HTTP {status}", challenge.realm)));
        }
        let (token, lifetime) = refresh::parse_answer(&body).map_err(fail)?;
        Ok((bearer(&token), lifetime.saturating_sub(refresh::MARGIN)))
    }
}

/// Worth asking again (a network failure, a 5xx answer) or not.
enum Retry {
    Again(String),
    Never(RepositoryError),
}

impl From<SendError> for Retry {
    fn from(e: SendError) -> Retry {
        match e {
            SendError::Transient(message) => Retry::Again(message),
            SendError::Fatal(e) => Retry::Never(e),
        }
    }
}

fn bearer(token: &str) -> HeaderValue {
    let mut value = HeaderValue::from_str(&format!("Bearer {token}")).unwrap_or(HeaderValue::from_static(""));
    value.set_sensitive(true);
    value
}

fn basic(user: &str, password: &str) -> HeaderValue {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let mut value = HeaderValue::from_str(&format!("Basic {encoded}")).expect("base64 is a header value");
    value.set_sensitive(true);
    value
}
