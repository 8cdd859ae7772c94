//! Shapes that Cluster API's own releases have and that the operator must handle as they are:
//! ClusterRoles with an `aggregationRule` and `rules: []`, a v1beta2 core with a v1beta1
//! provider, a status someone else overwrote.

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::Api;

use crate::fixtures::{components, publish};
use crate::support::{OPERATOR_AGENT, Scenario, is};
use crate::upgrade::{installed, spec};

/// The widget's components with the aggregated manager role Cluster API v1.10's releases
/// ship: an `aggregationRule` over the provider's own label, `rules: []`, and a role it selects.
fn with_aggregated_role(namespace: &str, version: &str) -> String {
    let label = format!("widget.test.io/aggregate-to-manager-{namespace}");
    format!(
        "{}---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {namespace}-widget-aggregated-manager
aggregationRule:
  clusterRoleSelectors:
    - matchLabels:
        {label}: \"true\"
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {namespace}-widget-manager-part
  labels:
    {label}: \"true\"
rules:
  - apiGroups: [infrastructure.cluster.x-k8s.io]
    resources: [gadgets]
    verbs: [get, list, watch]
",
        components("widget", version, &[])
    )
}

/// Who owns `rules` of a ClusterRole, by its managedFields.
fn owners_of_rules(role: &ClusterRole) -> Vec<String> {
    role.metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| serde_json::to_value(&e.fields_v1).unwrap().get("f:rules").is_some())
        .filter_map(|e| e.manager.clone())
        .collect()
}

#[tokio::test]
async fn an_aggregated_cluster_role_keeps_the_rules_kubernetes_gives_it_and_nothing_fights() {
    let mut s = Scenario::new("aggregated").await;
    let ns = s.namespace.clone();
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let widget = with_aggregated_role(&ns, "v1.0.0");
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.0.0", &widget).await;
    // Under the install manifest's RBAC, as Cluster API's releases were run.
    s.start_operator_shipped(|_| {}).await;
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;

    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let name = format!("{ns}-widget-aggregated-manager");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let role = loop {
        let role = roles.get(&name).await.unwrap();
        if role.rules.as_ref().is_some_and(|r| !r.is_empty()) {
            break role;
        }
        assert!(std::time::Instant::now() < deadline, "the aggregation never filled {name}: {role:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert_eq!(role.rules.as_ref().unwrap()[0].resources.as_deref(), Some(&["gadgets".to_string()][..]));
    let owners = owners_of_rules(&role);
    assert!(
        !owners.iter().any(|o| o == butler_operator::api::FIELD_MANAGER),
        "the operator owns rules: {owners:?}"
    );

    // Settled, the operator writes the role no more (it and the aggregation controller once
    // overwrote each other about ten times a second).
    if let Some(server) = s.cluster.server() {
        let writes = || {
            server
                .requests_from(OPERATOR_AGENT)
                .iter()
                .filter(|(method, path)| method == "PATCH" && path.contains(&name))
                .count()
        };
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let before = writes();
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        assert_eq!(writes() - before, 0, "the operator keeps applying {name}");
    }
    let role = roles.get(&name).await.unwrap();
    assert!(!role.rules.unwrap_or_default().is_empty(), "the rules stay");

    // The install is recorded as done: nothing of it is still pending.
    let inventories: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(s.client.clone(), &ns);
    let record = inventories.get("infrastructureproviders-widget-inventory").await.unwrap();
    let record: serde_json::Value = serde_json::from_str(&record.data.unwrap()["inventory"]).unwrap();
    assert!(record["objects"].as_array().is_some_and(|o| o.len() >= 4), "{record}");
    assert!(record.get("pending").is_none(), "an install that finished leaves objects pending: {record}");
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
    s.stop_operator().await;
}

#[tokio::test]
async fn a_status_someone_else_wrote_is_written_again() {
    let mut s = Scenario::new("reassert").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.wait_for::<CoreProvider>("butler", "v1.0.0 installed", installed("v1.0.0")).await;
    // Another writer (a person, another operator) says otherwise.
    let api = s.api::<CoreProvider>();
    let forged = serde_json::json!({"status": {"installedVersion": "v9.9.9", "conditions": []}});
    api.patch_status("butler", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&forged))
        .await
        .unwrap();
    s.wait_for::<CoreProvider>("butler", "the status written again", |p| {
        installed("v1.0.0")(p) && is(p, "ProviderInstalled", "True")
    })
    .await;
    s.stop_operator().await;
}

#[tokio::test]
async fn a_v1beta2_core_installs_with_a_v1beta1_infrastructure_provider() {
    let mut s = Scenario::new("mixed").await;
    crate::upgrade::publish_releases(&s).await;
    s.start_operator();
    // Cluster API v1.11 and later with a provider that is still v1beta1 (Azure's, through v1.26).
    s.create::<CoreProvider>("butler", &spec("butler", "v2.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.1.0")).await;
    let widget =
        s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    let message = &crate::support::condition(&widget, "ProviderInstalled").unwrap().message;
    assert_eq!(
        message,
        "v1.1.0 is installed (contract v1beta1, which the core provider's v1beta2 still supports)"
    );
    assert!(is(&widget, "PreflightCheckPassed", "True"), "{:?}", widget.status);
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
    s.stop_operator().await;
}

/// Cluster API's Docker provider renamed its kinds between two releases: the upgrade keeps the
/// old CRDs (their objects may be stored), and they stay the provider's, so that its deletion
/// with `crdDeletionPolicy: Delete` takes them too (they were orphaned: dropped from the
/// inventory, never deleted).
#[tokio::test]
async fn crds_an_upgrade_renamed_are_kept_and_go_with_the_provider() {
    use crate::fixtures::components_with_kinds;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut s = Scenario::new("renamed").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let old = components_with_kinds("docker", "v1.0.0", &["DockerCluster", "DockerMachine"]);
    let new = components_with_kinds("docker", "v1.1.0", &["DevCluster", "DevMachine"]);
    publish(&s, "infrastructure-docker", "infrastructure-components.yaml", "v1.0.0", &old).await;
    publish(&s, "infrastructure-docker", "infrastructure-components.yaml", "v1.1.0", &new).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("docker", &spec("infrastructure-docker", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("docker", "v1.0.0 installed", installed("v1.0.0")).await;
    s.patch_spec::<InfrastructureProvider>("docker", serde_json::json!({"version": "v1.1.0"})).await;
    s.wait_for::<InfrastructureProvider>("docker", "v1.1.0 installed", installed("v1.1.0")).await;

    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    let all = ["dockerclusters", "dockermachines", "devclusters", "devmachines"]
        .map(|plural| format!("{plural}.docker.test.io"));
    for name in &all {
        assert!(crds.get_opt(name).await.unwrap().is_some(), "{name} is there after the upgrade");
    }
    let inventories: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(s.client.clone(), &s.namespace);
    let record = inventories.get("infrastructureproviders-docker-inventory").await.unwrap();
    let record: serde_json::Value = serde_json::from_str(&record.data.unwrap()["inventory"]).unwrap();
    let kept: Vec<&str> =
        record["kept"].as_array().into_iter().flatten().filter_map(|o| o["name"].as_str()).collect();
    assert_eq!(kept, [all[0].as_str(), all[1].as_str()], "{record}");

    s.patch_spec::<InfrastructureProvider>("docker", serde_json::json!({"crdDeletionPolicy": "Delete"}))
        .await;
    s.api::<InfrastructureProvider>().delete("docker", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("docker").await;
    for name in &all {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while crds.get_opt(name).await.unwrap().is_some() {
            assert!(std::time::Instant::now() < deadline, "{name} stays after the provider's deletion");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    s.stop_operator().await;
}

/// A release that cannot be fetched leaves what is installed running: `ProviderInstalled`
/// stays True for what it is, `Installed`, never True with the failure's reason (a
/// contradiction the real release showed), and Ready says why it is not as asked.
#[tokio::test]
async fn an_installed_provider_whose_next_release_cannot_be_fetched_stays_installed() {
    let mut s = Scenario::new("unfetched").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.wait_for::<CoreProvider>("butler", "v1.0.0 installed", installed("v1.0.0")).await;
    s.patch_spec::<CoreProvider>("butler", serde_json::json!({"version": "v1.0.9"})).await;
    let core = s
        .wait_for::<CoreProvider>("butler", "the fetch failed", |p| {
            crate::support::reason(p, "Ready", "FetchFailed")
        })
        .await;
    let installed_condition = crate::support::condition(&core, "ProviderInstalled").unwrap();
    assert_eq!(
        (installed_condition.status.as_str(), installed_condition.reason.as_str()),
        ("True", "Installed")
    );
    assert!(
        installed_condition.message.starts_with("v1.0.0 is installed and stays; "),
        "{}",
        installed_condition.message
    );
    s.stop_operator().await;
}
