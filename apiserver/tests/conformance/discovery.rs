use butler_apiserver::MemoryApiServer;
use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, GroupVersionKind, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::{Discovery, Scope};

use crate::support::config_map;

#[tokio::test]
async fn the_built_in_kinds_are_discovered_with_their_scope() {
    let cluster = Cluster::connect().await;
    let discovery = Discovery::new(cluster.client()).run().await.unwrap();
    let cases = [
        ("", "v1", "Namespace", Scope::Cluster),
        ("", "v1", "ConfigMap", Scope::Namespaced),
        ("", "v1", "Secret", Scope::Namespaced),
        ("", "v1", "Service", Scope::Namespaced),
        ("", "v1", "ServiceAccount", Scope::Namespaced),
        ("", "v1", "Event", Scope::Namespaced),
        ("events.k8s.io", "v1", "Event", Scope::Namespaced),
        ("apps", "v1", "Deployment", Scope::Namespaced),
        ("apps", "v1", "DaemonSet", Scope::Namespaced),
        ("rbac.authorization.k8s.io", "v1", "Role", Scope::Namespaced),
        ("rbac.authorization.k8s.io", "v1", "RoleBinding", Scope::Namespaced),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole", Scope::Cluster),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding", Scope::Cluster),
        ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration", Scope::Cluster),
        ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration", Scope::Cluster),
        ("coordination.k8s.io", "v1", "Lease", Scope::Namespaced),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition", Scope::Cluster),
    ];
    for (group, version, kind, scope) in cases {
        let (_, caps) = discovery
            .resolve_gvk(&GroupVersionKind::gvk(group, version, kind))
            .unwrap_or_else(|| panic!("{kind} in {group:?}"));
        assert_eq!(caps.scope, scope, "{kind}");
    }
}

#[tokio::test]
async fn the_kubeconfig_file_reaches_the_server_and_servers_are_separate() {
    let one = MemoryApiServer::start().await;
    let two = MemoryApiServer::start().await;
    let kubeconfig = Kubeconfig::read_from(one.kubeconfig()).unwrap();
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap();
    let from_file = kube::Client::try_from(config).unwrap();
    let api: Api<ConfigMap> = Api::namespaced(from_file, "default");
    api.create(&PostParams::default(), &config_map("only-in-one", &[], &[])).await.unwrap();
    assert!(
        Api::<ConfigMap>::namespaced(one.client(), "default").get_opt("only-in-one").await.unwrap().is_some()
    );
    assert!(
        Api::<ConfigMap>::namespaced(two.client(), "default").get_opt("only-in-one").await.unwrap().is_none()
    );
    let namespaces: Vec<String> = Api::<Namespace>::all(two.client())
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect();
    assert_eq!(namespaces, ["default", "kube-node-lease", "kube-public", "kube-system"]);
    let path = one.kubeconfig().to_path_buf();
    drop(one);
    assert!(!path.exists(), "the kubeconfig file goes with its server");
}
