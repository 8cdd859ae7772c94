//! Keeping the release a provider runs before an upgrade step moves it (see
//! [`crate::controller::wanted::keep`]).

use kube::{Resource, ResourceExt};

use super::planning::{operator_config, repository_of};
use crate::api::{KeptRelease, ProviderUpgrade, ProviderUpgradeStatus, StepAction};
use crate::controller::context::Context;
use crate::upgrade::providers::ProviderRow;

/// Keeps the release an `Upgrade` step's provider runs before the step moves it, when it comes
/// from a remote repository (one in the cluster or compiled in needs no keeping); a release
/// that cannot be kept is said in an event, and a roll-back would read the repository.
pub(super) async fn keep_before(
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
        if crate::controller::wanted::fetch::remote_url(&row.spec, &config, row.provider_kind, &row.name)
            .is_none()
        {
            return Ok(None);
        }
        let repository = repository_of(ctx, row, &config).await?;
        let version =
            butler_repository::Version::parse(&from, "the version before").map_err(|e| e.to_string())?;
        let fetched = crate::controller::wanted::fetch::release(&repository, version).await?;
        let owner = k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: ProviderUpgrade::api_version(&()).into(),
            kind: ProviderUpgrade::kind(&()).into(),
            name: upgrade.name_any(),
            uid: upgrade.uid().unwrap_or_default(),
            ..Default::default()
        };
        let key =
            crate::controller::vocabulary::ProviderKey::new(row.provider_kind, &row.namespace, &row.name);
        crate::controller::wanted::keep::keep(&ctx.client, &key, &fetched, owner).await.map(Some)
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
