//! Upgrade policies at work: on a provider's resync, at most once per check interval (at once
//! after its spec changed), the operator looks in the provider's repository for a newer release
//! its policy follows and makes the ProviderUpgrade that moves it there; events on the provider
//! say what was found and why it waits. The repository is read through the HTTP cache, so a
//! check of a repository that did not change downloads nothing.

use std::time::Instant;

use butler_repository::{ClusterctlConfig, Version};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event, EventType};
use serde_json::json;

use super::follow::{candidates, suits};
use super::window::{State, Window};
use crate::api::{Approval, Follow, ProviderKind, ProviderUpgrade};
use crate::controller::ProviderObject;
use crate::controller::context::Context;
use crate::controller::install::preflight::core_of;
use crate::upgrade::providers::ProviderRow;

/// The label on a ProviderUpgrade a policy made: the provider's label (`infrastructure-aws`).
pub const MADE_FOR: &str = "operator.butlerlabs.dev/upgrade-policy-of";
/// Event reasons of upgrade policies, on the provider.
pub const FOUND: &str = "UpgradeFound";
pub const WAITING: &str = "UpgradeWaiting";
pub const IGNORED: &str = "UpgradePolicyIgnored";
pub const CHECK_FAILED: &str = "UpgradeCheckFailed";
/// A tag pushed before its release has no metadata yet: the newest few candidates are read.
const CANDIDATES: usize = 3;

/// What a check concluded, for the provider's event.
#[derive(Debug, Clone, PartialEq)]
enum Found {
    Nothing,
    Made { name: String, note: String },
    Waits(String),
    Ignored(String),
}

/// Checks `object`'s upgrade policy if it is due, the provider being at `installed` of
/// `contract` as the reconcile just wrote; never fails the reconcile (a failure is a Warning
/// event and a log line, and the next check tries again).
pub async fn check<K: ProviderObject>(
    ctx: &Context,
    object: &K,
    installed: Option<&str>,
    contract: Option<&str>,
    config: &ClusterctlConfig,
) {
    let spec = object.provider_spec();
    let Some(policy) = spec.upgrade_policy.as_ref().filter(|p| p.follow != Follow::Pin) else { return };
    let mut row = ProviderRow::of(object);
    row.installed_version = installed.map(String::from);
    row.contract = contract.map(String::from);
    // Not at its spec.version yet: an install or an upgrade is under way, the check waits.
    let at_version = row.version.as_deref().zip(installed).is_some_and(|(wanted, installed)| {
        Version::parse(wanted, "spec.version").ok() == Version::parse(installed, "status").ok()
    });
    if !at_version {
        return;
    }
    let uid = object.uid().unwrap_or_default();
    let generation = object.meta().generation;
    {
        let mut checks = ctx.upgrade_checks.lock().expect("not poisoned");
        if let Some((seen, at)) = checks.get(&uid)
            && *seen == generation
            && at.elapsed() < ctx.upgrade_check_interval
        {
            return;
        }
        checks.insert(uid, (generation, Instant::now()));
    }
    // Pins hold the files of one release: no other could install.
    let pinned = row.spec.fetch_config.as_ref().is_some_and(|f| f.sha256.is_some());
    let found = match pinned {
        true => Ok(Found::Ignored(
            "spec.fetchConfig.sha256 pins the files of one release, so the releases spec.upgradePolicy finds cannot install: remove the pins or the policy"
                .into(),
        )),
        false => match ctx.within_fetch_deadline(look(ctx, &row, policy.follow, config)).await {
            Ok(Some((version, contract))) => make(ctx, object, &row, policy, &version, contract).await,
            Ok(None) => Ok(Found::Nothing),
            Err(why) => Err(why),
        },
    };
    let (type_, reason, note) = match found {
        Ok(Found::Nothing) => return,
        Ok(Found::Made { note, .. }) => (EventType::Normal, FOUND, note),
        Ok(Found::Waits(note)) => (EventType::Normal, WAITING, note),
        Ok(Found::Ignored(note)) => (EventType::Warning, IGNORED, note),
        Err(why) => (EventType::Warning, CHECK_FAILED, format!("checking spec.upgradePolicy: {why}")),
    };
    tracing::info!(provider = %row.label(), namespace = %row.namespace, reason, "{note}");
    let event = Event {
        type_,
        reason: reason.into(),
        note: Some(note),
        action: "CheckUpgrades".into(),
        secondary: None,
    };
    if let Err(e) = ctx.recorder.publish(&event, &object.object_ref(&())).await {
        tracing::warn!(provider = %row.label(), error = %e, "cannot publish an event");
    }
}

/// The newest release the policy follows, with its contract when it crosses to another;
/// `None` when nothing newer suits.
async fn look(
    ctx: &Context,
    row: &ProviderRow,
    follow: Follow,
    config: &ClusterctlConfig,
) -> Result<Option<(Version, Option<String>)>, String> {
    let (Some(installed), Some(current)) = (row.installed_version.as_deref(), row.contract.as_deref()) else {
        return Ok(None);
    };
    let installed = Version::parse(installed, "status.installedVersion").map_err(|e| e.to_string())?;
    let repository = super::planning::repository_of(ctx, row, config).await?;
    let versions = repository.versions().await.map_err(|e| e.to_string())?;
    let is_core = row.provider_kind == ProviderKind::Core;
    let views = ctx.views();
    let core = core_of(&views).and_then(|c| c.contract.clone());
    for candidate in candidates(follow, &installed, &versions).into_iter().take(CANDIDATES) {
        let contract = match repository.contract_of(&candidate).await {
            Ok(contract) => contract,
            Err(butler_repository::RepositoryError::NotFound { .. }) => continue,
            Err(e) => return Err(e.to_string()),
        };
        if suits(follow, is_core, current, core.as_deref(), &contract) {
            let across = (contract != current).then_some(contract);
            return Ok(Some((candidate, across)));
        }
    }
    Ok(None)
}

/// Makes the ProviderUpgrade to `version` (by contract when it crosses to another), unless one
/// this policy made is still to finish, or the one to this version exists already.
async fn make<K: ProviderObject>(
    ctx: &Context,
    object: &K,
    row: &ProviderRow,
    policy: &crate::api::UpgradePolicy,
    version: &Version,
    across: Option<String>,
) -> Result<Found, String> {
    let label = row.label();
    let name = format!("{label}-{version}");
    let api: Api<ProviderUpgrade> = Api::namespaced(ctx.client.clone(), &row.namespace);
    let made = api
        .list(&ListParams::default().labels(&format!("{MADE_FOR}={label}")))
        .await
        .map_err(|e| format!("listing the ProviderUpgrades: {}", butler_runtime::error::describe(&e)))?;
    if let Some(same) = made.items.iter().find(|u| u.name_any() == name) {
        return Ok(match super::finished(same) {
            Some(false) => Found::Ignored(format!(
                "{version} is the newest release spec.upgradePolicy follows, but ProviderUpgrade {name} failed: delete it to try again"
            )),
            _ => Found::Nothing,
        });
    }
    if let Some(open) = made.items.iter().find(|u| super::finished(u).is_none()) {
        return Ok(Found::Waits(format!(
            "{version} found; it is proposed once ProviderUpgrade {} has finished",
            open.name_any()
        )));
    }
    let approval = policy.approval.unwrap_or_default();
    let target = match &across {
        Some(contract) => json!({"contract": contract}),
        None => json!({"providers": [{"kind": row.kind, "name": row.name, "version": version.to_string()}]}),
    };
    let mut spec = json!({"approval": approval});
    spec.as_object_mut().expect("an object").extend(target.as_object().expect("an object").clone());
    if let Some(window) = &policy.maintenance_window {
        spec["maintenanceWindow"] = serde_json::to_value(window).expect("a window serializes");
    }
    let upgrade: ProviderUpgrade = serde_json::from_value(json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1",
        "kind": "ProviderUpgrade",
        "metadata": {
            "name": name,
            "namespace": row.namespace,
            "labels": {MADE_FOR: label},
            // Gone with its provider. No blockOwnerDeletion: that would need rights on the
            // provider's finalizers that the upgrade does not need.
            "ownerReferences": [{
                "apiVersion": K::api_version(&()),
                "kind": K::kind(&()),
                "name": row.name,
                "uid": object.uid(),
                "controller": true,
            }],
        },
        "spec": spec,
    }))
    .map_err(|e| format!("the ProviderUpgrade {name}: {e}"))?;
    match api.create(&PostParams::default(), &upgrade).await {
        Ok(_) => {}
        // Made meanwhile (by another replica, or before a restart): nothing more to say.
        Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Found::Nothing),
        Err(e) => {
            return Err(format!("making ProviderUpgrade {name}: {}", butler_runtime::error::describe(&e)));
        }
    }
    let what = match &across {
        Some(contract) => {
            format!("{version}, of contract {contract}: every provider of the namespace moves with it")
        }
        None => version.to_string(),
    };
    let waits = match approval {
        Approval::Manual => format!("it waits for approval (butlerctl upgrade approve {name})"),
        Approval::Automatic => "approved by the policy".into(),
    };
    let window = match &policy.maintenance_window {
        None => String::new(),
        Some(w) => match Window::read(w, "spec.upgradePolicy.maintenanceWindow")
            .and_then(|w| w.at(jiff::Timestamp::now()))
        {
            Ok(State::Open(closes)) => format!("; the maintenance window is open until {closes}"),
            Ok(State::Closed(opens)) => format!("; it starts in the maintenance window opening at {opens}"),
            Err(why) => format!("; it cannot start: {why}"),
        },
    };
    let note = format!(
        "{what} found (spec.upgradePolicy.follow: {:?}): ProviderUpgrade {name} made; {waits}{window}",
        policy.follow
    );
    Ok(Found::Made { name, note })
}
