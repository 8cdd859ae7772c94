//! The plan of a roll-back (`spec.rollbackOf`): the upgrade it rolls back, reversed. Nothing is
//! read from a repository: the versions, contracts and object changes are the original's, and
//! each provider goes back from the release the original kept, so a roll-back plans and runs
//! without network.

use kube::api::Api;

use super::engine;
use crate::api::{
    KindNames, ObjectChanges, PlannedMove, ProviderKind, ProviderUpgrade, ProviderUpgradeStatus,
};
use crate::controller::context::Context;
use crate::upgrade::providers::ProviderRow;

/// The moves, contracts and steps of `upgrade`, which rolls back `original` (in the same
/// namespace).
pub async fn plan(
    ctx: &Context,
    upgrade: &ProviderUpgrade,
    original: &str,
    rows: &[ProviderRow],
) -> Result<ProviderUpgradeStatus, String> {
    let namespace = kube::ResourceExt::namespace(upgrade).unwrap_or_default();
    let api: Api<ProviderUpgrade> = Api::namespaced(ctx.client.clone(), &namespace);
    let read = api.get_opt(original).await.map_err(|e| {
        format!(
            "spec.rollbackOf: reading ProviderUpgrade {original}: {}",
            butler_runtime::error::describe(&e)
        )
    })?;
    let original_status = read
        .ok_or_else(|| format!("spec.rollbackOf: no ProviderUpgrade {original} in {namespace} to roll back"))?
        .status
        .unwrap_or_default();
    reversed(upgrade, &original_status, rows)
}

/// The original's moves of the providers `upgrade` names, reversed, in the contract's order.
pub fn reversed(
    upgrade: &ProviderUpgrade,
    original: &ProviderUpgradeStatus,
    rows: &[ProviderRow],
) -> Result<ProviderUpgradeStatus, String> {
    let core = rows
        .iter()
        .find(|r| r.provider_kind == ProviderKind::Core)
        .ok_or("no CoreProvider in this namespace")?;
    let mut plan = Vec::new();
    for target in upgrade.spec.providers.iter().flatten() {
        let row = rows
            .iter()
            .find(|r| r.kind == target.kind && r.name == target.name)
            .ok_or_else(|| format!("spec.providers: no {} {} in this namespace", target.kind, target.name))?;
        if row.installed_version.as_deref() == Some(target.version.as_str()) {
            continue;
        }
        let before = original.plan.iter().find(|m| m.kind == target.kind && m.name == target.name);
        plan.push(PlannedMove {
            kind: target.kind.clone(),
            name: target.name.clone(),
            from: row.installed_version.clone(),
            to: target.version.clone(),
            objects: before.and_then(|m| m.objects.as_ref()).map(undone),
        });
    }
    let core_moves = plan.iter().any(|m| m.kind == ProviderKind::Core.kind());
    let to_contract = match core_moves {
        true => original.from_contract.clone().or(core.contract.clone()),
        false => core.contract.clone(),
    };
    let change = to_contract != core.contract;
    let mut steps = engine::steps(&plan, change, true);
    // Each provider goes back from the release the original kept of it.
    for step in &mut steps {
        step.kept = original
            .steps
            .iter()
            .filter(|s| s.kind == step.kind && s.provider == step.provider)
            .find_map(|s| s.kept.clone().filter(|k| Some(&k.version) == step.version.as_ref()));
    }
    Ok(ProviderUpgradeStatus {
        from_contract: core.contract.clone(),
        to_contract,
        plan,
        steps,
        ..Default::default()
    })
}

/// A move's object changes undone: what it added goes, what it removed comes back; its CRDs
/// stay as it left them.
fn undone(changes: &ObjectChanges) -> ObjectChanges {
    ObjectChanges {
        added: changes.removed.clone(),
        changed: changes.changed.clone(),
        removed: changes.added.clone(),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{KeptRelease, StepAction, UpgradeStep, UpgradeTarget};

    #[test]
    fn a_roll_back_reverses_the_original_and_goes_back_from_what_it_kept() {
        let kept = KeptRelease {
            config_map: "kept-infrastructure-aws-v2.5.0".into(),
            version: "v2.5.0".into(),
            sha256: "ab".into(),
        };
        let original = ProviderUpgradeStatus {
            from_contract: Some("v1beta1".into()),
            to_contract: Some("v1beta1".into()),
            plan: vec![PlannedMove {
                kind: "InfrastructureProvider".into(),
                name: "aws".into(),
                from: Some("v2.5.0".into()),
                to: "v2.6.0".into(),
                objects: Some(ObjectChanges {
                    added: [("ConfigMap".to_string(), 1)].into(),
                    changed: [("Deployment".to_string(), 1)].into(),
                    kept_crds: vec!["old.x.io".into()],
                    ..Default::default()
                }),
            }],
            steps: vec![UpgradeStep {
                action: StepAction::Upgrade,
                kind: Some("InfrastructureProvider".into()),
                provider: Some("aws".into()),
                version: Some("v2.6.0".into()),
                kept: Some(kept.clone()),
                ..Default::default()
            }],
            ..Default::default()
        };
        let mut upgrade = ProviderUpgrade::new("u-rollback", Default::default());
        upgrade.spec.providers = Some(vec![UpgradeTarget {
            kind: "InfrastructureProvider".into(),
            name: "aws".into(),
            version: "v2.5.0".into(),
        }]);
        let rows = [
            ProviderRow::sample(ProviderKind::Core, "butler", "v0.1.0", vec![]),
            ProviderRow::sample(ProviderKind::Infrastructure, "aws", "v2.6.0", vec![]),
        ];
        let back = reversed(&upgrade, &original, &rows).unwrap();
        assert_eq!(back.plan[0].from.as_deref(), Some("v2.6.0"));
        let objects = back.plan[0].objects.clone().unwrap();
        assert_eq!(objects.removed.get("ConfigMap"), Some(&1));
        assert!(objects.added.is_empty() && objects.kept_crds.is_empty());
        assert_eq!(back.steps[0].kept, Some(kept));
        assert_eq!(back.steps[0].downgrade, Some(true));
        assert_eq!(back.steps.len(), 2, "the move, then every provider Ready: {:?}", back.steps);
    }
}
