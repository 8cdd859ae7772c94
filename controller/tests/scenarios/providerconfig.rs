//! ProviderConfigs as spec/000 has them: credentials checked (a missing key named, then
//! fixed, seen when the Secret is read again), an on-premises platform probed over HTTPS with the
//! trust of its kubeconfig, the pools of IPAM mode and their capacity, no finalizer, and an
//! earlier version's finalizer holding a deletion while a TenantCluster uses the config.

use axum::Router;
use axum::routing::get;
use butler_core::api::{NetworkPool, ProviderConfig, TenantCluster};
use butler_runtime::webhook::certificates::{issue, new_ca};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;

use crate::support::{Scenario, create, wait_for};

fn condition(config: Option<&ProviderConfig>, type_: &str) -> Option<(String, String)> {
    let c = config?.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn is(config: Option<&ProviderConfig>, type_: &str, status: &str, reason: &str) -> bool {
    condition(config, type_) == Some((status.into(), reason.into()))
}

async fn secret(s: &Scenario, ns: &str, name: &str, data: serde_json::Value) {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "stringData": data});
    Api::<Secret>::namespaced(s.client.clone(), ns)
        .patch(name, &PatchParams::apply("scenario").force(), &Patch::Apply(secret))
        .await
        .unwrap();
}

/// A Harvester cluster's API on 127.0.0.1 over HTTPS, with its own CA: `(url, CA PEM)`.
async fn fake_harvester() -> (String, String, axum_server::Handle<std::net::SocketAddr>) {
    let now = jiff::Timestamp::now();
    let ca = new_ca("fake-harvester-ca", now, 1).unwrap();
    let serving = issue(&ca, &["127.0.0.1".into(), "localhost".into()], now, 1).unwrap();
    let config =
        axum_server::tls_rustls::RustlsConfig::from_pem(serving.cert.into_bytes(), serving.key.into_bytes())
            .await
            .unwrap();
    let app = Router::new()
        .route("/version", get(|| async { axum::Json(json!({"gitVersion": "v1.29.9+rke2r1"})) }));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let handle = axum_server::Handle::new();
    let server = axum_server::from_tcp_rustls(listener, config).unwrap().handle(handle.clone());
    tokio::spawn(async move { server.serve(app.into_make_service()).await });
    (format!("https://127.0.0.1:{}", address.port()), ca.cert, handle)
}

fn base64(text: &str) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(text)
}

#[tokio::test]
async fn credentials_are_checked_and_a_fix_is_seen_at_the_next_read() {
    let s = Scenario::start().await;
    let ns = s.namespace("pc").await;
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    secret(&s, &ns, "aws-credentials", json!({"accessKeyID": "AKIAEXAMPLE"})).await;
    create(
        &configs,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: aws, namespace: {ns}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: aws-credentials}}\n  aws: {{region: eu-west-1}}\n"),
    )
    .await;
    let refused = wait_for(&configs, "aws", "credentials refused", |c| {
        is(c, "Validated", "False", "CredentialsInvalid")
    })
    .await
    .unwrap();
    let message =
        &refused.status.as_ref().unwrap().conditions.iter().find(|c| c.type_ == "Validated").unwrap().message;
    assert_eq!(
        message,
        &format!(
            "the Secret {ns}/aws-credentials of spec.credentialsRef: the key secretAccessKey is missing or empty; aws needs accessKeyID, secretAccessKey"
        )
    );
    assert!(!message.contains("AKIAEXAMPLE"));
    assert!(is(Some(&refused), "Ready", "False", "CredentialsInvalid"));
    assert_eq!(refused.status.as_ref().unwrap().validated, Some(false));

    secret(
        &s,
        &ns,
        "aws-credentials",
        json!({"accessKeyID": "AKIAEXAMPLE", "secretAccessKey": "wJalrXUtnFEMI"}),
    )
    .await;
    let ready = wait_for(&configs, "aws", "Ready", |c| is(c, "Ready", "True", "Ready")).await.unwrap();
    assert!(ready.finalizers().is_empty(), "no finalizer: a stopped controller holds no namespace");
    let status = ready.status.unwrap();
    assert_eq!((status.validated, status.ready), (Some(true), Some(true)));
    assert!(status.last_validation_time.is_some());
    assert!(status.last_probe_time.is_none(), "clouds are not probed");
    configs.delete("aws", &DeleteParams::default()).await.unwrap();
    wait_for(&configs, "aws", "deletion", |c| c.is_none()).await;
}

#[tokio::test]
async fn an_on_premises_platform_is_probed_and_its_pools_counted() {
    let s = Scenario::start().await;
    let ns = s.namespace("pc").await;
    let (url, ca, server) = fake_harvester().await;
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: h\n  cluster:\n    server: {url}\n    certificate-authority-data: {}\ncontexts:\n- name: h\n  context: {{cluster: h, user: u}}\ncurrent-context: h\nusers:\n- name: u\n  user: {{token: t}}\n",
        base64(&ca)
    );
    secret(&s, &ns, "harvester-credentials", json!({"kubeconfig": kubeconfig})).await;
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    create(
        &configs,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: harvester, namespace: {ns}}}\nspec:\n  provider: harvester\n  credentialsRef: {{name: harvester-credentials}}\n  harvester: {{networkName: default/vlan40}}\n  network:\n    mode: ipam\n    poolRefs: [{{name: pool-a}}]\n"),
    )
    .await;
    let waiting = wait_for(&configs, "harvester", "pools missing", |c| {
        is(c, "PoolsAvailable", "False", "PoolNotFound")
    })
    .await
    .unwrap();
    assert!(is(Some(&waiting), "Reachable", "True", "Reachable"), "{:?}", waiting.status);
    let status = waiting.status.unwrap();
    assert_eq!(status.provider_version.as_deref(), Some("v1.29.9+rke2r1"));
    assert!(status.last_probe_time.is_some());
    assert!(is(Some(&waiting_config(&configs).await), "Ready", "False", "PoolNotFound"));

    // The pool appears; the NetworkPool controller counts it; the capacity follows.
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    create(&pools, &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: NetworkPool\nmetadata: {{name: pool-a, namespace: {ns}}}\nspec: {{cidr: 10.40.0.0/24}}\n")).await;
    let ready = wait_for(&configs, "harvester", "Ready", |c| {
        is(c, "Ready", "True", "Ready")
            && c.and_then(|c| c.status.as_ref()?.capacity.as_ref()?.available_ips) == Some(256)
    })
    .await
    .unwrap();
    let capacity = ready.status.unwrap().capacity.unwrap();
    assert_eq!(capacity.estimated_tenants, Some(19), "256 / (5 + 8)");

    server.shutdown();
}

/// A ProviderConfig that still carries the finalizer of an earlier version, deleted while a
/// cluster uses it, is held as that version held it; a live one loses the finalizer.
#[tokio::test]
async fn an_earlier_versions_finalizer_holds_a_deletion_while_clusters_use_the_config() {
    let mut s = Scenario::start().await;
    let ns = s.namespace("pc-legacy").await;
    let team = s.namespace("team-pc-legacy").await;
    s.kill_controllers();
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    let legacy = |name: &str| {
        format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: {name}, namespace: {ns}, finalizers: [butler.butlerlabs.dev/providerconfig]}}\nspec:\n  provider: aws\n  credentialsRef: {{name: c}}\n  aws: {{region: eu-west-1}}\n"
        )
    };
    create(&configs, &legacy("held")).await;
    create(&configs, &legacy("live")).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    create(&clusters, &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: web, namespace: {team}}}\nspec:\n  providerConfigRef: {{name: held, namespace: {ns}}}\n")).await;
    configs.delete("held", &DeleteParams::default()).await.unwrap();
    s.start_controllers().await;
    wait_for(&configs, "live", "its old finalizer gone", |c| c.is_some_and(|c| c.finalizers().is_empty()))
        .await;
    let blocked =
        wait_for(&configs, "held", "deletion blocked", |c| is(c, "Ready", "False", "DeletionBlocked"))
            .await
            .unwrap();
    let status = blocked.status.unwrap();
    let message = &status.conditions.iter().find(|c| c.type_ == "Ready").unwrap().message;
    assert!(message.contains(&format!("{team}/web")), "{message}");
    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for(&configs, "held", "deletion", |c| c.is_none()).await;
}

async fn waiting_config(configs: &Api<ProviderConfig>) -> ProviderConfig {
    configs.get("harvester").await.unwrap()
}

#[tokio::test]
async fn a_platform_that_does_not_answer_is_not_ready_and_is_not_probed_again_within_a_minute() {
    let s = Scenario::start().await;
    let ns = s.namespace("pc").await;
    // A port that nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    secret(&s, &ns, "proxmox-credentials", json!({"token": "root@pam!butler=00000000-0000"})).await;
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    create(
        &configs,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pve, namespace: {ns}}}\nspec:\n  provider: proxmox\n  credentialsRef: {{name: proxmox-credentials}}\n  proxmox: {{endpoint: 'https://127.0.0.1:{port}', insecure: true, nodes: [pve1], storage: local-lvm}}\n"),
    )
    .await;
    let down = wait_for(&configs, "pve", "unreachable", |c| is(c, "Reachable", "False", "Unreachable"))
        .await
        .unwrap();
    assert!(is(Some(&down), "Ready", "False", "Unreachable"));
    assert!(is(Some(&down), "Validated", "True", "CredentialsValid"), "a token is enough for proxmox");
    let status = down.status.clone().unwrap();
    assert_eq!(status.ready, Some(false));
    let probed_at = status.last_probe_time.clone().expect("lastProbeTime");
    let message = &status.conditions.iter().find(|c| c.type_ == "Reachable").unwrap().message;
    assert!(message.contains(&format!("127.0.0.1:{port}")), "{message}");

    // A change wakes the ProviderConfig; the probe of a moment ago stands.
    configs
        .patch(
            "pve",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": "1"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    let after = configs.get("pve").await.unwrap();
    assert_eq!(after.status.unwrap().last_probe_time, Some(probed_at), "not probed again within a minute");
    configs.delete("pve", &DeleteParams::default()).await.unwrap();
    wait_for(&configs, "pve", "deletion", |c| c.is_none()).await;
}
