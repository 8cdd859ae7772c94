//! The `butler-operator run` binary as a process of its own: health and metrics endpoints,
//! the leader Lease, a SIGKILL in the middle of an upgrade, and a graceful SIGTERM.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use serde_json::json;

use crate::fixtures::{components, publish};
use crate::support::{Scenario, is};
use crate::upgrade::{installed, spec};

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().unwrap().port()
}

struct Process {
    child: Child,
    health: u16,
    metrics: u16,
}

impl Process {
    fn start(kubeconfig: &PathBuf, namespace: &str, cache: &std::path::Path, more: &[&str]) -> Process {
        let (health, metrics) = (free_port(), free_port());
        let child = Command::new(env!("CARGO_BIN_EXE_butler-operator"))
            .args(["run", "--health-probe-bind-address", &format!("127.0.0.1:{health}")])
            .args(more)
            .args(["--metrics-bind-address", &format!("127.0.0.1:{metrics}")])
            .args(["--leader-election-namespace", namespace, "--leader-election-lease-duration", "3"])
            .args(["--log-format", "json", "--namespace", namespace])
            .env("KUBECONFIG", kubeconfig)
            .env("BUTLER_CACHE_DIR", cache)
            .env("RUST_LOG", std::env::var("OPERATOR_LOG").unwrap_or_else(|_| "warn".into()))
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the operator binary starts");
        Process { child, health, metrics }
    }

    async fn get(&self, port: u16, path: &str) -> Option<(u16, String)> {
        let response = reqwest::get(format!("http://127.0.0.1:{port}{path}")).await.ok()?;
        Some((response.status().as_u16(), response.text().await.ok()?))
    }

    /// `/metrics` over HTTPS (the certificate the process made at start), with a bearer token.
    async fn scrape(&self, token: Option<&str>) -> (u16, String) {
        let client = reqwest::Client::builder().danger_accept_invalid_certs(true).build().unwrap();
        let mut request = client.get(format!("https://127.0.0.1:{}/metrics", self.metrics));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.expect("the metrics server answers over HTTPS");
        (response.status().as_u16(), response.text().await.unwrap())
    }

    async fn wait_ready(&self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let answer = self.get(self.health, "/readyz").await;
            if answer.as_ref().map(|r| r.0) == Some(200) {
                return;
            }
            assert!(Instant::now() < deadline, "the operator was not ready within 30s: {answer:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    fn signal(&self, signal: &str) {
        let status =
            Command::new("kill").args([signal, &self.child.id().to_string()]).status().expect("kill runs");
        assert!(status.success());
    }

    /// Waits for the process to end, and returns whether it ended well. It yields while it
    /// waits: the in-memory API server runs on this test's runtime.
    async fn wait_exit(&mut self, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting on the operator") {
                return status.success();
            }
            assert!(Instant::now() < deadline, "the operator did not stop within {within:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn the_binary_serves_probes_and_metrics_holds_the_lease_and_survives_a_kill() {
    let s = Scenario::new("binary").await;
    let Some(server) = s.cluster.server() else {
        println!(
            "skipped: the binary scenario runs on the in-memory API server only (it needs its kubeconfig file)"
        );
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let kubeconfig = server.kubeconfig().to_path_buf();
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    for version in ["v1.1.0", "v1.1.1"] {
        publish(
            &s,
            "infrastructure-widget",
            "infrastructure-components.yaml",
            version,
            &components("widget", version, &[]),
        )
        .await;
    }

    let mut operator = Process::start(&kubeconfig, &s.namespace, cache.path(), &[]);
    operator.wait_ready().await;
    assert_eq!(operator.get(operator.health, "/healthz").await.map(|r| r.0), Some(200));
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.1.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;

    // Metrics over HTTPS, to tokens the API server knows and allows `get` on /metrics.
    let (scraper, stranger) = scrapers(&s).await;
    assert_eq!(operator.scrape(None).await.0, 401, "no token");
    assert_eq!(operator.scrape(Some("forged")).await.0, 401, "a token the API server does not know");
    let (code, refused) = operator.scrape(Some(&stranger)).await;
    assert_eq!(code, 403, "{refused}");
    assert!(
        refused.contains(&format!("system:serviceaccount:{}:stranger may not get /metrics", s.namespace)),
        "{refused}"
    );
    let (code, metrics) = operator.scrape(Some(&scraper)).await;
    assert_eq!(code, 200, "{metrics}");
    assert!(
        metrics.contains("butler_operator_reconciles_total{kind=\"InfrastructureProvider\"}"),
        "{metrics}"
    );
    let info = format!(
        "butler_operator_provider_info{{kind=\"InfrastructureProvider\",namespace=\"{}\",name=\"widget\",version=\"v1.1.0\",contract=\"v1beta1\"}} 1",
        s.namespace
    );
    assert!(metrics.contains(&info), "{metrics}");
    assert!(metrics.contains("butler_operator_leader 1"), "{metrics}");
    // Its requests, as client-go's rest_client_requests_total counts them.
    assert!(
        metrics.contains(
            "butler_operator_rest_client_requests_total{verb=\"create\",resource=\"deployments.apps\"}"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("verb=\"watch\""), "{metrics}");
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &s.namespace);
    let lease = leases.get("butler-operator").await.expect("the leader Lease");
    assert!(lease.spec.unwrap().holder_identity.is_some_and(|h| !h.is_empty()));

    // Killed in the middle of an upgrade, then started again: the upgrade completes.
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v1.1.1"})).await;
    tokio::time::sleep(Duration::from_millis(5)).await;
    operator.child.kill().expect("SIGKILL");
    operator.wait_exit(Duration::from_secs(5)).await;
    // A new process waits out the dead holder's lease (3 s here) before it leads; this one
    // serves its metrics over plain HTTP, as Cluster API managers' flag asks.
    let mut operator = Process::start(&kubeconfig, &s.namespace, cache.path(), &["--insecure-diagnostics"]);
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let widget = s.api::<InfrastructureProvider>().get("widget").await.unwrap();
        if installed("v1.1.1")(&widget) && is(&widget, "ProviderInstalled", "True") {
            break;
        }
        assert!(Instant::now() < deadline, "the upgrade did not complete after the restart");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (code, metrics) = operator.get(operator.metrics, "/metrics").await.expect("plain HTTP metrics");
    assert_eq!(code, 200);
    assert!(metrics.contains("butler_operator_leader 1"), "{metrics}");

    // SIGTERM: the operator stops cleanly and hands the lease back.
    operator.signal("-TERM");
    assert!(operator.wait_exit(Duration::from_secs(20)).await, "a SIGTERM ends the operator with success");
    let lease = leases.get("butler-operator").await.unwrap();
    assert!(lease.spec.unwrap().holder_identity.is_none_or(|h| h.is_empty()), "the lease is released");
}

/// Tokens of two ServiceAccounts: `scraper`, bound to a ClusterRole that grants `get` on
/// `/metrics` (as Prometheus's account is), and `stranger`, bound to nothing.
async fn scrapers(s: &Scenario) -> (String, String) {
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let name = format!("{}-metrics-reader", s.namespace);
    let post = kube::api::PostParams::default();
    let reader: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(s.client.clone()).create(&post, &reader).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": s.namespace}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(s.client.clone()).create(&post, &binding).await.unwrap();
    let mut tokens = Vec::new();
    for account in ["scraper", "stranger"] {
        let config = s.cluster.service_account_config("scrape", &s.namespace, account).await;
        tokens.push(serde_json::to_value(&config.auth_info).unwrap()["token"].as_str().unwrap().to_string());
    }
    (tokens.remove(0), tokens.remove(0))
}
