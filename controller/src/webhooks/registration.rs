//! The webhook configurations that point the API server at this controller. In a cluster the
//! core components ship them ([`shipped`]: the Service, no CA bundle, no failure policy) and the
//! controller fills in, by name, only the CA bundle of the certificate it serves and the failure
//! policy ([`fill_in`]); a controller outside the cluster registers whole ones by URL
//! ([`configurations`]), with the rights of whoever runs it.

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
/// every namespace that holds Butler's objects Terminating. Nor for the namespace
/// controller's deletions (its own account, or kube-controller-manager's): a namespace being
/// deleted takes its ProviderConfigs with it, controller running or not.
const MATCH_CONDITIONS: [(&str, &str); 3] = [
    ("not-being-deleted", "request.operation != 'UPDATE' || !has(oldObject.metadata.deletionTimestamp)"),
    ("spec-changed", "request.operation != 'UPDATE' || object.spec != oldObject.spec"),
    (
        "not-the-namespace-controller",
        "request.operation != 'DELETE' || !(request.userInfo.username in ['system:serviceaccount:kube-system:namespace-controller', 'system:kube-controller-manager'])",
    ),
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

/// The annotation the controller puts on a shipped configuration once the API server reached
/// its webhooks: from then on they fail closed, across restarts. (A shipped configuration
/// fails closed by Kubernetes' default until the controller first fills it in, which is when
/// the controller has never run: nothing would be admitted unchecked.)
pub const REACHED: &str = "butler.butlerlabs.dev/webhooks-reached";

/// The configurations the core components ship, reached through the Service `namespace/name`:
/// no CA bundle and no failure policy, which the controller owns ([`fill_in`]).
pub fn shipped(namespace: &str, service: &str) -> [Value; 2] {
    let endpoint = Endpoint::Service { namespace: namespace.into(), name: service.into() };
    configurations(&endpoint, "", false, None).map(|mut config| {
        config["metadata"] = json!({"name": config["metadata"]["name"]});
        for hook in config.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten() {
            let hook = hook.as_object_mut().expect("a webhook is an object");
            hook.remove("failurePolicy");
            if let Some(client) = hook.get_mut("clientConfig").and_then(Value::as_object_mut) {
                client.remove("caBundle");
            }
        }
        config
    })
}

/// What the controller applies to a shipped configuration as the cluster has it (`existing`):
/// the CA bundle and the failure policy of each of its webhooks that this controller serves,
/// and the [`REACHED`] mark once it fails closed; nothing else, so that the components' owner
/// (the operator) keeps the rest. Webhooks the configuration lacks are left out (adding one
/// from these fields alone would be refused).
pub fn fill_in(existing: &Value, ca_pem: &str, fail: bool) -> Value {
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    let ours = [VALIDATING, MUTATING];
    let name = existing["metadata"]["name"].as_str().unwrap_or_default();
    let hooks: Vec<Value> = existing["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|h| ours.contains(&name) && h["name"].as_str().is_some_and(|n| n.ends_with(".butler.butlerlabs.dev")))
        .map(|h| {
            json!({"name": h["name"], "clientConfig": {"caBundle": ca}, "failurePolicy": if fail { "Fail" } else { "Ignore" }})
        })
        .collect();
    let mut metadata = json!({"name": name});
    if fail {
        metadata["annotations"] = json!({REACHED: "true"});
    }
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": existing["kind"],
        "metadata": metadata,
        "webhooks": hooks,
    })
}

/// Whether a shipped configuration says the API server has reached the webhooks.
pub fn reached(existing: &Value) -> bool {
    existing["metadata"]["annotations"][REACHED] == "true"
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
        assert_eq!(first["matchConditions"][2]["name"], "not-the-namespace-controller");
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

    /// The configurations of `components/core/butler.yaml` are these (the test fails when one
    /// of them changes without the other).
    #[test]
    fn the_components_ship_these_configurations() {
        let components: Vec<Value> =
            serde_saphyr::from_multiple(include_str!("../../../components/core/butler.yaml")).unwrap();
        for wanted in shipped("butler-system", "butler-webhook-service") {
            let found = components.iter().find(|o| o["kind"] == wanted["kind"]);
            assert_eq!(found, Some(&wanted), "components/core/butler.yaml holds {}", wanted["kind"]);
        }
    }

    #[test]
    fn the_controller_fills_in_the_ca_and_failure_policy_only() {
        let [validating, _] = shipped("butler-system", "butler-webhook-service");
        assert!(validating["webhooks"][0].get("failurePolicy").is_none());
        assert!(validating["webhooks"][0]["clientConfig"].get("caBundle").is_none());
        let mut existing = validating.clone();
        existing["webhooks"].as_array_mut().unwrap().truncate(2);
        existing["webhooks"][1]["name"] = json!("someone.else.io");
        let patch = fill_in(&existing, "PEM", false);
        assert_eq!(
            patch["webhooks"],
            json!([{"name": "validation.providerconfig.butler.butlerlabs.dev", "clientConfig": {"caBundle": "UEVN"}, "failurePolicy": "Ignore"}]),
            "only webhooks the configuration has, and only Butler's"
        );
        assert!(!reached(&patch));
        let closed = fill_in(&existing, "PEM", true);
        assert_eq!(closed["webhooks"][0]["failurePolicy"], "Fail");
        assert!(reached(&closed));
        assert_eq!(closed["metadata"], json!({"name": VALIDATING, "annotations": {REACHED: "true"}}));
        let mut foreign = existing.clone();
        foreign["metadata"]["name"] = json!("another-configuration");
        assert_eq!(
            fill_in(&foreign, "PEM", true)["webhooks"],
            json!([]),
            "another configuration is never touched"
        );
    }
}
