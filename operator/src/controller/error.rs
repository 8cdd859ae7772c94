//! Why a provider reconcile failed.

use butler_runtime::error::describe;

/// A failed reconcile; the message names the provider or object and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {}", describe(source))]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// The release could not be fetched; retried with backoff.
    #[error("{0}")]
    Fetch(String),
    /// An object could not be applied or deleted; retried with backoff.
    #[error("{0}")]
    Apply(String),
    /// Something still uses the provider; the deletion waits.
    #[error("{0}")]
    DeletionBlocked(String),
}

impl Error {
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Error {
        Error::Kube { what: what.into(), source }
    }

    /// A short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "Kubernetes",
            Error::Fetch(_) => "Fetch",
            Error::Apply(_) => "Apply",
            Error::DeletionBlocked(_) => "DeletionBlocked",
        }
    }
}
