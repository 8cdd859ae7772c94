//! Planning a ProviderUpgrade: the moves (from the providers' repositories, as the providers'
//! own reconciles reach them), the contracts, what each move does to the objects, and the
//! steps; a roll-back's plan is its original's reversed ([`super::rollback`]).

use butler_repository::{ClusterctlConfig, Repository};
use butler_runtime::conditions::{Wanted, merge};
use kube::Resource;

use super::{ORDER, PLANNED, engine, now, rollback};
use crate::api::{
    Follow, KindNames, ObjectChanges, PlannedMove, ProviderKind, ProviderUpgrade, ProviderUpgradeStatus,
};
use crate::controller::context::Context;
use crate::upgrade::changes::{counted, diff, render, storage_changes};
use crate::upgrade::moves::{Move, Repositories, Wanted as Target, moves, target_contract};
use crate::upgrade::providers::ProviderRow;

/// The plan: the moves (the core provider first), the contracts, the steps.
pub(super) async fn plan(
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
    if change {
        let namespace = kube::ResourceExt::namespace(upgrade).unwrap_or_default();
        elsewhere(&namespace, &ctx.views())?;
    }
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

/// Refuses, before anything is paused, a contract move that could not finish: it pauses every
/// provider the operator honours, and this upgrade sees (and unpauses) those of its own
/// namespace only.
fn elsewhere(namespace: &str, all: &[crate::controller::vocabulary::ProviderView]) -> Result<(), String> {
    let others: Vec<String> = all
        .iter()
        .filter(|v| !v.deleting && v.installed() && !v.paused && !v.held && v.key.namespace != namespace)
        .map(|v| v.describe())
        .collect();
    match others.is_empty() {
        true => Ok(()),
        false => Err(format!(
            "a contract move pauses every provider the operator honours, and {} run in other namespaces, which this ProviderUpgrade neither pauses nor moves: nothing was paused. Pause those first (spec.paused: true; this upgrade then moves its own namespace and leaves them to you to move and unpause), or keep the providers whose contract moves together in one namespace",
            others.join(", ")
        )),
    }
}

/// Refuses a plan that moves a pinned provider (`spec.upgradePolicy.follow: Pin`); a roll-back
/// moves it back all the same.
fn pinned(rows: &[ProviderRow], planned: &[Move]) -> Result<(), String> {
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

pub(super) fn operator_config(ctx: &Context) -> Result<ClusterctlConfig, String> {
    match &ctx.config_path {
        Some(path) => {
            ClusterctlConfig::load(Some(path)).map_err(|e| format!("the operator's config file: {e}"))
        }
        None => Ok(ClusterctlConfig::default()),
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
pub(super) async fn repository_of(
    ctx: &Context,
    row: &ProviderRow,
    config: &ClusterctlConfig,
) -> Result<Repository, String> {
    let base = crate::controller::wanted::fetch::operator_credentials_for(
        &row.spec,
        &crate::controller::wanted::fetch::operator_remote(&ctx.remote, config),
        &ctx.policy.credential_hosts,
    );
    let remote =
        crate::controller::wanted::config::load(&ctx.client, &ctx.secrets, &row.namespace, &row.spec, &base)
            .await
            .map_err(|e| e.0)?
            .remote;
    crate::controller::wanted::fetch::repository(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::UpgradePolicy;

    #[test]
    fn a_contract_move_with_providers_in_other_namespaces_is_refused_before_any_pause() {
        use crate::controller::vocabulary::ProviderView;
        let view =
            |namespace: &str, name: &str| ProviderView::sample(ProviderKind::Infrastructure, namespace, name);
        assert!(elsewhere("capi-system", &[view("capi-system", "docker")]).is_ok());
        let mut paused = view("capd-system", "aws");
        paused.paused = true;
        assert!(elsewhere("capi-system", &[view("capi-system", "docker"), paused]).is_ok(), "paused by hand");
        let refused = elsewhere("capi-system", &[view("capi-system", "docker"), view("capd-system", "aws")])
            .unwrap_err();
        assert!(refused.contains("capd-system") && refused.contains("nothing was paused"), "{refused}");
    }

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
