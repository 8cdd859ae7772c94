//! The ProviderUpgrade controller: plans an upgrade into its status before anything changes,
//! waits for approval, then runs its steps ([`engine`]) one at a time, each recorded with its
//! times and result. Everything it goes on is in the cluster (the steps in the upgrade's
//! status, the providers' specs and status), so an operator killed at any point carries on.
//! One upgrade runs at a time in a namespace.

pub mod engine;
pub mod follow;
pub mod found;
pub mod progress;
pub mod rollback;
pub mod window;

use std::sync::Arc;
use std::time::Duration;

use butler_repository::{ClusterctlConfig, Repository};
use butler_runtime::conditions::{Wanted, merge};
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};

use self::engine::Next;
use self::window::{State, Window};
use super::context::Context;
use super::error::Error;
use crate::api::{
    Approval, Follow, KeptRelease, KindNames, ObjectChanges, PlannedMove, ProviderKind, ProviderUpgrade,
    ProviderUpgradeStatus, StepAction, StepState,
};
use crate::cli::apply::{Repositories, Wanted as Target, moves, target_contract};
use crate::cli::diff::{counted, diff, render, storage_changes};
use crate::cli::providers::{self, ProviderRow};

const PLANNED: &str = "Planned";
const APPROVED: &str = "Approved";
const PROGRESSING: &str = "Progressing";
const SUCCEEDED: &str = "Succeeded";
const ORDER: [&str; 4] = [PLANNED, APPROVED, PROGRESSING, SUCCEEDED];
/// How long a step may take unless the spec says.
const STEP_TIMEOUT: Duration = Duration::from_secs(600);

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Reconciles one ProviderUpgrade.
pub async fn reconcile(upgrade: Arc<ProviderUpgrade>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = upgrade.namespace().unwrap_or_default();
    let name = upgrade.name_any();
    let mut status = upgrade.status.clone().unwrap_or_default();
    if status.conditions.iter().any(|c| c.type_ == SUCCEEDED) {
        return Ok(Action::await_change());
    }
    let generation = upgrade.meta().generation;
    // An upgrade changes provider objects with the operator's rights: only where provider
    // objects are honoured, or whoever may write an upgrade could change providers they may not.
    if let Err(why) = ctx.policy.honours(&namespace) {
        let wanted = [Wanted::new(PLANNED, false, "NamespaceNotAllowed", why)];
        status.conditions = merge(&status.conditions, &wanted, generation, &now(), &ORDER);
        write(&ctx, &upgrade, &status).await?;
        return Ok(Action::await_change());
    }
    let started = status.steps.iter().any(|s| s.state != StepState::Pending);
    if !started && (status.steps.is_empty() || status.observed_generation != generation) {
        let rows = list(&ctx, &namespace).await?;
        match plan(&ctx, &upgrade, &rows).await {
            Ok(planned) => status = planned,
            Err(message) => {
                let wanted = [Wanted::new(PLANNED, false, "PlanFailed", message)];
                status.conditions = merge(&status.conditions, &wanted, generation, &now(), &ORDER);
                write(&ctx, &upgrade, &status).await?;
                return Ok(Action::requeue(Duration::from_secs(60)));
            }
        }
        status.observed_generation = generation;
    }
    let approved = upgrade.spec.approval == Some(Approval::Automatic) || upgrade.spec.approved == Some(true);
    let approval = match approved {
        true => Wanted::new(APPROVED, true, "Approved", "approved"),
        false => Wanted::new(
            APPROVED,
            false,
            "WaitingForApproval",
            format!(
                "review the plan in the status, then set spec.approved: true (or run butlerctl upgrade approve {name})"
            ),
        ),
    };
    status.conditions = merge(&status.conditions, &[approval], generation, &now(), &ORDER);
    if !approved {
        write(&ctx, &upgrade, &status).await?;
        return Ok(Action::await_change());
    }
    // Once one of its steps ran, this upgrade holds the namespace's turn: no need to look, nor
    // at the window (an upgrade that started runs to its end).
    let has_turn = status.steps.iter().any(|s| s.state != StepState::Pending);
    if !has_turn && let Some((wanted, action)) = outside_window(&upgrade) {
        status.conditions = merge(&status.conditions, &[wanted], generation, &now(), &ORDER);
        write(&ctx, &upgrade, &status).await?;
        return Ok(action);
    }
    if !has_turn && let Some(other) = another_running(&ctx, &namespace, &name).await? {
        let wanted = Wanted::new(
            PROGRESSING,
            false,
            "WaitingForAnotherUpgrade",
            format!("ProviderUpgrade {other} runs; this one starts after it"),
        );
        status.conditions = merge(&status.conditions, &[wanted], generation, &now(), &ORDER);
        write(&ctx, &upgrade, &status).await?;
        return Ok(Action::requeue(Duration::from_secs(10)));
    }

    let rows = list(&ctx, &namespace).await?;
    let timeout =
        upgrade.spec.step_timeout.as_deref().and_then(|t| parse_duration(t).ok()).unwrap_or(STEP_TIMEOUT);
    let running = status.steps.iter().find(|s| s.state == StepState::Running);
    let elapsed = running.and_then(|s| s.started.as_deref()).and_then(since);
    let stamp = || now().0.to_string();
    let (action, progressing) =
        match engine::next(&name, &status.plan, &status.steps, &rows, elapsed, timeout) {
            Next::Start(index, changes) => {
                status.steps[index].kept = keep_before(&ctx, &upgrade, &status, index, &rows).await;
                for change in changes {
                    patch_provider(&ctx, change.kind, &namespace, &change.name, change.patch).await?;
                }
                let step = &mut status.steps[index];
                step.state = StepState::Running;
                step.started = Some(stamp());
                status.current_step = Some(step.name.clone());
                (
                    Action::requeue(Duration::from_millis(500)),
                    Wanted::new(PROGRESSING, true, "Running", status.steps[index].name.clone()),
                )
            }
            Next::Finish(index) => {
                let step = &mut status.steps[index];
                step.state = StepState::Succeeded;
                step.finished = Some(stamp());
                step.message = None;
                (
                    Action::requeue(Duration::from_millis(100)),
                    Wanted::new(PROGRESSING, true, "Running", step.name.clone()),
                )
            }
            Next::Wait(index, what) => {
                let step = &mut status.steps[index];
                step.message = Some(format!("waiting for {what}"));
                (
                    Action::requeue(Duration::from_secs(2)),
                    Wanted::new(PROGRESSING, true, "Running", step.name.clone()),
                )
            }
            Next::Fail(index, why, rollback) => {
                let rolled_back: Vec<String> = rollback
                    .iter()
                    .map(|c| {
                        format!(
                            "{} {} rolled back to {}",
                            c.kind.kind(),
                            c.name,
                            c.patch["spec"]["version"].as_str().unwrap_or_default()
                        )
                    })
                    .collect();
                for change in rollback {
                    patch_provider(&ctx, change.kind, &namespace, &change.name, change.patch).await?;
                }
                let why = match rolled_back.is_empty() {
                    true => why,
                    false => format!(
                        "{why}; {} (its CRDs stay as the newer version left them)",
                        rolled_back.join(", ")
                    ),
                };
                let step = &mut status.steps[index];
                step.state = StepState::Failed;
                step.finished = Some(stamp());
                step.message = Some(why.clone());
                let failed = Wanted::new(SUCCEEDED, false, "StepFailed", format!("{}: {why}", step.name));
                status.conditions = merge(&status.conditions, &[failed], generation, &now(), &ORDER);
                (Action::await_change(), Wanted::new(PROGRESSING, false, "Failed", why))
            }
            Next::Done => {
                status.current_step = None;
                let done = Wanted::new(SUCCEEDED, true, "Succeeded", "every step succeeded");
                status.conditions = merge(&status.conditions, &[done], generation, &now(), &ORDER);
                (Action::await_change(), Wanted::new(PROGRESSING, false, "Done", "every step succeeded"))
            }
            Next::Stopped => return Ok(Action::await_change()),
        };
    status.conditions = merge(&status.conditions, &[progressing], generation, &now(), &ORDER);
    let running = ctx.migrations.lock().expect("not poisoned").clone();
    status.storage_migrations =
        progress::storage_migrations(&namespace, &status.plan, &status.storage_migrations, &running);
    write(&ctx, &upgrade, &status).await?;
    Ok(action)
}

/// When the upgrade has a maintenance window that is closed now: why it waits, and when to
/// look again (as it opens).
fn outside_window(upgrade: &ProviderUpgrade) -> Option<(Wanted, Action)> {
    let window = upgrade.spec.maintenance_window.as_ref()?;
    match Window::read(window, "spec.maintenanceWindow").and_then(|w| w.at(jiff::Timestamp::now())) {
        Ok(State::Open(_)) => None,
        Ok(State::Closed(opens)) => {
            let wait = jiff::Timestamp::now().duration_until(opens.timestamp());
            // A second late rather than early; an hour at most, in case the clock moves.
            let wait = Duration::try_from(wait).unwrap_or_default().min(Duration::from_secs(3600))
                + Duration::from_secs(1);
            let message = format!(
                "the maintenance window opens at {opens} (spec.maintenanceWindow.schedule {:?})",
                window.schedule
            );
            Some((
                Wanted::new(PROGRESSING, false, "WaitingForMaintenanceWindow", message),
                Action::requeue(wait),
            ))
        }
        Err(why) => {
            Some((Wanted::new(PROGRESSING, false, "InvalidMaintenanceWindow", why), Action::await_change()))
        }
    }
}

/// Whether an upgrade finished: `Some(true)` succeeded, `Some(false)` failed, `None` not yet.
pub fn finished(upgrade: &ProviderUpgrade) -> Option<bool> {
    let status = upgrade.status.as_ref()?;
    status.conditions.iter().find(|c| c.type_ == SUCCEEDED).map(|c| c.status == "True")
}

/// Retries after a failure of the API server.
pub fn error_policy(upgrade: Arc<ProviderUpgrade>, error: &Error, _: Arc<Context>) -> Action {
    tracing::warn!(upgrade = %upgrade.name_any(), "{error}");
    Action::requeue(Duration::from_secs(5))
}

async fn list(ctx: &Context, namespace: &str) -> Result<Vec<ProviderRow>, Error> {
    providers::list(&ctx.client, Some(namespace)).await.map_err(Error::Apply)
}

/// The plan: the moves (the core provider first), the contracts, the steps.
async fn plan(
    ctx: &Context,
    upgrade: &ProviderUpgrade,
    rows: &[ProviderRow],
) -> Result<ProviderUpgradeStatus, String> {
    let spec = &upgrade.spec;
    if let Some(original) = &spec.rollback_of {
        return rollback_planned(ctx, upgrade, original, rows).await;
    }
    let target = match (&spec.contract, &spec.providers) {
        (Some(contract), None) => Target::Contract(contract.clone()),
        (None, Some(list)) if !list.is_empty() => {
            let mut versions = Vec::new();
            for t in list {
                let kind = ProviderKind::from_kind(&t.kind).ok_or_else(|| {
                    format!("spec.providers: {} is not a provider kind (CoreProvider, InfrastructureProvider, ...)", t.kind)
                })?;
                versions.push((kind.label(&t.name), t.version.clone()));
            }
            Target::Versions(versions)
        }
        _ => return Err("give spec.contract or spec.providers (one of them)".into()),
    };
    let core = rows
        .iter()
        .find(|r| r.provider_kind == ProviderKind::Core)
        .ok_or("no CoreProvider in this namespace: nothing to upgrade")?;
    let config = operator_config(ctx)?;
    let mut repositories = Repositories::default();
    for row in Repositories::needed(rows, &target) {
        repositories.add(row, repository_of(ctx, row, &config).await?);
    }
    let planned = moves(rows, &target, &repositories).await?;
    if spec.rollback_of.is_none() {
        pinned(rows, &planned)?;
    }
    let to_contract = target_contract(core, &target, &planned, &repositories).await?;
    let change = to_contract.is_some() && to_contract != core.contract;
    let mut plan: Vec<PlannedMove> = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for m in planned.iter().filter(|m| m.from.as_deref() != Some(m.to.as_str())) {
        let row = rows
            .iter()
            .find(|r| r.provider_kind == m.kind && r.name == m.name)
            .expect("moves come from the rows");
        // The repositories read for the plan serve the comparison too; a provider named by
        // version alone is read now.
        if repositories.of(row).is_err() {
            match repository_of(ctx, row, &config).await {
                Ok(repository) => repositories.add(row, repository),
                Err(why) => unknown.push(format!("{} {}: {why}", m.kind.kind(), m.name)),
            }
        }
        let objects = match repositories.of(row) {
            Ok(repository) => {
                match object_changes(ctx, row, repository, m.from.as_deref(), &m.to, &config).await {
                    Ok(changes) => Some(changes),
                    Err(why) => {
                        unknown.push(format!("{} {}: {why}", m.kind.kind(), m.name));
                        None
                    }
                }
            }
            // Unread, said above.
            Err(_) => None,
        };
        plan.push(PlannedMove {
            kind: m.kind.kind().to_string(),
            name: m.name.clone(),
            from: m.from.clone(),
            to: m.to.clone(),
            objects,
        });
    }
    let summary: Vec<String> = plan
        .iter()
        .map(|m| format!("{} {} {} -> {}", m.kind, m.name, m.from.as_deref().unwrap_or("-"), m.to))
        .collect();
    let message = match (summary.is_empty(), change) {
        (true, _) => "every provider is at its target already".to_string(),
        (false, true) => format!(
            "across contracts ({} to {}), paused meanwhile: {}",
            core.contract.as_deref().unwrap_or("-"),
            to_contract.as_deref().unwrap_or("-"),
            summary.join("; ")
        ),
        (false, false) => summary.join("; "),
    };
    let message = match unknown.is_empty() {
        true => message,
        false => format!("{message} (object changes not known for {})", unknown.join("; ")),
    };
    let mut status = upgrade.status.clone().unwrap_or_default();
    status.steps = engine::steps(&plan, change, spec.rollback_of.is_some());
    status.plan = plan;
    status.from_contract = core.contract.clone();
    status.to_contract = to_contract;
    status.current_step = None;
    let wanted = [Wanted::new(PLANNED, true, "Planned", message)];
    status.conditions = merge(&status.conditions, &wanted, upgrade.meta().generation, &now(), &ORDER);
    Ok(status)
}

/// Refuses a plan that moves a pinned provider (`spec.upgradePolicy.follow: Pin`); a roll-back
/// moves it back all the same.
fn pinned(rows: &[ProviderRow], planned: &[crate::cli::apply::Move]) -> Result<(), String> {
    let held: Vec<String> = planned
        .iter()
        .filter(|m| m.from.as_deref() != Some(m.to.as_str()))
        .filter_map(|m| rows.iter().find(|r| r.provider_kind == m.kind && r.name == m.name))
        .filter(|r| r.spec.upgrade_policy.as_ref().is_some_and(|p| p.follow == Follow::Pin))
        .map(|r| format!("{} {} is pinned at {}", r.kind, r.name, r.version.as_deref().unwrap_or("-")))
        .collect();
    match held.is_empty() {
        true => Ok(()),
        false => {
            Err(format!("{} (spec.upgradePolicy.follow: Pin): change its policy to move it", held.join("; ")))
        }
    }
}

/// A roll-back's plan ([`rollback`]), written as every plan is.
async fn rollback_planned(
    ctx: &Context,
    upgrade: &ProviderUpgrade,
    original: &str,
    rows: &[ProviderRow],
) -> Result<ProviderUpgradeStatus, String> {
    let planned = rollback::plan(ctx, upgrade, original, rows).await?;
    let moves: Vec<String> = planned
        .plan
        .iter()
        .map(|m| format!("{} {} {} -> {}", m.kind, m.name, m.from.as_deref().unwrap_or("-"), m.to))
        .collect();
    let message = match moves.is_empty() {
        true => format!("rolls back {original}: every provider is back already"),
        false => format!("rolls back {original}: {}", moves.join("; ")),
    };
    let mut status = upgrade.status.clone().unwrap_or_default();
    status.conditions = merge(
        &status.conditions,
        &[Wanted::new(PLANNED, true, "Planned", message)],
        upgrade.meta().generation,
        &now(),
        &ORDER,
    );
    Ok(ProviderUpgradeStatus { conditions: status.conditions, ..planned })
}

fn operator_config(ctx: &Context) -> Result<ClusterctlConfig, String> {
    match &ctx.config_path {
        Some(path) => {
            ClusterctlConfig::load(Some(path)).map_err(|e| format!("the operator's config file: {e}"))
        }
        None => Ok(ClusterctlConfig::default()),
    }
}

/// Keeps the release an `Upgrade` step's provider runs before the step moves it, when it comes
/// from a remote repository (one in the cluster or compiled in needs no keeping); a release
/// that cannot be kept is said in an event, and a roll-back would read the repository.
async fn keep_before(
    ctx: &Context,
    upgrade: &ProviderUpgrade,
    status: &ProviderUpgradeStatus,
    index: usize,
    rows: &[ProviderRow],
) -> Option<KeptRelease> {
    let step = &status.steps[index];
    if step.action != StepAction::Upgrade || step.downgrade == Some(true) {
        return step.kept.clone();
    }
    let (kind, name) = (step.kind.as_deref()?, step.provider.as_deref()?);
    let row = rows.iter().find(|r| r.kind == kind && r.name == name)?;
    let from = status.plan.iter().find(|m| m.kind == kind && m.name == name)?.from.clone()?;
    let kept = async {
        let config = operator_config(ctx)?;
        if super::fetch::remote_url(&row.spec, &config, row.provider_kind, &row.name).is_none() {
            return Ok(None);
        }
        let repository = repository_of(ctx, row, &config).await?;
        let version =
            butler_repository::Version::parse(&from, "the version before").map_err(|e| e.to_string())?;
        let fetched = super::fetch::release(&repository, version).await?;
        let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: ProviderUpgrade::api_version(&()).into(),
            kind: ProviderUpgrade::kind(&()).into(),
            name: upgrade.name_any(),
            uid: upgrade.uid().unwrap_or_default(),
            ..Default::default()
        };
        let key = super::vocabulary::ProviderKey::new(row.provider_kind, &row.namespace, &row.name);
        super::keep::keep(&ctx.client, &key, &fetched, owner).await.map(Some)
    };
    match kept.await {
        Ok(kept) => kept,
        Err(why) => {
            let note =
                format!("{kind} {name} {from} could not be kept for a roll-back without network: {why}");
            tracing::warn!(upgrade = %upgrade.name_any(), "{note}");
            let event = kube::runtime::events::Event {
                type_: kube::runtime::events::EventType::Warning,
                reason: "ReleaseNotKept".into(),
                note: Some(note),
                action: "Upgrade".into(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&event, &upgrade.object_ref(&())).await {
                tracing::warn!(upgrade = %upgrade.name_any(), error = %e, "cannot publish an event");
            }
            None
        }
    }
}

/// What moving `row` from `from` to `to` does to its objects, both rendered as the operator
/// renders them.
async fn object_changes(
    ctx: &Context,
    row: &ProviderRow,
    repo: &Repository,
    from: Option<&str>,
    to: &str,
    config: &ClusterctlConfig,
) -> Result<ObjectChanges, String> {
    let before = match from {
        Some(from) => render(&ctx.client, row, repo, from, config).await?,
        None => Vec::new(),
    };
    let after = render(&ctx.client, row, repo, to, config).await?;
    Ok(counted(&diff(&before, &after), storage_changes(&before, &after)))
}

/// A provider's repository as the provider's own reconcile reaches it: its config Secret, the
/// operator's credentials only where the operator's policy lets them go.
async fn repository_of(
    ctx: &Context,
    row: &ProviderRow,
    config: &ClusterctlConfig,
) -> Result<Repository, String> {
    let base = super::fetch::operator_credentials_for(&row.spec, &ctx.remote, &ctx.policy.credential_hosts);
    let remote = super::config::load(&ctx.client, &ctx.secrets, &row.namespace, &row.spec, &base)
        .await
        .map_err(|e| e.0)?
        .remote;
    super::fetch::repository(
        &ctx.client,
        row.provider_kind,
        &row.namespace,
        &row.name,
        &row.spec,
        &remote,
        config,
        ctx.policy.local_root.as_deref(),
    )
}

/// Another upgrade of the namespace that is under way.
async fn another_running(ctx: &Context, namespace: &str, name: &str) -> Result<Option<String>, Error> {
    let api: Api<ProviderUpgrade> = Api::namespaced(ctx.client.clone(), namespace);
    let all =
        api.list(&Default::default()).await.map_err(|e| Error::kube("listing the ProviderUpgrades", e))?;
    Ok(all
        .items
        .into_iter()
        .filter(|u| u.name_any() != name)
        .find(|u| {
            let status = u.status.clone().unwrap_or_default();
            status.steps.iter().any(|s| s.state == StepState::Running)
                && !status.conditions.iter().any(|c| c.type_ == SUCCEEDED)
        })
        .map(|u| u.name_any()))
}

async fn patch_provider(
    ctx: &Context,
    kind: ProviderKind,
    namespace: &str,
    name: &str,
    body: serde_json::Value,
) -> Result<(), Error> {
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), namespace, &kind.api_resource());
    let params = PatchParams { field_manager: Some(crate::api::FIELD_MANAGER.into()), ..Default::default() };
    api.patch(name, &params, &Patch::Merge(body))
        .await
        .map(|_| ())
        .map_err(|e| Error::kube(format!("changing {} {namespace}/{name}", kind.kind()), e))
}

/// Writes the status, tested against the upgrade's UID (one made again under the name is
/// another upgrade).
async fn write(
    ctx: &Context,
    upgrade: &ProviderUpgrade,
    status: &ProviderUpgradeStatus,
) -> Result<(), Error> {
    if upgrade.status.as_ref() == Some(status) {
        return Ok(());
    }
    let api: Api<ProviderUpgrade> =
        Api::namespaced(ctx.client.clone(), &upgrade.namespace().unwrap_or_default());
    let mut ops: Vec<PatchOperation> = butler_runtime::precondition::same_uid(upgrade).into_iter().collect();
    ops.push(PatchOperation::Add(AddOperation {
        path: PointerBuf::parse("/status").expect("a valid JSON pointer"),
        value: serde_json::to_value(status).expect("a status serializes"),
    }));
    api.patch_status(&upgrade.name_any(), &PatchParams::default(), &Patch::<()>::Json(json_patch::Patch(ops)))
        .await
        .map(|_| ())
        .map_err(|e| Error::kube(format!("writing the status of ProviderUpgrade {}", upgrade.name_any()), e))
}

/// How long ago an RFC 3339 time was.
fn since(time: &str) -> Option<Duration> {
    let then: k8s_openapi::jiff::Timestamp = time.parse().ok()?;
    let elapsed = k8s_openapi::jiff::Timestamp::now().duration_since(then);
    Duration::try_from(elapsed).ok()
}

/// A Go duration (`10m`, `1h30m`, `90s`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let parsed: kube::core::Duration = text.parse().map_err(|e| format!("{text}: {e}"))?;
    Ok(parsed.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::UpgradePolicy;
    use crate::cli::apply::Move;

    #[test]
    fn a_plan_that_moves_a_pinned_provider_is_refused_naming_it() {
        let mut aws = ProviderRow::sample(ProviderKind::Infrastructure, "aws", "v2.5.0", Vec::new());
        aws.version = Some("v2.5.0".into());
        aws.spec.upgrade_policy = Some(UpgradePolicy { follow: Follow::Pin, ..Default::default() });
        let core = ProviderRow::sample(ProviderKind::Core, "butler", "v0.1.0", Vec::new());
        let step = |kind, name: &str, from: &str, to: &str| Move {
            kind,
            namespace: "butler-system".into(),
            name: name.into(),
            from: Some(from.into()),
            to: to.into(),
        };
        let rows = [core, aws];
        let moving = [
            step(ProviderKind::Core, "butler", "v0.1.0", "v0.2.0"),
            step(ProviderKind::Infrastructure, "aws", "v2.5.0", "v2.6.0"),
        ];
        assert_eq!(
            pinned(&rows, &moving).unwrap_err(),
            "InfrastructureProvider aws is pinned at v2.5.0 (spec.upgradePolicy.follow: Pin): change its policy to move it"
        );
        let staying = [
            step(ProviderKind::Core, "butler", "v0.1.0", "v0.2.0"),
            step(ProviderKind::Infrastructure, "aws", "v2.5.0", "v2.5.0"),
        ];
        assert_eq!(pinned(&rows, &staying), Ok(()));
    }
}
