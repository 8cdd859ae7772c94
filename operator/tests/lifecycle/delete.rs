//! Deleting providers: held up while workload clusters (or objects of the provider's CRDs, or
//! for the core provider other providers) remain, then every object goes, CRDs included.

use butler_core::api::{ProviderConfig, TenantCluster};
use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};

use crate::support::{Scenario, condition, from_yaml, is, reason};

#[tokio::test]
async fn deletion_waits_for_tenant_clusters_and_the_core_provider_goes_last() {
    let mut s = Scenario::new("delete").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("harvester", "").await;
    s.wait_for::<InfrastructureProvider>("harvester", "installed", |p| is(p, "ProviderInstalled", "True"))
        .await;

    let ns = s.namespace.clone();
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &ns);
    let config: ProviderConfig = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: harv, namespace: {ns}}}\nspec:\n  provider: harvester\n  credentialsRef: {{name: harvester-credentials, namespace: {ns}}}\n  harvester: {{endpoint: 'https://harvester.example.com:6443', namespace: default, networkName: default/vlan40, imageName: default/talos}}\n"
    ));
    configs.create(&PostParams::default(), &config).await.expect("create the ProviderConfig");
    let cluster: TenantCluster = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: c1, namespace: {ns}}}\nspec:\n  providerConfigRef: {{name: harv}}\n  kubernetesVersion: 1.30.4\n"
    ));
    clusters.create(&PostParams::default(), &cluster).await.expect("create the TenantCluster");

    // The infrastructure provider waits for its workload cluster.
    s.api::<InfrastructureProvider>().delete("harvester", &DeleteParams::default()).await.unwrap();
    let harvester = s
        .wait_for::<InfrastructureProvider>("harvester", "the deletion held up", |p| {
            reason(p, "Deleting", "DeletionBlocked")
        })
        .await;
    let message = &condition(&harvester, "Deleting").unwrap().message;
    assert!(message.contains(&format!("TenantCluster {ns}/c1")), "{message}");
    assert_eq!(
        s.deployments("InfrastructureProvider", "harvester").await.len(),
        1,
        "nothing is removed while it is used"
    );

    // The core provider waits for the other providers.
    s.api::<CoreProvider>().delete("butler", &DeleteParams::default()).await.unwrap();
    let core = s
        .wait_for::<CoreProvider>("butler", "the deletion held up", |p| {
            reason(p, "Deleting", "DeletionBlocked")
        })
        .await;
    let message = &condition(&core, "Deleting").unwrap().message;
    assert!(message.contains(&format!("InfrastructureProvider {ns}/harvester")), "{message}");

    // The cluster goes: the infrastructure provider and its objects go.
    clusters.delete("c1", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("harvester").await;
    assert!(s.deployments("InfrastructureProvider", "harvester").await.is_empty());
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    assert!(roles.get_opt("butler-provider-harvester").await.unwrap().is_none());

    // The core provider now waits for the objects of its CRDs, then goes with them.
    let core = s
        .wait_for::<CoreProvider>("butler", "held up by the ProviderConfig", |p| {
            condition(p, "Deleting").is_some_and(|c| c.message.contains("ProviderConfig"))
        })
        .await;
    assert!(condition(&core, "Deleting").unwrap().message.contains(&format!("ProviderConfig {ns}/harv")));
    configs.delete("harv", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    assert!(
        crds.get_opt("tenantclusters.butler.butlerlabs.dev").await.unwrap().is_none(),
        "the provider's CRDs go too"
    );
    s.stop_operator().await;
}
