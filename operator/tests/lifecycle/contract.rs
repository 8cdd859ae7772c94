//! A contract change: refused while providers run, done by pausing every provider, upgrading
//! them all and unpausing; an unpause is refused while a provider's contract is one the core
//! does not accept (a v1beta2 core still accepts v1beta1, as Cluster API's does).

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use serde_json::json;

use crate::fixtures::{components, metadata_with_v1, publish_with};
use crate::support::{Scenario, condition, is, reason};
use crate::upgrade::{installed, publish_releases, spec};

fn replicas_and_remembered(d: &k8s_openapi::api::apps::v1::Deployment) -> (Option<i32>, Option<String>) {
    let remembered = d
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("operator.butlerlabs.dev/paused-replicas").cloned());
    (d.spec.as_ref().and_then(|s| s.replicas), remembered)
}

/// The core provider at v1.0.0 and the widget at v1.1.0 with two replicas, both of contract
/// v1beta1, installed by a running operator.
async fn core_and_widget_of_two(base: &str) -> Scenario {
    let mut s = Scenario::new(base).await;
    publish_releases(&s).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    let mut widget_spec: serde_json::Value =
        serde_json::from_str(&spec("infrastructure-widget", "v1.1.0")).unwrap();
    widget_spec["deployment"] = json!({"replicas": 2});
    s.create::<InfrastructureProvider>("widget", &widget_spec.to_string()).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    s
}

/// The core provider once its move is refused until every provider is paused, with the
/// refusal's message.
async fn refused_until_paused(s: &Scenario) -> (CoreProvider, String) {
    let core = s
        .wait_for::<CoreProvider>("butler", "the upgrade refused", |p| {
            reason(p, "ProviderUpgraded", "ContractChangeNeedsPause")
        })
        .await;
    let message = condition(&core, "ProviderUpgraded").unwrap().message.clone();
    (core, message)
}

#[tokio::test]
async fn a_contract_change_is_done_by_pause_upgrade_all_unpause() {
    let mut s = core_and_widget_of_two("contract").await;

    // Refused while the providers run; the condition names them.
    s.patch_spec::<CoreProvider>("butler", json!({"version": "v2.0.0"})).await;
    let (core, message) = refused_until_paused(&s).await;
    assert!(message.contains(&format!("InfrastructureProvider {}/widget", s.namespace)), "{message}");
    assert!(message.contains(&format!("CoreProvider {}/butler", s.namespace)), "{message}");
    assert_eq!(core.status.as_ref().unwrap().installed_version.as_deref(), Some("v1.0.0"));

    // Pause both: the Deployments go to 0 and remember their replicas.
    s.patch_spec::<InfrastructureProvider>("widget", json!({"paused": true})).await;
    s.patch_spec::<CoreProvider>("butler", json!({"paused": true})).await;
    s.wait_for::<InfrastructureProvider>("widget", "paused", |p| is(p, "Paused", "True")).await;
    let widget_deployment = &s.deployments("InfrastructureProvider", "widget").await[0];
    assert_eq!(replicas_and_remembered(widget_deployment), (Some(0), Some("2".into())));

    // Now the core provider upgrades (at 0 replicas).
    let core = s.wait_for::<CoreProvider>("butler", "v2.0.0 installed", installed("v2.0.0")).await;
    assert_eq!(core.status.as_ref().unwrap().contract.as_deref(), Some("v1beta2"));
    assert_eq!(
        replicas_and_remembered(&s.deployments("CoreProvider", "butler").await[0]),
        (Some(0), Some("1".into()))
    );

    // Cluster API's rule: a v1beta2 core still supports v1beta1 providers, so the core
    // unpauses while the widget is still at v1beta1, and the widget runs there too, its status
    // saying the core only still supports its contract.
    s.patch_spec::<CoreProvider>("butler", json!({"paused": false})).await;
    s.wait_for::<CoreProvider>("butler", "running", |p| reason(p, "Paused", "Running")).await;
    assert_eq!(replicas_and_remembered(&s.deployments("CoreProvider", "butler").await[0]), (Some(1), None));
    s.patch_spec::<InfrastructureProvider>("widget", json!({"paused": false})).await;
    let widget =
        s.wait_for::<InfrastructureProvider>("widget", "running", |p| reason(p, "Paused", "Running")).await;
    let message = &condition(&widget, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("contract v1beta1, which the core provider's v1beta2 still supports"),
        "{message}"
    );
    assert_eq!(
        replicas_and_remembered(&s.deployments("InfrastructureProvider", "widget").await[0]),
        (Some(2), None)
    );

    // Its own move to v1beta2 stays within what the core accepts: no pause needed.
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v2.0.0"})).await;
    let widget =
        s.wait_for::<InfrastructureProvider>("widget", "v2.0.0 installed", installed("v2.0.0")).await;
    assert!(reason(&widget, "Paused", "Running"), "{:?}", widget.status);
    let message = &condition(&widget, "ProviderInstalled").unwrap().message;
    assert!(!message.contains("still supports"), "{message}");
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
    s.stop_operator().await;
}

#[tokio::test]
async fn an_unpause_and_a_contract_change_due_at_once_never_both_happen() {
    let mut s = Scenario::new("gate").await;
    publish_releases(&s).await;
    // A core of contract v1, which supports no earlier contract.
    let v3 = components("butler", "v3.0.0", &[]);
    publish_with(&s, "butler", "core-components.yaml", "v3.0.0", &v3, &metadata_with_v1()).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.1.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    s.patch_spec::<InfrastructureProvider>("widget", json!({"paused": true})).await;
    s.patch_spec::<CoreProvider>("butler", json!({"paused": true})).await;
    s.wait_for::<InfrastructureProvider>("widget", "paused", |p| is(p, "Paused", "True")).await;
    s.wait_for::<CoreProvider>("butler", "paused", |p| is(p, "Paused", "True")).await;

    // The core's move to v1 and the widget's unpause at v1beta1 become due together, and
    // whatever is decided waits before its writes: each alone is right, both together would
    // run the widget against a core it does not speak.
    let hold = s.decided().write().await;
    s.patch_spec::<CoreProvider>("butler", json!({"version": "v3.0.0"})).await;
    s.patch_spec::<InfrastructureProvider>("widget", json!({"paused": false})).await;
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    drop(hold);

    let core = s
        .wait_for::<CoreProvider>("butler", "upgraded or refused", |p| {
            installed("v3.0.0")(p) || reason(p, "ProviderUpgraded", "ContractChangeNeedsPause")
        })
        .await;
    if installed("v3.0.0")(&core) {
        // The core went first: the widget's unpause is refused and it stays at 0.
        s.wait_for::<InfrastructureProvider>("widget", "unpause refused", |p| {
            reason(p, "Paused", "UnpauseRefused")
        })
        .await;
        let widget = &s.deployments("InfrastructureProvider", "widget").await[0];
        assert_eq!(replicas_and_remembered(widget).0, Some(0), "the widget never ran against v1");
    } else {
        // The widget went first: it runs at v1beta1, and the core stays there too.
        s.wait_for::<InfrastructureProvider>("widget", "running", |p| reason(p, "Paused", "Running")).await;
        assert_eq!(core.status.as_ref().unwrap().contract.as_deref(), Some("v1beta1"));
    }
    s.stop_operator().await;
}

#[tokio::test]
async fn a_contract_move_started_by_bumping_every_version_first_pauses_and_completes() {
    let mut s = core_and_widget_of_two("contract-bump").await;

    // The natural way in: every version bumped to the new contract first. Both are refused,
    // and the message says what to do from here.
    s.patch_spec::<CoreProvider>("butler", json!({"version": "v2.0.0"})).await;
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v2.0.0"})).await;
    let (core, message) = refused_until_paused(&s).await;
    assert!(
        message.contains("pause every provider first (spec.paused: true), this one included"),
        "{message}"
    );
    // Ready says the same, not that nothing is installed.
    assert!(reason(&core, "Ready", "ContractChangeNeedsPause"), "{:?}", core.status);
    // The others wait for the core provider to move first, as clusterctl moves them.
    let widget = s
        .wait_for::<InfrastructureProvider>("widget", "waiting for the core provider", |p| {
            reason(p, "PreflightCheckPassed", "WaitingForCoreProvider")
        })
        .await;
    let message = &condition(&widget, "PreflightCheckPassed").unwrap().message;
    assert!(message.contains("to move to v2.0.0 first"), "{message}");

    // Then every provider paused: each pause is carried out at once, at the version running,
    // and the move goes through without touching the versions again.
    s.patch_spec::<CoreProvider>("butler", json!({"paused": true})).await;
    let core = s
        .wait_for::<CoreProvider>("butler", "paused at v1.0.0", |p| {
            is(p, "Paused", "True") || installed("v2.0.0")(p)
        })
        .await;
    if !installed("v2.0.0")(&core) {
        let message = &condition(&core, "ProviderUpgraded").unwrap().message;
        assert!(message.contains("this provider is paused at v1.0.0"), "{message}");
        assert!(
            message.contains(&format!("Not paused: InfrastructureProvider {}/widget", s.namespace)),
            "{message}"
        );
        assert_eq!(replicas_and_remembered(&s.deployments("CoreProvider", "butler").await[0]).0, Some(0));
    }
    s.patch_spec::<InfrastructureProvider>("widget", json!({"paused": true})).await;
    let core = s.wait_for::<CoreProvider>("butler", "v2.0.0 installed", installed("v2.0.0")).await;
    assert_eq!(core.status.as_ref().unwrap().contract.as_deref(), Some("v1beta2"));
    s.wait_for::<InfrastructureProvider>("widget", "v2.0.0 installed", installed("v2.0.0")).await;
    assert_eq!(
        replicas_and_remembered(&s.deployments("InfrastructureProvider", "widget").await[0]),
        (Some(0), Some("2".into()))
    );

    // Unpaused, everyone runs again on the new contract.
    s.patch_spec::<InfrastructureProvider>("widget", json!({"paused": false})).await;
    s.patch_spec::<CoreProvider>("butler", json!({"paused": false})).await;
    s.wait_for::<CoreProvider>("butler", "running", |p| reason(p, "Paused", "Running")).await;
    s.wait_for::<InfrastructureProvider>("widget", "running", |p| reason(p, "Paused", "Running")).await;
    assert_eq!(
        replicas_and_remembered(&s.deployments("InfrastructureProvider", "widget").await[0]),
        (Some(2), None)
    );
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
    s.stop_operator().await;
}
