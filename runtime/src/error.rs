//! Kubernetes errors as users read them, and the one place where "not found" is fine.

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

/// Whether the API server answered 404 Not Found.
pub fn is_not_found(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 404)
}

/// Whether the API server answered 409 Conflict: the object changed since it was read (a
/// resourceVersion precondition failed), or it exists already.
pub fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// `None` for an object (or a kind) that is not there, the answer otherwise: for deletes of
/// what may be gone already, and reads of what may not exist.
pub fn not_found_ok<T>(result: Result<T, kube::Error>) -> Result<Option<T>, kube::Error> {
    match result {
        Ok(value) => Ok(Some(value)),
        Err(e) if is_not_found(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, reason: &str, message: &str) -> kube::Error {
        kube::Error::Api(Box::new(kube::core::Status::failure(message, reason).with_code(code)))
    }

    #[test]
    fn api_errors_read_as_the_servers_message() {
        assert_eq!(
            describe(&status(422, "Invalid", "Gadget \"x\" is invalid: spec.size: Required value")),
            "Gadget \"x\" is invalid: spec.size: Required value (Invalid, HTTP 422)"
        );
    }

    #[test]
    fn conflicts_are_told_apart() {
        assert!(is_conflict(&status(409, "Conflict", "changed")));
        assert!(!is_conflict(&status(404, "NotFound", "gone")));
        assert!(is_not_found(&status(404, "NotFound", "gone")));
    }

    #[test]
    fn only_not_found_is_fine() {
        assert_eq!(not_found_ok(Ok::<_, kube::Error>(1)).unwrap(), Some(1));
        assert_eq!(not_found_ok::<i32>(Err(status(404, "NotFound", "gone"))).unwrap(), None);
        assert!(not_found_ok::<i32>(Err(status(403, "Forbidden", "no"))).is_err());
    }
}
