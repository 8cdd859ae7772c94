//! [`Repository`]: one provider's repository, whatever its source: versions, metadata and
//! files, with pinned digests and clusterctl's version rules.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::digest::sha256_hex;
use crate::error::{RepositoryError, Result};
use crate::http::{Http, HttpOptions};
use crate::metadata::{METADATA_FILE, Metadata};
use crate::source::{
    AnySource, EmbeddedSource, GitHubOptions, GitHubSource, GitLabSource, LocalSource, OciOptions, OciSource,
    Source,
};
use crate::url::{Location, ProviderUrl};
use crate::version::{self, Version};

/// How remote repositories are reached.
#[derive(Clone, Default)]
pub struct RemoteOptions {
    pub http: HttpOptions,
    pub github: GitHubOptions,
    /// `GITLAB_ACCESS_TOKEN`.
    pub gitlab_token: Option<String>,
    /// Credentials, plain-HTTP registries and mirrors of OCI registries.
    pub oci: OciOptions,
}

impl RemoteOptions {
    /// A digest of every credential these options may send (tokens, registry logins): what was
    /// fetched with one set of credentials is kept apart from what another set may read.
    pub fn credentials_fingerprint(&self) -> String {
        let material = format!(
            "github\0{}\0gitlab\0{}\0oci\0{}",
            self.github.token.as_deref().unwrap_or_default(),
            self.gitlab_token.as_deref().unwrap_or_default(),
            self.oci.credential_material()
        );
        crate::digest::sha256_hex(material.as_bytes())
    }
}

/// Tokens are never printed (options end up in logs and error reports).
impl std::fmt::Debug for RemoteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteOptions")
            .field("http", &self.http)
            .field("github", &self.github)
            .field("gitlab_token", &self.gitlab_token.as_ref().map(|_| "<redacted>"))
            .field("oci", &self.oci)
            .finish()
    }
}

impl RemoteOptions {
    /// The defaults, with tokens and `GOPROXY` from the environment.
    pub fn from_env() -> RemoteOptions {
        let mut oci = OciOptions::default();
        oci.apply_variables(|key| std::env::var(key).ok());
        RemoteOptions {
            gitlab_token: std::env::var("GITLAB_ACCESS_TOKEN").ok().filter(|t| !t.is_empty()),
            oci,
            ..Default::default()
        }
    }
}

/// One provider's repository.
pub struct Repository<S: Source = AnySource> {
    provider: String,
    source: S,
    components_file: String,
    default_version: Option<Version>,
    pins: BTreeMap<String, String>,
    overrides: Option<PathBuf>,
}

impl Repository<AnySource> {
    /// The repository a provider URL names; `provider` (its label, such as
    /// `infrastructure-aws`) appears in messages.
    pub fn from_url(
        provider: &str,
        url: &ProviderUrl,
        options: &RemoteOptions,
    ) -> Result<Repository<AnySource>> {
        // A client loads the system's root certificates when made: only the sources that
        // speak HTTP through it make one.
        let http = || Http::new(options.http.clone());
        let source = match &url.location {
            Location::GitHub { owner, repo } => {
                AnySource::GitHub(GitHubSource::new(owner, repo, options.github.clone(), http())?)
            }
            Location::GitLab { host, project, package } => AnySource::GitLab(GitLabSource::new(
                host,
                project,
                package,
                options.gitlab_token.clone(),
                http(),
            )),
            Location::Local { base, label } if label != provider => {
                return Err(RepositoryError::LocalLabel {
                    provider: provider.to_string(),
                    base: base.display().to_string(),
                    label: label.clone(),
                });
            }
            Location::Local { base, label } => AnySource::Local(LocalSource::new(base, label)),
            Location::Embedded { label } => AnySource::Embedded(EmbeddedSource::new(label)?),
            Location::Oci { registry, repository, digest, plain_http } => {
                let source = OciSource::new(
                    provider,
                    registry,
                    repository,
                    digest.clone(),
                    *plain_http,
                    &options.oci,
                    options.http.clone(),
                )?;
                // An artifact holds its files under names the source finds by the provider's
                // type; ask for the one clusterctl's contract names.
                let (kind, _) = crate::source::type_and_name(provider);
                let file = if kind == "core" {
                    "core-components.yaml".to_string()
                } else {
                    format!("{kind}-components.yaml")
                };
                return Ok(Repository::new(provider, AnySource::Oci(source), &file)
                    .with_default_version(url.version.clone()));
            }
        };
        Ok(Repository::new(provider, source, &url.components_file).with_default_version(url.version.clone()))
    }
}

/// How many versions, newest first, are tried before a missing release is an error (as
/// clusterctl).
const CANDIDATES: usize = 5;

impl<S: Source> Repository<S> {
    pub fn new(provider: &str, source: S, components_file: &str) -> Repository<S> {
        Repository {
            provider: provider.into(),
            source,
            components_file: components_file.into(),
            default_version: None,
            pins: BTreeMap::new(),
            overrides: None,
        }
    }

    /// The version to use when none is asked for (the version in a provider URL).
    pub fn with_default_version(mut self, version: Option<Version>) -> Self {
        self.default_version = version;
        self
    }

    /// Pins the sha256 (hex) of one file: a fetch with another digest fails.
    pub fn with_pin(mut self, file: &str, sha256: &str) -> Self {
        self.pins.insert(file.into(), sha256.to_ascii_lowercase());
        self
    }

    /// A clusterctl overrides folder: `{folder}/{provider label}/{version}/{file}` replaces the
    /// fetched file.
    pub fn with_overrides(mut self, folder: Option<PathBuf>) -> Self {
        self.overrides = folder;
        self
    }

    pub fn provider(&self) -> &str {
        &self.provider
    }

    pub fn components_file(&self) -> &str {
        &self.components_file
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// The version to install: the one asked for (no listing at all), else the URL's, else the
    /// latest.
    pub async fn resolve(&self, requested: Option<&str>) -> Result<Version> {
        match requested.map(str::trim).filter(|r| !r.is_empty() && *r != "latest") {
            Some(text) => Version::parse(text, &format!("the version asked for {}", self.provider)),
            None => match &self.default_version {
                Some(version) => Ok(version.clone()),
                None => self.source.latest().await,
            },
        }
    }

    /// Every version the repository holds, newest first.
    pub async fn versions(&self) -> Result<Vec<Version>> {
        let mut versions = self.source.versions().await?;
        versions.sort_by(|a, b| b.cmp(a));
        Ok(versions)
    }

    /// One file of one version, checked against its pin.
    pub async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        let overridden = self
            .overrides
            .as_ref()
            .map(|dir| dir.join(&self.provider).join(version.to_string()).join(name))
            .filter(|p| p.is_file());
        let bytes = match overridden {
            Some(path) => {
                std::fs::read(&path).map_err(|e| RepositoryError::Io { path, message: e.to_string() })?
            }
            None => self.source.file(version, name).await?,
        };
        if let Some(expected) = self.pins.get(name) {
            let actual = sha256_hex(&bytes);
            if &actual != expected {
                return Err(RepositoryError::Checksum {
                    file: format!("{name} of {} {version}", self.provider),
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        Ok(bytes)
    }

    pub async fn metadata(&self, version: &Version) -> Result<Metadata> {
        Metadata::parse(&self.provider, &self.file(version, METADATA_FILE).await?)
    }

    pub async fn components(&self, version: &Version) -> Result<Vec<u8>> {
        self.file(version, &self.components_file).await
    }

    /// The contract `version` abides by, from its metadata.
    pub async fn contract_of(&self, version: &Version) -> Result<String> {
        Ok(self.metadata(version).await?.contract_of(&self.provider, version)?.to_string())
    }

    /// The newest version whose release series abides by `contract`, judged by the newest
    /// version's metadata (which lists every series).
    ///
    /// As clusterctl, a tag pushed before its release (listed, but with no metadata yet) is
    /// skipped: the newest few candidates are tried, and one whose metadata is not found makes
    /// way for the next.
    pub async fn latest_for_contract(&self, contract: &str) -> Result<Version> {
        let versions = self.source.versions().await?;
        let (newest, metadata) = self.newest_with_metadata(&versions).await?;
        let mut candidates: Vec<Version> = versions;
        for _ in 0..CANDIDATES {
            let best = metadata.latest_for_contract(&self.provider, &candidates, contract)?;
            if best == newest {
                return Ok(best);
            }
            match self.metadata(&best).await {
                Ok(_) => return Ok(best),
                Err(RepositoryError::NotFound { .. }) => candidates.retain(|v| v != &best),
                Err(e) => return Err(e),
            }
        }
        metadata.latest_for_contract(&self.provider, &candidates, contract)
    }

    /// The newest version whose metadata exists, with it (a few candidates, newest first).
    async fn newest_with_metadata(&self, versions: &[Version]) -> Result<(Version, Metadata)> {
        let mut candidates = versions.to_vec();
        let mut last_missing = None;
        for _ in 0..CANDIDATES {
            let Some(newest) = version::latest(&candidates).cloned() else { break };
            match self.metadata(&newest).await {
                Ok(metadata) => return Ok((newest, metadata)),
                Err(e @ RepositoryError::NotFound { .. }) => {
                    candidates.retain(|v| v != &newest);
                    last_missing = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
        Err(last_missing.unwrap_or(RepositoryError::NoVersions { location: self.source.location() }))
    }
}

#[cfg(test)]
mod debug_tests {
    use super::*;

    #[test]
    fn the_fingerprint_follows_every_credential() {
        let anonymous = RemoteOptions::default();
        let mut github = RemoteOptions::default();
        github.github.token = Some("a".into());
        let mut other = github.clone();
        other.github.token = Some("b".into());
        let mut oci = RemoteOptions::default();
        oci.oci.credentials = crate::source::OciCredentials::Token("t".into());
        let prints: std::collections::BTreeSet<String> =
            [&anonymous, &github, &other, &oci].iter().map(|o| o.credentials_fingerprint()).collect();
        assert_eq!(prints.len(), 4);
        assert_eq!(github.credentials_fingerprint(), github.clone().credentials_fingerprint());
    }

    #[test]
    fn debug_never_prints_a_token() {
        let mut options = RemoteOptions { gitlab_token: Some("glpat-secret".into()), ..Default::default() };
        options.github.token = Some("ghp_secret".into());
        let printed = format!("{options:?}");
        assert!(!printed.contains("secret"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }
}
