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
mod digest;
mod error;
mod http;
mod metadata;
mod repository;
mod source;
mod url;
mod version;

pub use cache::Cache;
pub use digest::{gunzip, sha256_hex};
pub use error::{RepositoryError, Result};
pub use http::HttpOptions;
pub use metadata::{METADATA_FILE, Metadata, ReleaseSeries};
pub use repository::{RemoteOptions, Repository};
pub use source::{
    AnySource, COMPRESSED_ANNOTATION, ConfigMapSource, GitHubOptions, GitHubSource, GitLabSource, GoProxy,
    LocalSource, Source, VERSION_LABEL,
};
pub use url::{Location, ProviderUrl};
pub use version::Version;

/// The HTTP client of the remote sources (for building sources by hand).
pub use http::Http;
