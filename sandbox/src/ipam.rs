//! The IPAM step of the sandbox: spec/002's single-pool example, a ProviderConfig in IPAM mode,
//! and a TenantCluster of the first team whose tenant is a second in-memory API server with a
//! MetalLB stand-in: the cluster gets its load-balancer block, and the tenant's MetalLB pool.

use std::time::{Duration, Instant};

use butler_apiserver::{MemoryApiServer, ServerOptions};
use butler_core::api::{IPAllocation, NetworkPool, TenantCluster};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use serde_json::json;

use crate::{Failure, NAMESPACE};

const TEAM_NAMESPACE: &str = "team-platform";

async fn apply(client: &kube::Client, namespace: &str, object: serde_json::Value) -> Result<(), Failure> {
    let kind = object["kind"].as_str().unwrap_or_default().to_string();
    let (group, version) =
        object["apiVersion"].as_str().unwrap_or_default().split_once('/').unwrap_or(("", "v1"));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &kind));
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource)
        .patch(&name, &PatchParams::apply("sandbox"), &Patch::Apply(object))
        .await?;
    Ok(())
}

/// Sets up the example and prints what kubectl would show; the tenant server and its MetalLB
/// stand-in keep running as long as the returned values live.
pub async fn first_tenant_cluster(
    client: &kube::Client,
    within: Duration,
) -> Result<(MemoryApiServer, tokio::task::JoinHandle<()>), Failure> {
    let tenant = MemoryApiServer::start_with(ServerOptions::named("butler-sandbox-tenant")).await;
    butler_apiserver::stand_ins::metallb::install(&tenant.client()).await?;
    let metallb = tokio::spawn(butler_apiserver::stand_ins::metallb::run(tenant.client()));
    let kubeconfig = std::fs::read_to_string(tenant.kubeconfig())?;
    apply(client, NAMESPACE, json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": "lab-pool", "namespace": NAMESPACE},
        "spec": {"cidr": "10.40.0.0/22",
            "reserved": [{"cidr": "10.40.0.0/28", "description": "Management cluster control plane and VIP"},
                         {"cidr": "10.40.0.16/28", "description": "Management cluster MetalLB pool"}],
            "tenantAllocation": {"start": "10.40.1.0", "end": "10.40.3.254", "defaults": {"nodesPerTenant": 5, "lbPoolPerTenant": 8}}}})).await?;
    apply(client, NAMESPACE, json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "harvester-kubeconfig", "namespace": NAMESPACE}, "stringData": {"kubeconfig": kubeconfig}})).await?;
    apply(client, NAMESPACE, json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "harvester-lab", "namespace": NAMESPACE},
        "spec": {"provider": "harvester", "credentialsRef": {"name": "harvester-kubeconfig"}, "harvester": {"networkName": "default/vlan40"},
            "network": {"mode": "ipam", "poolRefs": [{"name": "lab-pool", "priority": 0}],
                "loadBalancer": {"defaultPoolSize": 8, "allocationMode": "static"}}}})).await?;
    // The tenant's kubeconfig, where Cluster API leaves it.
    let secret: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "web-kubeconfig", "namespace": TEAM_NAMESPACE, "labels": {"cluster.x-k8s.io/cluster-name": "web"}},
        "type": "cluster.x-k8s.io/secret", "stringData": {"value": kubeconfig}}))?;
    Api::<Secret>::namespaced(client.clone(), TEAM_NAMESPACE).create(&PostParams::default(), &secret).await?;
    let cluster: TenantCluster = serde_json::from_value(
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "web", "namespace": TEAM_NAMESPACE},
        "spec": {"providerConfigRef": {"name": "harvester-lab", "namespace": NAMESPACE}, "kubernetesVersion": "1.30.4",
            "workers": {"replicas": 2, "machineTemplate": {"cpu": "4", "memory": "16Gi", "diskSize": "100Gi"}}}}),
    )?;
    let clusters: Api<TenantCluster> = Api::namespaced(client.clone(), TEAM_NAMESPACE);
    clusters.create(&PostParams::default(), &cluster).await?;
    let pools = Api::namespaced_with(
        tenant.client(),
        "metallb-system",
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool"),
            "ipaddresspools",
        ),
    );
    let deadline = Instant::now() + within;
    let (web, metallb_pool) = loop {
        let web = clusters.get("web").await?;
        let synced = web
            .status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "MetalLBSynced" && c.status == "True"));
        let pool: Option<DynamicObject> = pools.get_opt("default-pool").await?;
        if synced && let Some(pool) = pool {
            break (web, pool);
        }
        if Instant::now() > deadline {
            return Err(format!("the TenantCluster web did not get its addresses within {within:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let pool = Api::<NetworkPool>::namespaced(client.clone(), NAMESPACE).get("lab-pool").await?;
    let st = pool.status.unwrap_or_default();
    println!("\n{:<12} {:<13} {:<6} {:<10} ALLOCATIONS", "NETWORKPOOL", "CIDR", "TOTAL", "AVAILABLE");
    println!(
        "{:<12} {:<13} {:<6} {:<10} {}",
        pool.metadata.name.unwrap_or_default(),
        pool.spec.cidr,
        st.total_ips.unwrap_or_default(),
        st.available_ips.unwrap_or_default(),
        st.allocation_count.unwrap_or_default()
    );
    println!("\n{:<22} {:<9} {:<13} {:<13} PHASE", "IPALLOCATION", "POOL", "TYPE", "CIDR");
    for a in
        Api::<IPAllocation>::namespaced(client.clone(), NAMESPACE).list(&ListParams::default()).await?.items
    {
        let status = a.status.clone().unwrap_or_default();
        println!(
            "{:<22} {:<9} {:<13} {:<13} {}",
            a.name_any(),
            a.spec.pool_ref.name,
            a.spec.type_.as_str(),
            status.cidr.unwrap_or_default(),
            status.phase.map(|p| format!("{p:?}")).unwrap_or_default()
        );
    }
    let addresses = web.status.clone().and_then(|s| s.load_balancer_addresses).unwrap_or_default().join(",");
    let projected = metallb_pool.data["spec"]["addresses"].to_string();
    println!(
        "\n{:<14} {:<22} TENANT'S metallb-system/default-pool",
        "TENANTCLUSTER", "LOADBALANCERADDRESSES"
    );
    println!("{:<14} {:<22} {projected}", web.metadata.name.clone().unwrap_or_default(), addresses);
    Ok((tenant, metallb))
}
