//! Writing a provider's status and its events; both only when something changed.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::events::{Event, EventType};
use serde_json::json;

use super::ProviderObject;
use super::conditions::{self, Wanted};
use super::context::{Context, key_of};
use super::error::Error;
use crate::api::{KindNames, ProviderStatus};

/// The status a reconcile arrived at.
pub struct Outcome {
    pub contract: Option<String>,
    pub installed_version: Option<String>,
    pub conditions: Vec<Wanted>,
    /// Events to publish if the status changed: (reason, message).
    pub events: Vec<(String, String)>,
}

/// Reasons that are a refusal or a failure, published as Warning events.
const WARNINGS: &[&str] = &[
    "DowngradeRefused",
    "ContractMismatch",
    "ContractChangeNeedsPause",
    "UnpauseRefused",
    "RenderFailed",
    "InvalidCustomization",
    "FetchFailed",
    "ApplyFailed",
    "DeletionBlocked",
    "DuplicateProvider",
    "InvalidFetchConfig",
    "UnknownProvider",
    "InvalidVersion",
    "ConfigSecretUnreadable",
];

/// Writes the status when it differs from what the object has, then publishes the events and
/// wakes the other providers, whose checks may depend on this one. Returns whether it wrote.
pub async fn write<K>(ctx: &Context, object: &K, outcome: Outcome) -> Result<bool, Error>
where
    K: ProviderObject,
{
    let key = key_of(object);
    // What this process wrote last is newer than the cache, which may not have seen it yet.
    let written = ctx.statuses.lock().expect("not poisoned").get(&key).cloned();
    let existing = written.or_else(|| object.provider_status().cloned()).unwrap_or_default();
    let generation = object.meta().generation;
    let now = Time(jiff::Timestamp::now());
    let status = ProviderStatus {
        contract: outcome.contract,
        installed_version: outcome.installed_version,
        conditions: conditions::merge(&existing.conditions, &outcome.conditions, generation, &now),
        observed_generation: generation,
    };
    ctx.metrics.provider_installed(
        K::KIND.kind(),
        &key.1,
        &key.2,
        status.installed_version.as_deref().zip(status.contract.as_deref()),
    );
    if status == existing {
        return Ok(false);
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &key.1);
    api.patch_status(&key.2, &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
        .await
        .map_err(|source| {
            Error::kube(format!("writing the status of {} {}/{}", K::KIND, key.1, key.2), source)
        })?;
    ctx.statuses.lock().expect("not poisoned").insert(key.clone(), status);
    let reference = object.object_ref(&());
    for (reason, note) in outcome.events {
        let type_ = if WARNINGS.contains(&reason.as_str()) { EventType::Warning } else { EventType::Normal };
        let event = Event { type_, reason, note: Some(note), action: "Reconcile".into(), secondary: None };
        // An event that cannot be written must not fail the reconcile that already happened.
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            tracing::warn!(provider = %object.name_any(), error = %e, "cannot publish an event");
        }
    }
    ctx.trigger_others(&key);
    Ok(true)
}
