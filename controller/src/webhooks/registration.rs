//! The webhook configurations that point the API server at this controller: built here from
//! the CA bundle, where the server is reached (its Service, or a URL when it runs outside the
//! cluster) and the failure policy, and applied by the controller itself so that the CA bundle
//! always matches the certificate it serves.

use base64::Engine;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use serde_json::{Value, json};

use super::{MUTATE_TENANTCLUSTER, VALIDATE_NETWORKPOOL, VALIDATE_PROVIDERCONFIG, VALIDATE_TENANTCLUSTER};

/// The names of the configurations (those of the core provider's components before).
pub const VALIDATING: &str = "butler-validating-webhook-configuration";
pub const MUTATING: &str = "butler-mutating-webhook-configuration";

/// Where the API server reaches the webhook server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// A Service in front of the controller's pods (port 443).
    Service { namespace: String, name: String },
    /// A URL (`https://127.0.0.1:9443` when the controller runs outside the cluster).
    Url(String),
}

fn client_config(endpoint: &Endpoint, path: &str, ca_pem: &str) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    match endpoint {
        Endpoint::Service { namespace, name } => json!({
            "service": {"namespace": namespace, "name": name, "path": path, "port": 443},
            "caBundle": ca,
        }),
        Endpoint::Url(url) => json!({"url": format!("{}{path}", url.trim_end_matches('/')), "caBundle": ca}),
    }
}

fn webhook(name: &str, endpoint: &Endpoint, path: &str, ca_pem: &str, fail: bool, rule: Value) -> Value {
    json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "clientConfig": client_config(endpoint, path, ca_pem),
        "failurePolicy": if fail { "Fail" } else { "Ignore" },
        "sideEffects": "None",
        "timeoutSeconds": 10,
        "matchPolicy": "Equivalent",
        "rules": [rule],
        "matchConditions": MATCH_CONDITIONS.iter()
            .map(|(name, expression)| json!({"name": name, "expression": expression}))
            .collect::<Vec<_>>(),
    })
}

/// When the API server calls the webhooks at all. Never for an object being deleted nor for
/// an update that leaves the spec alone (finalizers, labels, annotations): what the webhooks
/// check is the spec, and with the controller stopped (crashed, scaled to 0, uninstalled with
/// its configurations left) a `Fail` policy would otherwise keep every finalizer in place and
/// every namespace that holds Butler's objects Terminating.
const MATCH_CONDITIONS: [(&str, &str); 2] = [
    ("not-being-deleted", "request.operation != 'UPDATE' || !has(oldObject.metadata.deletionTimestamp)"),
    ("spec-changed", "request.operation != 'UPDATE' || object.spec != oldObject.spec"),
];

fn rule(resource: &str, operations: &[&str]) -> Value {
    json!({
        "apiGroups": ["butler.butlerlabs.dev"], "apiVersions": ["v1alpha1"],
        "operations": operations, "resources": [resource], "scope": "Namespaced",
    })
}

fn metadata(name: &str, owner: Option<&OwnerReference>) -> Value {
    let mut meta = json!({"name": name, "labels": {"app.kubernetes.io/managed-by": butler_core::api::labels::FIELD_MANAGER}});
    if let Some(owner) = owner {
        meta["ownerReferences"] = json!([owner]);
    }
    meta
}

/// The validating and the mutating configuration. `fail` is the failure policy: Fail once the
/// server answers, Ignore before, so that an install never has a moment where every write of a
/// TenantCluster fails. `owner` (the controller's ClusterRole) takes them away with the
/// provider.
pub fn configurations(
    endpoint: &Endpoint,
    ca_pem: &str,
    fail: bool,
    owner: Option<&OwnerReference>,
) -> [Value; 2] {
    let validating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": metadata(VALIDATING, owner),
        "webhooks": [
            webhook("validation.providerconfig.butler.butlerlabs.dev", endpoint, VALIDATE_PROVIDERCONFIG, ca_pem, fail,
                rule("providerconfigs", &["CREATE", "UPDATE", "DELETE"])),
            webhook("validation.tenantcluster.butler.butlerlabs.dev", endpoint, VALIDATE_TENANTCLUSTER, ca_pem, fail,
                rule("tenantclusters", &["CREATE", "UPDATE"])),
            webhook("validation.networkpool.butler.butlerlabs.dev", endpoint, VALIDATE_NETWORKPOOL, ca_pem, fail,
                rule("networkpools", &["CREATE", "UPDATE"])),
        ],
    });
    let mutating = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": metadata(MUTATING, owner),
        "webhooks": [
            webhook("defaults.tenantcluster.butler.butlerlabs.dev", endpoint, MUTATE_TENANTCLUSTER, ca_pem, fail,
                rule("tenantclusters", &["CREATE"])),
        ],
    });
    [validating, mutating]
}

/// Whether every webhook of a configuration as the cluster has it fails closed already.
pub fn fails_closed(existing: &Value) -> bool {
    existing["webhooks"]
        .as_array()
        .is_some_and(|w| !w.is_empty() && w.iter().all(|h| h["failurePolicy"] == "Fail"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_point_at_the_service_or_a_url_with_the_ca() {
        let service =
            Endpoint::Service { namespace: "butler-system".into(), name: "butler-webhook-service".into() };
        let [validating, mutating] = configurations(&service, "PEM", false, None);
        let first = &validating["webhooks"][0];
        assert_eq!(first["clientConfig"]["service"]["path"], VALIDATE_PROVIDERCONFIG);
        assert_eq!(first["clientConfig"]["caBundle"], "UEVN");
        assert_eq!(first["failurePolicy"], "Ignore");
        assert_eq!(first["rules"][0]["operations"], json!(["CREATE", "UPDATE", "DELETE"]));
        assert_eq!(mutating["webhooks"][0]["rules"][0]["operations"], json!(["CREATE"]));
        assert_eq!(first["matchConditions"][0]["name"], "not-being-deleted");
        assert_eq!(first["matchConditions"][1]["name"], "spec-changed");
        assert!(!fails_closed(&validating));
        let owner = OwnerReference {
            api_version: "rbac.authorization.k8s.io/v1".into(),
            kind: "ClusterRole".into(),
            name: "butler-controller".into(),
            uid: "u".into(),
            ..Default::default()
        };
        let [validating, _] =
            configurations(&Endpoint::Url("https://127.0.0.1:9443/".into()), "PEM", true, Some(&owner));
        assert_eq!(
            validating["webhooks"][1]["clientConfig"]["url"],
            format!("https://127.0.0.1:9443{VALIDATE_TENANTCLUSTER}")
        );
        assert_eq!(validating["metadata"]["ownerReferences"][0]["name"], "butler-controller");
        assert!(fails_closed(&validating));
    }
}
