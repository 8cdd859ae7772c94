//! A stand-in for MetalLB's controller on a tenant cluster: its IPAddressPool kind, and the
//! assignment of addresses from the pools of `metallb-system` to LoadBalancer Services (lowest
//! free address, oldest Service first), with each pool's status (`availableIPv4`,
//! `assignedIPv4`, as MetalLB 0.14+ reports it).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

pub const NAMESPACE: &str = "metallb-system";

fn pools(client: &kube::Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool");
    Api::namespaced_with(
        client.clone(),
        NAMESPACE,
        &ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools"),
    )
}

/// Installs the IPAddressPool kind (any content, with a status) and the `metallb-system`
/// namespace.
pub async fn install(client: &kube::Client) -> Result<(), kube::Error> {
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "ipaddresspools.metallb.io"},
        "spec": {"group": "metallb.io", "scope": "Namespaced",
            "names": {"plural": "ipaddresspools", "singular": "ipaddresspool", "kind": "IPAddressPool", "listKind": "IPAddressPoolList"},
            "versions": [{"name": "v1beta1", "served": true, "storage": true, "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    }))
    .expect("the stand-in CRD is well formed");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &crd).await?;
    let _ = kube::runtime::wait::await_condition(
        crds,
        "ipaddresspools.metallb.io",
        kube::runtime::wait::conditions::is_crd_established(),
    )
    .await;
    let ns: Namespace = serde_json::from_value(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}),
    )
    .expect("a namespace is well formed");
    Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &ns).await?;
    Ok(())
}

/// The IPv4 addresses of a pool entry: `a-b` or a CIDR.
fn addresses(entry: &str) -> Vec<Ipv4Addr> {
    let range = match entry.split_once('-') {
        Some((a, b)) => a.trim().parse::<Ipv4Addr>().ok().zip(b.trim().parse::<Ipv4Addr>().ok()),
        None => entry.trim().parse::<ipnet::Ipv4Net>().ok().map(|n| (n.network(), n.broadcast())),
    };
    match range {
        Some((a, b)) if a <= b => (u32::from(a)..=u32::from(b)).map(Ipv4Addr::from).collect(),
        _ => Vec::new(),
    }
}

/// One pass: assign what can be assigned, and report each pool's figures.
pub async fn assign(client: &kube::Client) -> Result<(), kube::Error> {
    let pool_api = pools(client);
    let pool_list = pool_api.list(&ListParams::default()).await?.items;
    let service_api: Api<Service> = Api::all(client.clone());
    let mut services: Vec<Service> = service_api
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|s| s.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer"))
        .collect();
    services.sort_by_key(|s| (s.metadata.creation_timestamp.clone().map(|t| t.0), s.name_any()));
    let ingress = |s: &Service| -> Vec<Ipv4Addr> {
        s.status
            .as_ref()
            .and_then(|st| st.load_balancer.as_ref())
            .and_then(|lb| lb.ingress.as_ref())
            .map(|i| i.iter().filter_map(|i| i.ip.as_ref()?.parse().ok()).collect())
            .unwrap_or_default()
    };
    let mut used: BTreeSet<Ipv4Addr> = services.iter().flat_map(ingress).collect();
    let all: Vec<(String, Vec<Ipv4Addr>)> = pool_list
        .iter()
        .map(|p| {
            let entries = p.data["spec"]["addresses"].as_array().cloned().unwrap_or_default();
            (p.name_any(), entries.iter().filter_map(|e| e.as_str()).flat_map(addresses).collect())
        })
        .collect();
    for service in services.iter().filter(|s| ingress(s).is_empty()) {
        let Some(free) = all.iter().flat_map(|(_, a)| a.iter()).find(|a| !used.contains(a)).copied() else {
            break;
        };
        let namespace = service.namespace().unwrap_or_default();
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": free.to_string()}]}}});
        Api::<Service>::namespaced(client.clone(), &namespace)
            .patch_status(&service.name_any(), &PatchParams::default(), &Patch::Merge(status))
            .await?;
        used.insert(free);
    }
    for (pool, (name, owned)) in pool_list.iter().zip(&all) {
        let assigned = owned.iter().filter(|a| used.contains(a)).count();
        let status = json!({"availableIPv4": owned.len() - assigned, "assignedIPv4": assigned});
        if pool.data["status"]["availableIPv4"] != status["availableIPv4"]
            || pool.data["status"]["assignedIPv4"] != status["assignedIPv4"]
        {
            pool_api
                .patch_status(name, &PatchParams::default(), &Patch::Merge(json!({"status": status})))
                .await?;
        }
    }
    Ok(())
}

/// Plays MetalLB until dropped: a pass at each change of a Service or a pool.
pub async fn run(client: kube::Client) {
    let services = watcher(Api::<Service>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .map(|_| ());
    let pools = watcher(pools(&client), watcher::Config::default()).default_backoff().map(|_| ());
    let mut changes = std::pin::pin!(futures::stream::select(services, pools));
    while changes.next().await.is_some() {
        if let Err(e) = assign(&client).await {
            tracing::debug!(error = %e, "the MetalLB stand-in will try again at the next change");
        }
    }
}
