//! The ProviderConfig controller (spec/000, and spec/002 "Pool Capacity Estimation"): observe
//! the credentials Secret, the platform (probed at most once a minute) and the pools; plan the
//! status ([`plan`]); write it when it changed. Deletion waits while TenantClusters use it.

pub mod credentials;
pub mod plan;
pub mod probe;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use butler_core::api::labels::PROVIDER_CONFIG_FINALIZER;
use butler_core::api::{NetworkPool, ProviderConfig, ProviderConfigStatus};
use butler_runtime::conditions::{self, READY, Wanted};
use butler_runtime::error::not_found_ok;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::{Context, ProbeRecord};
use crate::error::Error;
use probe::{MIN_INTERVAL, Probed};

/// Every input is watched; this is only a safety net.
const RESYNC: Duration = Duration::from_secs(3600);

/// Reconciles one ProviderConfig.
pub async fn reconcile(config: Arc<ProviderConfig>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.scope.holds(&config.namespace().unwrap_or_default()) {
        return Ok(Action::await_change());
    }
    ctx.synced().await;
    let key = crate::keys::failure_key(config.as_ref());
    let config_object = config.clone();
    let started = ctx.metrics.reconcile_started("ProviderConfig");
    let result = async {
        let api: Api<ProviderConfig> =
            Api::namespaced(ctx.client.clone(), &config.namespace().unwrap_or_default());
        if config.meta().deletion_timestamp.is_some() {
            return delete(&config, &ctx, &api).await;
        }
        // No finalizer (issue 39.8): one would hold a namespace Terminating while the
        // controller is down. Admission refuses the deletion of one in use; the finalizer an
        // earlier version added goes.
        if butler_runtime::finalizer::has(config.as_ref(), PROVIDER_CONFIG_FINALIZER) {
            butler_runtime::finalizer::remove(&api, config.as_ref(), PROVIDER_CONFIG_FINALIZER)
                .await
                .map_err(|e| Error::kube(format!("removing the finalizer of {key}"), e))?;
        }
        reconcile_live(&config, &ctx, &api).await
    }
    .await;
    ctx.finished(config_object.as_ref(), started, &result);
    result
}

async fn reconcile_live(
    config: &ProviderConfig,
    ctx: &Context,
    api: &Api<ProviderConfig>,
) -> Result<Action, Error> {
    let namespace = config.namespace().unwrap_or_default();
    let uid = config.meta().uid.clone().unwrap_or_default();
    // Observe: the Secret, read by name at each reconcile (the controller may not watch
    // Secrets: the requeue below re-reads it).
    let reference = &config.spec.credentials_ref;
    let team_scoped =
        config.spec.scope.as_ref().and_then(|s| s.type_) == Some(butler_core::api::ScopeType::Team);
    let namespace_object = ctx.teams.namespaces.get(&ObjectRef::new(&namespace));
    let in_team_namespace =
        crate::team::plan::may_be_teams(&namespace, namespace_object.as_ref().map(|ns| ns.labels()));
    let secret_namespace = credentials::secret_namespace(
        &namespace,
        reference.namespace.as_deref(),
        team_scoped,
        in_team_namespace,
    );
    let what = format!(
        "the Secret {}/{} of spec.credentialsRef",
        secret_namespace.as_deref().unwrap_or(&namespace),
        reference.name
    );
    let (checked, secret_version) = match &secret_namespace {
        Err(refused) => (Err(refused.clone()), None),
        Ok(ns) => {
            match not_found_ok(Api::<Secret>::namespaced(ctx.client.clone(), ns).get(&reference.name).await) {
                Ok(Some(secret)) => {
                    let data: BTreeMap<String, Vec<u8>> =
                        secret.data.unwrap_or_default().into_iter().map(|(k, v)| (k, v.0)).collect();
                    let checked =
                        credentials::validate(config.spec.provider, &data, reference.key.as_deref())
                            .map_err(|why| format!("{what}: {why}"));
                    (checked, secret.metadata.resource_version)
                }
                Ok(None) => (
                    Err(format!(
                        "{what} does not exist; create it with the keys {} needs",
                        config.spec.provider
                    )),
                    None,
                ),
                Err(e) => {
                    (Err(format!("cannot read {what}: {}", ctx.secret_reader.cannot_read(ns, &e))), None)
                }
            }
        }
    };
    // The platform, when its probe is due.
    let now = jiff::Timestamp::now();
    let mut probed_now = false;
    if let Some(mut target) = checked.as_ref().ok().and_then(|c| probe::target(&config.spec, c)) {
        // A team chose this endpoint: it reaches no local address outside the allowed networks.
        if in_team_namespace {
            target.policy = Some(ctx.probe_network.clone());
        }
        let due = ctx.probes.lock().expect("not poisoned").get(&uid).is_none_or(|r| r.due(now));
        let recent = config
            .status
            .as_ref()
            .and_then(|s| s.last_probe_time.as_ref())
            .is_some_and(|t| now.duration_since(t.0).unsigned_abs() < MIN_INTERVAL);
        let known = ctx.probes.lock().expect("not poisoned").contains_key(&uid);
        // After a restart, a probe of less than a minute ago stands.
        if due && (known || !recent) {
            let result = probe::probe(&target).await;
            let mut probes = ctx.probes.lock().expect("not poisoned");
            let failures = match (&result, probes.get(&uid)) {
                (Probed::Reachable { .. }, _) => 0,
                (Probed::Unreachable(_), previous) => previous.map_or(0, |p| p.failures) + 1,
            };
            probes.insert(uid.clone(), ProbeRecord { at: now, failures, result });
            probed_now = true;
        }
    }
    let record = ctx.probes.lock().expect("not poisoned").get(&uid).cloned();
    let restored = match (&record, config.status.as_ref()) {
        (None, Some(status)) if status.last_probe_time.is_some() => Some(match status.ready {
            Some(true) => Probed::Reachable { version: status.provider_version.clone() },
            _ => Probed::Unreachable("not answering at the last probe".into()),
        }),
        _ => None,
    };
    let pools: Vec<(String, Option<Arc<NetworkPool>>)> = config
        .spec
        .network
        .iter()
        .flat_map(|n| n.pool_refs.iter().flatten())
        .map(|r| (r.name.clone(), ctx.pools.get(&ObjectRef::new(&r.name).within(&namespace))))
        .collect();

    // Plan.
    let plan = plan::plan(&plan::Observed {
        config,
        credentials: checked.as_ref().map(|_| ()).map_err(String::clone),
        probe: record.as_ref().map(|r| &r.result).or(restored.as_ref()),
        pools: pools.iter().map(|(n, p)| (n.clone(), p.as_deref())).collect(),
    });

    // Status: lastValidationTime moves when the credentials were checked anew (a new version
    // of the Secret, or valid again), lastProbeTime when a probe ran.
    let newly_validated = plan.validated && {
        let mut seen = ctx.validated_secrets.lock().expect("not poisoned");
        let previous = seen.insert(uid.clone(), secret_version.clone().unwrap_or_default());
        let was_validated = config.status.as_ref().and_then(|s| s.validated) == Some(true);
        previous.is_some_and(|p| Some(p) != secret_version) || !was_validated
    };
    if !plan.validated {
        ctx.validated_secrets.lock().expect("not poisoned").remove(&uid);
    }
    let events: Vec<(EventType, &str, String)> = plan
        .conditions
        .iter()
        .filter(|c| c.type_ == READY && !c.status)
        .map(|c| (EventType::Warning, "NotReady", c.message.clone()))
        .collect();
    write_status(
        ctx,
        config,
        api,
        &plan.conditions,
        |existing, conditions| {
            plan::status(
                &plan,
                existing,
                conditions,
                config.meta().generation,
                newly_validated.then_some(Time(now)),
                probed_now.then_some(Time(now)),
            )
        },
        events,
    )
    .await?;
    let probe_next = record.map(|r| r.next_in(now)).unwrap_or(RESYNC).min(RESYNC);
    let failing_since = (!plan.validated).then(|| failing_since(config)).flatten();
    let next = probe_next.min(plan::recheck_credentials_after(plan.validated, failing_since, now));
    Ok(Action::requeue(next.max(Duration::from_secs(1))))
}

/// Since when the credentials have been refused, as the status says.
fn failing_since(config: &ProviderConfig) -> Option<jiff::Timestamp> {
    let conditions = &config.status.as_ref()?.conditions;
    let validated = conditions.iter().find(|c| c.type_ == plan::VALIDATED && c.status == "False")?;
    Some(validated.last_transition_time.0)
}

/// Writes the status when it differs, with `wanted` conditions merged into what it has, and
/// publishes the events if it did.
async fn write_status(
    ctx: &Context,
    config: &ProviderConfig,
    api: &Api<ProviderConfig>,
    wanted: &[Wanted],
    build: impl FnOnce(
        &ProviderConfigStatus,
        Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    ) -> ProviderConfigStatus,
    events: Vec<(EventType, &str, String)>,
) -> Result<(), Error> {
    let uid = config.meta().uid.clone().unwrap_or_default();
    let written = ctx.config_statuses.lock().expect("not poisoned").get(&uid).cloned();
    let existing = written.or_else(|| config.status.clone()).unwrap_or_default();
    let now = Time(jiff::Timestamp::now());
    let merged = conditions::merge(&existing.conditions, wanted, config.meta().generation, &now, plan::ORDER);
    let status = build(&existing, merged);
    if status == existing {
        return Ok(());
    }
    let name = config.name_any();
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
        .await
        .map_err(|e| {
            Error::kube(
                format!(
                    "writing the status of ProviderConfig {}/{name}",
                    config.namespace().unwrap_or_default()
                ),
                e,
            )
        })?;
    let reason =
        |s: &ProviderConfigStatus| s.conditions.iter().find(|c| c.type_ == READY).map(|c| c.reason.clone());
    let ready_changed = reason(&existing) != reason(&status);
    ctx.config_statuses.lock().expect("not poisoned").insert(uid, status);
    if ready_changed {
        for (type_, reason, note) in events {
            let event = Event {
                type_,
                reason: reason.into(),
                note: Some(note),
                action: "Reconcile".into(),
                secondary: None,
            };
            if let Err(e) = ctx.recorder.publish(&event, &config.object_ref(&())).await {
                tracing::warn!(providerconfig = %name, error = %e, "cannot publish an event");
            }
        }
    }
    Ok(())
}

/// The deletion of a ProviderConfig that still carries an earlier version's finalizer: held
/// while TenantClusters reference it, as that version held it, then the finalizer goes.
async fn delete(config: &ProviderConfig, ctx: &Context, api: &Api<ProviderConfig>) -> Result<Action, Error> {
    if !butler_runtime::finalizer::has(config, PROVIDER_CONFIG_FINALIZER) {
        return Ok(Action::await_change());
    }
    let clusters = ctx.teams.clusters.using(&config.namespace().unwrap_or_default(), &config.name_any());
    let users = plan::users(config, clusters.iter().map(Arc::as_ref));
    if !users.is_empty() {
        let message = format!(
            "deletion waits: TenantClusters use this ProviderConfig: {}; delete them or point them at another ProviderConfig",
            users.join(", ")
        );
        let wanted = [Wanted::new(READY, false, "DeletionBlocked", message.clone())];
        let events = vec![(EventType::Warning, "DeletionBlocked", message)];
        write_status(
            ctx,
            config,
            api,
            &wanted,
            |existing, conditions| ProviderConfigStatus {
                conditions,
                ready: Some(false),
                ..existing.clone()
            },
            events,
        )
        .await?;
        // The TenantClusters' watch wakes it when one goes.
        return Ok(Action::requeue(RESYNC));
    }
    butler_runtime::finalizer::remove(api, config, PROVIDER_CONFIG_FINALIZER).await.map_err(|e| {
        Error::kube(format!("removing the finalizer of ProviderConfig {}", config.name_any()), e)
    })?;
    ctx.forget(&crate::keys::Gone::of(config));
    Ok(Action::await_change())
}
