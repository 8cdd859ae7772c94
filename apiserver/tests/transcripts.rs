//! What a real kube-apiserver v1.36 answered (`tests/transcripts/`, recorded by its
//! `record.py`), replayed against the in-memory server: each step is sent as it was recorded
//! and the answer is compared with the recorded one after the same normalisation (uids,
//! resourceVersions, times, generated names). Where Kubernetes and the in-memory server
//! differ, Kubernetes is right.
//!
//! A case is replayed here once the in-memory server answers every one of its steps as
//! recorded; the cases not yet here need set-up steps the recorder did not record (a
//! Deployment's ReplicaSets, a CRD, payloads of a given size) or kinds the server does not serve.

use std::path::PathBuf;

use butler_apiserver::MemoryApiServer;
use serde_json::{Map, Value, json};

/// A recorded case.
struct Case {
    name: String,
    steps: Vec<Value>,
}

fn case(name: &str) -> Case {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/transcripts").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let recorded: Value = serde_json::from_str(&text).expect("a transcript is JSON");
    Case { name: name.into(), steps: recorded["steps"].as_array().cloned().unwrap_or_default() }
}

/// What a step's answer was, in the normalised form the transcripts use.
#[derive(Debug, PartialEq)]
struct Answer {
    status: u16,
    warnings: Vec<String>,
    body: Value,
}

/// The answer to one recorded request.
async fn send(http: &reqwest::Client, base: &str, request: &Value) -> Answer {
    let method = reqwest::Method::from_bytes(request["method"].as_str().unwrap_or("GET").as_bytes())
        .expect("a recorded method");
    let mut url = reqwest::Url::parse(&format!("{base}{}", request["path"].as_str().unwrap_or("/")))
        .expect("a recorded path");
    if let Some(query) = request["query"].as_object() {
        let mut pairs = url.query_pairs_mut();
        for (k, v) in query {
            pairs.append_pair(k, v.as_str().unwrap_or_default());
        }
    }
    let mut builder = http.request(method, url).header("User-Agent", "transcript-recorder/1.0");
    if let Some(accept) = request["accept"].as_str() {
        builder = builder.header("Accept", accept);
    }
    let content_type = request["contentType"].as_str().unwrap_or("application/json");
    builder = match (&request["bodyText"], &request["body"]) {
        // JSON with duplicate keys, sent as it was written.
        (Value::String(text), _) => builder.header("Content-Type", content_type).body(text.clone()),
        (_, Value::Null) => builder,
        (_, Value::String(text)) => builder.header("Content-Type", content_type).body(text.clone()),
        (_, body) => builder.header("Content-Type", content_type).body(expanded(body.clone()).to_string()),
    };
    let response = builder.send().await.expect("the in-memory server answers");
    let status = response.status().as_u16();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok().map(String::from))
        .collect();
    let text = response.text().await.unwrap_or_default();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    Answer { status, warnings, body: normalise(body) }
}

/// A recorded body with its payloads written out: `"<N x 'a'>"` is N bytes of the letter a.
fn expanded(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, expanded(v))).collect()),
        Value::Array(items) => Value::Array(items.into_iter().map(expanded).collect()),
        Value::String(s) => {
            let payload = s
                .strip_prefix('<')
                .and_then(|r| r.strip_suffix("'>"))
                .and_then(|r| r.split_once(" x '"))
                .and_then(|(n, c)| Some((n.parse::<usize>().ok()?, c.chars().next()?)));
            match payload {
                Some((n, c)) => Value::String(c.to_string().repeat(n)),
                None => Value::String(s),
            }
        }
        other => other,
    }
}

/// The transcripts' normalisation (their README): uids, resourceVersions and times replaced,
/// strings over 4096 characters described.
fn normalise(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut out = Map::new();
            for (k, v) in map {
                let v = match (k.as_str(), &v) {
                    ("uid", Value::String(_)) => json!("<uid>"),
                    ("resourceVersion", Value::String(rv)) if !["", "0", "1"].contains(&rv.as_str()) => {
                        json!("<rv>")
                    }
                    (
                        "creationTimestamp"
                        | "deletionTimestamp"
                        | "time"
                        | "lastTransitionTime"
                        | "lastUpdateTime"
                        | "lastProbeTime"
                        | "expirationTimestamp"
                        | "startTime",
                        Value::String(_),
                    ) => json!("<time>"),
                    _ => normalise(v),
                };
                out.insert(k, v);
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(normalise).collect()),
        Value::String(s) if looks_like_uid(&s) => json!("<uid>"),
        Value::String(s) if s.chars().count() > 4096 => {
            let start: String = s.chars().take(40).collect();
            json!(format!("<truncated string of {} chars, starts '{start}'>", s.chars().count()))
        }
        other => other,
    }
}

fn looks_like_uid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.len() == 5
        && [8, 4, 4, 4, 12]
            .iter()
            .zip(&parts)
            .all(|(n, p)| p.len() == *n && p.chars().all(|c| c.is_ascii_hexdigit()))
}

/// The managedFields of an object, which the in-memory server keeps by its own rules: compared
/// by the cases about them only.
fn without_managed_fields(mut body: Value) -> Value {
    if let Some(meta) = body.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("managedFields");
    }
    if let Some(items) = body.get_mut("items").and_then(Value::as_array_mut) {
        for item in items {
            *item = without_managed_fields(item.take());
        }
    }
    body
}

/// Replays `name` on a fresh server: every step must be answered as
/// recorded (status, Warning headers and body, managedFields aside unless `managed_fields`).
async fn replay(name: &str, managed_fields: bool) {
    let server = MemoryApiServer::start().await;
    let http = reqwest::Client::builder().no_proxy().build().expect("an HTTP client");
    let recorded = case(name);
    let mut created_namespaces = Vec::new();
    let mut differences = Vec::new();
    for (i, step) in recorded.steps.iter().enumerate() {
        let request = &step["request"];
        // The recorder made the namespaces it works in before it recorded anything.
        let path = request["path"].as_str().unwrap_or_default();
        if let Some(ns) = path.split("/namespaces/").nth(1).and_then(|rest| rest.split('/').next())
            && !created_namespaces.contains(&ns.to_string())
            && !(path.ends_with(&format!("/namespaces/{ns}")) && request["method"] == "POST")
        {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            let _ = http
                .post(format!("{}/api/v1/namespaces", server.url()))
                .header("Content-Type", "application/json")
                .body(body.to_string())
                .send()
                .await;
            created_namespaces.push(ns.to_string());
        }
        let expected = &step["response"];
        let mut wanted_body = normalise(expected["body"].clone());
        if !managed_fields {
            wanted_body = without_managed_fields(wanted_body);
        }
        let wanted_warnings: Vec<String> = expected["headers"]["Warning"]
            .as_array()
            .map(|w| w.iter().filter_map(|s| s.as_str().map(String::from)).collect())
            .unwrap_or_default();
        let wanted_status = expected["status"].as_u64().unwrap_or_default() as u16;
        // A read was recorded when its answer changed (what a controller did a moment later):
        // it is read again until it does, for a few seconds.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
        let (answer, got_body) = loop {
            let answer = send(&http, &server.url(), request).await;
            let got_body = match managed_fields {
                true => answer.body.clone(),
                false => without_managed_fields(answer.body.clone()),
            };
            let same = answer.status == wanted_status
                && answer.warnings == wanted_warnings
                && got_body == wanted_body;
            if same || request["method"] != "GET" || std::time::Instant::now() > deadline {
                break (answer, got_body);
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        };
        if answer.status != wanted_status || answer.warnings != wanted_warnings || got_body != wanted_body {
            differences.push(format!(
                "step {i}: {} {}\n  recorded: {wanted_status} {wanted_warnings:?} {wanted_body}\n  answered: {} {:?} {got_body}",
                request["method"].as_str().unwrap_or_default(),
                path,
                answer.status,
                answer.warnings,
            ));
        }
    }
    assert!(
        differences.is_empty(),
        "{}: the in-memory server differs from Kubernetes:\n{}",
        recorded.name,
        differences.join("\n")
    );
}

#[tokio::test]
async fn an_empty_subjects_list_is_not_stored() {
    replay("01-empty-subjects-rolebinding", true).await;
}

#[tokio::test]
async fn an_empty_configmap_data_map_is_not_stored() {
    replay("02-empty-configmap-data", true).await;
}

#[tokio::test]
async fn a_deployment_is_stored_defaulted_without_its_empty_lists() {
    replay("03-empty-container-env", false).await;
}

#[tokio::test]
async fn clusterrole_rules_read_back_as_null_when_empty() {
    replay("04-empty-clusterrole-rules", false).await;
}

#[tokio::test]
async fn a_policy_that_reads_an_absent_list_refuses_as_kubernetes_does() {
    replay("05-vap-subjects-refusal", false).await;
}

#[tokio::test]
async fn size_limits_are_refused_in_kubernetes_words() {
    replay("07-size-limits", false).await;
}
