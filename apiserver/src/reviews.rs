//! TokenReview and SubjectAccessReview, which servers that delegate their authentication and
//! authorization to the API server create (controller-runtime's secure metrics, kube-rbac-proxy,
//! aggregated API servers), and the reviews a user makes of themself (SelfSubjectAccessReview,
//! SelfSubjectRulesReview, SelfSubjectReview: `kubectl auth can-i`, `can-i --list`, `auth
//! whoami`). Nothing is stored: the review comes back with its status. A token this server
//! issued is a ServiceAccount's; a user's access is decided by the same RBAC as its requests,
//! and `system:masters` may do anything, as on a real cluster.

use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::rbac::{self, Account, Attributes};
use crate::store::Store;

pub const AUTHENTICATION: &str = "authentication.k8s.io";
pub const AUTHORIZATION: &str = "authorization.k8s.io";

/// Whether a write to `group`/`plural` is a review this module answers.
pub fn is_review(group: &str, plural: &str) -> bool {
    matches!(
        (group, plural),
        (AUTHENTICATION, "tokenreviews" | "selfsubjectreviews")
            | (
                AUTHORIZATION,
                "subjectaccessreviews" | "selfsubjectaccessreviews" | "selfsubjectrulesreviews"
            )
    )
}

/// Whether a review is one every authenticated user may make of themself (the bootstrap
/// `system:basic-user` role grants it).
pub fn is_self_review(plural: &str) -> bool {
    plural.starts_with("selfsubject")
}

/// What `system:basic-user`, `system:discovery` and `system:public-info-viewer` give everyone.
fn basic_rules() -> (Vec<Value>, Vec<Value>) {
    (
        vec![
            json!({"verbs": ["create"], "apiGroups": [AUTHORIZATION], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]}),
            json!({"verbs": ["create"], "apiGroups": [AUTHENTICATION], "resources": ["selfsubjectreviews"]}),
        ],
        vec![
            json!({"verbs": ["get"], "nonResourceURLs": ["/.well-known", "/.well-known/*"]}),
            json!({"verbs": ["get"], "nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"]}),
            json!({"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"]}),
        ],
    )
}

/// A review of the requester's own access, identity or rules.
pub fn self_review(
    store: &Store,
    plural: &str,
    body: &Value,
    user: &str,
    groups: &[String],
) -> Result<Value, ApiError> {
    match plural {
        "selfsubjectreviews" => Ok(json!({
            "kind": "SelfSubjectReview",
            "apiVersion": format!("{AUTHENTICATION}/v1"),
            "metadata": {"creationTimestamp": crate::store::now()},
            "status": {"userInfo": {"username": user, "groups": groups}},
        })),
        "selfsubjectaccessreviews" => {
            let spec = &body["spec"];
            if spec["resourceAttributes"].is_object() == spec["nonResourceAttributes"].is_object() {
                return Err(ApiError::invalid(
                    AUTHORIZATION,
                    "",
                    "",
                    vec![crate::errors::Cause {
                        reason: "FieldValueInvalid",
                        message: "Invalid value: null: exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
                        field: "spec.resourceAttributes".into(),
                    }],
                ));
            }
            let mut asked = body.clone();
            asked["spec"]["user"] = json!(user);
            asked["spec"]["groups"] = json!(groups);
            let decided = subject_access_review(store, &asked)?;
            let status = match decided["status"]["allowed"] == true {
                true => json!({"allowed": true}),
                false => json!({"allowed": false}),
            };
            Ok(json!({"kind": "SelfSubjectAccessReview", "apiVersion": format!("{AUTHORIZATION}/v1"),
                "metadata": {}, "spec": body["spec"], "status": status}))
        }
        _ => {
            let namespace = body["spec"]["namespace"].as_str().filter(|n| !n.is_empty());
            let (mut resource_rules, mut non_resource_rules) = basic_rules();
            let rules: Vec<Value> = match groups.iter().any(|g| g == "system:masters") {
                true => vec![
                    json!({"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "nonResourceURLs": ["*"]}),
                ],
                false => rbac::rules_for(store, &Account::user(user, groups.to_vec()), namespace),
            };
            for rule in rules {
                let pick = |keys: &[&str]| -> Value {
                    let mut out = serde_json::Map::new();
                    for key in keys {
                        if let Some(v) =
                            rule.get(*key).filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
                        {
                            out.insert(key.to_string(), v.clone());
                        }
                    }
                    Value::Object(out)
                };
                if rule.get("resources").and_then(Value::as_array).is_some_and(|r| !r.is_empty()) {
                    resource_rules.push(pick(&["verbs", "apiGroups", "resources", "resourceNames"]));
                }
                if rule.get("nonResourceURLs").and_then(Value::as_array).is_some_and(|r| !r.is_empty()) {
                    non_resource_rules.insert(1, pick(&["verbs", "nonResourceURLs"]));
                }
            }
            Ok(json!({"kind": "SelfSubjectRulesReview", "apiVersion": format!("{AUTHORIZATION}/v1"),
                "metadata": {}, "spec": {},
                "status": {"resourceRules": resource_rules, "nonResourceRules": non_resource_rules, "incomplete": false}}))
        }
    }
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

/// The shortest token life kube-apiserver grants (10 minutes), and its default (an hour).
const SHORTEST_TOKEN_SECONDS: i64 = 600;
const DEFAULT_TOKEN_SECONDS: i64 = 3600;

/// The TokenRequest `body` (for `account`, a stored ServiceAccount) answered but for its
/// token, which the caller mints.
pub fn token_request(
    body: &Value,
    account: &Value,
    now: k8s_openapi::jiff::Timestamp,
) -> Result<Value, ApiError> {
    let spec = &body["spec"];
    let seconds = spec["expirationSeconds"].as_i64().unwrap_or(DEFAULT_TOKEN_SECONDS);
    if seconds < SHORTEST_TOKEN_SECONDS {
        return Err(ApiError::invalid(
            AUTHENTICATION,
            "TokenRequest",
            "",
            vec![crate::errors::Cause {
                reason: "FieldValueInvalid",
                message: format!("Invalid value: {seconds}: may not specify a duration less than 10 minutes"),
                field: "spec.expirationSeconds".into(),
            }],
        ));
    }
    let audiences = match spec["audiences"].as_array().filter(|a| !a.is_empty()) {
        Some(audiences) => json!(audiences),
        None => json!(["https://kubernetes.default.svc.cluster.local"]),
    };
    let expires = now.checked_add(k8s_openapi::jiff::SignedDuration::from_secs(seconds)).unwrap_or(now);
    let meta = &account["metadata"];
    Ok(json!({
        "kind": "TokenRequest",
        "apiVersion": format!("{AUTHENTICATION}/v1"),
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"], "creationTimestamp": crate::store::now()},
        "spec": {"audiences": audiences, "expirationSeconds": seconds, "boundObjectRef": spec.get("boundObjectRef").cloned().unwrap_or(Value::Null)},
        "status": {"token": "", "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()},
    }))
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
