//! cluster-api-operator's admission webhooks fail closed: once `migrate` scales it to 0, the
//! API server refuses every write they intercept, and so the removal of its finalizer from its
//! provider objects, which could then never go. Its webhooks on its own kinds are set to fail
//! open before the finalizers are touched; the policies they had are kept in an annotation on
//! their configuration, to put back by hand should cluster-api-operator be scaled up again.

use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use crate::controller::install::adopt::CAPI_OPERATOR_GROUP;

/// The annotation that keeps the failure policies the webhooks had before the move, as
/// `{webhook name: policy}`.
pub const POLICIES_BEFORE: &str = "operator.butlerlabs.dev/failure-policies-before-migration";

/// A webhook configuration whose webhooks on cluster-api-operator's kinds fail closed.
#[derive(Debug, Clone, PartialEq)]
pub struct Closed {
    /// `ValidatingWebhookConfiguration` or `MutatingWebhookConfiguration`.
    pub kind: &'static str,
    pub name: String,
    /// The webhooks to open, by their place in the list and name.
    pub webhooks: Vec<(usize, String)>,
    /// Whether the configuration has annotations already.
    annotated: bool,
}

impl Closed {
    /// The line of the report.
    pub fn describe(&self) -> String {
        let names: Vec<&str> = self.webhooks.iter().map(|(_, n)| n.as_str()).collect();
        format!(
            "cluster-api-operator's {} {}: its webhooks {} on its own kinds fail closed; set to fail open (failurePolicy: Ignore) once it is scaled down, so that its objects can be let go",
            self.kind,
            self.name,
            names.join(", ")
        )
    }

    /// The JSON patch that opens the webhooks, each guarded by its name (a configuration
    /// changed meanwhile refuses it), and records what they were.
    pub fn patch(&self) -> Value {
        let before: serde_json::Map<String, Value> =
            self.webhooks.iter().map(|(_, name)| (name.clone(), json!("Fail"))).collect();
        let mut ops = Vec::new();
        for (i, name) in &self.webhooks {
            ops.push(json!({"op": "test", "path": format!("/webhooks/{i}/name"), "value": name}));
            ops.push(json!({"op": "add", "path": format!("/webhooks/{i}/failurePolicy"), "value": "Ignore"}));
        }
        let record = Value::Object(before).to_string();
        ops.push(match self.annotated {
            true => json!({"op": "add", "path": format!("/metadata/annotations/{}", POLICIES_BEFORE.replace('/', "~1")), "value": record}),
            false => json!({"op": "add", "path": "/metadata/annotations", "value": {POLICIES_BEFORE: record}}),
        });
        Value::Array(ops)
    }
}

/// Whether a webhook's rules intercept cluster-api-operator's kinds (named by their group, not
/// by a wildcard: those are someone else's).
fn on_old_kinds(webhook: &Value) -> bool {
    webhook["rules"].as_array().into_iter().flatten().any(|rule| {
        rule["apiGroups"].as_array().into_iter().flatten().any(|g| g.as_str() == Some(CAPI_OPERATOR_GROUP))
    })
}

/// The webhooks of `configuration` that intercept cluster-api-operator's kinds, fail closed
/// (`Fail`, the default when unset) and call a Service of `namespace`, its operator's (another
/// operator's webhooks on that group, elsewhere, are not this one's to change), if any.
pub fn closed(kind: &'static str, configuration: &Value, namespace: &str) -> Option<Closed> {
    let webhooks: Vec<(usize, String)> = configuration["webhooks"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, w)| on_old_kinds(w) && w["failurePolicy"].as_str().unwrap_or("Fail") == "Fail")
        .filter(|(_, w)| w["clientConfig"]["service"]["namespace"].as_str() == Some(namespace))
        .map(|(i, w)| (i, w["name"].as_str().unwrap_or_default().to_string()))
        .collect();
    (!webhooks.is_empty()).then(|| Closed {
        kind,
        name: configuration["metadata"]["name"].as_str().unwrap_or_default().to_string(),
        webhooks,
        annotated: configuration["metadata"]["annotations"].is_object(),
    })
}

/// Every webhook configuration of the cluster whose webhooks on cluster-api-operator's kinds
/// fail closed and call its Service in `namespace`.
pub async fn find(client: &kube::Client, namespace: &str) -> Result<Vec<Closed>, String> {
    let reading = |e: kube::Error| {
        format!("reading the webhook configurations: {}", butler_runtime::error::describe(&e))
    };
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(client.clone());
    let mut found = Vec::new();
    for c in validating.list(&ListParams::default()).await.map_err(reading)?.items {
        let value = serde_json::to_value(&c).map_err(|e| e.to_string())?;
        found.extend(closed("ValidatingWebhookConfiguration", &value, namespace));
    }
    for c in mutating.list(&ListParams::default()).await.map_err(reading)?.items {
        let value = serde_json::to_value(&c).map_err(|e| e.to_string())?;
        found.extend(closed("MutatingWebhookConfiguration", &value, namespace));
    }
    Ok(found)
}

/// Opens the webhooks of `closed`.
pub async fn open(client: &kube::Client, closed: &Closed) -> Result<(), String> {
    let patch: json_patch::Patch =
        serde_json::from_value(closed.patch()).map_err(|e| format!("a JSON patch: {e}"))?;
    let params = PatchParams::default();
    let result = match closed.kind {
        "ValidatingWebhookConfiguration" => Api::<ValidatingWebhookConfiguration>::all(client.clone())
            .patch(&closed.name, &params, &Patch::Json::<()>(patch))
            .await
            .map(|_| ()),
        _ => Api::<MutatingWebhookConfiguration>::all(client.clone())
            .patch(&closed.name, &params, &Patch::Json::<()>(patch))
            .await
            .map(|_| ()),
    };
    result.map_err(|e| {
        format!(
            "setting the webhooks of {} {} to fail open: {}; run butlerctl migrate again",
            closed.kind,
            closed.name,
            butler_runtime::error::describe(&e)
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn service(namespace: &str) -> Value {
        json!({"service": {"namespace": namespace, "name": "capi-operator-webhook-service"}})
    }

    fn configuration(annotations: Value) -> Value {
        json!({
            "metadata": {"name": "capi-operator-validating-webhook-configuration", "annotations": annotations},
            "webhooks": [
                {"name": "vcoreprovider.operator.cluster.x-k8s.io", "failurePolicy": "Fail", "clientConfig": service("capi-operator-system"),
                 "rules": [{"apiGroups": ["operator.cluster.x-k8s.io"], "resources": ["coreproviders"]}]},
                {"name": "vother.example.com", "clientConfig": service("capi-operator-system"),
                 "rules": [{"apiGroups": ["*"], "resources": ["*"]}]},
                {"name": "vinfra.operator.cluster.x-k8s.io", "clientConfig": service("capi-operator-system"),
                 "rules": [{"apiGroups": ["operator.cluster.x-k8s.io"], "resources": ["infrastructureproviders"]}]},
                {"name": "vaddon.operator.cluster.x-k8s.io", "failurePolicy": "Ignore", "clientConfig": service("capi-operator-system"),
                 "rules": [{"apiGroups": ["operator.cluster.x-k8s.io"], "resources": ["addonproviders"]}]},
                {"name": "vipam.operator.cluster.x-k8s.io", "clientConfig": service("another-operator"),
                 "rules": [{"apiGroups": ["operator.cluster.x-k8s.io"], "resources": ["ipamproviders"]}]},
            ],
        })
    }

    #[test]
    fn only_its_fail_closed_webhooks_on_its_kinds_are_opened_and_recorded() {
        let found =
            closed("ValidatingWebhookConfiguration", &configuration(Value::Null), "capi-operator-system")
                .unwrap();
        assert_eq!(
            found.webhooks,
            [
                (0, "vcoreprovider.operator.cluster.x-k8s.io".to_string()),
                (2, "vinfra.operator.cluster.x-k8s.io".to_string())
            ],
            "a wildcard webhook is someone else's, as is one calling another namespace; an open one stays as it is"
        );
        let mut patched = configuration(Value::Null);
        json_patch::patch(&mut patched, &serde_json::from_value::<json_patch::Patch>(found.patch()).unwrap())
            .unwrap();
        assert_eq!(patched["webhooks"][0]["failurePolicy"], "Ignore");
        assert_eq!(patched["webhooks"][1]["failurePolicy"], Value::Null);
        assert_eq!(patched["webhooks"][2]["failurePolicy"], "Ignore");
        let record: Value =
            serde_json::from_str(patched["metadata"]["annotations"][POLICIES_BEFORE].as_str().unwrap())
                .unwrap();
        assert_eq!(record["vinfra.operator.cluster.x-k8s.io"], "Fail");
        assert_eq!(
            closed("ValidatingWebhookConfiguration", &patched, "capi-operator-system"),
            None,
            "a second run finds nothing"
        );

        let annotated = configuration(json!({"meta.helm.sh/release-name": "capi-operator"}));
        let found = closed("ValidatingWebhookConfiguration", &annotated, "capi-operator-system").unwrap();
        let mut patched = annotated.clone();
        json_patch::patch(&mut patched, &serde_json::from_value::<json_patch::Patch>(found.patch()).unwrap())
            .unwrap();
        assert_eq!(patched["metadata"]["annotations"]["meta.helm.sh/release-name"], "capi-operator");
        assert!(patched["metadata"]["annotations"][POLICIES_BEFORE].is_string());
    }

    #[test]
    fn a_configuration_changed_meanwhile_refuses_the_patch() {
        let found =
            closed("ValidatingWebhookConfiguration", &configuration(Value::Null), "capi-operator-system")
                .unwrap();
        let mut changed = configuration(Value::Null);
        changed["webhooks"].as_array_mut().unwrap().remove(0);
        let patch = serde_json::from_value::<json_patch::Patch>(found.patch()).unwrap();
        assert!(json_patch::patch(&mut changed, &patch).is_err());
    }
}
