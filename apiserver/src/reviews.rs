//! TokenReview and SubjectAccessReview, which servers that delegate their authentication and
//! authorization to the API server create (controller-runtime's secure metrics, kube-rbac-proxy,
//! aggregated API servers). Nothing is stored: the review comes back with its status. A token
//! this server issued is a ServiceAccount's; a user's access is decided by the same RBAC as its
//! requests, and `system:masters` may do anything, as on a real cluster.

use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::rbac::{self, Account, Attributes};
use crate::store::Store;

pub const AUTHENTICATION: &str = "authentication.k8s.io";
pub const AUTHORIZATION: &str = "authorization.k8s.io";

/// Whether a write to `group`/`plural` is a review this module answers.
pub fn is_review(group: &str, plural: &str) -> bool {
    matches!((group, plural), (AUTHENTICATION, "tokenreviews") | (AUTHORIZATION, "subjectaccessreviews"))
}

/// The TokenReview `body` with its status: who the token is, when this server issued it.
pub fn token_review(body: &Value, account_of: impl Fn(&str) -> Option<Account>) -> Result<Value, ApiError> {
    let token = body["spec"]["token"]
        .as_str()
        .filter(|t| !t.is_empty())
        .ok_or_else(|| ApiError::bad_request("TokenReview: spec.token is required"))?;
    let status = match account_of(token) {
        Some(account) => json!({
            "authenticated": true,
            "user": {"username": account.username(), "groups": account.groups()},
        }),
        None => json!({"authenticated": false}),
    };
    Ok(answered(body, "TokenReview", status))
}

/// The SubjectAccessReview `body` with its status: whether its user may do what it asks.
pub fn subject_access_review(store: &Store, body: &Value) -> Result<Value, ApiError> {
    let spec = &body["spec"];
    let user = spec["user"].as_str().unwrap_or_default();
    let groups: Vec<String> = rbac::strings(&spec["groups"]).map(String::from).collect();
    if user.is_empty() && groups.is_empty() {
        return Err(ApiError::bad_request("SubjectAccessReview: spec.user or spec.groups is required"));
    }
    let account = Account::user(user, groups.clone());
    let resource = &spec["resourceAttributes"];
    let non_resource = &spec["nonResourceAttributes"];
    let allowed = if groups.iter().any(|g| g == "system:masters") {
        true
    } else if resource.is_object() {
        let text = |v: &Value| v.as_str().filter(|s| !s.is_empty()).map(String::from);
        let attributes = Attributes {
            verb: text(&resource["verb"]).unwrap_or_default(),
            group: text(&resource["group"]).unwrap_or_default(),
            resource: text(&resource["resource"]).unwrap_or_default(),
            subresource: text(&resource["subresource"]),
            namespace: text(&resource["namespace"]),
            name: text(&resource["name"]),
        };
        rbac::rules_for(store, &account, attributes.namespace.as_deref())
            .iter()
            .any(|r| rbac::rule_allows(r, &attributes))
    } else if non_resource.is_object() {
        let path = non_resource["path"].as_str().unwrap_or_default();
        let verb = non_resource["verb"].as_str().unwrap_or_default();
        rbac::rules_for(store, &account, None).iter().any(|r| rbac::non_resource_allows(r, path, verb))
    } else {
        return Err(ApiError::bad_request(
            "SubjectAccessReview: spec.resourceAttributes or spec.nonResourceAttributes is required",
        ));
    };
    let status = match allowed {
        true => json!({"allowed": true, "reason": "allowed by RBAC"}),
        false => json!({"allowed": false}),
    };
    Ok(answered(body, "SubjectAccessReview", status))
}

fn answered(body: &Value, kind: &str, status: Value) -> Value {
    let group = if kind == "TokenReview" { AUTHENTICATION } else { AUTHORIZATION };
    json!({
        "apiVersion": format!("{group}/v1"),
        "kind": kind,
        "metadata": {"creationTimestamp": null},
        "spec": body["spec"],
        "status": status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_its_account_or_nobody() {
        let known = |t: &str| (t == "t1").then(|| Account::service_account("ops", "prometheus"));
        let review = token_review(&json!({"spec": {"token": "t1"}}), known).unwrap();
        assert_eq!(review["status"]["authenticated"], true);
        assert_eq!(review["status"]["user"]["username"], "system:serviceaccount:ops:prometheus");
        assert!(
            review["status"]["user"]["groups"]
                .as_array()
                .unwrap()
                .contains(&json!("system:serviceaccounts:ops"))
        );
        let review = token_review(&json!({"spec": {"token": "forged"}}), known).unwrap();
        assert_eq!(review["status"], json!({"authenticated": false}));
        assert_eq!(token_review(&json!({"spec": {}}), known).unwrap_err().code, 400);
    }
}
