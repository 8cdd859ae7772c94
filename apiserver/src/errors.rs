//! Errors as the API server sends them: `Status` objects with the real codes and reasons.

use serde_json::{Value, json};

/// One field of an invalid object (a `StatusCause`).
#[derive(Debug, Clone, PartialEq)]
pub struct Cause {
    /// `FieldValueInvalid`, `FieldValueRequired`, `FieldValueNotSupported`, ...
    pub reason: &'static str,
    pub message: String,
    /// The field path, as `spec.items[0].name`.
    pub field: String,
}

/// A failed request.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> ApiError {
        ApiError { code, reason, message: message.into(), details: None }
    }

    fn with_details(mut self, group: &str, kind: &str, name: &str) -> ApiError {
        // As Kubernetes writes them: an empty group (the core one) or name is left out.
        let mut details = json!({"name": name, "group": group, "kind": kind});
        if let Some(map) = details.as_object_mut() {
            map.retain(|_, v| v.as_str().is_some_and(|s| !s.is_empty()));
        }
        self.details = Some(details);
        self
    }

    /// `404 NotFound`: `configmaps "x" not found`.
    pub fn not_found(group: &str, plural: &str, name: &str) -> ApiError {
        ApiError::new(404, "NotFound", format!("{} \"{name}\" not found", qualified(group, plural)))
            .with_details(group, plural, name)
    }

    /// `404 NotFound` for a path that names no resource.
    pub fn no_such_resource() -> ApiError {
        ApiError::new(404, "NotFound", "the server could not find the requested resource")
    }

    /// `409 AlreadyExists`.
    pub fn already_exists(group: &str, plural: &str, name: &str) -> ApiError {
        ApiError::new(409, "AlreadyExists", format!("{} \"{name}\" already exists", qualified(group, plural)))
            .with_details(group, plural, name)
    }

    /// `409 Conflict` for a stale resourceVersion or a failed precondition.
    pub fn conflict(group: &str, plural: &str, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {} \"{name}\": {why}", qualified(group, plural)),
        )
        .with_details(group, plural, name)
    }

    /// `409 Conflict` of server-side apply, one cause per conflicting field.
    pub fn apply_conflict(group: &str, plural: &str, name: &str, conflicts: &[(String, String)]) -> ApiError {
        let lines: Vec<String> =
            conflicts.iter().map(|(manager, field)| format!("conflict with {manager}: {field}")).collect();
        let message = format!("Apply failed with {} conflict(s): {}", conflicts.len(), lines.join("; "));
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|(manager, field)| {
                json!({"reason": "FieldManagerConflict", "message": format!("conflict with {manager}"), "field": field})
            })
            .collect();
        let mut error = ApiError::new(409, "Conflict", message).with_details(group, plural, name);
        error.details.as_mut().expect("details set")["causes"] = Value::Array(causes);
        error
    }

    /// `422 Invalid`, one cause per field, worded as the API server words them.
    pub fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> ApiError {
        let what = if group.is_empty() { kind.to_string() } else { format!("{kind}.{group}") };
        let texts: Vec<String> = causes.iter().map(|c| format!("{}: {}", c.field, c.message)).collect();
        let list = if texts.len() == 1 { texts[0].clone() } else { format!("[{}]", texts.join(", ")) };
        let mut error = ApiError::new(422, "Invalid", format!("{what} \"{name}\" is invalid: {list}"))
            .with_details(group, kind, name);
        let causes: Vec<Value> = causes
            .iter()
            .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
            .collect();
        error.details.as_mut().expect("details set")["causes"] = Value::Array(causes);
        error
    }

    /// `400 BadRequest`.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    /// `401 Unauthorized`: a token the server does not know.
    pub fn unauthorized() -> ApiError {
        ApiError::new(401, "Unauthorized", "Unauthorized")
    }

    /// `403 Forbidden`.
    pub fn forbidden(message: impl Into<String>) -> ApiError {
        ApiError::new(403, "Forbidden", message)
    }

    /// `403 Forbidden` of NamespaceLifecycle: a create in a namespace being deleted, with the
    /// `NamespaceTerminating` cause clients read it by.
    pub fn namespace_terminating(group: &str, plural: &str, name: &str, namespace: &str) -> ApiError {
        let message = format!(
            "{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated",
            qualified(group, plural)
        );
        let mut error = ApiError::new(403, "Forbidden", message).with_details(group, plural, name);
        error.details.as_mut().expect("details set")["causes"] = json!([{
            "reason": "NamespaceTerminating",
            "message": format!("namespace {namespace} is being terminated"),
            "field": "metadata.namespace",
        }]);
        error
    }

    /// A ValidatingAdmissionPolicy's refusal, at the code of its validation's reason.
    /// An admission policy's refusal of a write: `{resource} "{name}" is forbidden: {why}`,
    /// with the refusal as the one cause, as kube-apiserver words it.
    pub fn policy(
        code: u16,
        reason: &'static str,
        request: &crate::request::Attributes,
        why: String,
    ) -> ApiError {
        let message = format!(
            "{} \"{}\" is forbidden: {why}",
            qualified(&request.group, &request.resource),
            request.name
        );
        let mut error = ApiError::new(code, reason, message).with_details(
            &request.group,
            &request.resource,
            &request.name,
        );
        error.details.as_mut().expect("details set")["causes"] = json!([{"message": why}]);
        error
    }

    /// `413 RequestEntityTooLarge`: a body over the API server's limit.
    pub fn request_too_large(limit: usize) -> ApiError {
        ApiError::new(413, "RequestEntityTooLarge", format!("Request entity too large: limit is {limit}"))
    }

    /// `415 UnsupportedMediaType`: a protobuf body of a kind this server does not read.
    pub fn unreadable_protobuf(message: impl Into<String>) -> ApiError {
        ApiError::new(415, "UnsupportedMediaType", message)
    }

    /// `503 ServiceUnavailable`: a server that is starting.
    pub fn unavailable() -> ApiError {
        ApiError::new(503, "ServiceUnavailable", "the server is currently unable to handle the request")
    }

    /// `500 InternalError`.
    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    /// A webhook's refusal, with the code and reason it gave (the usual ones; others go out
    /// without a reason).
    pub fn webhook(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
        let reason =
            ["Forbidden", "BadRequest", "Invalid", "Conflict", "NotFound", "AlreadyExists", "InternalError"]
                .into_iter()
                .find(|r| *r == reason)
                .unwrap_or("");
        ApiError::new(code, reason, message)
    }

    /// `405 MethodNotAllowed`.
    pub fn method_not_allowed(message: impl Into<String>) -> ApiError {
        ApiError::new(405, "MethodNotAllowed", message)
    }

    /// `410 Expired`: a watch or list asked for a resourceVersion that is no longer kept.
    pub fn expired(message: impl Into<String>) -> ApiError {
        ApiError::new(410, "Expired", message)
    }

    /// `415 UnsupportedMediaType`.
    pub fn unsupported_media_type(content_type: &str) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml, application/merge-patch+json, application/json-patch+json, application/strategic-merge-patch+json, application/apply-patch+yaml; got {content_type:?}"
            ),
        )
    }

    /// The `Status` object sent as the response body.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(details) = &self.details {
            status["details"] = details.clone();
        }
        status
    }
}

/// `configmaps` for the core group, `teams.butler.butlerlabs.dev` for others.
pub fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() { plural.to_string() } else { format!("{plural}.{group}") }
}
