//! Installing Butler's seven providers from the embedded repository.

use std::time::Instant;

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use butler_repository::butler_infrastructure;

use crate::support::{OPERATOR_AGENT, Scenario, is};

#[tokio::test]
async fn core_and_six_infrastructure_providers_install_from_the_embedded_repository() {
    let mut s = Scenario::new("install").await;
    s.secret("aws-variables", &[("AWS_REGION", "eu-west-1")]).await;
    s.start_operator();
    let started = Instant::now();
    s.create::<CoreProvider>("butler", "").await;
    for name in butler_infrastructure() {
        let spec = if name == "aws" { "configSecret: {name: aws-variables}" } else { "" };
        s.create::<InfrastructureProvider>(name, spec).await;
    }
    s.wait_for::<CoreProvider>("butler", "ProviderInstalled", |p| is(p, "ProviderInstalled", "True")).await;
    for name in butler_infrastructure() {
        s.wait_for::<InfrastructureProvider>(name, "ProviderInstalled", |p| {
            is(p, "ProviderInstalled", "True")
        })
        .await;
    }
    let elapsed = started.elapsed();
    println!("seven providers installed in {elapsed:?}");
    if let Some(server) = s.cluster.server() {
        let requests = server.requests_from(OPERATOR_AGENT);
        for (method, path) in &requests {
            println!("{method} {path}");
        }
        println!("operator requests: {}", requests.len());
    }
    s.mark_available().await;
    for name in butler_infrastructure() {
        let p = s.wait_for::<InfrastructureProvider>(name, "Ready", |p| is(p, "Ready", "True")).await;
        let status = p.status.as_ref().unwrap();
        assert_eq!(
            (status.installed_version.as_deref(), status.contract.as_deref()),
            (Some("v0.1.0"), Some("v1beta1"))
        );
        assert_eq!(p.spec.version, None, "the version chosen is not written back into spec");
    }
    s.stop_operator().await;
}

#[tokio::test]
async fn an_operator_limited_to_a_namespace_leaves_the_providers_of_others_alone() {
    let mut s = Scenario::new("limited").await;
    crate::upgrade::publish_releases(&s).await;
    // Someone else's core provider, in another namespace, made first.
    let other = s.cluster.namespace("limited-other").await;
    let theirs: CoreProvider = serde_json::from_value(serde_json::json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "CoreProvider",
        "metadata": {"name": "butler", "namespace": other}, "spec": {},
    }))
    .unwrap();
    let their_api: kube::Api<CoreProvider> = kube::Api::namespaced(s.client.clone(), &other);
    their_api.create(&Default::default(), &theirs).await.unwrap();

    s.start_operator();
    s.create::<CoreProvider>("butler", &crate::upgrade::spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &crate::upgrade::spec("infrastructure-widget", "v1.0.0"))
        .await;
    s.wait_for::<InfrastructureProvider>("widget", "installed", crate::upgrade::installed("v1.0.0")).await;
    // Ours is the only core provider it knows: not refused as a second one.
    s.wait_for::<CoreProvider>("butler", "installed", |p| is(p, "ProviderInstalled", "True")).await;

    // Theirs was never touched: no finalizer, no status.
    let untouched = their_api.get("butler").await.unwrap();
    assert!(untouched.metadata.finalizers.unwrap_or_default().is_empty());
    assert!(untouched.status.is_none_or(|st| st.conditions.is_empty()), "no status written");
    s.stop_operator().await;
}

/// A runtime extension provider (Nutanix's, in clusterctl's list) is a provider kind of its
/// own: installed from its release beside the core, listed by `butlerctl describe`, and deleted
/// with what it installed.
#[tokio::test]
async fn a_runtime_extension_provider_installs_beside_the_core_and_goes_with_its_objects() {
    use crate::fixtures::{components, publish, selector};
    use butler_operator::api::RuntimeExtensionProvider;
    let mut s = Scenario::new("runtime-ext").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let release = components("caren", "v1.0.0", &[]);
    publish(&s, "runtime-extension-caren", "runtime-extension-components.yaml", "v1.0.0", &release).await;
    s.start_operator();
    let versioned = |label: &str| {
        let mut spec: serde_json::Value = serde_json::from_str(&selector(label)).unwrap();
        spec["version"] = serde_json::json!("v1.0.0");
        spec.to_string()
    };
    s.create::<CoreProvider>("butler", &versioned("butler")).await;
    s.create::<RuntimeExtensionProvider>("caren", &versioned("runtime-extension-caren")).await;
    s.wait_for::<RuntimeExtensionProvider>("caren", "installed", |p| is(p, "ProviderInstalled", "True"))
        .await;
    let deployments: kube::Api<k8s_openapi::api::apps::v1::Deployment> =
        kube::Api::namespaced(s.client.clone(), &s.namespace);
    let manager = deployments.get("caren-controller-manager").await.unwrap();
    assert_eq!(
        manager.metadata.labels.unwrap()["cluster.x-k8s.io/provider"],
        "runtime-extension-caren",
        "labelled as clusterctl labels a runtime extension"
    );
    let rows = butler_operator::upgrade::providers::list(&s.client, Some(&s.namespace)).await.unwrap();
    assert!(rows.iter().any(|r| r.name == "caren"), "butlerctl lists it");
    s.api::<RuntimeExtensionProvider>().delete("caren", &Default::default()).await.unwrap();
    s.wait_gone::<RuntimeExtensionProvider>("caren").await;
    assert!(deployments.get_opt("caren-controller-manager").await.unwrap().is_none());
    s.api::<CoreProvider>().delete("butler", &Default::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    s.stop_operator().await;
}

/// cluster-api-operator's quick start asks `InfrastructureProvider azure` at `v1.17.0`, a
/// release of Cluster API's Azure provider; here `azure` names Butler's. The provider says so,
/// with the URL that reaches the upstream one, instead of a bare "not found".
#[tokio::test]
async fn a_butler_name_at_an_upstream_version_says_where_the_upstream_provider_is() {
    let mut s = Scenario::new("butler-name").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("azure", "version: v1.17.0").await;
    let refused = s
        .wait_for::<InfrastructureProvider>("azure", "refused", |p| is(p, "ProviderInstalled", "False"))
        .await;
    let message = &crate::support::condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("azure here names Butler's own InfrastructureProvider azure, which has no release v1.17.0")
            && message.contains("spec.fetchConfig.url: https://github.com/kubernetes-sigs/cluster-api-provider-azure/releases/latest/infrastructure-components.yaml"),
        "{message}"
    );
    s.api::<InfrastructureProvider>().delete("azure", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("azure").await;
    s.api::<CoreProvider>().delete("butler", &Default::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    s.stop_operator().await;
}
