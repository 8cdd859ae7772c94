//! `butler-repository`: a clusterctl-compatible provider repository client.
//!
//! It reads provider repositories as clusterctl does: GitHub releases, GitLab generic packages
//! and local folders, named by a provider URL ([`ProviderUrl`]), plus the in-cluster ConfigMaps
//! of the provider operator for air-gapped clusters. It is frugal where clusterctl is not: an
//! explicit version makes no listing call, release files are downloaded outside the rate-limited
//! API, responses are cached on disk and revalidated with conditional requests, and an offline
//! mode serves from the cache alone. Downloads are size-limited and may be pinned by sha256. It
//! knows nothing of the operator.

mod cache;
mod components;
mod config;
mod digest;
mod envsubst;
mod error;
mod http;
mod images;
mod metadata;
mod provider;
mod repository;
mod retarget;
mod scope;
mod source;
mod templates;
mod upstream;
pub use upstream::upstream_providers;
mod url;
mod variables;
mod version;
mod yaml;

pub use butler_runtime::network::{self, NetworkPolicy};
pub use cache::Cache;
pub use components::{
    CLUSTERCTL_LABEL, Components, ComponentsOptions, PROVIDER_LABEL, ProcessError, declared_namespace,
    process_components,
};
pub use config::{ClusterctlConfig, ConfigError, GITHUB_TOKEN, GITLAB_TOKEN, token};
pub use digest::{MAX_TAR_ENTRIES, gunzip, sha256_hex, sha256_json_hex, untar};
pub use envsubst::{BadSubstitution, ExpandError, MissingVariables, VariableUse, expand, list_variables};
pub use error::{RepositoryError, Result};
pub use http::{HttpOptions, ProxySetting};
pub use images::{ImageMeta, ImageOverrides, ImageRef};
pub use ipnet::IpNet;
pub use metadata::{METADATA_FILE, Metadata, ReleaseSeries, core_supports, supported_contracts};
pub use provider::{BUTLER_GITHUB, ProviderEntry, ProviderType};
pub use repository::{RemoteOptions, Repository};
pub use retarget::INJECT_CA_FROM;
pub use scope::{CLUSTER_SCOPED_KINDS, known_cluster_scoped};
pub use source::{
    AnySource, COMPRESSED_ANNOTATION, ConfigMapSource, EMBEDDED_VERSION, EmbeddedProvider, EmbeddedSource,
    GitHubOptions, GitHubSource, GitLabSource, GoProxy, LocalSource, Source, VERSION_LABEL, built_in,
    butler_infrastructure, embedded_provider, embedded_providers,
};
/// OCI registries as a provider source.
pub mod oci {
    pub use crate::source::{
        ARTIFACT_TYPE, CA_VARIABLE, DOCKER_CONFIG_KEY, DockerConfig, INSECURE_VARIABLE, OciCredentials,
        OciOptions, OciSource, PASSWORD_VARIABLE, PROVIDER_NAME_ANNOTATION, PROVIDER_TYPE_ANNOTATION,
        Published, REFRESH_TOKEN_VARIABLE, TITLE_ANNOTATION, TOKEN_HOSTS_VARIABLE, TOKEN_VARIABLE,
        USERNAME_VARIABLE, VERSION_ANNOTATION, publish,
    };
}
pub use templates::{
    ClusterVariables, Template, clusterclass_file, process_template, template_file, template_variables,
};
pub use url::{Location, ProviderUrl};
pub use variables::Variables;
pub use version::Version;
pub use yaml::{Document, split_documents};

/// JSON values, as documents hold them.
pub use serde_json::Value;

/// The HTTP client of the remote sources (for building sources by hand).
pub use http::{Fetched, Http};
