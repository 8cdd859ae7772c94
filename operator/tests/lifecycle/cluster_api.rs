//! Cluster API's own releases, in the shapes its release process renders them (written here
//! from those facts): a core over 1 MiB that travels gzipped, two dozen CRDs with conversion
//! webhooks whose CA cert-manager injects, cert-manager Issuers and Certificates, webhook
//! configurations, an aggregated manager ClusterRole with `rules: []`, a provider that renames
//! its kinds between two releases, and one that stays on v1beta1 under a v1beta2 core. The
//! scenario installs them, moves the contract the natural way (every version bumped first, then
//! every provider paused), and deletes what renamed its CRDs with them.

use butler_operator::api::{BootstrapProvider, ControlPlaneProvider, CoreProvider, InfrastructureProvider};
use butler_operator::controller::ProviderObject;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::json;

use crate::fixtures::publish_with;
use crate::shapes::{DOCKER_NEW, DOCKER_OLD, plural_of as plural, releases};
use crate::support::{OPERATOR_AGENT, Scenario, condition, is, reason};
use crate::upgrade::{installed, spec};

/// Publishes every release of the fixture; returns the core's components size.
async fn publish_all(s: &Scenario) -> usize {
    let mut core_size = 0;
    for r in releases() {
        if r.label == "cluster-api" {
            core_size = core_size.max(r.components.len());
        }
        publish_with(s, r.label, r.file, r.version, &r.components, r.metadata).await;
    }
    core_size
}

async fn running<K: ProviderObject>(s: &Scenario, name: &str, version: &'static str) {
    s.wait_for::<K>(name, &format!("{version} installed and running"), |p| {
        installed(version)(p) && reason(p, "Paused", "Running")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_apis_releases_install_move_their_contract_and_go() {
    let mut s = Scenario::new("capi").await;
    let core_size = publish_all(&s).await;
    assert!(core_size > 1024 * 1024, "the core's components are over 1 MiB: {core_size}");
    let stored = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .get("cluster-api-v1.10.10")
        .await
        .unwrap();
    assert!(stored.binary_data.is_some_and(|b| b.contains_key("components")), "the core travels gzipped");

    s.start_operator();
    s.create::<CoreProvider>("cluster-api", &spec("cluster-api", "v1.10.10")).await;
    s.create::<BootstrapProvider>("kubeadm", &spec("bootstrap-kubeadm", "v1.10.10")).await;
    s.create::<ControlPlaneProvider>("kubeadm", &spec("control-plane-kubeadm", "v1.10.10")).await;
    s.create::<InfrastructureProvider>("docker", &spec("infrastructure-docker", "v1.10.10")).await;
    s.create::<InfrastructureProvider>("azure", &spec("infrastructure-azure", "v1.26.0")).await;
    s.wait_for::<CoreProvider>("cluster-api", "installed", installed("v1.10.10")).await;
    s.wait_for::<BootstrapProvider>("kubeadm", "installed", installed("v1.10.10")).await;
    s.wait_for::<ControlPlaneProvider>("kubeadm", "installed", installed("v1.10.10")).await;
    s.wait_for::<InfrastructureProvider>("docker", "installed", installed("v1.10.10")).await;
    s.wait_for::<InfrastructureProvider>("azure", "installed", installed("v1.26.0")).await;
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    let listed = crds.list(&Default::default()).await.unwrap().items;
    let ours =
        listed.iter().filter(|c| c.spec.group.ends_with(".test.io") && c.spec.group.contains(".cap")).count();
    assert!(ours >= 22, "two dozen CRDs installed: {ours}");
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("docker", "Ready", |p| is(p, "Ready", "True")).await;

    // The contract move, the natural way: every Cluster API version bumped first...
    s.patch_spec::<CoreProvider>("cluster-api", json!({"version": "v1.11.0"})).await;
    s.patch_spec::<BootstrapProvider>("kubeadm", json!({"version": "v1.11.0"})).await;
    s.patch_spec::<ControlPlaneProvider>("kubeadm", json!({"version": "v1.11.0"})).await;
    s.patch_spec::<InfrastructureProvider>("docker", json!({"version": "v1.11.0"})).await;
    let core = s
        .wait_for::<CoreProvider>("cluster-api", "the move refused until paused", |p| {
            reason(p, "ProviderUpgraded", "ContractChangeNeedsPause")
        })
        .await;
    let message = &condition(&core, "ProviderUpgraded").unwrap().message;
    assert!(message.contains("pause every provider first"), "{message}");
    // ...then every provider paused: the move goes through, the core first.
    s.patch_spec::<CoreProvider>("cluster-api", json!({"paused": true})).await;
    s.patch_spec::<BootstrapProvider>("kubeadm", json!({"paused": true})).await;
    s.patch_spec::<ControlPlaneProvider>("kubeadm", json!({"paused": true})).await;
    s.patch_spec::<InfrastructureProvider>("docker", json!({"paused": true})).await;
    s.patch_spec::<InfrastructureProvider>("azure", json!({"paused": true})).await;
    s.wait_for::<CoreProvider>("cluster-api", "v1.11.0 installed", installed("v1.11.0")).await;
    s.wait_for::<BootstrapProvider>("kubeadm", "v1.11.0 installed", installed("v1.11.0")).await;
    s.wait_for::<ControlPlaneProvider>("kubeadm", "v1.11.0 installed", installed("v1.11.0")).await;
    s.wait_for::<InfrastructureProvider>("docker", "v1.11.0 installed", installed("v1.11.0")).await;
    let unpause = json!({"paused": false});
    let unpaused = std::time::Instant::now();
    let before = s.cluster.server().map(|server| server.requests_from(OPERATOR_AGENT).len());
    s.patch_spec::<CoreProvider>("cluster-api", unpause.clone()).await;
    s.patch_spec::<BootstrapProvider>("kubeadm", unpause.clone()).await;
    s.patch_spec::<ControlPlaneProvider>("kubeadm", unpause.clone()).await;
    s.patch_spec::<InfrastructureProvider>("docker", unpause.clone()).await;
    s.patch_spec::<InfrastructureProvider>("azure", unpause).await;
    running::<CoreProvider>(&s, "cluster-api", "v1.11.0").await;
    running::<BootstrapProvider>(&s, "kubeadm", "v1.11.0").await;
    running::<ControlPlaneProvider>(&s, "kubeadm", "v1.11.0").await;
    running::<InfrastructureProvider>(&s, "docker", "v1.11.0").await;
    println!("the four Cluster API providers unpaused in {:.2} s", unpaused.elapsed().as_secs_f64());
    if let (Some(server), Some(before)) = (s.cluster.server(), before) {
        // An unpause scales Deployments: a megabyte of unchanged CRDs is not applied again
        // (it was, and made one unpause take 14 s).
        let mut writes = server.requests_from(OPERATOR_AGENT).split_off(before);
        writes.retain(|(method, path)| method == "PATCH" && !path.contains("/apis/operator.butlerlabs.dev/"));
        let crds = writes.iter().filter(|(_, path)| path.contains("/customresourcedefinitions/")).count();
        assert_eq!(crds, 0, "CRDs applied again by an unpause: {writes:?}");
        assert!(writes.iter().any(|(_, path)| path.contains("/deployments/")), "{writes:?}");
    }
    let azure = s
        .wait_for::<InfrastructureProvider>("azure", "running on v1beta1", |p| reason(p, "Paused", "Running"))
        .await;
    let message = &condition(&azure, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("contract v1beta1, which the core provider's v1beta2 still supports"),
        "{message}"
    );
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("azure", "Ready", |p| is(p, "Ready", "True")).await;

    // The Docker provider's old kinds stayed, and go with it.
    let docker_crds =
        DOCKER_OLD.iter().chain(DOCKER_NEW).map(|k| format!("{}.infrastructure.capd.test.io", plural(k)));
    let docker_crds: Vec<String> = docker_crds.collect();
    for name in &docker_crds {
        assert!(crds.get_opt(name).await.unwrap().is_some(), "{name} is there after the move");
    }
    s.patch_spec::<InfrastructureProvider>("docker", json!({"crdDeletionPolicy": "Delete"})).await;
    s.api::<InfrastructureProvider>().delete("docker", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("docker").await;
    for name in &docker_crds {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while crds.get_opt(name).await.unwrap().is_some() {
            assert!(std::time::Instant::now() < deadline, "{name} stays after the provider's deletion");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    s.stop_operator().await;
}
