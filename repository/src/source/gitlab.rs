//! GitLab generic packages: `https://{host}/api/v4/projects/{project}/packages/generic/{package}/{version}/{file}`.
//! GitLab cannot list a package's versions, so a version must be given.

use http::{HeaderMap, HeaderValue, header};

use super::Source;
use crate::error::{RepositoryError, Result};
use crate::http::Http;
use crate::version::Version;

pub struct GitLabSource {
    host: String,
    /// The project id or escaped path (`group%2Fproject`), kept as written.
    project: String,
    package: String,
    /// `GITLAB_ACCESS_TOKEN`, sent as a bearer token.
    token: Option<String>,
    http: Http,
    /// `https`, or `http` for tests against a local server.
    scheme: &'static str,
}

impl GitLabSource {
    pub fn new(host: &str, project: &str, package: &str, token: Option<String>, http: Http) -> GitLabSource {
        GitLabSource {
            host: host.into(),
            project: project.into(),
            package: package.into(),
            token,
            http,
            scheme: "https",
        }
    }

    /// The same source over plain HTTP, for the tests against a server on 127.0.0.1 (no URL
    /// a user writes reaches GitLab over plain HTTP).
    #[cfg(test)]
    fn over_plain_http(mut self) -> GitLabSource {
        self.scheme = "http";
        self
    }
}

impl Source for GitLabSource {
    fn location(&self) -> String {
        format!("the GitLab package {} of project {} on {}", self.package, self.project, self.host)
    }

    async fn versions(&self) -> Result<Vec<Version>> {
        Err(RepositoryError::LatestUnsupported { location: self.location() })
    }

    async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        let url = format!(
            "{}://{}/api/v4/projects/{}/packages/generic/{}/{version}/{name}",
            self.scheme, self.host, self.project, self.package
        );
        let mut headers = HeaderMap::new();
        if let Some(value) =
            self.token.as_deref().and_then(|t| HeaderValue::from_str(&format!("Bearer {t}")).ok())
        {
            headers.insert(header::AUTHORIZATION, value);
        }
        match self.http.get(&url, &headers, self.token.as_deref()).await {
            Ok(fetched) => Ok(fetched.body),
            Err(RepositoryError::NotFound { .. }) => Err(RepositoryError::NotFound {
                what: name.to_string(),
                location: format!("version {version} of {}", self.location()),
            }),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
#[path = "gitlab_tests.rs"]
mod tests;
