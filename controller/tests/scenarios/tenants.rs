//! What the TenantCluster scenarios share: pools, a ProviderConfig and clusters on the
//! management side, and a tenant cluster (a second in-memory API server with MetalLB's kind)
//! reached through the cluster's kubeconfig Secret.

use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, NetworkPool, ProviderConfig, TenantCluster};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use serde_json::{Value, json};

use crate::support::{Scenario, wait_for};

pub(crate) async fn make<K>(s: &Scenario, ns: &str, object: Value) -> K
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + serde::Serialize
        + std::fmt::Debug,
{
    let object: K = serde_json::from_value(object).unwrap();
    Api::<K>::namespaced(s.client.clone(), ns).create(&PostParams::default(), &object).await.unwrap()
}

pub(crate) async fn pool(s: &Scenario, ns: &str, name: &str, cidr: &str) {
    make::<NetworkPool>(
        s,
        ns,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": name, "namespace": ns}, "spec": {"cidr": cidr}}),
    )
    .await;
    // Counted, so that clusters can choose by free addresses.
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), ns);
    wait_for(&pools, name, "counted", |p| {
        p.and_then(|p| p.status.as_ref()).is_some_and(|s| s.available_ips.is_some())
    })
    .await;
}

pub(crate) async fn config(s: &Scenario, ns: &str, network: Value) {
    make::<ProviderConfig>(s, ns, json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "pc", "namespace": ns},
        "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"}, "network": network}})).await;
}

/// The namespaces `{base}-system`, with the NetworkPool `lab` of `cidr`, and `{base}-team`.
pub(crate) async fn with_pool(s: &Scenario, base: &str, cidr: &str) -> (String, String) {
    let system = s.namespace(&format!("{base}-system")).await;
    let team = s.namespace(&format!("{base}-team")).await;
    pool(s, &system, "lab", cidr).await;
    (system, team)
}

/// In `system`, the NetworkPool `lab` of `cidr` and an IPAM ProviderConfig `pc` over it that
/// gives each cluster 4 load-balancer addresses.
pub(crate) async fn small_ipam(s: &Scenario, system: &str, cidr: &str) {
    pool(s, system, "lab", cidr).await;
    let network =
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 4}});
    config(s, system, network).await;
}

pub(crate) async fn cluster(s: &Scenario, team: &str, name: &str, config_ns: &str) {
    make::<TenantCluster>(
        s,
        team,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": name, "namespace": team},
        "spec": {"providerConfigRef": {"name": "pc", "namespace": config_ns}}}),
    )
    .await;
}

/// Waits until the TenantCluster `name` has the condition `type_` whose reason, or status,
/// is `word`: the cluster then.
pub(crate) async fn cluster_says(
    clusters: &Api<TenantCluster>,
    name: &str,
    type_: &str,
    word: &str,
) -> TenantCluster {
    let said = |c: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition| {
        c.type_ == type_ && (c.reason == word || c.status == word)
    };
    wait_for(clusters, name, &format!("{type_} {word}"), |c| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|st| st.conditions.iter().any(said))
    })
    .await
    .expect("the cluster exists")
}

pub(crate) fn ipam_ready(c: Option<&TenantCluster>) -> bool {
    c.and_then(|c| c.status.as_ref())
        .is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "IPAMReady" && c.status == "True"))
}

/// A tenant cluster: a second in-memory API server (also when the management cluster is a real
/// one: the controllers run in this process) with MetalLB's IPAddressPool kind and namespace.
pub(crate) async fn tenant_server() -> butler_apiserver::MemoryApiServer {
    let server =
        butler_apiserver::MemoryApiServer::start_with(butler_apiserver::ServerOptions::named("tenant")).await;
    butler_apiserver::stand_ins::metallb::install(&server.client()).await.unwrap();
    server
}

/// The Secret `{cluster}-kubeconfig` that reaches `tenant`.
pub(crate) async fn kubeconfig_secret(
    s: &Scenario,
    team: &str,
    cluster: &str,
    tenant: &butler_apiserver::MemoryApiServer,
) {
    use k8s_openapi::api::core::v1::Secret;
    // By name, as Cluster API writes a load balancer's: the controller resolves it and reaches
    // the address it found.
    let text = std::fs::read_to_string(tenant.kubeconfig()).unwrap().replace("127.0.0.1", "localhost");
    let secret: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": team, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret", "stringData": {"value": text}}))
    .unwrap();
    Api::<Secret>::namespaced(s.client.clone(), team).create(&PostParams::default(), &secret).await.unwrap();
}

pub(crate) fn metallb(tenant: &butler_apiserver::MemoryApiServer) -> Api<kube::api::DynamicObject> {
    let gvk = kube::api::GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool");
    Api::namespaced_with(
        tenant.client(),
        "metallb-system",
        &kube::api::ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools"),
    )
}

/// Waits until the tenant's default-pool lists exactly `wanted`.
pub(crate) async fn pool_is(tenant: &butler_apiserver::MemoryApiServer, wanted: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = metallb(tenant).get_opt("default-pool").await.unwrap();
        let addresses: Vec<String> = found
            .as_ref()
            .and_then(|p| p.data["spec"]["addresses"].as_array().cloned())
            .unwrap_or_default()
            .iter()
            .filter_map(|a| a.as_str().map(String::from))
            .collect();
        if addresses == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "default-pool is {addresses:?}, not {wanted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// LoadBalancer Services on the tenant, as MetalLB would leave them: `ip` assigned or waiting.
pub(crate) async fn lb_service(tenant: &butler_apiserver::MemoryApiServer, name: &str, ip: Option<&str>) {
    use k8s_openapi::api::core::v1::Service;
    let api: Api<Service> = Api::namespaced(tenant.client(), "default");
    let service: Service = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}}))
    .unwrap();
    api.create(&PostParams::default(), &service).await.unwrap();
    if let Some(ip) = ip {
        let status = json!({"status": {"loadBalancer": {"ingress": [{"ip": ip}]}}});
        api.patch_status(name, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(status))
            .await
            .unwrap();
    }
}

pub(crate) fn growth_names(list: &[IPAllocation]) -> Vec<String> {
    let mut names: Vec<String> = list
        .iter()
        .filter(|a| {
            a.labels().get("butler.butlerlabs.dev/allocation-role").map(String::as_str) == Some("growth")
        })
        .filter(|a| a.metadata.deletion_timestamp.is_none())
        .map(|a| a.name_any())
        .collect();
    names.sort();
    names
}

pub(crate) async fn growth_is(api: &Api<IPAllocation>, wanted: &[String]) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let names = growth_names(&api.list(&ListParams::default()).await.unwrap().items);
        if names == wanted {
            return;
        }
        assert!(Instant::now() < deadline, "growth allocations {names:?}, not {wanted:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A tenant on which Butler's account (the ServiceAccount metallb-system/butler, reached
/// through the Secret `{cluster}-kubeconfig`) reads Services and may do only `verbs` to
/// MetalLB's pools; [`allow_pools`] changes what it may do.
pub(crate) async fn guarded_tenant(
    s: &Scenario,
    team: &str,
    cluster: &str,
    verbs: &[&str],
) -> butler_apiserver::MemoryApiServer {
    use k8s_openapi::api::core::v1::Secret;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let tenant = tenant_server().await;
    let role: ClusterRole =
        serde_json::from_value(json!({"metadata": {"name": "butler"}, "rules": butler_rules(verbs)}))
            .unwrap();
    Api::<ClusterRole>::all(tenant.client()).create(&PostParams::default(), &role).await.unwrap();
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "butler"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "butler"},
        "subjects": [{"kind": "ServiceAccount", "name": "butler", "namespace": "metallb-system"}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(tenant.client()).create(&PostParams::default(), &binding).await.unwrap();
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: '{}'}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\nusers:\n- name: u\n  user: {{token: '{}'}}\n",
        tenant.url(),
        tenant.service_account_token("metallb-system", "butler")
    );
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": team, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "type": "cluster.x-k8s.io/secret",
        "stringData": {"value": kubeconfig},
    }))
    .unwrap();
    Api::<Secret>::namespaced(s.client.clone(), team).create(&PostParams::default(), &secret).await.unwrap();
    tenant
}

/// Lets Butler's account of a [`guarded_tenant`] do `verbs` to MetalLB's pools.
pub(crate) async fn allow_pools(tenant: &butler_apiserver::MemoryApiServer, verbs: &[&str]) {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    let patch = json!({"rules": butler_rules(verbs)});
    Api::<ClusterRole>::all(tenant.client())
        .patch("butler", &kube::api::PatchParams::default(), &kube::api::Patch::Merge(patch))
        .await
        .unwrap();
}

fn butler_rules(pool_verbs: &[&str]) -> Value {
    json!([
        {"apiGroups": ["metallb.io"], "resources": ["ipaddresspools"], "verbs": pool_verbs},
        {"apiGroups": [""], "resources": ["services"], "verbs": ["get", "list", "watch"]},
    ])
}

/// Addons are named as DNS labels and at most 64 a cluster: a look-alike name (`Cilium`,
/// `cilium `) is no other addon that a deny list would miss, and a TenantCluster of 150,000
/// addons never reaches the webhooks.
#[tokio::test]
async fn addon_names_are_dns_labels_and_a_cluster_holds_at_most_64() {
    let s = Scenario::start().await;
    let team = s.namespace("addons-team").await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let with = |name: &str, addons: Value| -> TenantCluster {
        serde_json::from_value(
            json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": name, "namespace": team},
            "spec": {"providerConfigRef": {"name": "pc"}, "addons": addons}}),
        )
        .unwrap()
    };
    for (name, addons) in [
        ("upper", json!([{"name": "Cilium"}])),
        ("spaced", json!([{"name": "cilium "}])),
        ("many", Value::Array((0..65).map(|i| json!({"name": format!("a{i}")})).collect())),
    ] {
        let refused = clusters.create(&PostParams::default(), &with(name, addons)).await;
        assert!(matches!(&refused, Err(kube::Error::Api(e)) if e.code == 422), "{name}: {refused:?}");
    }
}
