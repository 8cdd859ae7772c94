//! Deleting providers: held up while workload clusters (or for the core provider other
//! providers) remain, then every object goes; the CRDs stay unless the provider says
//! `crdDeletionPolicy: Delete`, and then the deletion also waits for the objects of its CRDs.

use butler_core::api::{ProviderConfig, TenantCluster};
use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};

use crate::fixtures::{Part, components, publish, selector};
use crate::support::{Scenario, condition, from_yaml, is, reason, webhooks_failing_open};

#[tokio::test]
async fn deletion_waits_for_tenant_clusters_and_the_core_provider_goes_last() {
    let mut s = Scenario::new("delete").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("harvester", "").await;
    s.wait_for::<InfrastructureProvider>("harvester", "installed", |p| is(p, "ProviderInstalled", "True"))
        .await;
    webhooks_failing_open(&s).await;

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

    // The core provider goes; its CRDs stay, and the objects of them (crdDeletionPolicy Keep,
    // the default, as clusterctl delete without --include-crd).
    s.wait_gone::<CoreProvider>("butler").await;
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    assert!(crds.get_opt("tenantclusters.butler.butlerlabs.dev").await.unwrap().is_some(), "the CRDs stay");
    assert!(configs.get_opt("harv").await.unwrap().is_some(), "and so do their objects");
    configs.delete("harv", &DeleteParams::default()).await.unwrap();
    s.stop_operator().await;
}

#[tokio::test]
async fn a_provider_that_deletes_its_crds_waits_for_their_objects() {
    let mut s = Scenario::new("crd-delete").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    let components = components("gizmo", "v1.0.0", &[Part::Crd]);
    publish(&s, "infrastructure-gizmo", "infrastructure-components.yaml", "v1.0.0", &components).await;
    let spec = serde_json::from_str::<serde_json::Value>(&selector("infrastructure-gizmo")).unwrap();
    let spec = serde_json::json!({"fetchConfig": spec["fetchConfig"], "crdDeletionPolicy": "Delete"});
    s.create::<InfrastructureProvider>("gizmo", &spec.to_string()).await;
    s.wait_for::<InfrastructureProvider>("gizmo", "installed", |p| is(p, "ProviderInstalled", "True")).await;

    let gadgets =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("gizmo.test.io", "v1", "Gadget"), "gadgets");
    let api: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), &s.namespace, &gadgets);
    let gadget: DynamicObject =
        serde_json::from_value(serde_json::json!({"apiVersion": "gizmo.test.io/v1", "kind": "Gadget",
        "metadata": {"name": "g1", "namespace": s.namespace}}))
        .unwrap();
    api.create(&PostParams::default(), &gadget).await.unwrap();

    s.api::<InfrastructureProvider>().delete("gizmo", &DeleteParams::default()).await.unwrap();
    let held = s
        .wait_for::<InfrastructureProvider>("gizmo", "held up", |p| reason(p, "Deleting", "DeletionBlocked"))
        .await;
    let message = &condition(&held, "Deleting").unwrap().message;
    assert!(message.contains(&format!("Gadget {}/g1", s.namespace)), "{message}");
    api.delete("g1", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("gizmo").await;
    // A deleted CRD stays, Terminating, while the API server removes its objects.
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while crds.get_opt("gadgets.gizmo.test.io").await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "its CRD went, as asked");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    s.stop_operator().await;
}

#[tokio::test]
async fn an_inventory_made_elsewhere_is_never_trusted() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut s = Scenario::new("forged").await;
    let elsewhere = s.cluster.namespace("forger").await;
    // Someone who may write ConfigMaps in another namespace forges the inventory of gcp, listing
    // an object the operator never made.
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &elsewhere);
    let victim: ConfigMap = from_yaml(&format!(
        "metadata: {{name: victim, namespace: {elsewhere}}}\ndata: {{precious: 'yes'}}\n"
    ));
    configmaps.create(&PostParams::default(), &victim).await.unwrap();
    let record = serde_json::json!({"version": "v0.0.1", "contract": "v1beta1", "digest": "forged",
        "objects": [{"apiVersion": "v1", "kind": "ConfigMap", "namespace": elsewhere, "name": "victim"}]});
    let forged: ConfigMap = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "infrastructureproviders-gcp-inventory", "namespace": elsewhere, "labels": {
            "operator.butlerlabs.dev/inventory": "true",
            "operator.butlerlabs.dev/provider-kind": "InfrastructureProvider",
            "operator.butlerlabs.dev/provider-namespace": s.namespace,
            "operator.butlerlabs.dev/provider-name": "gcp"}},
        "data": {"inventory": record.to_string()}}))
    .unwrap();
    configmaps.create(&PostParams::default(), &forged).await.unwrap();

    // Watching every namespace, the operator meets the forged inventory; on a shared real
    // cluster it stays in its own, where the forgery is out of its sight anyway.
    match s.cluster.is_in_memory() {
        true => s.start_operator_everywhere(),
        false => s.start_operator(),
    }
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("gcp", "").await;
    s.wait_for::<InfrastructureProvider>("gcp", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    s.api::<InfrastructureProvider>().delete("gcp", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("gcp").await;
    assert!(
        configmaps.get_opt("victim").await.unwrap().is_some(),
        "what the forged inventory listed is untouched"
    );
    s.stop_operator().await;
}

#[tokio::test]
async fn a_provider_deleted_and_made_again_starts_afresh() {
    let mut s = Scenario::new("again").await;
    s.start_operator();
    crate::upgrade::publish_releases(&s).await;
    s.create::<CoreProvider>("butler", &crate::upgrade::spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &crate::upgrade::spec("infrastructure-widget", "v1.1.0"))
        .await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0", crate::upgrade::installed("v1.1.0")).await;
    // Gone without the operator's clean-up: someone took the finalizer off first.
    let api = s.api::<InfrastructureProvider>();
    let unfinalize = kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    api.patch("widget", &kube::api::PatchParams::default(), &unfinalize).await.unwrap();
    api.delete("widget", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("widget").await;
    // The same name again, at an older minor version: a new provider, not a downgrade.
    s.create::<InfrastructureProvider>("widget", &crate::upgrade::spec("infrastructure-widget", "v1.0.0"))
        .await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0", crate::upgrade::installed("v1.0.0")).await;
    s.stop_operator().await;
}

#[tokio::test]
async fn an_object_someone_else_made_is_neither_taken_over_nor_deleted() {
    let mut s = Scenario::new("taken").await;
    if !s.cluster.is_in_memory() {
        // The ClusterRole is cluster-wide: on a shared real cluster another scenario's gcp may own it.
        println!("skipped on a real cluster: the provider's ClusterRole is one per cluster");
        return;
    }
    // Someone made a ClusterRole of the name gcp's components use, before gcp was installed.
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let theirs: ClusterRole = from_yaml(
        "metadata: {name: butler-provider-gcp}\nrules:\n- {apiGroups: [''], resources: [configmaps], verbs: [get]}\n",
    );
    roles.create(&PostParams::default(), &theirs).await.unwrap();
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("gcp", "").await;
    let refused = s
        .wait_for::<InfrastructureProvider>("gcp", "refused", |p| {
            reason(p, "ProviderInstalled", "ApplyFailed")
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message
            .contains("ClusterRole butler-provider-gcp exists already and was not made by butler-operator"),
        "{message}"
    );
    let untouched = roles.get("butler-provider-gcp").await.unwrap();
    assert_eq!(
        untouched.rules.unwrap()[0].resources.as_deref(),
        Some(&["configmaps".to_string()][..]),
        "left as it was"
    );
    s.api::<InfrastructureProvider>().delete("gcp", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("gcp").await;
    assert!(roles.get_opt("butler-provider-gcp").await.unwrap().is_some(), "and never deleted");
    roles.delete("butler-provider-gcp", &DeleteParams::default()).await.unwrap();
    s.stop_operator().await;
}

#[tokio::test]
async fn a_crd_that_was_there_before_is_applied_over_and_never_deleted() {
    let mut s = Scenario::new("adopted").await;
    if !s.cluster.is_in_memory() {
        // With crdDeletionPolicy Delete it would delete Butler's CRDs that other scenarios use.
        println!("skipped on a real cluster: Butler's CRDs are shared by the scenarios there");
        return;
    }
    // Someone installed Butler's Team CRD by hand before the core provider.
    let teams = butler_core::api::crds()
        .into_iter()
        .find(|c| c.metadata.name.as_deref() == Some("teams.butler.butlerlabs.dev"))
        .expect("the Team CRD");
    s.cluster.install_crd(&butler_runtime::crds::tidy(teams)).await;

    s.start_operator();
    s.create::<CoreProvider>("butler", "crdDeletionPolicy: Delete").await;
    s.wait_for::<CoreProvider>("butler", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    let taken = crds.get("teams.butler.butlerlabs.dev").await.unwrap();
    assert!(taken.labels().contains_key("operator.butlerlabs.dev/provider-name"), "applied over");

    // Deleted with its CRDs: those it made go, the one that was there before stays.
    s.api::<CoreProvider>().delete("butler", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    assert!(crds.get_opt("teams.butler.butlerlabs.dev").await.unwrap().is_some(), "the adopted CRD stays");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while crds.get_opt("networkpools.butler.butlerlabs.dev").await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "the CRD the provider made was not deleted");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    s.stop_operator().await;
}

#[tokio::test]
async fn an_object_made_for_a_provider_that_is_gone_is_taken_over() {
    let mut s = Scenario::new("orphans").await;
    if !s.cluster.is_in_memory() {
        println!("skipped on a real cluster: the core provider's ClusterRole is one per cluster");
        return;
    }
    s.start_operator_everywhere();
    s.create::<CoreProvider>("butler", "").await;
    s.wait_for::<CoreProvider>("butler", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    // The operator is killed, and the provider goes without it (its finalizer stripped, as
    // `kubectl delete ns --force` users do): what it made cluster-wide stays behind.
    s.kill_operator().await;
    let api = s.api::<CoreProvider>();
    let unfinalize = kube::api::Patch::Merge(serde_json::json!({"metadata": {"finalizers": null}}));
    api.patch("butler", &kube::api::PatchParams::default(), &unfinalize).await.unwrap();
    api.delete("butler", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<CoreProvider>("butler").await;
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    assert!(roles.get_opt("butler-controller").await.unwrap().is_some(), "left behind");
    // Installed again, in another namespace: the orphans are taken over, not refused.
    let again = s.cluster.namespace("orphans-again").await;
    s.start_operator_everywhere();
    let core: Api<CoreProvider> = Api::namespaced(s.client.clone(), &again);
    core.create(
        &PostParams::default(),
        &from_yaml(&format!("metadata: {{name: butler, namespace: {again}}}\nspec: {{}}\n")),
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let p = core.get("butler").await.unwrap();
        if is(&p, "ProviderInstalled", "True") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not installed: {:?}", p.status);
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let role = roles.get("butler-controller").await.unwrap();
    assert_eq!(
        role.metadata.labels.unwrap_or_default().get("operator.butlerlabs.dev/provider-namespace"),
        Some(&again),
        "now the new provider's"
    );
    s.stop_operator().await;
}

#[tokio::test]
async fn a_namespace_deleted_under_its_providers_gets_nothing_written_again() {
    let mut s = Scenario::new("nsgone").await;
    if let Some(server) = s.cluster.server() {
        // The provider objects' stream lags the Deployments' (two watches, no order between
        // them): the namespace controller's deletion of a Deployment is seen before the
        // provider's deletion timestamp, as it was on a real server.
        let lag = std::time::Duration::from_millis(1500);
        server.delay_watches_of_group(crate::support::OPERATOR_AGENT, "operator.butlerlabs.dev", lag);
    }
    // The releases are in a folder, as on GitHub: still there while the namespace goes.
    let base = tempfile::tempdir().unwrap();
    let root = base.path().to_path_buf();
    for (label, name, file) in [
        ("butler", "butler", "core-components.yaml"),
        ("infrastructure-widget", "widget", "infrastructure-components.yaml"),
    ] {
        let dir = root.join(label).join("v1.0.0");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("metadata.yaml"), crate::fixtures::METADATA).unwrap();
        std::fs::write(dir.join(file), components(name, "v1.0.0", &[])).unwrap();
    }
    let folder = root.clone();
    s.start_operator_with_options(move |o| o.policy.local_root = Some(folder));
    let spec = |label: &str, file: &str| {
        let url = format!("file://{}/{label}/v1.0.0/{file}", root.display());
        serde_json::json!({"version": "v1.0.0", "fetchConfig": {"url": url}}).to_string()
    };
    s.create::<CoreProvider>("butler", &spec("butler", "core-components.yaml")).await;
    s.create::<InfrastructureProvider>(
        "widget",
        &spec("infrastructure-widget", "infrastructure-components.yaml"),
    )
    .await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0", crate::upgrade::installed("v1.0.0")).await;
    s.wait_for::<CoreProvider>("butler", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let before = s.cluster.server().map(|server| server.requests_from(crate::support::OPERATOR_AGENT).len());

    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    namespaces.delete(&s.namespace, &DeleteParams::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("widget").await;
    s.wait_gone::<CoreProvider>("butler").await;
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let left = roles
        .list(
            &kube::api::ListParams::default()
                .labels(&format!("operator.butlerlabs.dev/provider-namespace={}", s.namespace)),
        )
        .await
        .unwrap();
    assert_eq!(left.items.len(), 0, "the providers' cluster-wide objects go with them");

    if let (Some(server), Some(before)) = (s.cluster.server(), before) {
        // Status, finalizers and events of the providers being deleted are written; nothing
        // the namespace controller deleted is made or applied again.
        let in_namespace = format!("/namespaces/{}/", s.namespace);
        let written: Vec<String> = server
            .requests_from(crate::support::OPERATOR_AGENT)
            .split_off(before)
            .into_iter()
            .filter(|(method, path)| method != "GET" && method != "DELETE" && path.contains(&in_namespace))
            .filter(|(_, path)| {
                !path.starts_with("/apis/operator.butlerlabs.dev/")
                    && !path.starts_with("/apis/events.k8s.io/")
            })
            .map(|(method, path)| format!("{method} {path}"))
            .collect();
        assert_eq!(written, Vec::<String>::new(), "written again during the namespace's deletion");
    }
    s.stop_operator().await;
}
