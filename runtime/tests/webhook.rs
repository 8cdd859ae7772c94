//! The admission-webhook server as an API server calls it: AdmissionReview v1 over HTTPS,
//! verified against the CA that signed the serving certificate, and a certificate renewed
//! while serving.

use std::sync::Arc;

use butler_runtime::shutdown::shutdown_switch;
use butler_runtime::webhook::certificates::{issue, new_ca};
use butler_runtime::webhook::{Tls, Webhooks, serve};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::{Value, json};

fn client_trusting(ca_pem: &str) -> reqwest::Client {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder().tls_backend_preconfigured(tls).build().unwrap()
}

fn review(uid: &str, labels: Value) -> Value {
    json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "requestKind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "requestResource": {"group": "", "version": "v1", "resource": "configmaps"},
            "name": "c", "namespace": "default", "operation": "CREATE",
            "userInfo": {"username": "someone"},
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default", "labels": labels}},
            "dryRun": false,
        }
    })
}

#[tokio::test]
async fn reviews_are_answered_over_verified_https_and_the_certificate_renews_in_place() {
    let now = jiff::Timestamp::now();
    let ca = new_ca("butler-test-ca", now, 365).unwrap();
    let serving = issue(&ca, &["localhost".into(), "127.0.0.1".into()], now, 30).unwrap();
    let tls = Tls::from_pem(&serving.cert, &serving.key).unwrap();
    let webhooks = Webhooks::new().route(
        "/validate-configmaps",
        Arc::new(|request: &AdmissionRequest<ConfigMap>| {
            let denied = request
                .object
                .as_ref()
                .and_then(|o| o.metadata.labels.as_ref())
                .is_some_and(|l| l.contains_key("deny"));
            let response = AdmissionResponse::from(request);
            if denied {
                response.deny("ConfigMap default/c: the label deny is not allowed; remove it")
            } else {
                response
            }
        }),
    );
    let (stop, shutdown) = shutdown_switch();
    let (address, task) = serve("127.0.0.1:0".parse().unwrap(), &tls, webhooks, shutdown).await.unwrap();
    let url = format!("https://localhost:{}/validate-configmaps", address.port());
    let client = client_trusting(&ca.cert);

    let answer: Value =
        client.post(&url).json(&review("u-1", json!({}))).send().await.unwrap().json().await.unwrap();
    assert_eq!(answer["kind"], "AdmissionReview");
    assert_eq!(answer["response"]["uid"], "u-1");
    assert_eq!(answer["response"]["allowed"], true);

    let answer: Value = client
        .post(&url)
        .json(&review("u-2", json!({"deny": "yes"})))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "ConfigMap default/c: the label deny is not allowed; remove it"
    );

    // An object that does not read as its kind (the API server's schema comes after mutating
    // webhooks): refused by the path of the field, with the request's uid.
    let mut bad = review("u-5", json!({}));
    bad["request"]["object"]["data"] = json!({"key": 5});
    let answer: Value = client.post(&url).json(&bad).send().await.unwrap().json().await.unwrap();
    assert_eq!((&answer["response"]["uid"], &answer["response"]["allowed"]), (&json!("u-5"), &json!(false)));
    let message = answer["response"]["status"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("data.key does not read as the object's kind: invalid type: integer `5`"),
        "{message}"
    );
    // A body that is no AdmissionReview at all: 400.
    let status = client.post(&url).body("{\"request\": 7}").send().await.unwrap().status();
    assert_eq!(status, reqwest::StatusCode::BAD_REQUEST);

    // A certificate from another CA is not trusted by this client; after the reload, the
    // server presents the renewed one of the same CA and the client still trusts it.
    let renewed = issue(&ca, &["localhost".into()], now, 60).unwrap();
    tls.reload(&renewed.cert, &renewed.key).unwrap();
    let fresh = client_trusting(&ca.cert);
    let answer: Value =
        fresh.post(&url).json(&review("u-3", json!({}))).send().await.unwrap().json().await.unwrap();
    assert_eq!(answer["response"]["uid"], "u-3");
    let stranger = new_ca("someone-else", now, 1).unwrap();
    assert!(client_trusting(&stranger.cert).post(&url).json(&review("u-4", json!({}))).send().await.is_err());

    assert!(Tls::from_pem("not a certificate", &renewed.key).err().unwrap().to_string().contains("PEM"));
    stop.send(true).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(10), task).await.unwrap().unwrap();
}

/// A review decoded and decided holds one of the server's places; past them, one more is shed
/// with 429 and `Retry-After` (the API server retries it) before its body is decoded, so that a
/// few large reviews at once never hold many times their size in memory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_past_the_servers_places_are_shed_with_429() {
    let now = jiff::Timestamp::now();
    let ca = new_ca("butler-test-ca", now, 365).unwrap();
    let serving = issue(&ca, &["localhost".into()], now, 30).unwrap();
    let tls = Tls::from_pem(&serving.cert, &serving.key).unwrap();
    let (entered, mut inside) = tokio::sync::mpsc::unbounded_channel::<()>();
    // Dropped, the sender lets every decision go (each waits on the channel until then).
    let (let_go, wait) = std::sync::mpsc::channel::<()>();
    let gate = std::sync::Mutex::new(wait);
    let webhooks = Webhooks::at_once(1).route(
        "/slow",
        Arc::new(move |request: &AdmissionRequest<ConfigMap>| {
            entered.send(()).unwrap();
            // Decides only once the test lets it: the one place stays taken meanwhile (the
            // worker's other tasks move to another thread while this one waits).
            tokio::task::block_in_place(|| {
                let _ = gate.lock().unwrap().recv();
            });
            AdmissionResponse::from(request)
        }),
    );
    let (stop, shutdown) = shutdown_switch();
    let (address, task) = serve("127.0.0.1:0".parse().unwrap(), &tls, webhooks, shutdown).await.unwrap();
    let url = format!("https://localhost:{}/slow", address.port());
    let client = client_trusting(&ca.cert);
    let first = tokio::spawn({
        let (client, url) = (client.clone(), url.clone());
        async move { client.post(&url).json(&review("u-1", json!({}))).send().await.unwrap().status() }
    });
    inside.recv().await.unwrap();
    let shed = client.post(&url).json(&review("u-2", json!({}))).send().await.unwrap();
    assert_eq!(shed.status(), 429);
    assert_eq!(shed.headers()["retry-after"], "1");
    drop(let_go);
    assert_eq!(first.await.unwrap(), 200, "the one in its place is answered");
    let after = client.post(&url).json(&review("u-3", json!({}))).send().await.unwrap();
    assert_eq!(after.status(), 200, "the place is free again");
    stop.send(true).unwrap();
    task.await.unwrap();
}
