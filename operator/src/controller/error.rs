//! Why a provider reconcile failed.

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

/// A Kubernetes error for a condition or a log line: the API server's own message (which
/// names the object and field) and its reason, without the debug dump of the whole Status.
pub fn describe(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if !status.message.is_empty() => {
            format!("{} ({}, HTTP {})", status.message, status.reason, status.code)
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn api_errors_read_as_the_servers_message() {
        let status =
            kube::core::Status::failure("Gadget \"x\" is invalid: spec.size: Required value", "Invalid")
                .with_code(422);
        assert_eq!(
            describe(&kube::Error::Api(Box::new(status))),
            "Gadget \"x\" is invalid: spec.size: Required value (Invalid, HTTP 422)"
        );
    }
}
