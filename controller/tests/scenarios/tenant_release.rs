//! A deleted cluster's load-balancer addresses go back to the pool only once its tenant's
//! MetalLB no longer lists them: dropped from the tenant's pool first, and held while the
//! tenant refuses (with a condition that says so), so that no other cluster is handed an
//! address this one still announces.

use butler_core::api::{IPAllocation, TenantCluster};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{Scenario, wait_for};
use crate::tenants::{cluster, config, ipam_ready, kubeconfig_secret, metallb, pool, pool_is, tenant_server};

/// A system and a team namespace with a pool and an IPAM ProviderConfig of 4 addresses a
/// cluster.
async fn platform(s: &Scenario, base: &str, cidr: &str) -> (String, String) {
    let system = s.namespace(&format!("{base}-system")).await;
    let team = s.namespace(&format!("{base}-team")).await;
    pool(s, &system, "lab", cidr).await;
    config(
        s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 4}}),
    )
    .await;
    (system, team)
}

#[tokio::test]
async fn a_deleted_clusters_addresses_leave_the_tenant_before_they_go_back() {
    let s = Scenario::start().await;
    let (system, team) = platform(&s, "tc-release", "10.71.0.0/24").await;
    let tenant = tenant_server().await;
    kubeconfig_secret(&s, &team, "web", &tenant).await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "web", "IPAMReady", ipam_ready).await;
    pool_is(&tenant, &["10.71.0.0-10.71.0.3"]).await;

    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    wait_for(&allocations, &format!("{team}.web-lb"), "released", |a| a.is_none()).await;
    assert!(
        metallb(&tenant).get_opt("default-pool").await.unwrap().is_none(),
        "the tenant's pool, which held the cluster's addresses alone, went before them"
    );
    wait_for(&clusters, "web", "gone", |c| c.is_none()).await;
}

#[tokio::test]
async fn a_tenant_that_refuses_holds_the_addresses_until_it_gives_way() {
    let s = Scenario::start().await;
    let (system, team) = platform(&s, "tc-refuse", "10.72.0.0/24").await;
    // The tenant lets Butler's account read and write its pool, but not delete it.
    let tenant = tenant_server().await;
    let rules = |verbs: &[&str]| json!([{"apiGroups": ["metallb.io"], "resources": ["ipaddresspools"], "verbs": verbs}]);
    let role: Role = serde_json::from_value(json!({
        "metadata": {"name": "butler", "namespace": "metallb-system"},
        "rules": rules(&["get", "list", "watch", "create", "patch"]),
    }))
    .unwrap();
    let roles: Api<Role> = Api::namespaced(tenant.client(), "metallb-system");
    roles.create(&PostParams::default(), &role).await.unwrap();
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "butler", "namespace": "metallb-system"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "butler"},
        "subjects": [{"kind": "ServiceAccount", "name": "butler", "namespace": "metallb-system"}],
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(tenant.client(), "metallb-system")
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: '{}'}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\nusers:\n- name: u\n  user: {{token: '{}'}}\n",
        tenant.url(),
        tenant.service_account_token("metallb-system", "butler")
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "web-kubeconfig", "namespace": team}, "stringData": {"value": kubeconfig},
    }))
    .unwrap();
    Api::<Secret>::namespaced(s.client.clone(), &team).create(&PostParams::default(), &secret).await.unwrap();
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "web", "IPAMReady", ipam_ready).await;
    pool_is(&tenant, &["10.72.0.0-10.72.0.3"]).await;

    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    let held = wait_for(&clusters, "web", "the release held", |c| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|st| {
            st.conditions.iter().any(|c| c.type_ == "MetalLBSynced" && c.reason == "TenantRefusedRelease")
        })
    })
    .await
    .unwrap();
    let status = held.status.unwrap();
    let message = &status.conditions.iter().find(|c| c.type_ == "MetalLBSynced").unwrap().message;
    assert!(
        message.starts_with("the tenant refused to drop 10.72.0.0-10.72.0.3 from its MetalLB pool"),
        "{message}"
    );
    assert!(status.lb_allocation_ref.is_some(), "the rest of the status stays");
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let block = format!("{team}.web-lb");
    assert!(allocations.get_opt(&block).await.unwrap().is_some(), "the block stays the cluster's");
    pool_is(&tenant, &["10.72.0.0-10.72.0.3"]).await;

    // The tenant gives way: the addresses leave it, then go back to the pool.
    roles
        .patch("butler", &PatchParams::default(), &Patch::Merge(json!({"rules": rules(&["*"])})))
        .await
        .unwrap();
    wait_for(&allocations, &block, "released", |a| a.is_none()).await;
    assert!(metallb(&tenant).get_opt("default-pool").await.unwrap().is_none());
    wait_for(&clusters, "web", "gone", |c| c.is_none()).await;
}
