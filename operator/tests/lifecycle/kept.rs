//! Kept releases: an upgrade keeps the release a provider ran before it moves it, so that a
//! roll-back installs it again with the repository out of reach.

use std::time::Duration;

use butler_operator::api::{CoreProvider, InfrastructureProvider, StepState};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use serde_json::json;

use crate::fixtures::{METADATA, broken_components, components, publish};
use crate::support::{Scenario, is};
use crate::upgrade::{installed, spec};
use crate::upgrades::{condition, create, wait_upgrade_within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_step_rolls_back_from_the_kept_release_with_the_repository_gone() {
    let mut s = Scenario::new("upgrade-kept").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // The widget's releases in a folder: v1.1.0's manager never becomes Available.
    let base = tempfile::tempdir().unwrap();
    let broken = broken_components("widget", "v1.1.0");
    for (version, text) in [("v1.0.0", components("widget", "v1.0.0", &[])), ("v1.1.0", broken)] {
        let dir = base.path().join("infrastructure-widget").join(version);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("metadata.yaml"), METADATA).unwrap();
        std::fs::write(dir.join("infrastructure-components.yaml"), text).unwrap();
    }
    let root = base.path().to_path_buf();
    let start = |s: &mut Scenario| {
        let root = root.clone();
        s.start_operator_with_options(move |o| o.policy.local_root = Some(root));
    };
    start(&mut s);
    // Where no kubelet runs, every provider Deployment but the broken one becomes Available.
    let marking = crate::cli::keep_marking_available(&s);
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    let url =
        format!("file://{}/infrastructure-widget/latest/infrastructure-components.yaml", root.display());
    let widget = json!({"version": "v1.0.0", "fetchConfig": {"url": url}});
    s.create::<InfrastructureProvider>("widget", &widget.to_string()).await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready at v1.0.0", |p| {
        installed("v1.0.0")(p) && is(p, "Ready", "True")
    })
    .await;

    create(
        &s,
        "to-broken",
        json!({"approval": "Automatic", "stepTimeout": "5s",
               "providers": [{"kind": "InfrastructureProvider", "name": "widget", "version": "v1.1.0"}]}),
    )
    .await;
    let running = wait_upgrade_within(&s, "to-broken", "the move started", Duration::from_secs(60), |u| {
        u.status.as_ref().is_some_and(|st| st.steps[0].state == StepState::Running)
    })
    .await;
    let kept =
        running.status.unwrap().steps[0].kept.clone().expect("the release before is kept as the step starts");
    assert_eq!(
        (kept.config_map.as_str(), kept.version.as_str()),
        ("kept-infrastructure-widget-v1.0.0", "v1.0.0")
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let cm = configmaps.get(&kept.config_map).await.unwrap();
    let owner = &cm.metadata.owner_references.unwrap()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("ProviderUpgrade", "to-broken"));

    // The operator restarts (nothing in memory) and v1.0.0 leaves the repository: the roll-back
    // has only what was kept.
    s.kill_operator().await;
    std::fs::remove_dir_all(root.join("infrastructure-widget").join("v1.0.0")).unwrap();
    start(&mut s);
    let failed = wait_upgrade_within(&s, "to-broken", "Failed", Duration::from_secs(60), |u| {
        condition(u, "Succeeded").is_some_and(|c| c.0 == "False")
    })
    .await;
    let steps = failed.status.unwrap().steps;
    let message = steps[0].message.clone().unwrap_or_default();
    assert!(message.contains("InfrastructureProvider widget rolled back to v1.0.0"), "{steps:#?}");
    let widget = s
        .wait_for::<InfrastructureProvider>("widget", "rolled back from the kept release", |p| {
            installed("v1.0.0")(p) && is(p, "Ready", "True")
        })
        .await;
    let annotations = widget.metadata.annotations.unwrap_or_default();
    assert_eq!(annotations.get("operator.butlerlabs.dev/rollback-sha256"), Some(&kept.sha256));
    marking.abort();
    s.stop_operator().await;
}
