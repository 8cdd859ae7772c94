//! Upgrade policies: the operator finds a newer release a provider's policy follows, proposes
//! it as a ProviderUpgrade, and (approved by the policy) runs it in the maintenance window.

use std::time::Duration;

use butler_operator::api::{CoreProvider, InfrastructureProvider, StepState};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams};
use serde_json::json;

use crate::fixtures::{components, publish};
use crate::support::{Scenario, is};
use crate::upgrade::{installed, spec};
use crate::upgrades::{condition, upgrades, wait_upgrade_within};

/// A daily window (UTC) opening at the first whole minute at least 15 s from now: closed when
/// the policy is read, open soon after.
fn window_opening_soon() -> (String, jiff::Timestamp) {
    let now = jiff::Timestamp::now();
    let minute = now.as_second().div_euclid(60) * 60;
    let mut opens = minute + 60;
    if opens - now.as_second() < 15 {
        opens += 60;
    }
    let at = jiff::Timestamp::from_second(opens).unwrap();
    let civil = at.to_zoned(jiff::tz::TimeZone::UTC);
    (format!("{} {} * * *", civil.minute(), civil.hour()), at)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_patch_release_is_found_and_installed_by_itself_in_the_maintenance_window() {
    let mut s = Scenario::new("upgrade-policy").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // A patch release, a pre-release of the next and a minor release: the policy follows the
    // patch alone.
    for version in ["v1.0.0", "v1.0.1", "v1.0.2-rc.1", "v1.1.0"] {
        let widget = components("widget", version, &[]);
        publish(&s, "infrastructure-widget", "infrastructure-components.yaml", version, &widget).await;
    }
    s.start_operator();
    let marking = crate::cli::keep_marking_available(&s);
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    let (schedule, opens) = window_opening_soon();
    let mut widget: serde_json::Value =
        serde_json::from_str(&spec("infrastructure-widget", "v1.0.0")).unwrap();
    widget["upgradePolicy"] = json!({
        "follow": "Patch",
        "approval": "Automatic",
        "maintenanceWindow": {"schedule": schedule, "duration": "10m"},
    });
    s.create::<InfrastructureProvider>("widget", &widget.to_string()).await;

    // Found, proposed, approved by the policy, and waiting for the window.
    let name = "infrastructure-widget-v1.0.1";
    let waiting = wait_upgrade_within(&s, name, "waiting for the window", Duration::from_secs(60), |u| {
        condition(u, "Progressing").is_some_and(|c| c.1 == "WaitingForMaintenanceWindow")
    })
    .await;
    assert!(jiff::Timestamp::now() < opens, "the window was still closed when the upgrade waited for it");
    assert_eq!(condition(&waiting, "Approved").map(|c| c.0), Some("True".into()), "approved by the policy");
    let status = waiting.status.clone().unwrap();
    assert_eq!(status.plan.len(), 1, "{:?}", status.plan);
    assert_eq!((status.plan[0].from.as_deref(), status.plan[0].to.as_str()), (Some("v1.0.0"), "v1.0.1"));
    assert_eq!(
        waiting.metadata.labels.clone().unwrap_or_default().get("operator.butlerlabs.dev/upgrade-policy-of"),
        Some(&"infrastructure-widget".to_string())
    );
    let owner = &waiting.metadata.owner_references.clone().unwrap_or_default()[0];
    assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("InfrastructureProvider", "widget"));
    // The provider's event says what was found and why it waits.
    let found = wait_note(&s, "UpgradeFound", name).await;
    assert!(found.contains("maintenance window opening at"), "{found}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let before = s.api::<InfrastructureProvider>().get("widget").await.unwrap();
    assert_eq!(before.spec.version.as_deref(), Some("v1.0.0"), "nothing moves before the window");

    // The window opens: the upgrade runs by itself.
    let done = wait_upgrade_within(&s, name, "Succeeded", Duration::from_secs(150), |u| {
        condition(u, "Succeeded").is_some_and(|c| c.0 == "True")
    })
    .await;
    let steps = done.status.unwrap().steps;
    let started: jiff::Timestamp = steps[0].started.as_deref().unwrap().parse().unwrap();
    assert!(started >= opens, "the first step started at {started}, before the window opened at {opens}");
    assert!(steps.iter().all(|st| st.state == StepState::Succeeded), "{steps:#?}");
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.1", |p| {
        installed("v1.0.1")(p) && is(p, "Ready", "True")
    })
    .await;
    // v1.1.0 is a minor release: nothing more is proposed.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let all = upgrades(&s).list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = all.items.iter().filter_map(|u| u.metadata.name.clone()).collect();
    assert_eq!(names, [name]);
    marking.abort();
    s.stop_operator().await;
}

/// The notes of the events of `reason` in the scenario's namespace.
async fn notes(s: &Scenario, reason: &str) -> Vec<String> {
    let events: Api<Event> = Api::namespaced(s.client.clone(), &s.namespace);
    let all = events.list(&ListParams::default()).await.unwrap().items;
    all.into_iter().filter(|e| e.reason.as_deref() == Some(reason)).filter_map(|e| e.note).collect()
}

/// Waits until an event of `reason` says `what`.
async fn wait_note(s: &Scenario, reason: &str, what: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let found = notes(s, reason).await;
        if let Some(note) = found.iter().find(|n| n.contains(what)) {
            return note.clone();
        }
        assert!(std::time::Instant::now() < deadline, "no {reason} event saying {what:?}: {found:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_core_provider_following_contracts_proposes_the_whole_namespace_and_pins_exclude_a_policy() {
    let mut s = Scenario::new("upgrade-policy-contract").await;
    for version in ["v1.0.0", "v1.1.0", "v2.0.0"] {
        publish(&s, "butler", "core-components.yaml", version, &components("butler", version, &[])).await;
        let widget = components("widget", version, &[]);
        publish(&s, "infrastructure-widget", "infrastructure-components.yaml", version, &widget).await;
    }
    s.start_operator();
    let marking = crate::cli::keep_marking_available(&s);
    // The core provider follows contracts, approved by hand.
    let mut core: serde_json::Value = serde_json::from_str(&spec("butler", "v1.0.0")).unwrap();
    core["upgradePolicy"] = json!({"follow": "Contract"});
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    // The widget pins the files of its release: no policy can move it.
    let mut widget: serde_json::Value =
        serde_json::from_str(&spec("infrastructure-widget", "v1.0.0")).unwrap();
    widget["fetchConfig"]["sha256"] = json!({
        "metadata.yaml": butler_repository::sha256_hex(crate::fixtures::METADATA.as_bytes()),
        "infrastructure-components.yaml": butler_repository::sha256_hex(components("widget", "v1.0.0", &[]).as_bytes()),
    });
    widget["upgradePolicy"] = json!({"follow": "Minor"});
    s.create::<InfrastructureProvider>("widget", &widget.to_string()).await;

    let ignored = wait_note(&s, "UpgradePolicyIgnored", "spec.fetchConfig.sha256 pins").await;
    assert!(ignored.contains("remove the pins or the policy"), "{ignored}");
    // The newest release is of the next contract: the whole namespace moves, as an upgrade by
    // contract, waiting for approval.
    let name = "butler-v2.0.0";
    let found = wait_note(&s, "UpgradeFound", name).await;
    assert!(found.contains("of contract v1beta2: every provider of the namespace moves with it"), "{found}");
    assert!(found.contains(&format!("it waits for approval (butlerctl upgrade approve {name})")), "{found}");
    let planned =
        wait_upgrade_within(&s, name, "planned, waiting for approval", Duration::from_secs(30), |u| {
            condition(u, "Approved").is_some_and(|c| c.1 == "WaitingForApproval")
                && condition(u, "Planned").is_some()
        })
        .await;
    assert_eq!(planned.spec.contract.as_deref(), Some("v1beta2"));
    assert_eq!(planned.spec.approval, Some(butler_operator::api::Approval::Manual));
    marking.abort();
    s.stop_operator().await;
}
