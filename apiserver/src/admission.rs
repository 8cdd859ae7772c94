//! Admission webhooks, called as a real API server calls them: for a write that a registered
//! Mutating- or ValidatingWebhookConfiguration's rules match (operation, group, version,
//! resource, scope, object selector), an AdmissionReview v1 goes over HTTPS to the webhook's
//! URL or Service, trusting only its `caBundle`, within its `timeoutSeconds`. Mutating webhooks
//! run first and their JSON patches apply in order, then the validating ones see the result; a
//! denial or, with `failurePolicy: Fail`, a webhook that cannot be called fails the request as
//! Kubernetes words it.
//!
//! The write is first made as a dry run to learn the object that would be stored; the object
//! the webhooks admitted is then written (a mutated one with its resourceVersion, so that a
//! change in between is a conflict). A Service reference is reached at the address that
//! [`crate::MemoryApiServer::route_service`] gave it.

use std::collections::HashMap;
use std::time::Duration;

use base64::Engine;
use serde_json::{Value, json};

use crate::errors::ApiError;
use crate::request::Attributes;
use crate::selectors::LabelSelector;

/// A webhook of a configuration that matches a write.
#[derive(Debug, Clone)]
pub struct Hook {
    pub name: String,
    pub mutating: bool,
    pub client_config: Value,
    pub fail: bool,
    pub timeout: Duration,
}

fn contains(list: &Value, value: &str) -> bool {
    list.as_array().is_some_and(|l| l.iter().any(|v| v == "*" || v == value))
}

pub(crate) fn rule_matches(rule: &Value, a: &Attributes) -> bool {
    let resource = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let resource_ok = rule["resources"].as_array().is_some_and(|l| {
        l.iter().any(|r| {
            r == "*"
                || r == resource.as_str()
                || (a.subresource.is_some() && r == &format!("{}/*", a.resource))
                || (a.subresource.is_none() && r == "*/*")
        })
    });
    let scope_ok = match rule["scope"].as_str().unwrap_or("*") {
        "Namespaced" => a.namespaced,
        "Cluster" => !a.namespaced,
        _ => true,
    };
    contains(&rule["operations"], a.operation)
        && contains(&rule["apiGroups"], &a.group)
        && contains(&rule["apiVersions"], &a.version)
        && resource_ok
        && scope_ok
}

/// Whether a JSON label selector (`matchLabels`, `matchExpressions`) selects `object`; none
/// selects everything.
pub(crate) fn selector_matches(selector: &Value, object: &Value) -> bool {
    if selector.is_null() {
        return true;
    }
    LabelSelector::parse(&crate::selectors::text_of(selector)).is_ok_and(|parsed| parsed.matches(object))
}

/// Whether every `matchConditions` expression of a webhook holds for a write (CEL over
/// `object`, `oldObject` and `request`, null where Kubernetes has null: `oldObject` on
/// CREATE, `object` on DELETE). An expression that cannot be evaluated counts as not holding
/// (Kubernetes then applies the failure policy; the webhooks here never rely on that).
fn conditions_hold(conditions: &Value, a: &Attributes, object: &Value, old: &Value) -> bool {
    let Some(conditions) = conditions.as_array().filter(|c| !c.is_empty()) else { return true };
    let expressions: Vec<crate::cel::Expression> =
        conditions.iter().map(|c| crate::cel::Expression::of(c, false)).collect();
    crate::cel::Evaluator::new(a, object, old, None).all_hold(&expressions)
}

/// The webhooks of the configurations that match a write, mutating ones first, each list in
/// the order of the configurations' names.
pub fn matching(configurations: &[(bool, Value)], a: &Attributes, object: &Value, old: &Value) -> Vec<Hook> {
    // The webhook configurations themselves are never sent to webhooks.
    if a.group == "admissionregistration.k8s.io" {
        return Vec::new();
    }
    let mut sorted: Vec<&(bool, Value)> = configurations.iter().collect();
    sorted.sort_by_key(|(mutating, c)| {
        (!*mutating, c["metadata"]["name"].as_str().unwrap_or_default().to_string())
    });
    let mut hooks = Vec::new();
    for (mutating, configuration) in sorted {
        for webhook in configuration["webhooks"].as_array().into_iter().flatten() {
            let rules = webhook["rules"].as_array().into_iter().flatten();
            if !rules.clone().any(|r| rule_matches(r, a)) {
                continue;
            }
            let selector = &webhook["objectSelector"];
            if !(selector_matches(selector, object) || selector_matches(selector, old)) {
                continue;
            }
            if !conditions_hold(&webhook["matchConditions"], a, object, old) {
                continue;
            }
            hooks.push(Hook {
                name: webhook["name"].as_str().unwrap_or_default().to_string(),
                mutating: *mutating,
                client_config: webhook["clientConfig"].clone(),
                fail: webhook["failurePolicy"].as_str().unwrap_or("Fail") == "Fail",
                timeout: Duration::from_secs(webhook["timeoutSeconds"].as_u64().unwrap_or(10).clamp(1, 30)),
            });
        }
    }
    hooks
}

/// The AdmissionReview of a write.
pub fn review(uid: &str, a: &Attributes, object: &Value, old: &Value) -> Value {
    let gvk = json!({"group": a.group, "version": a.version, "kind": a.kind});
    let gvr = json!({"group": a.group, "version": a.version, "resource": a.resource});
    let mut request = json!({
        "uid": uid, "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": a.name, "operation": a.operation, "userInfo": {"username": a.user, "groups": a.groups},
        "object": object, "oldObject": old, "dryRun": a.dry_run,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": format!("{}Options", match a.operation {
            "CREATE" => "Create", "UPDATE" => "Update", _ => "Delete" })},
    });
    if let Some(ns) = &a.namespace {
        request["namespace"] = json!(ns);
    }
    if let Some(sub) = &a.subresource {
        request["subResource"] = json!(sub);
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request})
}

/// Where a webhook is reached: the URL, and the host to resolve to a routed Service's address.
fn endpoint(
    config: &Value,
    services: &HashMap<(String, String), String>,
) -> Result<(String, Option<(String, String)>), String> {
    if let Some(url) = config["url"].as_str() {
        return Ok((url.to_string(), None));
    }
    let service = &config["service"];
    let (ns, name) =
        (service["namespace"].as_str().unwrap_or_default(), service["name"].as_str().unwrap_or_default());
    let routed = services
        .get(&(ns.to_string(), name.to_string()))
        .ok_or_else(|| format!("service \"{name}\" not found"))?;
    let host = format!("{name}.{ns}.svc");
    let path = service["path"].as_str().unwrap_or("/");
    let port = service["port"].as_u64().unwrap_or(443);
    Ok((format!("https://{host}:{port}{path}"), Some((host, routed.clone()))))
}

/// Calls one webhook; the answer's `response`, or why it could not be called.
pub async fn call(
    hook: &Hook,
    body: &Value,
    services: &HashMap<(String, String), String>,
) -> Result<Value, String> {
    let (url, resolve) = endpoint(&hook.client_config, services)?;
    let mut builder = reqwest::Client::builder().timeout(hook.timeout);
    if let Some(ca) = hook.client_config["caBundle"].as_str() {
        let pem = base64::engine::general_purpose::STANDARD
            .decode(ca)
            .map_err(|_| "caBundle is not base64".to_string())?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| format!("caBundle: {e}"))? {
            builder = builder.add_root_certificate(cert);
        }
    }
    if let Some((host, routed)) = resolve {
        let address = routed
            .trim_start_matches("https://")
            .parse()
            .map_err(|_| format!("the route of {host} is not host:port"))?;
        builder = builder.resolve(&host, address);
    }
    let client = builder.build().map_err(|e| e.to_string())?;
    // As client-go's REST client, which the API server calls webhooks with: an answer of 429
    // (or 5xx) with Retry-After is tried again after that many seconds, at most 10 times and
    // within the webhook's timeout.
    let deadline = tokio::time::Instant::now() + hook.timeout;
    let mut attempt = 0;
    let answer = loop {
        let answer = client.post(&url).json(body).send().await.map_err(|e| {
            let mut text = format!("Post \"{url}\": {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                text.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            text
        })?;
        let status = answer.status().as_u16();
        let wait = answer
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|_| status == 429 || status >= 500)
            .map(std::time::Duration::from_secs);
        match wait {
            Some(wait) if attempt < 10 && tokio::time::Instant::now() + wait < deadline => {
                attempt += 1;
                tokio::time::sleep(wait).await;
            }
            _ => break answer,
        }
    };
    let status = answer.status();
    let review: Value = answer
        .json()
        .await
        .map_err(|e| format!("the answer of {url} ({status}) is not an AdmissionReview: {e}"))?;
    let response = review["response"].clone();
    if response.is_null() {
        return Err(format!("the answer of {url} has no response"));
    }
    if response["uid"] != body["request"]["uid"] {
        return Err(format!("the answer of {url} is for another request (uid {})", response["uid"]));
    }
    Ok(response)
}

/// The error of a denial, as Kubernetes words it.
pub fn denied(hook: &str, response: &Value) -> ApiError {
    let result = &response["status"];
    let message = match (result["message"].as_str(), result["reason"].as_str()) {
        (Some(m), _) if !m.is_empty() => format!("admission webhook \"{hook}\" denied the request: {m}"),
        (_, Some(r)) if !r.is_empty() => format!("admission webhook \"{hook}\" denied the request: {r}"),
        _ => format!("admission webhook \"{hook}\" denied the request without explanation"),
    };
    let code = result["code"].as_u64().map_or(400, |c| c.max(400)) as u16;
    ApiError::webhook(code, result["reason"].as_str().unwrap_or_default(), message)
}

/// The error of a webhook that could not be called.
pub fn failed(hook: &str, why: &str) -> ApiError {
    ApiError::internal(format!(
        "Internal error occurred: failed calling webhook \"{hook}\": failed to call webhook: {why}"
    ))
}

/// Applies a webhook's JSON patch to the object. The patch is bytes: base64 text as Go writes
/// them, or an array of numbers (which Go reads as well, and some webhook libraries write).
pub fn mutate(object: &mut Value, hook: &str, response: &Value) -> Result<(), ApiError> {
    let bad = |why: String| failed(hook, &why);
    let bytes = match &response["patch"] {
        Value::Null => return Ok(()),
        Value::String(text) => base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|_| bad("the patch is not base64".into()))?,
        Value::Array(numbers) => numbers
            .iter()
            .map(|n| n.as_u64().and_then(|n| u8::try_from(n).ok()))
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| bad("the patch is not bytes".into()))?,
        _ => return Err(bad("the patch is not bytes".into())),
    };
    if response["patchType"].as_str().unwrap_or("JSONPatch") != "JSONPatch" {
        return Err(bad("only JSONPatch is a patch type".into()));
    }
    let patch: json_patch::Patch =
        serde_json::from_slice(&bytes).map_err(|e| bad(format!("the patch is not a JSON patch: {e}")))?;
    json_patch::patch(object, &patch).map_err(|e| bad(format!("the patch does not apply: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A webhook that sheds load (429 with Retry-After, as Butler's does past its places) is
    /// called again, as client-go's REST client calls it again for kube-apiserver.
    #[tokio::test]
    async fn a_webhook_answering_429_with_retry_after_is_called_again() {
        use base64::Engine;
        use std::sync::atomic::{AtomicUsize, Ordering};
        let _ = rustls::crypto::ring::default_provider().install_default();
        let now = jiff::Timestamp::now();
        let ca = butler_runtime::webhook::certificates::new_ca("test-ca", now, 1).unwrap();
        let serving =
            butler_runtime::webhook::certificates::issue(&ca, &["localhost".into()], now, 1).unwrap();
        let tls = butler_runtime::webhook::Tls::from_pem(&serving.cert, &serving.key).unwrap();
        let calls = std::sync::Arc::new(AtomicUsize::new(0));
        let counted = calls.clone();
        let router = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |axum::Json(review): axum::Json<Value>| {
                let calls = counted.clone();
                async move {
                    use axum::response::IntoResponse;
                    match calls.fetch_add(1, Ordering::SeqCst) {
                        0 => (
                            axum::http::StatusCode::TOO_MANY_REQUESTS,
                            [(axum::http::header::RETRY_AFTER, "1")],
                            "busy",
                        )
                            .into_response(),
                        _ => {
                            axum::Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                            "response": {"uid": review["request"]["uid"], "allowed": true}}))
                            .into_response()
                        }
                    }
                }
            }),
        );
        let (stop, shutdown) = butler_runtime::shutdown::shutdown_switch();
        let (address, task) = butler_runtime::webhook::serve_https(
            "test",
            "127.0.0.1:0".parse().unwrap(),
            &tls,
            router,
            shutdown,
        )
        .await
        .unwrap();
        let hook = Hook {
            name: "retried.example.com".into(),
            mutating: false,
            client_config: json!({"url": format!("https://localhost:{}/hook", address.port()),
                "caBundle": base64::engine::general_purpose::STANDARD.encode(&ca.cert)}),
            fail: true,
            timeout: Duration::from_secs(10),
        };
        let body = json!({"request": {"uid": "u-1"}});
        let response = call(&hook, &body, &HashMap::new()).await.unwrap();
        assert_eq!(response["allowed"], true);
        assert_eq!(calls.load(Ordering::SeqCst), 2, "called again after its Retry-After");
        stop.send(true).unwrap();
        task.await.unwrap();
    }

    fn attributes(operation: &'static str) -> Attributes {
        Attributes {
            operation,
            group: "butler.butlerlabs.dev".into(),
            version: "v1alpha1".into(),
            resource: "tenantclusters".into(),
            subresource: None,
            kind: "TenantCluster".into(),
            namespaced: true,
            namespace: Some("team-a".into()),
            name: "web".into(),
            user: "someone".into(),
            groups: Vec::new(),
            dry_run: false,
        }
    }

    fn configuration(name: &str, operations: Value, selector: Value) -> Value {
        json!({"metadata": {"name": name}, "webhooks": [{"name": format!("{name}.hook"), "clientConfig": {"url": "https://x"},
            "objectSelector": selector,
            "rules": [{"apiGroups": ["butler.butlerlabs.dev"], "apiVersions": ["*"], "operations": operations, "resources": ["tenantclusters"], "scope": "Namespaced"}]}]})
    }

    #[test]
    fn match_conditions_skip_a_webhook_as_kubernetes_evaluates_them() {
        let mut configuration = configuration("v", json!(["CREATE", "UPDATE", "DELETE"]), Value::Null);
        configuration["webhooks"][0]["matchConditions"] = json!([
            {"name": "not-being-deleted", "expression": "request.operation != 'UPDATE' || !has(oldObject.metadata.deletionTimestamp)"},
            {"name": "spec-changed", "expression": "request.operation != 'UPDATE' || object.spec != oldObject.spec"},
        ]);
        let configurations = vec![(false, configuration)];
        let old = json!({"metadata": {"name": "t"}, "spec": {"a": 1}});
        let called = |op, object: &Value, old: &Value| {
            !matching(&configurations, &attributes(op), object, old).is_empty()
        };
        assert!(called("CREATE", &old, &Value::Null));
        assert!(called("DELETE", &Value::Null, &old));
        assert!(called("UPDATE", &json!({"metadata": {"name": "t"}, "spec": {"a": 2}}), &old));
        let finalizer_only = json!({"metadata": {"name": "t", "finalizers": ["x"]}, "spec": {"a": 1}});
        assert!(!called("UPDATE", &finalizer_only, &old));
        let terminating =
            json!({"metadata": {"name": "t", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"a": 1}});
        let changed =
            json!({"metadata": {"name": "t", "deletionTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"a": 3}});
        assert!(!called("UPDATE", &changed, &terminating));
    }

    #[test]
    fn rules_and_selectors_pick_the_webhooks_mutating_first() {
        let configurations = vec![
            (false, configuration("b-validate", json!(["CREATE", "UPDATE"]), Value::Null)),
            (true, configuration("a-mutate", json!(["CREATE"]), Value::Null)),
            (false, configuration("c-labelled", json!(["*"]), json!({"matchLabels": {"tier": "gold"}}))),
        ];
        let object = json!({"metadata": {"labels": {"tier": "silver"}}});
        let names = |op| -> Vec<String> {
            matching(&configurations, &attributes(op), &object, &Value::Null)
                .into_iter()
                .map(|h| h.name)
                .collect()
        };
        assert_eq!(names("CREATE"), ["a-mutate.hook", "b-validate.hook"]);
        assert_eq!(names("UPDATE"), ["b-validate.hook"]);
        assert!(names("DELETE").is_empty());
        let gold = json!({"metadata": {"labels": {"tier": "gold"}}});
        assert_eq!(
            matching(&configurations, &attributes("DELETE"), &Value::Null, &gold).len(),
            1,
            "the old object's labels count"
        );
        let mut status = attributes("UPDATE");
        status.subresource = Some("status".into());
        assert!(
            matching(&configurations, &status, &object, &Value::Null).is_empty(),
            "subresources need their own rule"
        );
    }

    #[test]
    fn denials_and_patches_read_as_kubernetes_has_them() {
        let response = json!({"uid": "u", "allowed": false, "status": {"code": 403, "reason": "Forbidden", "message": "over quota"}});
        let e = denied("quota.hook", &response);
        assert_eq!(
            (e.code, e.message.as_str()),
            (403, "admission webhook \"quota.hook\" denied the request: over quota")
        );
        let silent = denied("x", &json!({"allowed": false}));
        assert_eq!(
            (silent.code, silent.message.as_str()),
            (400, "admission webhook \"x\" denied the request without explanation")
        );
        let patch = base64::engine::general_purpose::STANDARD
            .encode(r#"[{"op": "add", "path": "/spec/replicas", "value": 3}]"#);
        let mut object = json!({"spec": {}});
        mutate(&mut object, "m", &json!({"allowed": true, "patchType": "JSONPatch", "patch": patch}))
            .unwrap();
        assert_eq!(object["spec"]["replicas"], 3);
        let as_numbers: Vec<u8> = br#"[{"op": "add", "path": "/spec/size", "value": 1}]"#.to_vec();
        mutate(&mut object, "m", &json!({"allowed": true, "patchType": "JSONPatch", "patch": as_numbers}))
            .unwrap();
        assert_eq!(object["spec"]["size"], 1);
        let r = review("u-1", &attributes("CREATE"), &object, &Value::Null);
        assert_eq!(
            (r["request"]["operation"].as_str(), r["request"]["namespace"].as_str()),
            (Some("CREATE"), Some("team-a"))
        );
    }
}
