//! HTTP for the remote sources: conditional requests through the [`Cache`], retries with backoff
//! on 5xx answers and network failures, a size limit on every download, an offline mode, and
//! GitHub's rate-limit answer turned into its own error.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use http::{HeaderMap, HeaderValue, header};

use crate::cache::Cache;
use crate::error::RepositoryError;
use crate::network::{NetworkPolicy, PolicyResolver, Refusal};

/// Redirects followed at most, as browsers and reqwest do.
const MAX_REDIRECTS: usize = 10;

/// What every request of the repository client calls itself.
pub(crate) const USER_AGENT: &str = concat!("butler-repository/", env!("CARGO_PKG_VERSION"));

/// How remote fetches behave.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where responses are cached; `None` disables caching.
    pub cache: Option<Cache>,
    /// Serve from the cache alone, never touching the network.
    pub offline: bool,
    /// The largest download accepted, in bytes.
    pub max_download: u64,
    /// Retries after a 5xx answer or a network failure.
    pub retries: u32,
    /// The first backoff; it doubles with every retry.
    pub backoff: Duration,
    /// The limit of one request.
    pub timeout: Duration,
    /// The addresses requests and their redirects may reach.
    pub network: NetworkPolicy,
    /// Which HTTP proxy requests go through.
    pub proxy: ProxySetting,
}

/// Which HTTP proxy requests go through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ProxySetting {
    /// `HTTPS_PROXY`, `HTTP_PROXY` and `NO_PROXY` of the environment, as clusterctl reads them:
    /// the command line's, run by whoever sets them.
    #[default]
    Environment,
    /// None: the operator's, whose environment anyone who edits its Deployment may change, and
    /// whose address checks a proxy would bypass (the proxy resolves the names).
    Off,
    /// This one, configured on purpose.
    Url(String),
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            cache: Some(Cache::new(Cache::default_dir(), Duration::from_secs(24 * 3600))),
            offline: false,
            max_download: 64 << 20,
            retries: 3,
            backoff: Duration::from_millis(250),
            timeout: Duration::from_secs(30),
            network: NetworkPolicy::default(),
            proxy: ProxySetting::Environment,
        }
    }
}

/// An answer, with the headers that matter.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// Why sending failed before an answer came.
pub enum SendError {
    /// A network failure or a timeout: worth retrying.
    Transient(String),
    /// Not worth retrying (a download over the limit, a bad URL).
    Fatal(RepositoryError),
}

/// A fetched body and the `Link` header that came with it.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub body: Vec<u8>,
    pub link: Option<String>,
}

/// The HTTP client of the remote sources.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    pub options: HttpOptions,
}

fn header_text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(String::from)
}

impl Http {
    pub fn new(options: HttpOptions) -> Http {
        let client =
            guarded_client(&options, &[]).expect("a reqwest client with a crypto provider installed");
        Http { client, options }
    }

    /// A conditional, retried, size-limited GET through reqwest. Redirects are followed hop by
    /// hop under the same rules as the first URL (its addresses, no step down from https to
    /// http), and `headers` (credentials among them) go to the first host only.
    pub async fn get(
        &self,
        url: &str,
        headers: &HeaderMap,
        credential: Option<&str>,
    ) -> Result<Fetched, RepositoryError> {
        let client = self.client.clone();
        let limit = self.options.max_download;
        let policy = self.options.network.clone();
        self.fetch(url, credential, |conditional| {
            let mut all = headers.clone();
            all.extend(conditional);
            let (client, policy, url) = (client.clone(), policy.clone(), url.to_string());
            async move {
                let response = follow(&client, &policy, &url, all).await?;
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let body = read_within(response, limit).await?.ok_or_else(|| {
                    SendError::Fatal(RepositoryError::TooLarge { what: url.clone(), limit })
                })?;
                Ok(Answer { status, headers, body })
            }
        })
        .await
    }

    /// The cache, retry and error handling around any sender; `send` gets the conditional
    /// headers to add. `credential` is what the request carries (a token), when anything: what
    /// it fetched is cached apart, under a digest of it, so that the cache (offline mode above
    /// all) never serves to one reader what only another's credentials could read.
    pub async fn fetch<F, Fut>(
        &self,
        url: &str,
        credential: Option<&str>,
        send: F,
    ) -> Result<Fetched, RepositoryError>
    where
        F: Fn(HeaderMap) -> Fut,
        Fut: Future<Output = Result<Answer, SendError>>,
    {
        let authenticated = credential.is_some();
        let key = cache_key(url, credential);
        let cache = self.options.cache.as_ref();
        if self.options.offline {
            let cache = cache.ok_or_else(|| RepositoryError::NotCached {
                url: url.to_string(),
                cache: "(no cache)".into(),
            })?;
            return cache.lookup(&key).map(|e| Fetched { body: e.body, link: e.link }).ok_or_else(|| {
                RepositoryError::NotCached { url: url.to_string(), cache: cache.dir().to_path_buf() }
            });
        }
        let cached =
            cache.and_then(|c| c.lookup(&key)).filter(|e| cache.is_some_and(|c| e.age < c.max_age()));
        let mut conditional = HeaderMap::new();
        if let Some(entry) = &cached {
            if let Some(value) = entry.etag.as_deref().and_then(|e| HeaderValue::from_str(e).ok()) {
                conditional.insert(header::IF_NONE_MATCH, value);
            }
            if let Some(value) = entry.last_modified.as_deref().and_then(|e| HeaderValue::from_str(e).ok()) {
                conditional.insert(header::IF_MODIFIED_SINCE, value);
            }
        }
        let mut attempt = 0;
        let answer = loop {
            let result = send(conditional.clone()).await;
            let retry = match &result {
                Err(SendError::Transient(_)) => true,
                Ok(answer) => answer.status >= 500,
                Err(SendError::Fatal(_)) => false,
            };
            if retry && attempt < self.options.retries {
                tokio::time::sleep(self.options.backoff * 2u32.pow(attempt)).await;
                attempt += 1;
                continue;
            }
            match result {
                Ok(answer) => break answer,
                Err(SendError::Fatal(e)) => return Err(e),
                Err(SendError::Transient(message)) => {
                    return Err(RepositoryError::Network { url: url.to_string(), message });
                }
            }
        };
        match answer.status {
            304 => {
                let entry = cached.ok_or_else(|| RepositoryError::Http {
                    url: url.to_string(),
                    status: 304,
                    message: "Not Modified, but nothing is cached".into(),
                })?;
                if let Some(cache) = cache {
                    cache.touch(&key)?;
                }
                Ok(Fetched { body: entry.body, link: entry.link })
            }
            200..=299 => {
                let link = header_text(&answer.headers, "link");
                if let Some(cache) = cache {
                    let etag = header_text(&answer.headers, "etag");
                    let modified = header_text(&answer.headers, "last-modified");
                    if etag.is_some() || modified.is_some() {
                        cache.store(
                            &key,
                            &answer.body,
                            etag.as_deref(),
                            modified.as_deref(),
                            link.as_deref(),
                        )?;
                    }
                }
                Ok(Fetched { body: answer.body, link })
            }
            404 => Err(RepositoryError::NotFound { what: url.to_string(), location: "the server".into() }),
            403 | 429 if header_text(&answer.headers, "x-ratelimit-remaining").as_deref() == Some("0") => {
                Err(rate_limited(&answer.headers, authenticated))
            }
            status => {
                // The body is the server's, not ours to repeat: it goes to the log, and the
                // error (which reaches conditions) says the status alone.
                tracing::debug!(%url, status, body = %summary(&answer.body), "the server refused");
                Err(RepositoryError::Http { url: url.to_string(), status, message: reason_phrase(status) })
            }
        }
    }
}

/// Where the cache keeps what `url` answered to a request carrying `credential`: the URL alone
/// for anonymous requests, else beside a digest of the credential (never the credential).
pub(crate) fn cache_key(url: &str, credential: Option<&str>) -> String {
    match credential {
        None => url.to_string(),
        Some(c) => format!("{url}#credential={}", &crate::digest::sha256_hex(c.as_bytes())[..16]),
    }
}

/// A client whose requests reach only what `options.network` permits (checked on resolved
/// addresses) and follow no redirect by themselves (see [`follow`]), trusting the system's roots
/// and the PEM certificates of `extra_roots`.
pub(crate) fn guarded_client(
    options: &HttpOptions,
    extra_roots: &[String],
) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .timeout(options.timeout)
        .user_agent(USER_AGENT)
        .redirect(reqwest::redirect::Policy::none())
        .dns_resolver(PolicyResolver(std::sync::Arc::new(options.network.clone())));
    builder = match &options.proxy {
        ProxySetting::Environment => builder,
        ProxySetting::Off => builder.no_proxy(),
        ProxySetting::Url(url) => builder
            .no_proxy()
            .proxy(reqwest::Proxy::all(url.as_str()).map_err(|e| format!("the proxy {url:?}: {e}"))?),
    };
    for pem in extra_roots {
        let certificates =
            reqwest::Certificate::from_pem_bundle(pem.as_bytes()).map_err(|e| format!("not PEM: {e}"))?;
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    builder.build().map_err(|e| format!("cannot make an HTTP client: {e}"))
}

/// A response's body, or `None` once it holds more than `limit` bytes (read no further).
pub(crate) async fn read_within(
    response: reqwest::Response,
    limit: u64,
) -> Result<Option<Vec<u8>>, SendError> {
    butler_runtime::network::read_within(response, limit)
        .await
        .map_err(|e| SendError::Transient(e.to_string()))
}

/// Sends a GET and follows its redirects: each hop's address is checked (by the resolver for a
/// name, here for an address written in the URL), https never steps down to http, and the
/// caller's headers stay with the first host (a redirect elsewhere gets the conditional ones
/// and `Accept` only).
pub(crate) async fn follow(
    client: &reqwest::Client,
    policy: &NetworkPolicy,
    url: &str,
    headers: HeaderMap,
) -> Result<reqwest::Response, SendError> {
    let refused = |why: String| SendError::Fatal(RepositoryError::Refused { url: url.to_string(), why });
    let mut current = reqwest::Url::parse(url).map_err(|e| refused(format!("not a URL: {e}")))?;
    let first = current.clone();
    for _ in 0..=MAX_REDIRECTS {
        if let Some(why) = policy.refusal_of_url(&current) {
            return Err(refused(why));
        }
        let same_host = current.host_str() == first.host_str() && current.port() == first.port();
        let headers = if same_host { headers.clone() } else { crossing(&headers) };
        let response =
            client.get(current.clone()).headers(headers).send().await.map_err(|e| match refusal_in(&e) {
                Some(why) => refused(why),
                None => SendError::Transient(e.to_string()),
            })?;
        let location = response.headers().get(header::LOCATION).and_then(|l| l.to_str().ok());
        let (true, Some(location)) = (response.status().is_redirection(), location) else {
            return Ok(response);
        };
        current = next_hop(&current, location).map_err(refused)?;
    }
    Err(refused(format!("more than {MAX_REDIRECTS} redirects")))
}

/// The headers a redirect to another host keeps: what the request asks for and what it holds
/// cached, never a credential (whatever its header: `Authorization`, GitLab's `PRIVATE-TOKEN`).
fn crossing(headers: &HeaderMap) -> HeaderMap {
    const KEPT: [header::HeaderName; 4] =
        [header::ACCEPT, header::IF_NONE_MATCH, header::IF_MODIFIED_SINCE, header::RANGE];
    headers.iter().filter(|(name, _)| KEPT.contains(name)).map(|(n, v)| (n.clone(), v.clone())).collect()
}

/// Where a redirect from `current` to `location` goes, unless it steps down from https.
fn next_hop(current: &reqwest::Url, location: &str) -> Result<reqwest::Url, String> {
    let next = current.join(location).map_err(|e| format!("a redirect to {location:?}: {e}"))?;
    if current.scheme() == "https" && next.scheme() != "https" {
        return Err(format!("a redirect from https to {next} would drop TLS"));
    }
    Ok(next)
}

/// The network policy's refusal somewhere in a reqwest error's causes (the resolver's error).
pub(crate) fn refusal_in(error: &reqwest::Error) -> Option<String> {
    let mut cause: Option<&dyn std::error::Error> = std::error::Error::source(error);
    while let Some(e) = cause {
        if let Some(refusal) = e.downcast_ref::<Refusal>() {
            return Some(refusal.0.clone());
        }
        cause = e.source();
    }
    None
}

/// GitHub's rate-limit answer: when the limit resets and what to do.
fn rate_limited(headers: &HeaderMap, authenticated: bool) -> RepositoryError {
    let reset =
        header_text(headers, "x-ratelimit-reset").and_then(|r| r.parse::<i64>().ok()).unwrap_or_default();
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or_default();
    let reset_at = jiff::Timestamp::from_second(reset)
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_default();
    let hint = if authenticated {
        "Wait until then, or use another token in GITHUB_TOKEN."
    } else {
        "Set GITHUB_TOKEN to a GitHub token to raise the limit from 60 to 5,000 requests an hour."
    };
    RepositoryError::RateLimited { reset_at, minutes: ((reset - now).max(0) + 59) / 60, hint }
}

/// The standard words of an HTTP status (`Forbidden`).
fn reason_phrase(status: u16) -> String {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("an error status")
        .to_string()
}

/// The start of an error body, or its `message` when it is JSON (for the log).
fn summary(body: &[u8]) -> String {
    if let Ok(json) = serde_json::from_slice::<serde_json::Value>(body)
        && let Some(message) = json["message"].as_str()
    {
        return message.to_string();
    }
    String::from_utf8_lossy(&body[..body.len().min(200)]).trim().to_string()
}

/// Guarded clients, shared: one loads the system's roots when made (tens of milliseconds), so
/// the readers of registries (sessions, token exchanges) share one per timeout, network rules
/// and extra roots.
pub(crate) fn shared_client(
    http: &HttpOptions,
    roots: &[String],
) -> std::result::Result<reqwest::Client, String> {
    type ClientKey = (Duration, String, String);
    static CLIENTS: std::sync::Mutex<std::collections::BTreeMap<ClientKey, reqwest::Client>> =
        std::sync::Mutex::new(std::collections::BTreeMap::new());
    let key = (
        http.timeout,
        format!("{:?} {:?}", http.network, http.proxy),
        crate::digest::sha256_hex(roots.join("\0").as_bytes()),
    );
    let mut clients = CLIENTS.lock().expect("not poisoned");
    if let Some(client) = clients.get(&key) {
        return Ok(client.clone());
    }
    let client = guarded_client(http, roots)?;
    if clients.len() >= 64 {
        clients.clear();
    }
    clients.insert(key, client.clone());
    Ok(client)
}

#[cfg(test)]
mod redirect_tests {
    use super::*;

    #[test]
    fn a_redirect_never_steps_down_from_https() {
        let here = reqwest::Url::parse("https://gitlab.example.com/api/v4/x").unwrap();
        assert_eq!(next_hop(&here, "/other").unwrap().as_str(), "https://gitlab.example.com/other");
        assert_eq!(
            next_hop(&here, "https://objects.example.net/b").unwrap().host_str(),
            Some("objects.example.net")
        );
        assert!(next_hop(&here, "http://gitlab.example.com/x").unwrap_err().contains("would drop TLS"));
        let plain = reqwest::Url::parse("http://127.0.0.1:8080/x").unwrap();
        assert!(next_hop(&plain, "http://127.0.0.1:8081/y").is_ok(), "plain http stays plain http");
    }
}
