//! HTTP for the remote sources: conditional requests through the [`Cache`], retries with backoff
//! on 5xx answers and network failures, a size limit on every download, an offline mode, and
//! GitHub's rate-limit answer turned into its own error.

use std::future::Future;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use http::{HeaderMap, HeaderValue, header};

use crate::cache::Cache;
use crate::error::RepositoryError;

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
        let client = reqwest::Client::builder()
            .timeout(options.timeout)
            .user_agent(USER_AGENT)
            .build()
            .expect("a reqwest client with a crypto provider installed");
        Http { client, options }
    }

    /// A conditional, retried, size-limited GET through reqwest.
    pub async fn get(
        &self,
        url: &str,
        headers: &HeaderMap,
        authenticated: bool,
    ) -> Result<Fetched, RepositoryError> {
        let client = self.client.clone();
        let limit = self.options.max_download;
        self.fetch(url, authenticated, |conditional| {
            let mut all = headers.clone();
            all.extend(conditional);
            let request = client.get(url).headers(all);
            let url = url.to_string();
            async move {
                let response = request.send().await.map_err(|e| SendError::Transient(e.to_string()))?;
                let status = response.status().as_u16();
                let headers = response.headers().clone();
                let mut body = Vec::new();
                let mut stream = response.bytes_stream();
                while let Some(chunk) = stream.next().await {
                    let chunk = chunk.map_err(|e| SendError::Transient(e.to_string()))?;
                    if body.len() as u64 + chunk.len() as u64 > limit {
                        return Err(SendError::Fatal(RepositoryError::TooLarge { what: url.clone(), limit }));
                    }
                    body.extend_from_slice(&chunk);
                }
                Ok(Answer { status, headers, body })
            }
        })
        .await
    }

    /// The cache, retry and error handling around any sender; `send` gets the conditional
    /// headers to add.
    pub async fn fetch<F, Fut>(
        &self,
        url: &str,
        authenticated: bool,
        send: F,
    ) -> Result<Fetched, RepositoryError>
    where
        F: Fn(HeaderMap) -> Fut,
        Fut: Future<Output = Result<Answer, SendError>>,
    {
        let cache = self.options.cache.as_ref();
        if self.options.offline {
            let cache = cache.ok_or_else(|| RepositoryError::NotCached {
                url: url.to_string(),
                cache: "(no cache)".into(),
            })?;
            return cache.lookup(url).map(|e| Fetched { body: e.body, link: e.link }).ok_or_else(|| {
                RepositoryError::NotCached { url: url.to_string(), cache: cache.dir().to_path_buf() }
            });
        }
        let cached = cache.and_then(|c| c.lookup(url)).filter(|e| cache.is_some_and(|c| e.age < c.max_age()));
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
                    cache.touch(url)?;
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
                            url,
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
