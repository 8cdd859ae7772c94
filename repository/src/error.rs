//! [`RepositoryError`]: every way reading a provider repository fails, each saying where and
//! what to do next.

use std::path::PathBuf;

use thiserror::Error;

#[derive(Debug, Error)]
pub enum RepositoryError {
    #[error("{url:?} is not a provider repository URL; expected {expected}")]
    InvalidUrl { url: String, expected: String },
    #[error(
        "the local repository {base}/{label} is not {provider}'s: clusterctl reads a local repository from a folder named after the provider ({base}/{provider}/{{version}}/{{components file}})"
    )]
    LocalLabel { provider: String, base: String, label: String },
    #[error("{url:?} uses plain http; {source_kind} repositories must be read over https")]
    PlainHttp { url: String, source_kind: &'static str },
    #[error("GET {url} failed: HTTP {status}: {message}")]
    Http { url: String, status: u16, message: String },
    #[error("GET {url} failed: {message}")]
    Network { url: String, message: String },
    #[error("GET {url} refused: {why}")]
    Refused { url: String, why: String },
    #[error("the GitHub API rate limit is exhausted; it resets at {reset_at} (in {minutes} min). {hint}")]
    RateLimited { reset_at: String, minutes: i64, hint: &'static str },
    #[error("{what} was not found in {location}")]
    NotFound { what: String, location: String },
    #[error("{location} has no versions")]
    NoVersions { location: String },
    #[error(
        "{location} cannot list its versions, so \"latest\" cannot be resolved; set the version explicitly"
    )]
    LatestUnsupported { location: String },
    #[error(
        "{version:?} from {origin} is not a semantic version (expected vMAJOR.MINOR.PATCH, for example v1.2.3)"
    )]
    InvalidVersion { version: String, origin: String },
    #[error("the metadata of {provider} is not valid: {problem}")]
    Metadata { provider: String, problem: String },
    #[error("{provider} {version} belongs to no release series of its metadata; the series are {series}")]
    NoSeries { provider: String, version: String, series: String },
    #[error(
        "{provider} {tag}: the tag is no semantic version, so no release series of the metadata covers it and it has no contract; name a vX.Y.Z release to install it"
    )]
    TagWithoutSeries { provider: String, tag: String },
    #[error("{provider} has no version for contract {contract}; its series are {series}")]
    NoVersionForContract { provider: String, contract: String, series: String },
    #[error("ConfigMaps selected by {selector:?} in namespace {namespace}: {problem}")]
    ConfigMap { selector: String, namespace: String, problem: String },
    #[error("{file}: its sha256 is {actual}, but {expected} is pinned; the file changed or the pin is wrong")]
    Checksum { file: String, expected: String, actual: String },
    #[error("{what} is larger than the limit of {limit} bytes")]
    TooLarge { what: String, limit: u64 },
    #[error("{what} is not valid gzip: {message}")]
    BadGzip { what: String, message: String },
    #[error(
        "offline: {url} is not in the cache at {cache}; fetch it once online, or use a local or ConfigMap repository"
    )]
    NotCached { url: String, cache: PathBuf },
    #[error("{reference}: {message}")]
    Oci { reference: String, message: String },
    #[error("{path}: {message}")]
    Io { path: PathBuf, message: String },
    #[error("reading ConfigMaps from the cluster failed: {0}")]
    Kube(String),
}

pub type Result<T, E = RepositoryError> = std::result::Result<T, E>;
