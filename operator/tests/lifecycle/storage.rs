//! Storage-version migration: objects stored at v1alpha1, a release that makes v1beta1 the
//! storage version, and a following release that no longer lists v1alpha1.

use butler_operator::api::{CoreProvider, InfrastructureProvider, StepState, StorageMigration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use serde_json::json;

use crate::fixtures::{components, publish, versioned_gadget_crd};
use crate::support::Scenario;
use crate::upgrade::{installed, spec};
use crate::upgrades::{condition, wait_upgrade_within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_stored_at_an_old_version_are_migrated_so_a_release_without_it_installs() {
    let mut s = Scenario::new("storage").await;
    let group = format!("{}.test.io", s.namespace);
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    for (version, versions) in
        [("v1.0.0", vec!["v1alpha1"]), ("v1.1.0", vec!["v1alpha1", "v1beta1"]), ("v1.1.1", vec!["v1beta1"])]
    {
        let text =
            format!("{}---\n{}", components("widget", version, &[]), versioned_gadget_crd(&group, &versions));
        publish(&s, "infrastructure-widget", "infrastructure-components.yaml", version, &text).await;
    }
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;

    let gvk =
        |v: &str| ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, v, "Gadget"), "gadgets");
    let old: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), &s.namespace, &gvk("v1alpha1"));
    for i in 0..30 {
        let gadget: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{group}/v1alpha1"), "kind": "Gadget",
            "metadata": {"name": format!("g{i}")}, "spec": {"size": i},
        }))
        .unwrap();
        old.create(&PostParams::default(), &gadget).await.unwrap();
    }
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    let name = format!("gadgets.{group}");
    let stored =
        |crd: CustomResourceDefinition| crd.status.and_then(|st| st.stored_versions).unwrap_or_default();

    // v1.1.0 makes v1beta1 the storage version: the objects are written again, the list
    // trimmed, and the upgrade that moved the provider shows it.
    let marking = crate::cli::keep_marking_available(&s);
    crate::upgrades::create(
        &s,
        "to-1-1",
        json!({"approval": "Automatic", "providers": [{"kind": "InfrastructureProvider", "name": "widget", "version": "v1.1.0"}]}),
    )
    .await;
    let done = wait_upgrade_within(&s, "to-1-1", "Succeeded", std::time::Duration::from_secs(60), |u| {
        condition(u, "Succeeded").is_some_and(|c| c.0 == "True")
    })
    .await;
    let status = done.status.unwrap();
    let planned = status.plan[0].objects.clone().unwrap().storage_versions;
    assert_eq!(planned, [format!("{name}: v1alpha1 -> v1beta1")]);
    assert_eq!(
        status.storage_migrations,
        [StorageMigration {
            crd: name.clone(),
            provider: "InfrastructureProvider widget".into(),
            version: "v1beta1".into(),
            written: 30,
            gone: 0,
            state: StepState::Succeeded,
        }]
    );
    marking.abort();
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while stored(crds.get(&name).await.unwrap()) != ["v1beta1"] {
        assert!(
            std::time::Instant::now() < deadline,
            "storedVersions: {:?}",
            stored(crds.get(&name).await.unwrap())
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // v1.1.1 no longer lists v1alpha1, and installs with every object intact.
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v1.1.1"})).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.1 installed", installed("v1.1.1")).await;
    let new: Api<DynamicObject> = Api::namespaced_with(s.client.clone(), &s.namespace, &gvk("v1beta1"));
    let gadgets = new.list(&ListParams::default()).await.unwrap().items;
    assert_eq!(gadgets.len(), 30);
    let g7 = gadgets.iter().find(|g| g.metadata.name.as_deref() == Some("g7")).unwrap();
    assert_eq!(g7.data["spec"]["size"], 7);
    s.stop_operator().await;
}
