//! The kinds of provider repository (GitHub, GitLab, local folders, ConfigMaps, and the one
//! compiled into this build), behind one trait.

mod configmap;
mod embedded;
mod github;
mod gitlab;
mod goproxy;
mod local;
mod oci;
pub(crate) use oci::type_and_name;

use std::future::Future;

pub use configmap::{COMPRESSED_ANNOTATION, ConfigMapSource, VERSION_LABEL};
pub use embedded::{
    EMBEDDED_VERSION, EmbeddedProvider, EmbeddedSource, built_in, butler_infrastructure, embedded_provider,
    embedded_providers,
};
pub use github::{GitHubOptions, GitHubSource};
pub use gitlab::GitLabSource;
pub use goproxy::GoProxy;
pub use local::LocalSource;
pub use oci::{
    ARTIFACT_TYPE, CA_VARIABLE, DOCKER_CONFIG_KEY, DockerConfig, INSECURE_VARIABLE, OciCredentials,
    OciOptions, OciSource, PASSWORD_VARIABLE, PROVIDER_NAME_ANNOTATION, PROVIDER_TYPE_ANNOTATION, Published,
    REFRESH_TOKEN_VARIABLE, TITLE_ANNOTATION, TOKEN_HOSTS_VARIABLE, TOKEN_VARIABLE, USERNAME_VARIABLE,
    VERSION_ANNOTATION, publish,
};

use crate::error::Result;
use crate::version::{self, Version};

/// A provider repository: the versions it holds and the files of each.
pub trait Source: Send + Sync {
    /// Where the files come from, for messages.
    fn location(&self) -> String;

    /// Every version the repository holds (unordered).
    fn versions(&self) -> impl Future<Output = Result<Vec<Version>>> + Send;

    /// The newest version by clusterctl's rules (releases outrank pre-releases).
    fn latest(&self) -> impl Future<Output = Result<Version>> + Send {
        async move {
            let versions = self.versions().await?;
            version::latest(&versions)
                .cloned()
                .ok_or_else(|| crate::error::RepositoryError::NoVersions { location: self.location() })
        }
    }

    /// One file of one version.
    fn file(&self, version: &Version, name: &str) -> impl Future<Output = Result<Vec<u8>>> + Send;
}

/// Any of the sources, for callers that choose at run time.
pub enum AnySource {
    Embedded(EmbeddedSource),
    GitHub(GitHubSource),
    GitLab(GitLabSource),
    Local(LocalSource),
    ConfigMap(ConfigMapSource),
    Oci(OciSource),
}

macro_rules! each {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            AnySource::Embedded($s) => $body,
            AnySource::GitHub($s) => $body,
            AnySource::GitLab($s) => $body,
            AnySource::Local($s) => $body,
            AnySource::ConfigMap($s) => $body,
            AnySource::Oci($s) => $body,
        }
    };
}

impl Source for AnySource {
    fn location(&self) -> String {
        each!(self, s => s.location())
    }

    async fn versions(&self) -> Result<Vec<Version>> {
        each!(self, s => s.versions().await)
    }

    async fn latest(&self) -> Result<Version> {
        each!(self, s => s.latest().await)
    }

    async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        each!(self, s => s.file(version, name).await)
    }
}
