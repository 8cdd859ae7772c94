//! Admission webhook configurations as Kubernetes stores them: each webhook defaulted
//! (`failurePolicy: Fail`, `matchPolicy: Equivalent`, `timeoutSeconds: 10`, empty selectors,
//! rules of any scope, `reinvocationPolicy: Never` for mutating ones) and checked for what the
//! API server requires (a unique name, exactly one of `url` or `service`, `sideEffects`,
//! `admissionReviewVersions`), so a partial object is refused as it is there.

use serde_json::{Value, json};

use crate::errors::Cause;

fn default(slot: &mut Value, key: &str, value: Value) {
    if slot[key].is_null() {
        slot[key] = value;
    }
}

/// Defaults and checks the webhooks of a configuration of `kind`; the causes of a refusal.
pub fn default_and_check(kind: &str, object: &mut Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let mut names = Vec::new();
    let required =
        |field: String| Cause { reason: "FieldValueRequired", message: "Required value".into(), field };
    let hooks = object.get_mut("webhooks").and_then(Value::as_array_mut);
    for (i, hook) in hooks.into_iter().flatten().enumerate() {
        let at = |field: &str| format!("webhooks[{i}].{field}");
        default(hook, "failurePolicy", json!("Fail"));
        default(hook, "matchPolicy", json!("Equivalent"));
        default(hook, "timeoutSeconds", json!(10));
        default(hook, "namespaceSelector", json!({}));
        default(hook, "objectSelector", json!({}));
        if kind == "MutatingWebhookConfiguration" {
            default(hook, "reinvocationPolicy", json!("Never"));
        }
        for rule in hook.get_mut("rules").and_then(Value::as_array_mut).into_iter().flatten() {
            default(rule, "scope", json!("*"));
        }
        if let Some(service) = hook["clientConfig"].get_mut("service").filter(|s| s.is_object()) {
            default(service, "port", json!(443));
        }
        match hook["name"].as_str().filter(|n| !n.is_empty()) {
            None => causes.push(required(at("name"))),
            Some(name) if names.contains(&name.to_string()) => causes.push(Cause {
                reason: "FieldValueDuplicate",
                message: format!("Duplicate value: {name:?}"),
                field: at("name"),
            }),
            Some(name) => names.push(name.to_string()),
        }
        let client = &hook["clientConfig"];
        if client["url"].is_null() == client["service"].is_null() {
            causes.push(Cause {
                reason: "FieldValueRequired",
                message: "Required value: exactly one of url or service is required".into(),
                field: at("clientConfig"),
            });
        }
        if hook["sideEffects"].is_null() {
            causes.push(required(at("sideEffects")));
        }
        if hook["admissionReviewVersions"].as_array().is_none_or(Vec::is_empty) {
            causes.push(required(at("admissionReviewVersions")));
        }
    }
    causes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn webhooks_are_defaulted_and_a_partial_one_refused() {
        let mut config = json!({"webhooks": [{
            "name": "v.x.io", "sideEffects": "None", "admissionReviewVersions": ["v1"],
            "clientConfig": {"service": {"namespace": "ns", "name": "svc", "path": "/v"}},
            "rules": [{"apiGroups": ["x.io"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["w"]}],
        }]});
        assert!(default_and_check("MutatingWebhookConfiguration", &mut config).is_empty());
        let hook = &config["webhooks"][0];
        assert_eq!(hook["failurePolicy"], "Fail");
        assert_eq!(hook["reinvocationPolicy"], "Never");
        assert_eq!(hook["rules"][0]["scope"], "*");
        assert_eq!(hook["clientConfig"]["service"]["port"], 443);
        let mut partial = json!({"webhooks": [{"name": "v.x.io", "clientConfig": {"caBundle": "UEVN"}}]});
        let fields: Vec<String> = default_and_check("ValidatingWebhookConfiguration", &mut partial)
            .into_iter()
            .map(|c| c.field)
            .collect();
        assert_eq!(
            fields,
            ["webhooks[0].clientConfig", "webhooks[0].sideEffects", "webhooks[0].admissionReviewVersions"]
        );
    }
}
