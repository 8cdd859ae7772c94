//! Why a reconcile failed.

use butler_runtime::error::describe;

/// A failed reconcile; the message names the object and what failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{what}: {}", describe(source))]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    /// An object could not be applied or deleted; retried with backoff.
    #[error("{0}")]
    Apply(String),
}

impl Error {
    pub fn kube(what: impl Into<String>, source: kube::Error) -> Error {
        Error::Kube { what: what.into(), source }
    }

    /// A short label for metrics.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Kube { .. } => "Kubernetes",
            Error::Apply(_) => "Apply",
        }
    }
}
