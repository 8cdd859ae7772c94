//! Writing a provider's status and its events, in one place; both only when something changed.
//! A reconcile that stops short ([`Stop`]) is written here too, and its reason says how it
//! comes back.

use std::time::Duration;

use butler_runtime::conditions::{self, Wanted};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::Event;
use serde_json::json;

use crate::api::ProviderStatus;
use crate::controller::ProviderObject;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::report::reason::{ORDER, Reason, Retry, Stop};
use crate::controller::vocabulary::{ProviderKey, ProviderView, uid_of};

/// How often a provider is looked at again with nothing changing: every input is watched, so
/// this is only a safety net (and it notices new ConfigMap versions of an empty spec.version).
/// The default of `--sync-period`.
pub const RESYNC: Duration = Duration::from_secs(600);

/// The status a reconcile arrived at.
pub struct Outcome {
    pub contract: Option<String>,
    pub installed_version: Option<String>,
    pub conditions: Vec<Wanted>,
    /// Events to publish if the status changed.
    pub events: Vec<(Reason, String)>,
}

/// The whole status, written only to `object`: not to one made again under its name since
/// (a reconcile of a deleted provider that ends after the name was taken again would give the
/// new provider the old one's installed version).
fn status_patch<K: ProviderObject>(object: &K, status: &ProviderStatus) -> Patch<()> {
    let write = json_patch::PatchOperation::Add(json_patch::AddOperation {
        path: json_patch::jsonptr::PointerBuf::parse("/status").expect("a valid JSON pointer"),
        value: json!(status),
    });
    let operations = butler_runtime::precondition::same_uid(object).into_iter().chain([write]).collect();
    Patch::Json(json_patch::Patch(operations))
}

/// Whether the object's status was written by someone else after this process's last write
/// (which left the resourceVersion `ours`): it says otherwise, and it is newer. A cached object
/// older than that write has simply not seen it yet. resourceVersions are etcd's revisions,
/// which grow; one that is not a number counts as newer, costing at most a write that changes
/// nothing.
fn overwritten(
    live: Option<&ProviderStatus>,
    wanted: &ProviderStatus,
    version: Option<&str>,
    ours: Option<&str>,
) -> bool {
    if live == Some(wanted) {
        return false;
    }
    match (version.and_then(|v| v.parse::<u64>().ok()), ours.and_then(|v| v.parse::<u64>().ok())) {
        (Some(live), Some(ours)) => live > ours,
        _ => true,
    }
}

/// Writes the status when it differs from what the object has, then publishes the events and
/// wakes the other providers, whose checks may depend on this one. Returns whether it wrote.
pub async fn write<K>(ctx: &Context, object: &K, outcome: Outcome) -> Result<bool, Error>
where
    K: ProviderObject,
{
    let key = ProviderKey::of(object);
    let uid = uid_of(object);
    // What this process wrote last is newer than the cache, which may not have seen it yet.
    let written = ctx.statuses.lock().expect("not poisoned").get(&uid).cloned();
    let existing = written.or_else(|| object.provider_status().cloned()).unwrap_or_default();
    let generation = object.meta().generation;
    let now = Time(jiff::Timestamp::now());
    let status = ProviderStatus {
        contract: outcome.contract,
        installed_version: outcome.installed_version,
        conditions: conditions::merge(&existing.conditions, &outcome.conditions, generation, &now, ORDER),
        observed_generation: generation,
    };
    ctx.metrics.provider_installed(&key, status.installed_version.as_deref().zip(status.contract.as_deref()));
    // Skipped when nothing changed, unless someone else wrote the status since this process
    // did: then it is written again.
    let ours = ctx.status_versions.lock().expect("not poisoned").get(&uid).cloned();
    if status == existing
        && !overwritten(
            object.provider_status(),
            &status,
            object.meta().resource_version.as_deref(),
            ours.as_deref(),
        )
    {
        return Ok(false);
    }
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &key.namespace);
    let written = api
        .patch_status(&key.name, &PatchParams::default(), &status_patch(object, &status))
        .await
        .map_err(|source| Error::kube(format!("writing the status of {key}"), source))?;
    if let Some(version) = written.meta().resource_version.clone() {
        ctx.status_versions.lock().expect("not poisoned").insert(uid.clone(), version);
    }
    ctx.statuses.lock().expect("not poisoned").insert(uid, status);
    let reference = object.object_ref(&());
    for (reason, note) in outcome.events {
        let Some(type_) = reason.event() else { continue };
        // kube's recorder counts an event again (a series) when its type, reason and action
        // repeat, keeping the first note: an action per note keeps "upgraded from v1.10.9 to
        // v1.10.10" apart from an earlier "upgraded from v1.10.10 to v1.10.9".
        let event = Event {
            type_,
            reason: reason.as_str().into(),
            action: event_action(&note),
            note: Some(note),
            secondary: None,
        };
        // An event that cannot be written must not fail the reconcile that already happened.
        if let Err(e) = ctx.recorder.publish(&event, &reference).await {
            tracing::warn!(provider = %object.name_any(), error = %e, "cannot publish an event");
        }
    }
    ctx.trigger_others(&key);
    Ok(true)
}

/// The action of an event with `note`: the note itself, within the 128 characters an event's
/// action may hold.
fn event_action(note: &str) -> String {
    note.chars().take(128).collect()
}

/// Writes a reconcile that stopped at `stop`: its condition (`kept` says whether what is
/// installed stays, so `ProviderInstalled` stays True, reason Installed) and Ready False for the same reason, with
/// `also` (how earlier steps went, so that a condition of an earlier reconcile does not stay),
/// keeping the installed version. Then comes back as the reason says.
pub async fn stopped<K>(
    ctx: &Context,
    object: &K,
    me: &ProviderView,
    stop: Stop,
    kept: bool,
    also: Option<Wanted>,
) -> Result<Action, Error>
where
    K: ProviderObject,
{
    let Stop { reason, message } = stop;
    // What is installed stays (a release that cannot be fetched): its condition stays True for
    // what it is, Installed, never True with the failure's reason.
    let own = match (kept, me.installed_version.as_deref()) {
        (true, Some(version)) => {
            Reason::Installed.wanted(true, format!("{version} is installed and stays; {message}"))
        }
        _ => reason.wanted(false, message.clone()),
    };
    let mut wanted = vec![own, reason.not_ready(message.clone())];
    wanted.extend(also);
    let outcome = Outcome {
        contract: me.contract.clone(),
        installed_version: me.installed_version.clone(),
        conditions: wanted,
        events: vec![(reason, message.clone())],
    };
    write(ctx, object, outcome).await?;
    match reason.retry() {
        Retry::OnChange => Ok(Action::requeue(ctx.sync_period)),
        Retry::After(delay) => Ok(Action::requeue(delay)),
        Retry::Backoff if reason == Reason::FetchFailed => Err(Error::Fetch(message)),
        Retry::Backoff => Err(Error::Apply(message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::InfrastructureProvider;

    #[test]
    fn two_moves_are_two_events_and_a_repeat_is_a_series() {
        let back = event_action("upgraded from v1.10.10 to v1.10.9");
        let forth = event_action("upgraded from v1.10.9 to v1.10.10");
        assert_ne!(back, forth, "kube's recorder would merge them into one series");
        assert_eq!(forth, event_action("upgraded from v1.10.9 to v1.10.10"));
        assert_eq!(event_action(&"x".repeat(300)).len(), 128);
    }

    #[test]
    fn a_status_is_written_again_only_when_someone_wrote_it_after_us() {
        let ours = ProviderStatus { installed_version: Some("v1.0.0".into()), ..Default::default() };
        let other = ProviderStatus { installed_version: Some("v9.9.9".into()), ..Default::default() };
        assert!(!overwritten(Some(&ours), &ours, Some("7"), Some("5")), "the object holds it");
        assert!(!overwritten(Some(&other), &ours, Some("4"), Some("5")), "a cache older than our write");
        assert!(overwritten(Some(&other), &ours, Some("6"), Some("5")), "written by someone else since");
        assert!(overwritten(Some(&other), &ours, Some("x"), Some("5")), "unknown order: write again");
    }

    #[test]
    fn the_status_goes_to_the_object_read_and_no_other_of_its_name() {
        let mut object = InfrastructureProvider::new("widget", Default::default());
        object.metadata.uid = Some("uid-1".into());
        let status = ProviderStatus { installed_version: Some("v1.1.0".into()), ..Default::default() };
        let Patch::Json(patch) = status_patch(&object, &status) else { panic!("a JSON patch") };
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([
                {"op": "test", "path": "/metadata/uid", "value": "uid-1"},
                {"op": "add", "path": "/status", "value": {"installedVersion": "v1.1.0"}},
            ])
        );
    }
}
