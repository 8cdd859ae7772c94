//! Upgrades as objects: a ProviderUpgrade is planned into its status, waits for approval, and
//! runs its steps in the contract's order.

use std::time::{Duration, Instant};

use butler_operator::api::{CoreProvider, InfrastructureProvider, ProviderUpgrade, StepState};
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::fixtures::{broken_components, components, publish, versioned_gadget_crd};
use crate::support::{Scenario, is};
use crate::upgrade::{installed, spec};

pub(crate) fn upgrades(s: &Scenario) -> Api<ProviderUpgrade> {
    Api::namespaced(s.client.clone(), &s.namespace)
}

pub(crate) async fn create(s: &Scenario, name: &str, spec: serde_json::Value) {
    let upgrade: ProviderUpgrade = serde_json::from_value(json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "ProviderUpgrade",
        "metadata": {"name": name, "namespace": s.namespace}, "spec": spec,
    }))
    .unwrap();
    upgrades(s).create(&PostParams::default(), &upgrade).await.unwrap();
}

/// Waits until `check` holds for the upgrade; panics after 60 s with its status.
async fn wait_upgrade(
    s: &Scenario,
    name: &str,
    what: &str,
    check: impl Fn(&ProviderUpgrade) -> bool,
) -> ProviderUpgrade {
    wait_upgrade_within(s, name, what, Duration::from_secs(60), check).await
}

/// Waits until the upgrade exists and `check` holds for it; panics after `limit` with its
/// status.
pub(crate) async fn wait_upgrade_within(
    s: &Scenario,
    name: &str,
    what: &str,
    limit: Duration,
    check: impl Fn(&ProviderUpgrade) -> bool,
) -> ProviderUpgrade {
    let deadline = Instant::now() + limit;
    loop {
        let found = upgrades(s).get_opt(name).await.unwrap();
        if let Some(found) = &found
            && check(found)
        {
            return found.clone();
        }
        assert!(
            Instant::now() < deadline,
            "ProviderUpgrade {name}: {what} did not happen within {limit:?}; status: {}",
            serde_json::to_string_pretty(&found.map(|f| f.status)).unwrap()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub(crate) fn condition(u: &ProviderUpgrade, type_: &str) -> Option<(String, String)> {
    let status = u.status.as_ref()?;
    status.conditions.iter().find(|c| c.type_ == type_).map(|c| (c.status.clone(), c.reason.clone()))
}

/// The core provider `butler` and the infrastructure provider `widget` installed at v1.0.0,
/// and Ready.
async fn both_ready_at_v1(s: &Scenario) {
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
}

async fn publish_releases(s: &Scenario) {
    for version in ["v1.0.0", "v1.1.0", "v2.0.0"] {
        publish(s, "butler", "core-components.yaml", version, &components("butler", version, &[])).await;
        let widget = components("widget", version, &[]);
        publish(s, "infrastructure-widget", "infrastructure-components.yaml", version, &widget).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_waits_for_approval_then_runs_the_core_first() {
    let mut s = Scenario::new("upgrade-object").await;
    publish_releases(&s).await;
    s.start_operator();
    let marking = crate::cli::keep_marking_available(&s);
    both_ready_at_v1(&s).await;

    create(
        &s,
        "to-1-1",
        json!({"providers": [
            {"kind": "InfrastructureProvider", "name": "widget", "version": "v1.1.0"},
            {"kind": "CoreProvider", "name": "butler", "version": "v1.1.0"},
        ]}),
    )
    .await;
    let planned = wait_upgrade(&s, "to-1-1", "planned and waiting for approval", |u| {
        condition(u, "Planned").is_some_and(|c| c.0 == "True")
            && condition(u, "Approved").is_some_and(|c| c.1 == "WaitingForApproval")
    })
    .await;
    let status = planned.status.unwrap();
    let names: Vec<&str> = status.steps.iter().map(|st| st.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Upgrade CoreProvider butler to v1.1.0",
            "Upgrade InfrastructureProvider widget to v1.1.0",
            "Every provider Ready"
        ]
    );
    assert_eq!(status.plan.len(), 2);
    assert_eq!(status.plan[0].from.as_deref(), Some("v1.0.0"));
    // Each move says what it does to the provider's objects: a new image in the Deployment.
    let objects = status.plan[0].objects.clone().expect("the object changes of the move");
    assert_eq!(objects.changed.get("Deployment"), Some(&1), "{objects:?}");
    assert!(objects.added.is_empty() && objects.removed.is_empty(), "{objects:?}");
    // Nothing moves before the approval.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let core = s.api::<CoreProvider>().get("butler").await.unwrap();
    assert_eq!(core.spec.version.as_deref(), Some("v1.0.0"));

    let said = butler_operator::cli::upgrades::approve(&s.client, &s.namespace, "to-1-1").await.unwrap();
    assert!(said.contains("Upgrade CoreProvider butler to v1.1.0"), "{said}");
    let approved = upgrades(&s).get("to-1-1").await.unwrap();
    assert_eq!(approved.spec.approved, Some(true), "approving is the spec field a GitOps commit sets");
    let done =
        wait_upgrade(&s, "to-1-1", "Succeeded", |u| condition(u, "Succeeded").is_some_and(|c| c.0 == "True"))
            .await;
    let steps = done.status.unwrap().steps;
    assert!(
        steps
            .iter()
            .all(|st| st.state == StepState::Succeeded && st.started.is_some() && st.finished.is_some()),
        "{steps:#?}"
    );
    assert!(steps[0].finished <= steps[1].started, "the core provider moves first: {steps:#?}");
    let widget = s.wait_for::<InfrastructureProvider>("widget", "v1.1.0", installed("v1.1.0")).await;
    assert_eq!(widget.spec.version.as_deref(), Some("v1.1.0"));
    s.wait_for::<CoreProvider>("butler", "v1.1.0", installed("v1.1.0")).await;

    // Rolled back as a whole: a new upgrade moves both back, across the minor version.
    let said = butler_operator::cli::upgrades::rollback(&s.client, &s.namespace, "to-1-1").await.unwrap();
    assert!(said.contains("to-1-1-rollback"), "{said}");
    let back = wait_upgrade(&s, "to-1-1-rollback", "Succeeded", |u| {
        condition(u, "Succeeded").is_some_and(|c| c.0 == "True")
    })
    .await;
    let names: Vec<String> = back.status.unwrap().steps.into_iter().map(|st| st.name).collect();
    assert_eq!(names[0], "Upgrade CoreProvider butler to v1.0.0");
    s.wait_for::<CoreProvider>("butler", "back at v1.0.0", |p| {
        installed("v1.0.0")(p) && is(p, "Ready", "True")
    })
    .await;
    s.wait_for::<InfrastructureProvider>("widget", "back at v1.0.0", |p| {
        installed("v1.0.0")(p) && is(p, "Ready", "True")
    })
    .await;
    marking.abort();
    s.stop_operator().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_upgrade_through_the_object_pauses_everything_first_and_survives_a_kill_at_every_step() {
    let mut s = Scenario::new("upgrade-contract").await;
    publish_releases(&s).await;
    s.start_operator();
    let marking = crate::cli::keep_marking_available(&s);
    both_ready_at_v1(&s).await;

    create(&s, "to-v1beta2", json!({"contract": "v1beta2", "approval": "Automatic"})).await;
    // The operator is killed as each step starts (or as soon after as it is seen) and started
    // again: every step goes on from where the cluster shows it.
    for index in 0..5 {
        wait_upgrade(&s, "to-v1beta2", &format!("step {index} started"), |u| {
            u.status
                .as_ref()
                .is_some_and(|st| st.steps.get(index).is_some_and(|step| step.state != StepState::Pending))
        })
        .await;
        s.kill_operator().await;
        s.start_operator();
    }
    let done = wait_upgrade(&s, "to-v1beta2", "Succeeded", |u| {
        condition(u, "Succeeded").is_some_and(|c| c.0 == "True")
    })
    .await;
    let status = done.status.unwrap();
    assert_eq!(
        (status.from_contract.as_deref(), status.to_contract.as_deref()),
        (Some("v1beta1"), Some("v1beta2"))
    );
    let names: Vec<&str> = status.steps.iter().map(|st| st.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "Pause every provider",
            "Upgrade CoreProvider butler to v2.0.0",
            "Upgrade InfrastructureProvider widget to v2.0.0",
            "Unpause the providers this upgrade paused",
            "Every provider Ready",
        ]
    );
    for pair in status.steps.windows(2) {
        assert!(pair[0].finished <= pair[1].started, "{} before {}", pair[0].name, pair[1].name);
    }
    let widget = s.wait_for::<InfrastructureProvider>("widget", "v2.0.0", installed("v2.0.0")).await;
    assert_eq!(widget.spec.paused, Some(false));
    assert!(
        !widget
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key("operator.butlerlabs.dev/paused-by-upgrade")
    );
    s.wait_for::<CoreProvider>("butler", "Ready at v2.0.0", |p| {
        installed("v2.0.0")(p) && is(p, "Ready", "True")
    })
    .await;
    marking.abort();
    s.stop_operator().await;
}

/// An upgrade changes provider objects with the operator's rights: one written where provider
/// objects are not honoured changes nothing (else whoever may write an upgrade there could
/// change providers they may not touch).
#[tokio::test]
async fn an_upgrade_where_providers_are_not_honoured_changes_nothing() {
    let mut s = Scenario::new("upgrade-elsewhere").await;
    publish_releases(&s).await;
    s.start_operator_with_options(|o| o.policy.provider_namespaces = Some(vec!["somewhere-else".into()]));
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    create(
        &s,
        "sneaky",
        json!({"approval": "Automatic", "providers": [{"kind": "CoreProvider", "name": "butler", "version": "v2.0.0"}]}),
    )
    .await;
    // Another operator's or no one's: not planned, not even written to.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let left =
        Api::<ProviderUpgrade>::namespaced(s.client.clone(), &s.namespace).get("sneaky").await.unwrap();
    assert!(left.status.is_none(), "{:?}", left.status);
    let core = s.api::<CoreProvider>().get("butler").await.unwrap();
    assert_eq!(core.spec.version.as_deref(), Some("v1.0.0"));
    s.stop_operator().await;
}

/// A step whose provider is not Ready in time fails the upgrade and rolls that provider back
/// to its version before, over the operator's no-downgrade rule, with the CRDs left as the
/// newer version made them (their objects are stored at its storage version by then).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_step_not_ready_in_time_fails_and_rolls_its_provider_back() {
    let mut s = Scenario::new("upgrade-rollback").await;
    let group = format!("{}.test.io", s.namespace);
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let crd = |versions: &[&str]| format!("---\n{}", versioned_gadget_crd(&group, versions));
    let good = components("widget", "v1.0.0", &[]) + &crd(&["v1alpha1"]);
    // v1.1.0 moves the CRD's storage version, and its manager never becomes Available.
    let broken = broken_components("widget", "v1.1.0") + &crd(&["v1alpha1", "v1beta1"]);
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.0.0", &good).await;
    publish(&s, "infrastructure-widget", "infrastructure-components.yaml", "v1.1.0", &broken).await;
    s.start_operator();
    // Where no kubelet runs, every provider Deployment but the broken one becomes Available.
    let marking = crate::cli::keep_marking_available(&s);
    both_ready_at_v1(&s).await;

    create(
        &s,
        "to-broken",
        json!({"approval": "Automatic", "stepTimeout": "3s",
               "providers": [{"kind": "InfrastructureProvider", "name": "widget", "version": "v1.1.0"}]}),
    )
    .await;
    let failed = wait_upgrade(&s, "to-broken", "Failed", |u| {
        condition(u, "Succeeded").is_some_and(|c| c.0 == "False")
    })
    .await;
    let status = failed.status.unwrap();
    let step = &status.steps[0];
    assert_eq!(step.state, StepState::Failed);
    let message = step.message.clone().unwrap_or_default();
    assert!(
        message.contains("not done within 3s")
            && message.contains("InfrastructureProvider widget rolled back to v1.0.0"),
        "{message}"
    );
    // Back at v1.0.0 (a downgrade across minor versions, allowed for this roll-back), Ready,
    // with the CRD as v1.1.0 left it.
    let widget = s
        .wait_for::<InfrastructureProvider>("widget", "rolled back and Ready", |p| {
            installed("v1.0.0")(p) && is(p, "Ready", "True")
        })
        .await;
    assert_eq!(widget.spec.version.as_deref(), Some("v1.0.0"));
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(s.client.clone());
    let crd = crds.get(&format!("gadgets.{group}")).await.unwrap();
    let storage = crd.spec.versions.iter().find(|v| v.storage).map(|v| v.name.clone());
    assert_eq!(storage.as_deref(), Some("v1beta1"));
    marking.abort();
    s.stop_operator().await;
}

/// An upgrade's planning reads a provider's config Secret as the provider's reconcile does,
/// under the same one check: a Secret of another namespace is never read (it was on the
/// planning path, and its tokens could go to a registry the planner chose).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planning_never_reads_a_config_secret_of_another_namespace() {
    let mut s = Scenario::new("upgrade-secret").await;
    publish_releases(&s).await;
    let victim = s.cluster.namespace("victim").await;
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(s.client.clone(), &victim);
    let secret: k8s_openapi::api::core::v1::Secret = serde_json::from_value(
        json!({"metadata": {"name": "creds"}, "stringData": {"GITHUB_TOKEN": "theirs"}}),
    )
    .unwrap();
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    s.start_operator();
    let marking = crate::cli::keep_marking_available(&s);
    both_ready_at_v1(&s).await;
    s.patch_spec::<InfrastructureProvider>(
        "widget",
        json!({"configSecret": {"name": "creds", "namespace": victim}}),
    )
    .await;
    create(
        &s,
        "reach",
        json!({"providers": [{"kind": "InfrastructureProvider", "name": "widget", "version": "v1.1.0"}]}),
    )
    .await;
    // Planned without the object changes, which would need the Secret: the plan says why.
    let planned = wait_upgrade(&s, "reach", "planned", |u| condition(u, "Planned").is_some()).await;
    let message =
        planned.status.unwrap().conditions.iter().find(|c| c.type_ == "Planned").unwrap().message.clone();
    assert!(message.contains("is not the provider's namespace"), "{message}");
    if let Some(server) = s.cluster.server() {
        let read = server
            .requests_from(crate::support::OPERATOR_AGENT)
            .into_iter()
            .filter(|(_, path)| path.contains(&format!("/namespaces/{victim}/secrets")))
            .count();
        assert_eq!(read, 0, "the other namespace's Secret was read");
    }
    marking.abort();
    s.stop_operator().await;
}

/// An upgrade deleted while it holds providers paused unpauses them before it goes: nothing
/// is left at 0 replicas by an upgrade no one can see any more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upgrade_deleted_mid_way_unpauses_what_it_paused() {
    let mut s = Scenario::new("upgrade-deleted").await;
    publish_releases(&s).await;
    s.start_operator();
    let marking = crate::cli::keep_marking_available(&s);
    both_ready_at_v1(&s).await;

    create(&s, "to-v1beta2", json!({"contract": "v1beta2", "approval": "Automatic"})).await;
    let paused_by = |p: &InfrastructureProvider| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get("operator.butlerlabs.dev/paused-by-upgrade"))
            .cloned()
    };
    // The operator stops as the pause starts; the upgrade is deleted meanwhile.
    wait_upgrade(&s, "to-v1beta2", "the pause started", |u| {
        u.status
            .as_ref()
            .is_some_and(|st| st.steps.first().is_some_and(|step| step.state != StepState::Pending))
    })
    .await;
    s.kill_operator().await;
    let widget = s.api::<InfrastructureProvider>().get("widget").await.unwrap();
    assert_eq!(paused_by(&widget).as_deref(), Some("to-v1beta2"), "the upgrade paused the widget");
    let held = upgrades(&s).get("to-v1beta2").await.unwrap();
    assert!(
        held.metadata.finalizers.iter().flatten().any(|f| f == "operator.butlerlabs.dev/upgrade"),
        "an upgrade holding providers paused is held: {:?}",
        held.metadata.finalizers
    );
    upgrades(&s).delete("to-v1beta2", &Default::default()).await.unwrap();
    s.start_operator();
    let deadline = Instant::now() + Duration::from_secs(30);
    while upgrades(&s).get_opt("to-v1beta2").await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "the deleted upgrade never went");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let widget = s
        .wait_for::<InfrastructureProvider>("widget", "unpaused", |p| {
            p.spec.paused == Some(false) && paused_by(p).is_none()
        })
        .await;
    assert_eq!(widget.status.unwrap().installed_version.as_deref(), Some("v1.0.0"));
    s.wait_for::<CoreProvider>("butler", "unpaused", |p| p.spec.paused != Some(true)).await;
    marking.abort();
    s.stop_operator().await;
}
