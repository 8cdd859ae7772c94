//! The reconcile of a provider that is not being deleted: observe, preflight, plan, apply,
//! status. Only observe and apply do I/O; a step that stops the reconcile says why with a
//! [`Stop`], which [`status::stopped`] writes.

use std::sync::Arc;

use butler_runtime::conditions::Wanted;
use butler_runtime::objects::ObjectRef;
use kube::runtime::controller::Action;

use super::applying::apply;
use super::observe::{Unobserved, fetch_release, observe, operator_config};
use crate::api::ProviderSpec;
use crate::controller::ProviderObject;
use crate::controller::context::{Context, view_of};
use crate::controller::error::Error;
use crate::controller::install::plan::{self, InstallInput};
use crate::controller::report::reason::{Reason, Stop};
use crate::controller::report::status::{self, Outcome};
use crate::controller::vocabulary::{Fetched, ProviderKey, ProviderView, uid_of};
use crate::controller::wanted::config::Redactor;
use crate::controller::wanted::fetch::{self};

/// Installs, upgrades, pauses or unpauses a provider.
pub async fn install<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error>
where
    K: ProviderObject,
{
    let object = object.as_ref();
    let key = ProviderKey::of(object);
    let uid = uid_of(object);
    let me = view_of(object, ctx.statuses.lock().expect("not poisoned").get(&uid));
    let all = ctx.views();
    let spec = object.provider_spec();

    // Observe what needs no fetching, then the checks that need nothing else.
    let operator_config = match operator_config(&ctx) {
        Ok(c) => c,
        Err(stop) => return status::stopped(&ctx, object, &me, stop, false, None).await,
    };
    if let Err(stop) =
        super::preflight::preflight(&me, spec, &all, fetch::known(&operator_config, key.kind, &key.name))
    {
        return status::stopped(&ctx, object, &me, stop, false, None).await;
    }
    let passed = Reason::Passed.wanted(true, "the preflight checks passed");

    // Observe the rest: the config Secret, the release, the inventory and the Deployments.
    let annotation = |name: &str| object.meta().annotations.as_ref().and_then(|a| a.get(name)).cloned();
    // A roll-back names the release an upgrade kept: that one needs no network.
    let kept = annotation(crate::controller::upgrades::engine::ROLLBACK_TO)
        .zip(annotation(crate::controller::wanted::keep::ROLLBACK_SHA256));
    let observed = match observe(&ctx, &key, &me, &all, spec, &operator_config, kept.as_ref()).await {
        Ok(o) => o,
        Err(Unobserved::Failed(e)) => return Err(e),
        Err(Unobserved::Stop(stop, redactor)) => {
            let stop = Stop { message: redactor.redact(&stop.message), ..stop };
            let kept = stop.reason == Reason::FetchFailed && me.installed();
            let also = (stop.reason == Reason::FetchFailed).then_some(passed);
            return status::stopped(&ctx, object, &me, stop, kept, also).await;
        }
    };
    // Servers and renderers quote what they reject: every message from here on is redacted.
    let redactor = Redactor::new(&observed.values.variables, &operator_config.variables);

    // The ceiling of the release's roles, when the configuration names one: read live, since
    // the platform may widen it at any time.
    let ceiling = match ctx.policy.role_ceiling.as_deref() {
        None => None,
        Some(name) => {
            let roles: kube::Api<k8s_openapi::api::rbac::v1::ClusterRole> =
                kube::Api::all(ctx.client.clone());
            match roles.get_opt(name).await {
                Ok(Some(role)) => {
                    let rules = role.rules.unwrap_or_default();
                    Some(rules.iter().filter_map(|r| serde_json::to_value(r).ok()).collect::<Vec<_>>())
                }
                Ok(None) => {
                    let stop = Stop::new(
                        Reason::PolicyViolation,
                        format!(
                            "the ceiling ClusterRole {name} (--role-ceiling) does not exist, so no role of the release can be checked against it; create it, or start the operator without --role-ceiling"
                        ),
                    );
                    return status::stopped(&ctx, object, &me, stop, me.installed(), Some(passed)).await;
                }
                Err(e) => return Err(Error::kube(format!("reading the ceiling ClusterRole {name}"), e)),
            }
        }
    };

    // The release asked for, held only until it is planned: a pause plans the installed one
    // next, and an apply (most of a reconcile of a large release) needs neither text.
    let asked = observed.fetched;

    // Plan. The config Secret first, then the operator's config file (only what it names for
    // this provider); never the operator's own environment.
    let label = key.kind.label(&key.name);
    let from_config =
        crate::controller::wanted::fetch::operator_variables_reach(spec, &ctx.policy.credential_hosts);
    let variables = |name: &str| {
        let configured = || from_config.then(|| operator_config.variable_for(&label, name)).flatten();
        observed.values.variables.get(name).or_else(configured).cloned()
    };
    let images =
        crate::controller::wanted::config::merged_images(&operator_config.images, &observed.values.images);
    let rollback_to = annotation(crate::controller::upgrades::engine::ROLLBACK_TO);
    let shadow =
        crate::controller::wanted::fetch::butler_name_shadows(key.kind, &key.name, spec, &operator_config);
    // The plan of a release for a spec: the one asked for, or the installed one to pause at.
    let plan_of = |me: &ProviderView,
                   all: &[ProviderView],
                   spec: &ProviderSpec,
                   fetched: &Fetched,
                   rollback_to: Option<&str>| {
        plan::plan_install(&InstallInput {
            me,
            spec,
            all,
            fetched,
            variables: &variables,
            inventory: observed.previous.as_ref(),
            live: &observed.live,
            images: &images,
            policy: &ctx.policy,
            ceiling: ceiling.as_deref(),
            additional: observed.additional.as_deref(),
            rollback_to,
            renders: &ctx.renders,
            shadow: shadow.as_deref(),
        })
    };
    let plan_with =
        |me: &ProviderView, all: &[ProviderView]| plan_of(me, all, spec, &asked, rollback_to.as_deref());
    // An unpause and a contract change depend on the other providers: they are decided again
    // at the one decision point, from the views as they are now, and the gate stays held
    // until the status is written.
    let decides = (me.held && !me.paused)
        || (me.installed() && me.contract.as_deref() != Some(asked.contract.as_str()));
    let (_gate, plan) = match decides {
        false => (None, plan_with(&me, &all)),
        true => {
            let gate = ctx.contract_gate.lock().await;
            let me = view_of(object, ctx.statuses.lock().expect("not poisoned").get(&uid));
            (Some(gate), plan_with(&me, &ctx.views()))
        }
    };
    drop(asked);
    // A pause is carried out whatever the version asks: refused a contract change until every
    // provider is paused, this provider pauses at the version it runs.
    let mut plan = match plan::pause_first(&plan, &me) {
        None => plan,
        Some(installed) => {
            let mut at = spec.clone();
            at.version = Some(installed.clone());
            let remote = &observed.values.remote;
            match fetch_release(&ctx, &key, &me, &all, &at, remote, &operator_config, None).await {
                Ok(fetched) => {
                    let mut paused = plan_of(&me, &all, &at, &fetched, None);
                    let refusals =
                        plan.conditions.iter().filter(|c| !c.status && c.type_ != Reason::Passed.condition());
                    paused.conditions.extend(refusals.cloned());
                    paused.events.extend(plan.events.iter().cloned());
                    paused
                }
                Err(message) => {
                    tracing::warn!(provider = %key, "cannot fetch the installed {installed} to pause at: {}", redactor.redact(&message));
                    plan
                }
            }
        }
    };
    if decides {
        drop(ctx.decided.read().await);
    }
    for warning in &plan.warnings {
        tracing::warn!(provider = %key, "{}", redactor.redact(warning));
    }

    // A repair of what someone else changed waits for no deletion: one under way that the
    // caches have not shown yet (the namespace's, or the provider's) is read live first.
    let repair = !plan.changed && plan.objects.iter().any(|o| ctx.drift.drifted(&ObjectRef::of(o)));
    if repair
        && let Some(why) = crate::controller::install::repair::deletion_under_way(&ctx, object, &key).await
    {
        tracing::info!(provider = %key, "not applying what drifted again: {why}");
        return Ok(Action::requeue(ctx.sync_period));
    }

    // Apply.
    let applied = match apply(&ctx, object, &key, &mut plan, observed.previous.as_ref()).await {
        Ok(applied) => applied,
        Err(message) if message.contains(crate::controller::install::repair::NAMESPACE_TERMINATING) => {
            // The namespace goes, and the provider with it: nothing to say on a status that
            // goes too.
            tracing::info!(provider = %key, "not applied: {message}");
            return Ok(Action::requeue(ctx.sync_period));
        }
        Err(message) => {
            let preflight = plan
                .conditions
                .iter()
                .find(|w| w.type_ == Reason::Passed.condition())
                .map(|w| Wanted { message: redactor.redact(&w.message), ..w.clone() });
            let message = crate::controller::install::forbidden::explained(&message);
            let stop = Stop::new(Reason::ApplyFailed, redactor.redact(&message));
            return status::stopped(&ctx, object, &me, stop, false, preflight).await;
        }
    };

    // Status. A Deployment this apply changed is judged as the API server answered the apply,
    // not as observed before it: else the old rollout would make the new version Ready.
    let mut live = observed.live.clone();
    for d in applied {
        live.retain(|l| (&l.namespace, &l.name) != (&d.namespace, &d.name));
        live.push(d);
    }
    let mut wanted = plan.conditions.clone();
    wanted.push(plan::readiness(&plan, &live));
    let outcome = Outcome {
        contract: plan.contract.clone(),
        installed_version: plan.installed_version.clone(),
        conditions: wanted
            .into_iter()
            .map(|w| Wanted { message: redactor.redact(&w.message), ..w })
            .collect(),
        events: plan.events.iter().map(|(reason, m)| (*reason, redactor.redact(m))).collect(),
    };
    let (installed, contract) = (outcome.installed_version.clone(), outcome.contract.clone());
    status::write(&ctx, object, outcome).await?;
    crate::controller::upgrades::found::check(
        &ctx,
        object,
        installed.as_deref(),
        contract.as_deref(),
        &operator_config,
    )
    .await;
    Ok(Action::requeue(ctx.sync_period))
}
