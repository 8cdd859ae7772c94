//! The steps of an upgrade and what comes next, decided from the steps recorded so far and the
//! provider objects as they are: no I/O, so every decision is tested without a cluster. A step
//! starts by changing provider objects (patches that can be sent twice), then waits until they
//! show it done, so that an operator killed anywhere starts the same step again, or finds it
//! done.

use serde_json::{Value, json};

use crate::api::{PlannedMove, ProviderKind, StepAction, StepState, UpgradeStep};
use crate::upgrade::moves::{condition_true, installed, refusal};
use crate::upgrade::providers::ProviderRow;

/// The annotation on a provider that an upgrade paused: its value names the upgrade, which
/// alone unpauses it.
pub const PAUSED_BY: &str = "operator.butlerlabs.dev/paused-by-upgrade";
/// The annotation on a provider that a failed upgrade rolled back: the version it goes back to,
/// the one downgrade the operator then allows.
pub const ROLLBACK_TO: &str = "operator.butlerlabs.dev/rollback-to";

/// The steps of a plan, in the contract's order: with a contract change every provider is
/// paused first and unpaused after; the core provider moves before the others; last, every
/// running provider must be Ready.
pub fn steps(plan: &[PlannedMove], contract_change: bool, downgrade: bool) -> Vec<UpgradeStep> {
    let step = |name: String, action: StepAction| UpgradeStep { name, action, ..Default::default() };
    let mut steps = Vec::new();
    if contract_change {
        steps.push(step("Pause every provider".into(), StepAction::Pause));
    }
    let mut ordered: Vec<&PlannedMove> = plan.iter().collect();
    ordered.sort_by_key(|m| m.kind != "CoreProvider");
    for m in ordered {
        steps.push(UpgradeStep {
            kind: Some(m.kind.clone()),
            provider: Some(m.name.clone()),
            version: Some(m.to.clone()),
            downgrade: downgrade.then_some(true),
            ..step(format!("Upgrade {} {} to {}", m.kind, m.name, m.to), StepAction::Upgrade)
        });
    }
    if contract_change {
        steps.push(step("Unpause the providers this upgrade paused".into(), StepAction::Unpause));
    }
    steps.push(step("Every provider Ready".into(), StepAction::Ready));
    steps
}

/// A change to one provider object: a merge patch of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub kind: ProviderKind,
    pub name: String,
    pub patch: Value,
}

/// What to do next.
#[derive(Debug, Clone, PartialEq)]
pub enum Next {
    /// Make these changes, then record step `index` running.
    Start(usize, Vec<Change>),
    /// Step `index` is done.
    Finish(usize),
    /// Step `index` failed, for this reason; these changes roll its provider back.
    Fail(usize, String, Vec<Change>),
    /// Step `index` runs; look again soon. The message says what it waits for.
    Wait(usize, String),
    /// Every step succeeded.
    Done,
    /// A step failed before: nothing more runs.
    Stopped,
}

fn row_of<'a>(rows: &'a [ProviderRow], kind: &str, name: &str) -> Option<&'a ProviderRow> {
    rows.iter().find(|r| r.kind == kind && r.name == name)
}

/// The next move of the upgrade `upgrade`, whose steps are `steps`, with the providers `rows`;
/// `elapsed` is how long the running step has run, `timeout` how long it may.
pub fn next(
    upgrade: &str,
    plan: &[PlannedMove],
    steps: &[UpgradeStep],
    rows: &[ProviderRow],
    elapsed: Option<std::time::Duration>,
    timeout: std::time::Duration,
) -> Next {
    if steps.iter().any(|s| s.state == StepState::Failed) {
        return Next::Stopped;
    }
    let Some((index, step)) = steps.iter().enumerate().find(|(_, s)| s.state != StepState::Succeeded) else {
        return Next::Done;
    };
    if step.state == StepState::Pending {
        return Next::Start(index, changes(upgrade, step, rows));
    }
    // Running: done, refused, out of time, or still waiting.
    match progress(upgrade, step, rows) {
        Ok(()) => Next::Finish(index),
        // A failed step puts its provider back and unpauses what this upgrade paused: nothing
        // is left held at 0 by an upgrade that stopped.
        Err(Waiting::Refused(why)) => Next::Fail(
            index,
            why,
            [rollback(step, rows, plan_from(step, plan)), release(upgrade, rows)].concat(),
        ),
        Err(Waiting::For(what)) if elapsed.is_some_and(|e| e > timeout) => Next::Fail(
            index,
            format!("not done within {}s: still waiting for {what}", timeout.as_secs()),
            [rollback(step, rows, plan_from(step, plan)), release(upgrade, rows)].concat(),
        ),
        Err(Waiting::For(what)) => Next::Wait(index, what),
    }
}

/// The version an `Upgrade` step's provider had when the plan was made.
fn plan_from<'a>(step: &UpgradeStep, plan: &'a [PlannedMove]) -> Option<&'a str> {
    let (kind, name) = (step.kind.as_deref()?, step.provider.as_deref()?);
    plan.iter().find(|m| m.kind == kind && m.name == name)?.from.as_deref()
}

/// The changes that put a failed `Upgrade` step's provider back at its version before, the one
/// downgrade its annotation allows.
fn rollback(step: &UpgradeStep, rows: &[ProviderRow], from: Option<&str>) -> Vec<Change> {
    let (Some(from), StepAction::Upgrade) = (from, step.action) else { return Vec::new() };
    let target = step.kind.as_deref().zip(step.provider.as_deref()).and_then(|(k, n)| row_of(rows, k, n));
    target
        .map(|r| Change { kind: r.provider_kind, name: r.name.clone(), patch: back_to(from, step) })
        .into_iter()
        .collect()
}

/// The patch that moves a provider back to `version`: the one downgrade its annotation allows,
/// from the release the step kept when it is that version (else from the repository).
fn back_to(version: &str, step: &UpgradeStep) -> Value {
    let kept = step.kept.as_ref().filter(|k| k.version == version).map(|k| k.sha256.clone());
    json!({
        "metadata": {"annotations": {ROLLBACK_TO: version, crate::controller::wanted::keep::ROLLBACK_SHA256: kept}},
        "spec": {"version": version},
    })
}

/// The provider objects a step changes as it starts.
fn changes(upgrade: &str, step: &UpgradeStep, rows: &[ProviderRow]) -> Vec<Change> {
    let change =
        |row: &ProviderRow, patch: Value| Change { kind: row.provider_kind, name: row.name.clone(), patch };
    match step.action {
        // Those running now are paused, marked as this upgrade's to unpause.
        StepAction::Pause => rows
            .iter()
            .filter(|r| !r.paused)
            .map(|r| {
                change(
                    r,
                    json!({"metadata": {"annotations": {PAUSED_BY: upgrade}}, "spec": {"paused": true}}),
                )
            })
            .collect(),
        StepAction::Upgrade => {
            let target =
                step.kind.as_deref().zip(step.provider.as_deref()).and_then(|(k, n)| row_of(rows, k, n));
            let version = step.version.clone().unwrap_or_default();
            // A roll-back names the version it may go back to, the one downgrade allowed.
            let patch = match step.downgrade {
                Some(true) => back_to(&version, step),
                _ => json!({"spec": {"version": version}}),
            };
            target.map(|r| change(r, patch)).into_iter().collect()
        }
        StepAction::Unpause => release(upgrade, rows),
        StepAction::Ready => Vec::new(),
    }
}

/// Unpauses the providers `upgrade` paused (and only those).
pub fn release(upgrade: &str, rows: &[ProviderRow]) -> Vec<Change> {
    rows.iter()
        .filter(|r| paused_by(r) == Some(upgrade))
        .map(|r| Change {
            kind: r.provider_kind,
            name: r.name.clone(),
            patch: json!({"metadata": {"annotations": {PAUSED_BY: null}}, "spec": {"paused": false}}),
        })
        .collect()
}

fn paused_by(row: &ProviderRow) -> Option<&str> {
    row.annotations.get(PAUSED_BY).map(String::as_str)
}

enum Waiting {
    For(String),
    Refused(String),
}

/// Whether a running step is done; else what it waits for, or the operator's refusal.
fn progress(upgrade: &str, step: &UpgradeStep, rows: &[ProviderRow]) -> Result<(), Waiting> {
    let describe = |r: &ProviderRow| format!("{} {}", r.kind, r.name);
    // Only a status that describes the current spec counts.
    let unseen: Vec<String> = rows.iter().filter(|r| !r.observed).map(describe).collect();
    match step.action {
        StepAction::Pause => {
            let running: Vec<String> =
                rows.iter().filter(|r| !condition_true(r, "Paused")).map(describe).collect();
            match running.is_empty() {
                true => Ok(()),
                false => Err(Waiting::For(format!("held at 0 replicas: {}", running.join(", ")))),
            }
        }
        StepAction::Upgrade => {
            let (kind, name) =
                (step.kind.as_deref().unwrap_or_default(), step.provider.as_deref().unwrap_or_default());
            let version = step.version.as_deref().unwrap_or_default();
            let Some(row) = row_of(rows, kind, name) else {
                return Err(Waiting::Refused(format!("{kind} {name} is gone")));
            };
            if !row.observed {
                return Err(Waiting::For(format!("the operator to see {kind} {name} at {version}")));
            }
            // Installed, and Ready unless it is held paused (across contracts).
            let ready = row.paused || (condition_true(row, "Ready") && !condition_true(row, "Paused"));
            if installed(row, version) && ready {
                return Ok(());
            }
            match refusal(row) {
                Some(why) => Err(Waiting::Refused(format!("the operator refused: {why}"))),
                None if installed(row, version) => {
                    Err(Waiting::For(format!("{kind} {name} Ready at {version}")))
                }
                None => Err(Waiting::For(format!("{kind} {name} installed at {version}"))),
            }
        }
        StepAction::Unpause => {
            let still: Vec<String> =
                rows.iter().filter(|r| paused_by(r) == Some(upgrade)).map(describe).collect();
            match still.is_empty() {
                true => Ok(()),
                false => Err(Waiting::For(format!("unpaused: {}", still.join(", ")))),
            }
        }
        StepAction::Ready => {
            if !unseen.is_empty() {
                return Err(Waiting::For(format!("the operator to see {}", unseen.join(", "))));
            }
            if let Some(why) = rows.iter().find_map(refusal) {
                return Err(Waiting::Refused(format!("the operator refused: {why}")));
            }
            let waiting: Vec<String> = rows
                .iter()
                .filter(|r| !r.paused && (!condition_true(r, "Ready") || condition_true(r, "Paused")))
                .map(describe)
                .collect();
            match waiting.is_empty() {
                true => Ok(()),
                false => Err(Waiting::For(format!("Ready: {}", waiting.join(", ")))),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::KeptRelease;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: String::new(),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn row(kind: ProviderKind, name: &str, installed: &str, conditions: Vec<Condition>) -> ProviderRow {
        ProviderRow::sample(kind, name, installed, conditions)
    }

    fn plan() -> Vec<PlannedMove> {
        vec![
            PlannedMove {
                kind: "InfrastructureProvider".into(),
                name: "widget".into(),
                from: Some("v1.0.0".into()),
                to: "v2.0.0".into(),
                objects: None,
            },
            PlannedMove {
                kind: "CoreProvider".into(),
                name: "butler".into(),
                from: Some("v1.0.0".into()),
                to: "v2.0.0".into(),
                objects: None,
            },
        ]
    }

    #[test]
    fn a_contract_change_pauses_first_moves_the_core_first_and_unpauses_last() {
        let names: Vec<String> = steps(&plan(), true, false).into_iter().map(|s| s.name).collect();
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
        let within: Vec<StepAction> = steps(&plan(), false, false).into_iter().map(|s| s.action).collect();
        assert_eq!(within, [StepAction::Upgrade, StepAction::Upgrade, StepAction::Ready]);
    }

    #[test]
    fn a_step_that_fails_unpauses_what_the_upgrade_paused_and_nothing_else() {
        let timeout = std::time::Duration::from_secs(1);
        let mut steps = steps(&plan(), true, false);
        let mut rows = vec![
            row(ProviderKind::Core, "butler", "v1.0.0", vec![condition("Ready", "True", "Ready")]),
            row(ProviderKind::Infrastructure, "widget", "v1.0.0", vec![condition("Ready", "True", "Ready")]),
        ];
        // The core provider was paused by this upgrade; the widget by someone else, by hand.
        rows[0].paused = true;
        rows[0].annotations.insert(PAUSED_BY.into(), "u1".into());
        rows[1].paused = true;
        steps[0].state = StepState::Running;
        // The pause never completes (a provider it cannot see keeps running): out of time.
        let long = Some(std::time::Duration::from_secs(5));
        let Next::Fail(0, why, changes) = next("u1", &plan(), &steps, &rows, long, timeout) else { panic!() };
        assert!(why.contains("not done within"), "{why}");
        let released: Vec<&str> = changes.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(released, ["butler"], "only what this upgrade paused is unpaused");
        assert_eq!(changes[0].patch["spec"]["paused"], false);
        assert!(changes[0].patch["metadata"]["annotations"][PAUSED_BY].is_null());
    }

    #[test]
    fn steps_start_with_their_changes_wait_and_finish_from_what_the_providers_show() {
        let timeout = std::time::Duration::from_secs(600);
        let mut steps = steps(&plan(), true, false);
        let mut rows = vec![
            row(ProviderKind::Core, "butler", "v1.0.0", vec![condition("Ready", "True", "Ready")]),
            row(ProviderKind::Infrastructure, "widget", "v1.0.0", vec![condition("Ready", "True", "Ready")]),
        ];
        // The pause marks both providers as this upgrade's.
        let Next::Start(0, changes) = next("u1", &plan(), &steps, &rows, None, timeout) else { panic!() };
        assert_eq!(changes.len(), 2);
        assert_eq!(changes[0].patch["metadata"]["annotations"][PAUSED_BY], "u1");
        steps[0].state = StepState::Running;
        assert!(matches!(next("u1", &plan(), &steps, &rows, None, timeout), Next::Wait(0, _)));
        for r in rows.iter_mut() {
            r.paused = true;
            r.annotations.insert(PAUSED_BY.into(), "u1".into());
            r.conditions.push(condition("Paused", "True", "Paused"));
        }
        assert_eq!(next("u1", &plan(), &steps, &rows, None, timeout), Next::Finish(0));
        steps[0].state = StepState::Succeeded;
        // The core provider moves; a refusal fails the step; time running out does too.
        let Next::Start(1, changes) = next("u1", &plan(), &steps, &rows, None, timeout) else { panic!() };
        assert_eq!(
            changes,
            [Change {
                kind: ProviderKind::Core,
                name: "butler".into(),
                patch: json!({"spec": {"version": "v2.0.0"}})
            }]
        );
        steps[1].state = StepState::Running;
        let late = Some(std::time::Duration::from_secs(601));
        let Next::Fail(1, why, rollback) = next("u1", &plan(), &steps, &rows, late, timeout) else {
            panic!()
        };
        assert!(why.contains("CoreProvider butler installed at v2.0.0"), "{why}");
        // The provider goes back to its version before, the one downgrade its annotation allows
        // (from the release the step kept, when it kept one).
        let sha = "operator.butlerlabs.dev/rollback-sha256";
        assert_eq!(
            rollback[0],
            Change {
                kind: ProviderKind::Core,
                name: "butler".into(),
                patch: json!({"metadata": {"annotations": {ROLLBACK_TO: "v1.0.0", sha: null}}, "spec": {"version": "v1.0.0"}}),
            }
        );
        // Then what the upgrade paused runs again, at the versions before.
        let unpaused: Vec<&str> = rollback[1..].iter().map(|c| c.name.as_str()).collect();
        assert_eq!(unpaused, ["butler", "widget"]);
        assert!(rollback[1..].iter().all(|c| c.patch["spec"]["paused"] == false));
        steps[1].kept = Some(KeptRelease {
            config_map: "kept-butler-v1.0.0".into(),
            version: "v1.0.0".into(),
            sha256: "ab".into(),
        });
        let Next::Fail(1, _, rollback) = next("u1", &plan(), &steps, &rows, late, timeout) else { panic!() };
        assert_eq!(rollback[0].patch["metadata"]["annotations"][sha], "ab");
        rows[0].conditions.push(condition("ProviderUpgraded", "False", "ContractChangeNeedsPause"));
        assert!(
            matches!(next("u1", &plan(), &steps, &rows, None, timeout), Next::Fail(1, why, _) if why.contains("ContractChangeNeedsPause"))
        );
        rows[0].conditions.retain(|c| c.type_ != "ProviderUpgraded");
        rows[0].installed_version = Some("v2.0.0".into());
        rows[0].conditions.push(condition("ProviderInstalled", "True", "Installed"));
        assert_eq!(next("u1", &plan(), &steps, &rows, None, timeout), Next::Finish(1));
        // Only what this upgrade paused is unpaused.
        steps[1].state = StepState::Succeeded;
        steps[2].state = StepState::Succeeded;
        rows[1].annotations.insert(PAUSED_BY.into(), "someone-else".into());
        let Next::Start(3, changes) = next("u1", &plan(), &steps, &rows, None, timeout) else { panic!() };
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].name, "butler");
        steps[3].state = StepState::Failed;
        assert_eq!(next("u1", &plan(), &steps, &rows, None, timeout), Next::Stopped);
    }
}
