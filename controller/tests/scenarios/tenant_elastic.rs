//! The tenant's side of TenantClusters in IPAM mode (spec/002): MetalLB's default-pool
//! projected and its drift reverted, elastic growth for waiting Services minus the supply on its
//! way and shrink after 10 idle minutes, growth at once when MetalLB is out of addresses, and an
//! unreachable tenant skipped with a condition.

use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, TenantCluster};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

use crate::support::{Scenario, wait_for};
use crate::tenants::{
    cluster, cluster_says, config, growth_is, kubeconfig_secret, lb_service, metallb, pool_is, small_ipam,
    tenant_server, with_pool,
};

/// The cluster `app` of `{base}-team` on an elastic ProviderConfig over `{prefix}.0/24`
/// (`initial` addresses to start, growth one at a time), its tenant's pool synced: the tenant,
/// and the system and team namespaces.
async fn elastic_app(
    s: &Scenario,
    base: &str,
    prefix: &str,
    initial: u8,
) -> (butler_apiserver::MemoryApiServer, String, String) {
    let tenant = tenant_server().await;
    let (system, team) = with_pool(s, base, &format!("{prefix}.0/24")).await;
    config(
        s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}],
        "loadBalancer": {"allocationMode": "elastic", "initialPoolSize": initial, "growthIncrement": 1}}),
    )
    .await;
    kubeconfig_secret(s, &team, "app", &tenant).await;
    cluster(s, &team, "app", &system).await;
    pool_is(&tenant, &[format!("{prefix}.0-{prefix}.{}", initial - 1).as_str()]).await;
    (tenant, system, team)
}

#[tokio::test]
async fn the_tenants_metallb_pool_follows_the_allocations_and_drift_is_reverted() {
    let s = Scenario::start().await;
    let tenant = tenant_server().await;
    let system = s.namespace("tc-metallb-system").await;
    let team = s.namespace("tc-metallb-team").await;
    small_ipam(&s, &system, "10.60.0.0/24").await;
    kubeconfig_secret(&s, &team, "web", &tenant).await;
    cluster(&s, &team, "web", &system).await;
    pool_is(&tenant, &["10.60.0.0-10.60.0.3"]).await;
    // Someone edits it on the tenant: the next reconcile puts it back.
    let edit = json!({"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool", "spec": {"addresses": ["192.168.0.0/24"]}});
    metallb(&tenant)
        .patch(
            "default-pool",
            &kube::api::PatchParams::apply("someone").force(),
            &kube::api::Patch::Apply(edit),
        )
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(61));
    pool_is(&tenant, &["10.60.0.0-10.60.0.3"]).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let web = cluster_says(&clusters, "web", "MetalLBSynced", "True").await;
    assert!(
        web.status
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.message == "metallb-system/default-pool: 10.60.0.0-10.60.0.3")
    );
}

#[tokio::test]
async fn elastic_ipam_grows_for_waiting_services_minus_supply_and_shrinks_after_ten_idle_minutes() {
    let s = Scenario::start().await;
    let tenant = tenant_server().await;
    let (system, team) = with_pool(&s, "tc-elastic", "10.70.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}],
        "loadBalancer": {"allocationMode": "elastic", "initialPoolSize": 2, "growthIncrement": 1},
        "quotaPerTenant": {"maxLoadBalancerIPs": 8}}),
    )
    .await;
    kubeconfig_secret(&s, &team, "app", &tenant).await;
    cluster(&s, &team, "app", &system).await;
    pool_is(&tenant, &["10.70.0.0-10.70.0.1"]).await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let growth = |n: u32| format!("{team}.app-lb-{n}");
    // Both initial addresses in use, a third Service waits: not before 30 seconds.
    lb_service(&tenant, "ingress", Some("10.70.0.0")).await;
    lb_service(&tenant, "web", Some("10.70.0.1")).await;
    lb_service(&tenant, "api", None).await;
    s.clock.advance(Duration::from_secs(5));
    tokio::time::sleep(Duration::from_millis(300)).await;
    growth_is(&api, &[]).await;
    s.clock.advance(Duration::from_secs(30));
    growth_is(&api, &[growth(1)]).await;
    pool_is(&tenant, &["10.70.0.0-10.70.0.1", "10.70.0.2-10.70.0.2"]).await;
    // Two more wait while the first growth block is still unused (MetalLB has not assigned it):
    // three waiting, one address on its way, two more blocks, in one batch.
    lb_service(&tenant, "b", None).await;
    lb_service(&tenant, "c", None).await;
    s.clock.advance(Duration::from_secs(31));
    growth_is(&api, &[growth(1), growth(2), growth(3)]).await;
    // The Services go; the growth blocks are idle: kept for 10 minutes, then released.
    use k8s_openapi::api::core::v1::Service;
    let services: Api<Service> = Api::namespaced(tenant.client(), "default");
    for name in ["api", "b", "c"] {
        services.delete(name, &DeleteParams::default()).await.unwrap();
    }
    s.clock.advance(Duration::from_secs(1));
    let deadline = Instant::now() + Duration::from_secs(30);
    while api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|a| a.annotations().contains_key("butler.butlerlabs.dev/idle-since"))
        .count()
        < 3
    {
        assert!(Instant::now() < deadline, "the idle blocks were not marked");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    s.clock.advance(Duration::from_secs(540));
    tokio::time::sleep(Duration::from_millis(500)).await;
    growth_is(&api, &[growth(1), growth(2), growth(3)]).await;
    s.clock.advance(Duration::from_secs(61));
    growth_is(&api, &[]).await;
    pool_is(&tenant, &["10.70.0.0-10.70.0.1"]).await;
}

#[tokio::test]
async fn a_service_that_metallb_cannot_serve_gets_its_address_without_waiting_out_thirty_seconds() {
    let s = Scenario::start().await;
    let tenant = tenant_server().await;
    let metallb = tokio::spawn(butler_apiserver::stand_ins::metallb::run(tenant.client()));
    let (system, team) = with_pool(&s, "tc-fast", "10.80.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}],
        "loadBalancer": {"allocationMode": "elastic", "initialPoolSize": 2, "growthIncrement": 1}}),
    )
    .await;
    kubeconfig_secret(&s, &team, "app", &tenant).await;
    cluster(&s, &team, "app", &system).await;
    pool_is(&tenant, &["10.80.0.0-10.80.0.1"]).await;
    for name in ["ingress", "web", "api"] {
        lb_service(&tenant, name, None).await;
    }
    // MetalLB serves two and reports its pool empty; the third is served once the pool grows,
    // with the clock standing still (no 30 seconds pass).
    use k8s_openapi::api::core::v1::Service;
    // MetalLB serves Services in no promised order: whichever waits, all three end up served,
    // the third from the grown block.
    let services: Api<Service> = Api::namespaced(tenant.client(), "default");
    let mut ips = Vec::new();
    let mut last_created = None;
    for name in ["ingress", "web", "api"] {
        let served = wait_for(&services, name, "an address", |svc| {
            svc.and_then(|s| s.status.as_ref()?.load_balancer.as_ref()?.ingress.as_ref())
                .is_some_and(|i| !i.is_empty())
        })
        .await
        .unwrap();
        ips.push(
            served.status.clone().unwrap().load_balancer.unwrap().ingress.unwrap()[0].ip.clone().unwrap(),
        );
        last_created = last_created.max(served.metadata.creation_timestamp.map(|t| t.0));
    }
    ips.sort();
    assert_eq!(ips, ["10.80.0.0", "10.80.0.1", "10.80.0.2"]);
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    growth_is(&api, &[format!("{team}.app-lb-1")]).await;
    // Grown on MetalLB's word, not after the 30 seconds a waiting Service otherwise needs.
    let grown = api.get(&format!("{team}.app-lb-1")).await.unwrap();
    let waited = grown.metadata.creation_timestamp.unwrap().0.duration_since(last_created.unwrap());
    assert!(waited.as_secs() < 20, "grown {waited:?} after the last Service was created");
    metallb.abort();
}

#[tokio::test]
async fn an_unreachable_tenant_is_skipped_with_a_condition_and_its_cluster_keeps_its_block() {
    let s = Scenario::start().await;
    let (system, team) = with_pool(&s, "tc-down", "10.95.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"allocationMode": "elastic"}}),
    )
    .await;
    // A tenant that has gone away: its kubeconfig names a port nothing listens on.
    let tenant = tenant_server().await;
    kubeconfig_secret(&s, &team, "gone", &tenant).await;
    drop(tenant);
    cluster(&s, &team, "gone", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let gone = cluster_says(&clusters, "gone", "MetalLBSynced", "TenantUnreachable").await;
    let status = gone.status.unwrap();
    let message = &status.conditions.iter().find(|c| c.type_ == "MetalLBSynced").unwrap().message;
    assert!(
        message.contains(&format!("through {team}/gone-kubeconfig) does not answer"))
            && message.contains("next in"),
        "{message}"
    );
    assert!(
        status.conditions.iter().any(|c| c.type_ == "IPAMReady" && c.status == "True"),
        "its block stands"
    );
}

#[tokio::test]
async fn a_service_of_another_load_balancer_class_asks_for_nothing() {
    use k8s_openapi::api::core::v1::Service;
    let s = Scenario::start().await;
    let (tenant, system, team) = elastic_app(&s, "tc-class", "10.73.0", 1).await;
    lb_service(&tenant, "ingress", Some("10.73.0.0")).await;
    // Waits for another load balancer's address: MetalLB would never serve it.
    let theirs: Service = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "cloud", "namespace": "default"},
        "spec": {"type": "LoadBalancer", "loadBalancerClass": "example.com/cloud-lb", "ports": [{"port": 80}]}}))
    .unwrap();
    Api::<Service>::namespaced(tenant.client(), "default")
        .create(&Default::default(), &theirs)
        .await
        .unwrap();
    s.clock.advance(Duration::from_secs(31));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let api: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    growth_is(&api, &[]).await;
    // One MetalLB serves does ask.
    lb_service(&tenant, "web", None).await;
    s.clock.advance(Duration::from_secs(31));
    growth_is(&api, &[format!("{team}.app-lb-1")]).await;
}

#[tokio::test]
async fn a_tenant_that_changes_its_services_does_not_have_the_status_written_each_time() {
    let s = Scenario::start().await;
    let (tenant, _, team) = elastic_app(&s, "tc-churn", "10.82.0", 2).await;
    lb_service(&tenant, "ingress", Some("10.82.0.0")).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    cluster_says(&clusters, "app", "ElasticIPAM", "Satisfied").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = clusters.get("app").await.unwrap().resource_version();
    // More Services, each served: the cluster is looked at again, and nothing it says changes.
    for name in ["web", "api", "admin"] {
        lb_service(&tenant, name, Some("10.82.0.1")).await;
    }
    s.clock.advance(Duration::from_secs(61));
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(clusters.get("app").await.unwrap().resource_version(), before, "the status was written again");
}
