//! Sizes and limits are checked by the CRDs themselves (with or without the webhooks): a
//! quantity that does not parse, or a negative one, never reaches the controllers' sums.

use butler_core::api::{Team, TenantCluster};
use kube::api::{Api, PostParams};

use crate::support::{Scenario, api_message, from_yaml};

#[tokio::test]
async fn negative_or_unparseable_quantities_are_refused_by_the_crds() {
    let s = Scenario::start().await;
    let ns = s.namespace("quantities").await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &ns);
    let cluster = |name: &str, cpu: &str, memory: &str| -> TenantCluster {
        from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  kubernetesVersion: 1.30.4\n  workers: {{replicas: 1, machineTemplate: {{cpu: {cpu}, memory: {memory}, diskSize: 50Gi}}}}\n"
        ))
    };
    let dry = PostParams { dry_run: true, ..Default::default() };
    for (cpu, memory, field) in [
        ("-4", "8Gi", "spec.workers.machineTemplate.cpu"),
        ("'-4'", "8Gi", "spec.workers.machineTemplate.cpu"),
        ("4", "lots", "spec.workers.machineTemplate.memory"),
        ("4", "'8 Gi'", "spec.workers.machineTemplate.memory"),
    ] {
        let refused = clusters.create(&dry, &cluster("bad", cpu, memory)).await.unwrap_err();
        let message = api_message(&refused);
        assert!(message.contains(field), "cpu {cpu}, memory {memory}: {message}");
    }
    for (cpu, memory) in [("4", "8Gi"), ("'500m'", "'1.5Gi'"), ("'+2'", "'1e9'")] {
        clusters
            .create(&dry, &cluster("good", cpu, memory))
            .await
            .unwrap_or_else(|e| panic!("cpu {cpu}: {e}"));
    }
    let teams: Api<Team> = Api::all(s.client.clone());
    let name = s.cluster.unique("quantities");
    let team: Team = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {name}}}\nspec:\n  access: {{}}\n  resourceLimits: {{maxCPUCores: -10, maxMemory: 64Gi}}\n"
    ));
    let refused = teams.create(&dry, &team).await.unwrap_err();
    assert!(api_message(&refused).contains("spec.resourceLimits.maxCPUCores"), "{}", api_message(&refused));
}
