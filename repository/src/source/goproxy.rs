//! Listing a GitHub repository's versions through a Go module proxy, as clusterctl does when
//! `GOPROXY` allows it: no GitHub API call, so no rate limit.

use http::HeaderMap;

use crate::error::{RepositoryError, Result};
use crate::http::Http;
use crate::version::Version;

/// The default Go module proxy.
pub const DEFAULT_PROXY: &str = "https://proxy.golang.org";

/// Whether and where to list versions through a Go module proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GoProxy {
    Disabled,
    Url(String),
}

impl GoProxy {
    /// clusterctl's reading of `GOPROXY`: unset or empty is the default proxy; in a list (`,`
    /// or `|` separated) empty entries are skipped and the first other one decides: `off` or
    /// `direct` disable it, anything else is the proxy; a list of nothing but separators
    /// disables it too.
    pub fn from_env_value(value: Option<&str>) -> GoProxy {
        let value = value.unwrap_or_default();
        if value.is_empty() {
            return GoProxy::Url(DEFAULT_PROXY.to_string());
        }
        match value.split([',', '|']).map(str::trim).find(|entry| !entry.is_empty()) {
            None | Some("off" | "direct") => GoProxy::Disabled,
            Some(url) => GoProxy::Url(url.trim_end_matches('/').to_string()),
        }
    }

    /// From the process environment.
    pub fn from_env() -> GoProxy {
        GoProxy::from_env_value(std::env::var("GOPROXY").ok().as_deref())
    }
}

/// Every version of `github.com/{owner}/{repo}` the proxy lists: the module path itself for
/// majors 0 and 1, then `/v2`, `/v3`, ... while the proxy knows them.
pub async fn list(http: &Http, proxy: &str, owner: &str, repo: &str) -> Result<Vec<Version>> {
    let mut versions = Vec::new();
    let mut major = 1;
    loop {
        let suffix = if major < 2 { String::new() } else { format!("/v{major}") };
        let url = format!("{proxy}/github.com/{owner}/{repo}{suffix}/@v/list");
        let body = match http.get(&url, &HeaderMap::new(), None).await {
            Ok(fetched) => fetched.body,
            Err(RepositoryError::NotFound { .. }) | Err(RepositoryError::Http { status: 410, .. })
                if major > 1 =>
            {
                break;
            }
            Err(e) => return Err(e),
        };
        let found: Vec<Version> = String::from_utf8_lossy(&body)
            .lines()
            .map(str::trim)
            .filter(|line| !line.is_empty() && !line.contains("+incompatible"))
            .filter_map(|line| Version::parse(line, "the Go module proxy").ok())
            .collect();
        if found.is_empty() && major > 1 {
            break;
        }
        versions.extend(found);
        major += 1;
    }
    Ok(versions)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goproxy_follows_clusterctl_rules() {
        assert_eq!(GoProxy::from_env_value(None), GoProxy::Url(DEFAULT_PROXY.into()));
        assert_eq!(GoProxy::from_env_value(Some("")), GoProxy::Url(DEFAULT_PROXY.into()));
        assert_eq!(GoProxy::from_env_value(Some("off")), GoProxy::Disabled);
        assert_eq!(GoProxy::from_env_value(Some("direct")), GoProxy::Disabled);
        assert_eq!(
            GoProxy::from_env_value(Some("https://goproxy.internal/,direct")),
            GoProxy::Url("https://goproxy.internal".into())
        );
        assert_eq!(GoProxy::from_env_value(Some("https://a|https://b")), GoProxy::Url("https://a".into()));
        assert_eq!(GoProxy::from_env_value(Some("direct,https://a")), GoProxy::Disabled);
        // Empty entries are skipped, as clusterctl's GetSchemeAndHost does.
        assert_eq!(GoProxy::from_env_value(Some(",,https://a,direct")), GoProxy::Url("https://a".into()));
        assert_eq!(GoProxy::from_env_value(Some(" | ,direct")), GoProxy::Disabled);
        assert_eq!(GoProxy::from_env_value(Some(",")), GoProxy::Disabled);
    }
}
