//! The ProviderUpgrade controller: plans an upgrade into its status before anything changes,
//! waits for approval, then runs its steps ([`engine`]) one at a time, each recorded with its
//! times and result. Everything it goes on is in the cluster (the steps in the upgrade's
//! status, the providers' specs and status), so an operator killed at any point carries on.
//! One upgrade runs at a time in a namespace.

pub mod engine;
pub mod follow;
pub mod found;
mod kept;
mod planning;
pub mod progress;
pub mod rollback;
pub mod window;

use std::sync::Arc;
use std::time::Duration;

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
use crate::api::{Approval, KindNames, ProviderKind, ProviderUpgrade, ProviderUpgradeStatus, StepState};
use crate::upgrade::providers::{self, ProviderRow};

const PLANNED: &str = "Planned";
const APPROVED: &str = "Approved";
const PROGRESSING: &str = "Progressing";
const SUCCEEDED: &str = "Succeeded";
const ORDER: [&str; 4] = [PLANNED, APPROVED, PROGRESSING, SUCCEEDED];
/// How long a step may take unless the spec says.
const STEP_TIMEOUT: Duration = Duration::from_secs(600);
/// Held by an upgrade while it has providers paused: deleted then, it unpauses them first.
pub const FINALIZER: &str = "operator.butlerlabs.dev/upgrade";

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Reconciles one ProviderUpgrade.
pub async fn reconcile(upgrade: Arc<ProviderUpgrade>, ctx: Arc<Context>) -> Result<Action, Error> {
    let namespace = upgrade.namespace().unwrap_or_default();
    let name = upgrade.name_any();
    let mut status = upgrade.status.clone().unwrap_or_default();
    let generation = upgrade.meta().generation;
    // An upgrade changes provider objects with the operator's rights: only where provider
    // objects are honoured, or whoever may write an upgrade could change providers they may not.
    // One elsewhere is another operator's or no one's: it is not even written to.
    if ctx.honours(&namespace).is_err() {
        return Ok(Action::await_change());
    }
    let deleted = upgrade.meta().deletion_timestamp.is_some();
    if deleted || finished(&upgrade).is_some() {
        if butler_runtime::finalizer::has(&*upgrade, FINALIZER) {
            // Deleted while it held providers paused: what it paused runs again (an upgrade
            // that ended has released them already).
            if deleted {
                for change in engine::release(&name, &list(&ctx, &namespace).await?) {
                    patch_provider(&ctx, change.kind, &namespace, &change.name, change.patch).await?;
                }
            }
            let api: Api<ProviderUpgrade> = Api::namespaced(ctx.client.clone(), &namespace);
            butler_runtime::finalizer::remove(&api, &upgrade, FINALIZER)
                .await
                .map_err(|e| Error::kube(format!("releasing ProviderUpgrade {name}"), e))?;
        }
        return Ok(Action::await_change());
    }
    let started = status.steps.iter().any(|s| s.state != StepState::Pending);
    if !started && (status.steps.is_empty() || status.observed_generation != generation) {
        let rows = list(&ctx, &namespace).await?;
        match ctx.within_fetch_deadline(planning::plan(&ctx, &upgrade, &rows)).await {
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
    // at the window (an upgrade that started runs to its end). A new plan starts nothing.
    if !started && let Some((wanted, action)) = outside_window(&upgrade) {
        status.conditions = merge(&status.conditions, &[wanted], generation, &now(), &ORDER);
        write(&ctx, &upgrade, &status).await?;
        return Ok(action);
    }
    if !started && let Some(other) = another_running(&ctx, &namespace, &name).await? {
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
    let timeout = upgrade
        .spec
        .step_timeout
        .as_deref()
        .and_then(|t| window::parse_duration(t).ok())
        .unwrap_or(STEP_TIMEOUT);
    let running = status.steps.iter().find(|s| s.state == StepState::Running);
    let elapsed = running.and_then(|s| s.started.as_deref()).and_then(since);
    let stamp = || now().0.to_string();
    let (action, progressing) =
        match engine::next(&name, &status.plan, &status.steps, &rows, elapsed, timeout) {
            Next::Start(index, changes) => {
                // Before it pauses anything: deleted meanwhile, it unpauses what it paused.
                if status.steps[index].action == crate::api::StepAction::Pause
                    && !butler_runtime::finalizer::has(&*upgrade, FINALIZER)
                {
                    let api: Api<ProviderUpgrade> = Api::namespaced(ctx.client.clone(), &namespace);
                    butler_runtime::finalizer::add(&api, &upgrade, FINALIZER)
                        .await
                        .map_err(|e| Error::kube(format!("marking ProviderUpgrade {name}"), e))?;
                }
                status.steps[index].kept = kept::keep_before(&ctx, &upgrade, &status, index, &rows).await;
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
                    .map(|c| match c.patch["spec"]["version"].as_str() {
                        Some(version) => format!("{} {} rolled back to {version}", c.kind.kind(), c.name),
                        None => format!("{} {} unpaused", c.kind.kind(), c.name),
                    })
                    .collect();
                for change in rollback {
                    patch_provider(&ctx, change.kind, &namespace, &change.name, change.patch).await?;
                }
                let why = match rolled_back.is_empty() {
                    true => why,
                    false => {
                        format!("{why}; {} (CRDs stay as a newer version left them)", rolled_back.join(", "))
                    }
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
