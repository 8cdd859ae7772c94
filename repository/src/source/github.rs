//! GitHub releases. Versions are listed through the GitHub API (one call per 100 releases) or,
//! when `GOPROXY` allows, through the Go module proxy; files are downloaded from the release's
//! download URLs, which are not API calls and so not rate-limited. An explicit version needs no
//! API call at all.

use std::collections::BTreeMap;
use std::sync::Mutex;

use http::{HeaderMap, HeaderValue, header};
use octocrab::{AuthState, OctoBody, Octocrab, OctocrabBuilder};
use serde::Deserialize;

use super::{GoProxy, Source, goproxy};
use crate::error::{RepositoryError, Result};
use crate::http::{Answer, Http, SendError};
use crate::version::{self, Version};

/// At most this many pages of releases (100 each) are read.
const MAX_RELEASE_PAGES: usize = 20;

/// Where GitHub is, and how to talk to it.
#[derive(Clone)]
pub struct GitHubOptions {
    /// The REST API (`https://api.github.com`, or `https://{host}/api/v3` for GitHub Enterprise).
    pub api_base: String,
    /// Where release downloads live (`https://github.com`, or `https://{host}`).
    pub web_base: String,
    /// A token (`GITHUB_TOKEN`): raises the rate limit and reaches private repositories.
    pub token: Option<String>,
    pub goproxy: GoProxy,
}

/// The token is never printed (options end up in logs and error reports).
impl std::fmt::Debug for GitHubOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubOptions")
            .field("api_base", &self.api_base)
            .field("web_base", &self.web_base)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("goproxy", &self.goproxy)
            .finish()
    }
}

impl Default for GitHubOptions {
    fn default() -> Self {
        GitHubOptions {
            api_base: "https://api.github.com".into(),
            web_base: "https://github.com".into(),
            token: std::env::var("GITHUB_TOKEN").ok().filter(|t| !t.is_empty()),
            goproxy: GoProxy::from_env(),
        }
    }
}

#[derive(Deserialize)]
struct Release {
    tag_name: String,
    #[serde(default)]
    draft: bool,
    #[serde(default)]
    assets: Vec<Asset>,
}

#[derive(Deserialize)]
struct Asset {
    name: String,
    url: String,
}

/// The releases of one GitHub repository.
pub struct GitHubSource {
    owner: String,
    repo: String,
    options: GitHubOptions,
    http: Http,
    api: Octocrab,
    /// Release tags by version, as listed (a tag may lack the leading `v`).
    tags: Mutex<BTreeMap<Version, String>>,
}

impl GitHubSource {
    pub fn new(owner: &str, repo: &str, options: GitHubOptions, http: Http) -> Result<GitHubSource> {
        Ok(GitHubSource {
            owner: owner.into(),
            repo: repo.into(),
            api: api_client()?,
            options,
            http,
            tags: Mutex::new(BTreeMap::new()),
        })
    }

    fn tag(&self, version: &Version) -> String {
        self.tags.lock().expect("not poisoned").get(version).cloned().unwrap_or_else(|| version.to_string())
    }

    /// One API GET (conditional, retried, time-limited), through octocrab. The token goes in
    /// our own header: octocrab would send it to api.github.com only, not to GitHub
    /// Enterprise.
    async fn api_get(&self, url: &str, accept: &'static str) -> Result<crate::http::Fetched> {
        let timeout = self.http.options.timeout;
        self.http
            .fetch(url, self.options.token.as_deref(), |conditional| async move {
                let mut headers = conditional;
                headers.insert(header::ACCEPT, HeaderValue::from_static(accept));
                headers.insert(header::USER_AGENT, HeaderValue::from_static(crate::http::USER_AGENT));
                headers.insert("x-github-api-version", HeaderValue::from_static("2022-11-28"));
                if let Some(value) = self
                    .options
                    .token
                    .as_deref()
                    .and_then(|t| HeaderValue::from_str(&format!("Bearer {t}")).ok())
                {
                    headers.insert(header::AUTHORIZATION, value);
                }
                // The whole answer within the time limit and the size limit: a server that
                // sends its headers and then trickles or floods the body holds nothing for long.
                let limit = self.http.options.max_download;
                let whole = async {
                    let response = self
                        .api
                        ._get_with_headers(url, Some(headers))
                        .await
                        .map_err(|e| SendError::Transient(e.to_string()))?;
                    let status = response.status().as_u16();
                    let headers = response.headers().clone();
                    let limited = http_body_util::Limited::new(response.into_body(), limit as usize);
                    let body = http_body_util::BodyExt::collect(limited).await.map_err(|e| {
                        match e.downcast_ref::<http_body_util::LengthLimitError>() {
                            Some(_) => {
                                SendError::Fatal(RepositoryError::TooLarge { what: url.to_string(), limit })
                            }
                            None => SendError::Transient(e.to_string()),
                        }
                    })?;
                    Ok(Answer { status, headers, body: body.to_bytes().to_vec() })
                };
                tokio::time::timeout(timeout, whole)
                    .await
                    .map_err(|_| SendError::Transient(format!("no whole answer within {timeout:?}")))?
            })
            .await
    }

    /// Every release, through the API, one page of 100 at a time, at most
    /// [`MAX_RELEASE_PAGES`] pages (a `next` link that points back ends the list).
    async fn releases(&self) -> Result<Vec<Release>> {
        let mut url = Some(format!(
            "{}/repos/{}/{}/releases?per_page=100",
            self.options.api_base, self.owner, self.repo
        ));
        let mut releases = Vec::new();
        let mut pages = 0;
        while let Some(next) = url.take() {
            pages += 1;
            if pages > MAX_RELEASE_PAGES {
                return Err(RepositoryError::Http {
                    url: next,
                    status: 200,
                    message: format!(
                        "the repository lists more than {} releases; pin the version instead of asking for the latest",
                        MAX_RELEASE_PAGES * 100
                    ),
                });
            }
            let fetched = self
                .api_get(&next, "application/vnd.github+json")
                .await
                .map_err(|e| self.not_found_as(e, "the repository"))?;
            let page: Vec<Release> =
                serde_json::from_slice(&fetched.body).map_err(|e| RepositoryError::Http {
                    url: next.clone(),
                    status: 200,
                    // Where, not what: the server's bytes are not repeated.
                    message: format!(
                        "the release list is not what GitHub sends (line {}, column {})",
                        e.line(),
                        e.column()
                    ),
                })?;
            releases.extend(page);
            url = fetched.link.as_deref().and_then(next_link).filter(|n| *n != next);
        }
        Ok(releases)
    }

    async fn release(&self, tag: &str) -> Result<Option<Release>> {
        let url = format!("{}/repos/{}/{}/releases/tags/{tag}", self.options.api_base, self.owner, self.repo);
        match self.api_get(&url, "application/vnd.github+json").await {
            Ok(fetched) => Ok(serde_json::from_slice(&fetched.body).ok()),
            Err(RepositoryError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn not_found_as(&self, error: RepositoryError, what: &str) -> RepositoryError {
        match error {
            RepositoryError::NotFound { .. } => {
                RepositoryError::NotFound { what: what.to_string(), location: self.location() }
            }
            other => other,
        }
    }

    fn remember(&self, pairs: impl IntoIterator<Item = (Version, String)>) {
        self.tags.lock().expect("not poisoned").extend(pairs);
    }
}

/// An octocrab client over our own HTTP stack: hyper with rustls on ring and the platform's
/// certificate verifier (octocrab's built-in TLS would bring a second crypto provider).
fn api_client() -> Result<Octocrab> {
    let failed = |e: String| RepositoryError::Network {
        url: "https://api.github.com".into(),
        message: format!("cannot set up TLS: {e}"),
    };
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_platform_verifier(rustls::crypto::ring::default_provider())
        .map_err(|e| failed(e.to_string()))?
        .https_or_http()
        .enable_http1()
        .enable_http2()
        .build();
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build::<_, OctoBody>(connector);
    OctocrabBuilder::new_empty()
        .with_service(client)
        .with_auth(AuthState::None)
        .build()
        .map_err(|e| failed(e.to_string()))
}

/// The `rel="next"` URL of a `Link` header.
fn next_link(link: &str) -> Option<String> {
    link.split(',').find(|part| part.contains("rel=\"next\"")).and_then(|part| {
        let start = part.find('<')? + 1;
        let end = part.find('>')?;
        Some(part[start..end].to_string())
    })
}

impl Source for GitHubSource {
    fn location(&self) -> String {
        format!("the GitHub releases of {}/{}", self.owner, self.repo)
    }

    async fn versions(&self) -> Result<Vec<Version>> {
        // As clusterctl: a proxy that cannot list the module (private, not proxied, down)
        // makes way for the GitHub API.
        if let GoProxy::Url(proxy) = &self.options.goproxy {
            match goproxy::list(&self.http, proxy, &self.owner, &self.repo).await {
                Ok(versions) => return Ok(versions),
                Err(e) => tracing::debug!(
                    repository = %format!("{}/{}", self.owner, self.repo),
                    error = %e,
                    "the Go module proxy cannot list its versions; asking the GitHub API"
                ),
            }
        }
        let releases = self.releases().await?;
        let pairs: Vec<(Version, String)> = releases
            .into_iter()
            .filter(|r| !r.draft)
            .filter_map(|r| Version::parse(&r.tag_name, "a GitHub tag").ok().map(|v| (v, r.tag_name)))
            .collect();
        self.remember(pairs.clone());
        Ok(pairs.into_iter().map(|(v, _)| v).collect())
    }

    async fn latest(&self) -> Result<Version> {
        let versions = self.versions().await?;
        if matches!(self.options.goproxy, GoProxy::Disabled) {
            return version::latest(&versions)
                .cloned()
                .ok_or_else(|| RepositoryError::NoVersions { location: self.location() });
        }
        // The proxy lists tags; a tag with no release is skipped, newest candidate first.
        let mut candidates = versions;
        while let Some(best) = version::latest(&candidates).cloned() {
            if self.release(&best.to_string()).await?.is_some_and(|r| !r.draft) {
                return Ok(best);
            }
            candidates.retain(|v| v != &best);
        }
        Err(RepositoryError::NoVersions { location: self.location() })
    }

    async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        let tag = self.tag(version);
        let url =
            format!("{}/{}/{}/releases/download/{tag}/{name}", self.options.web_base, self.owner, self.repo);
        let missing = || RepositoryError::NotFound {
            what: name.to_string(),
            location: format!("the GitHub release {tag} of {}/{}", self.owner, self.repo),
        };
        match self.http.get(&url, &HeaderMap::new(), None).await {
            Ok(fetched) => Ok(fetched.body),
            // A private repository's downloads need the API, with a token (offline, what the
            // API answered to that token is in the cache, apart from anonymous downloads).
            Err(RepositoryError::NotFound { .. } | RepositoryError::NotCached { .. })
                if self.options.token.is_some() =>
            {
                let release = self.release(&tag).await?.ok_or_else(missing)?;
                let asset = release.assets.into_iter().find(|a| a.name == name).ok_or_else(missing)?;
                Ok(self.api_get(&asset.url, "application/octet-stream").await?.body)
            }
            Err(RepositoryError::NotFound { .. }) => Err(missing()),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::next_link;

    #[test]
    fn next_links_are_read_from_the_link_header() {
        let link = "<https://api.github.com/repos/o/r/releases?per_page=100&page=2>; rel=\"next\", <https://api.github.com/repos/o/r/releases?per_page=100&page=5>; rel=\"last\"";
        assert_eq!(
            next_link(link).as_deref(),
            Some("https://api.github.com/repos/o/r/releases?per_page=100&page=2")
        );
        assert_eq!(next_link("<x>; rel=\"prev\""), None);
    }
}
