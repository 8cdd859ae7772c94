//! The reconcile of a provider that is not being deleted: observe, preflight, plan, apply,
//! status. Only observe and apply do I/O; a step that stops the reconcile says why with a
//! [`Stop`], which [`status::stopped`] writes.

use std::sync::Arc;

use butler_repository::{ClusterctlConfig, RemoteOptions, Version};
use butler_runtime::apply::Made;
use butler_runtime::conditions::Wanted;
use butler_runtime::inventory::while_applying;
use butler_runtime::objects::{ObjectRef, defined_kind};
use kube::runtime::controller::Action;

use super::ProviderObject;
use super::adopt;
use super::config::{self, ConfigSecretValues, Redactor};
use super::context::{Context, view_of};
use super::error::Error;
use super::fetch::{self, Installed};
use super::inventory::{self, Inventory, inventory_of};
use super::plan::{self, InstallInput, InstallPlan, core_of};
use super::reason::{Reason, Stop};
use super::status::{self, Outcome};
use super::vocabulary::{Fetched, LiveDeployment, ProviderKey, ProviderView, uid_of};
use crate::api::ProviderSpec;

/// Why observing stopped: a reason for the status (with the redactor of what was read so far),
/// or a failure of the API server.
enum Unobserved {
    Stop(Stop, Redactor),
    Failed(Error),
}

/// What an install reads besides the provider objects.
struct Observed {
    values: ConfigSecretValues,
    /// The YAML of `spec.additionalManifests`.
    additional: Option<String>,
    fetched: Fetched,
    previous: Option<Inventory>,
    live: Vec<LiveDeployment>,
}

/// Releases kept in memory at the most (each a components file, often a megabyte).
const MOST_RELEASES: usize = 32;

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
    if let Err(stop) = plan::preflight(&me, spec, &all, fetch::known(&operator_config, key.kind, &key.name)) {
        return status::stopped(&ctx, object, &me, stop, false, None).await;
    }
    let passed = Reason::Passed.wanted(true, "the preflight checks passed");

    // Observe the rest: the config Secret, the release, the inventory and the Deployments.
    let annotation = |name: &str| object.meta().annotations.as_ref().and_then(|a| a.get(name)).cloned();
    // A roll-back names the release an upgrade kept: that one needs no network.
    let kept = annotation(super::upgrades::engine::ROLLBACK_TO).zip(annotation(super::keep::ROLLBACK_SHA256));
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

    // Plan. The config Secret first, then the operator's config file (only what it names for
    // this provider); never the operator's own environment.
    let label = key.kind.label(&key.name);
    let variables = |name: &str| {
        observed.values.variables.get(name).or_else(|| operator_config.variable_for(&label, name)).cloned()
    };
    let images = super::config::merged_images(&operator_config.images, &observed.values.images);
    let rollback_to = annotation(super::upgrades::engine::ROLLBACK_TO);
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
            additional: observed.additional.as_deref(),
            rollback_to,
            renders: &ctx.renders,
        })
    };
    let plan_with = |me: &ProviderView, all: &[ProviderView]| {
        plan_of(me, all, spec, &observed.fetched, rollback_to.as_deref())
    };
    // An unpause and a contract change depend on the other providers: they are decided again
    // at the one decision point, from the views as they are now, and the gate stays held
    // until the status is written.
    let decides = (me.held && !me.paused)
        || (me.installed() && me.contract.as_deref() != Some(observed.fetched.contract.as_str()));
    let (_gate, plan) = match decides {
        false => (None, plan_with(&me, &all)),
        true => {
            let gate = ctx.contract_gate.lock().await;
            let me = view_of(object, ctx.statuses.lock().expect("not poisoned").get(&uid));
            (Some(gate), plan_with(&me, &ctx.views()))
        }
    };
    // A pause is carried out whatever the version asks: refused a contract change until every
    // provider is paused, this provider pauses at the version it runs.
    let plan = match plan::pause_first(&plan, &me) {
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
    if repair && let Some(why) = super::repair::deletion_under_way(&ctx, object, &key).await {
        tracing::info!(provider = %key, "not applying what drifted again: {why}");
        return Ok(Action::requeue(ctx.sync_period));
    }

    // Apply.
    let applied = match apply(&ctx, object, &key, &plan, observed.previous.as_ref()).await {
        Ok(applied) => applied,
        Err(message) if message.contains(super::repair::NAMESPACE_TERMINATING) => {
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
            let message = super::forbidden::explained(&message);
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
    super::upgrades::found::check(&ctx, object, installed.as_deref(), contract.as_deref(), &operator_config)
        .await;
    Ok(Action::requeue(ctx.sync_period))
}

/// The operator's config file, read at every reconcile: a mounted ConfigMap that changes
/// takes effect without a restart.
fn operator_config(ctx: &Context) -> Result<ClusterctlConfig, Stop> {
    match &ctx.config_path {
        Some(path) => ClusterctlConfig::load(Some(path)).map_err(|e| {
            Stop::new(
                Reason::OperatorConfigUnreadable,
                format!("the operator's config file: {e}; fix it (--config), the provider waits"),
            )
        }),
        None => Ok(ClusterctlConfig::default()),
    }
}

/// Reads the config Secret, fetches the release, and reads the inventory and the Deployments.
/// A stop comes with the redactor of what was read so far.
async fn observe(
    ctx: &Context,
    key: &ProviderKey,
    me: &ProviderView,
    all: &[ProviderView],
    spec: &ProviderSpec,
    operator_config: &ClusterctlConfig,
    kept: Option<&(String, String)>,
) -> Result<Observed, Unobserved> {
    // The Secret's messages name keys, never values: nothing to redact yet.
    let values = config::load(
        &ctx.client,
        &ctx.secrets,
        &key.namespace,
        spec,
        &fetch::operator_credentials_for(spec, &ctx.remote, &ctx.policy.credential_hosts),
    )
    .await
    .map_err(|config::Unreadable(message)| {
        let nothing = Redactor::new(&Default::default(), &Default::default());
        Unobserved::Stop(Stop::new(Reason::ConfigSecretUnreadable, message), nothing)
    })?;
    let fetched = fetch_release(ctx, key, me, all, spec, &values.remote, operator_config, kept)
        .await
        .map_err(|message| {
            let stop =
                Stop::new(Reason::FetchFailed, format!("cannot fetch the provider's release: {message}"));
            Unobserved::Stop(stop, Redactor::new(&values.variables, &operator_config.variables))
        })?;
    let additional = additional_manifests(ctx, key, spec).await.map_err(|message| {
        let stop = Stop::new(Reason::RenderFailed, message);
        Unobserved::Stop(stop, Redactor::new(&values.variables, &operator_config.variables))
    })?;
    let previous = inventory_of(ctx, &me.uid).await.map_err(Unobserved::Failed)?;
    let live = ctx.live_deployments(key);
    Ok(Observed { values, additional, fetched, previous, live })
}

/// The `manifests` of the ConfigMap `spec.additionalManifests` names, which must be beside the
/// provider object (never read elsewhere).
async fn additional_manifests(
    ctx: &Context,
    key: &ProviderKey,
    spec: &ProviderSpec,
) -> Result<Option<String>, String> {
    let Some(reference) = &spec.additional_manifests else { return Ok(None) };
    if let Some(other) = reference.namespace.as_deref().filter(|n| !n.is_empty() && *n != key.namespace) {
        return Err(format!(
            "spec.additionalManifests.namespace {other:?} is not the provider's namespace {:?}; the ConfigMap must be beside the provider object: create it there and drop the namespace",
            key.namespace
        ));
    }
    let what = format!("the ConfigMap {}/{} of spec.additionalManifests", key.namespace, reference.name);
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(ctx.client.clone(), &key.namespace);
    let found = api
        .get_opt(&reference.name)
        .await
        .map_err(|e| format!("cannot read {what}: {}", butler_runtime::error::describe(&e)))?;
    let configmap = found
        .ok_or_else(|| format!("{what} does not exist; create it, or remove spec.additionalManifests"))?;
    let manifests = configmap.data.and_then(|mut d| d.remove("manifests"));
    manifests.map(Some).ok_or_else(|| format!("{what} has no key \"manifests\"; put the YAML to apply there"))
}

/// Fetches the release the spec and the installed state ask for. Releases of remote URLs are
/// kept in memory, since a published release does not change.
#[allow(clippy::too_many_arguments)]
async fn fetch_release(
    ctx: &Context,
    key: &ProviderKey,
    me: &ProviderView,
    all: &[ProviderView],
    spec: &ProviderSpec,
    remote: &RemoteOptions,
    operator_config: &ClusterctlConfig,
    kept: Option<&(String, String)>,
) -> Result<Fetched, String> {
    let repo = fetch::repository(
        &ctx.client,
        key.kind,
        &key.namespace,
        &key.name,
        spec,
        remote,
        operator_config,
        ctx.policy.local_root.as_deref(),
    )?;
    let core_contract = core_of(all).and_then(|c| c.contract.clone());
    let installed = me
        .installed_version
        .as_deref()
        .zip(me.contract.as_deref())
        .map(|(version, contract)| Installed { version, contract });
    let choice = fetch::choose_version(key.kind, spec, installed, core_contract.as_deref());
    // One deadline for the whole fetch: each request has its own timeout, but a repository of
    // endless pages (or one that answers each just in time) must not hold the reconcile.
    let deadline = tokio::time::Instant::now() + ctx.fetch_deadline;
    let late = || {
        format!(
            "the fetch did not finish within {} s (--fetch-deadline, every request of it together); the repository is slow or holds too many pages: it is tried again, or pin spec.version",
            ctx.fetch_deadline.as_secs()
        )
    };
    let version =
        tokio::time::timeout_at(deadline, fetch::resolve(&repo, &choice)).await.map_err(|_| late())??;
    // Kept apart by the credentials that fetched it (a provider that names the same private
    // release without them must fetch it, and be refused, itself) and by its pins (a release
    // kept unpinned is checked when a pin comes).
    let pins = spec.fetch_config.as_ref().and_then(|f| f.sha256.as_ref());
    let cache_key = fetch::remote_url(spec, operator_config, key.kind, &key.name).map(|u| {
        let pins = serde_json::to_string(&pins).expect("pins serialize");
        format!("{u}#{version}#{}#{pins}", remote.credentials_fingerprint())
    });
    if let Some(hit) =
        cache_key.as_ref().and_then(|k| ctx.releases.lock().expect("not poisoned").get(k).cloned())
    {
        return Ok(hit);
    }
    let from_kept = match kept {
        Some((to, sha256)) if Version::parse(to, "rollback-to").ok().as_ref() == Some(&version) => {
            super::keep::read(&ctx.client, key, to, sha256).await
        }
        _ => None,
    };
    let shown = version.to_string();
    let fetched = match from_kept {
        Some(fetched) => fetched,
        None => tokio::time::timeout_at(deadline, fetch::release(&repo, version))
            .await
            .map_err(|_| late())?
            .map_err(|e| {
                match fetch::butler_name_hint(key.kind, &key.name, spec, operator_config, &shown) {
                    Some(hint) => format!("{e}; {hint}"),
                    None => e,
                }
            })?,
    };
    if let Some(k) = cache_key {
        let mut releases = ctx.releases.lock().expect("not poisoned");
        // Bounded: rotated credentials and old versions would otherwise pile up.
        if releases.len() >= MOST_RELEASES {
            releases.clear();
        }
        releases.insert(k, fetched.clone());
    }
    Ok(fetched)
}

/// Makes an object the provider has not made before, as [`Applier::create_new`] does, and
/// also takes over one this operator made for a provider that is gone (its provider object
/// answers 404: deleted with its finalizer stripped, its namespace force-deleted), which no one
/// else would ever clean up, and one clusterctl or cluster-api-operator installed for this
/// provider ([`adopt`]). Anything else that exists stays refused.
async fn create_or_take_over(
    ctx: &Context,
    key: &ProviderKey,
    wanted: &serde_json::Value,
    waits: bool,
    ours: &(dyn Fn(&kube::api::DynamicObject) -> bool + Sync),
    earlier: &EarlierInstall<'_>,
) -> Result<(kube::api::DynamicObject, kube::discovery::ApiResource), String> {
    let existing = match ctx.applier.create_only(wanted, waits).await? {
        Made::Created(created, resource) => return Ok((created, resource)),
        Made::Gone => return ctx.applier.apply(wanted, waits).await,
        Made::Exists(existing) => existing,
    };
    if ours(&existing) || orphaned(ctx, key, &existing).await? {
        return ctx.applier.apply(wanted, waits).await;
    }
    if let Some(stale_owners) = earlier.installed(ctx, wanted, &existing).await? {
        let r = ObjectRef::of(wanted);
        // Owners first: applied, the object is this provider's and never looked at again.
        if !stale_owners.is_empty() {
            let uid = existing.metadata.uid.as_deref().unwrap_or_default();
            ctx.applier.patch_json(&r, adopt::drop_owners(uid, &stale_owners)).await?;
        }
        tracing::info!(object = %r.describe(), provider = %key, "taking over an object clusterctl or cluster-api-operator installed for this provider");
        return ctx.applier.apply(wanted, waits).await;
    }
    Err(format!(
        "{} exists already and was not made by {} (for this provider, or for one that is gone) nor by clusterctl or cluster-api-operator for this provider in this namespace; it is left alone: delete it (or rename it) if it should be made here",
        ObjectRef::of(wanted).describe(),
        crate::api::FIELD_MANAGER
    ))
}

/// An installation of this provider by clusterctl or cluster-api-operator, found by the
/// labels those tools put on what they install. A namespaced object of the rendered set is in
/// the provider's namespace; a cluster-wide one (a ClusterRole, a webhook configuration, a CRD)
/// is taken over only when the provider's Deployment there is theirs too, so that an install
/// in another namespace keeps its own.
struct EarlierInstall<'a> {
    plan: &'a InstallPlan,
    here: tokio::sync::OnceCell<bool>,
}

impl<'a> EarlierInstall<'a> {
    fn new(plan: &'a InstallPlan) -> EarlierInstall<'a> {
        EarlierInstall { plan, here: tokio::sync::OnceCell::new() }
    }

    /// The owner references to drop when `existing` is such an installation's, else none.
    async fn installed(
        &self,
        ctx: &Context,
        wanted: &serde_json::Value,
        existing: &kube::api::DynamicObject,
    ) -> Result<Option<Vec<(usize, String)>>, String> {
        let Some(label) = adopt::manifest_label(wanted) else { return Ok(None) };
        // Another provider of this operator labelled it: never taken from it here.
        if existing.metadata.labels.as_ref().and_then(ProviderKey::from_labels).is_some() {
            return Ok(None);
        }
        let adopt::Installed::ByClusterctl { stale_owners } = adopt::judge(&existing.metadata, label) else {
            return Ok(None);
        };
        let namespaced = existing.metadata.namespace.is_some();
        Ok((namespaced || self.in_this_namespace(ctx, label).await?).then_some(stale_owners))
    }

    async fn in_this_namespace(&self, ctx: &Context, label: &str) -> Result<bool, String> {
        let found = self
            .here
            .get_or_try_init(|| async {
                for deployment in self.plan.objects.iter().filter(|o| o["kind"] == "Deployment") {
                    let live = ctx.applier.get(&ObjectRef::of(deployment)).await?;
                    if live.is_some_and(|d| adopt::judge(&d.metadata, label) != adopt::Installed::Elsewhere) {
                        return Ok::<bool, String>(true);
                    }
                }
                Ok(false)
            })
            .await?;
        Ok(*found)
    }
}

/// Whether an object carries the labels of another provider of this operator that is gone.
async fn orphaned(
    ctx: &Context,
    key: &ProviderKey,
    existing: &kube::api::DynamicObject,
) -> Result<bool, String> {
    use crate::api::KindNames;
    let Some(owner) = existing.metadata.labels.as_ref().and_then(ProviderKey::from_labels) else {
        return Ok(false);
    };
    if owner == *key {
        return Ok(true);
    }
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(ctx.client.clone(), &owner.namespace, &owner.kind.api_resource());
    match api.get_opt(&owner.name).await {
        Ok(found) => Ok(found.is_none()),
        Err(e) => Err(format!("reading {owner}: {}", butler_runtime::error::describe(&e))),
    }
}

/// Makes a CRD the provider has not made before. A CRD is one API for the whole cluster: one
/// that was there before is applied over, as clusterctl does, after the inventory records it
/// as adopted, so the provider never deletes it; never one that another provider of this
/// operator made and still has (a release could otherwise rewrite another provider's API),
/// and one made outside the operator only in the groups the policy lets providers take over.
async fn adopt_crd<K: ProviderObject>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    wanted: &serde_json::Value,
    waits: bool,
    adopted: &mut Vec<ObjectRef>,
    earlier: &EarlierInstall<'_>,
) -> Result<(kube::api::DynamicObject, kube::discovery::ApiResource), String> {
    let theirs = match ctx.applier.create_only(wanted, waits).await? {
        Made::Created(created, resource) => return Ok((created, resource)),
        Made::Gone => return ctx.applier.apply(wanted, waits).await,
        Made::Exists(existing) => {
            let owner = existing.metadata.labels.as_ref().and_then(ProviderKey::from_labels);
            if owner.is_none() {
                let name = existing.metadata.name.as_deref().unwrap_or_default();
                ctx.policy.may_adopt(name, existing.data["spec"]["group"].as_str().unwrap_or_default())?;
            }
            if let Some(owner) = owner.filter(|o| o != key)
                && ctx.views().iter().any(|v| v.key == owner && !v.deleting)
            {
                return Err(format!(
                    "CustomResourceDefinition {} belongs to {owner}, and a provider never takes over another's CRDs; the two providers cannot be installed together",
                    existing.metadata.name.as_deref().unwrap_or_default()
                ));
            }
            // One clusterctl or cluster-api-operator installed for this provider is the
            // provider's from now on, as if it had made it (its crdDeletionPolicy applies).
            !key.labelled_on(&existing.metadata) && earlier.installed(ctx, wanted, &existing).await?.is_none()
        }
    };
    if theirs {
        adopted.push(ObjectRef::of(wanted));
        let recorded = ctx.inventories.lock().expect("not poisoned").get(&uid_of(object)).cloned();
        let record = Inventory {
            adopted: adopted.clone(),
            ..recorded.unwrap_or_else(|| earlier.plan.inventory.clone())
        };
        inventory::write(ctx, object, key, &record).await?;
    }
    ctx.applier.apply(wanted, waits).await
}

/// Applies the plan. When the objects changed, the inventory first records the new objects
/// and those of the previous set (so a crash at any point leaves every object findable), then
/// every object this process has not applied as it is now (or that changed since) is applied
/// and what dropped out is deleted; the inventory then forgets those.
/// When they did not change, only objects that drifted (or that this process has not written
/// yet: after a restart, all of them) are applied.
async fn apply<K>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    plan: &InstallPlan,
    previous: Option<&Inventory>,
) -> Result<Vec<LiveDeployment>, String>
where
    K: ProviderObject,
{
    let mut deployments = Vec::new();
    // What changed goes, and what drifted; what this process applied as it is stays. Each
    // object considered is digested once (and only those: a reconcile that changed nothing
    // digests only what drifted).
    let to_apply: Vec<(&serde_json::Value, String)> = plan
        .objects
        .iter()
        .filter_map(|o| {
            let r = ObjectRef::of(o);
            match plan.changed {
                true => Some(super::drift::content_of(o)).filter(|c| !ctx.drift.unchanged(&r, c)),
                false => (!ctx.drift.is_current(&r)).then(|| super::drift::content_of(o)),
            }
            .map(|content| (o, content))
        })
        .collect();
    let recorded = |ctx: &Context| {
        let inventories = ctx.inventories.lock().expect("not poisoned");
        inventories.get(&uid_of(object)).map(|i| (i.objects.len(), i.pending.is_empty()))
    };
    let finished = recorded(ctx) == Some((plan.inventory.objects.len(), true));
    if to_apply.is_empty() && plan.delete.is_empty() && finished {
        // A storage-version migration cut short goes on.
        return migrate_stored(ctx, object, key, Vec::new()).await.map(|()| Vec::new());
    }
    // Every kind the set needs is served before the first write, or nothing is written.
    let unserved = ctx.applier.unserved(&plan.objects).await;
    if !unserved.is_empty() {
        return Err(unserved.join("; "));
    }
    // Which objects are namespaced is the API server's to say (by group and kind): none of
    // them goes anywhere but the provider's namespace.
    let outside = ctx.applier.outside(&plan.objects, &key.namespace).await;
    if !outside.is_empty() {
        return Err(format!("nothing is applied: {}", outside.join("; ")));
    }
    // Made by this provider before (and not still pending from an install that stopped).
    let pending_before: &[ObjectRef] = previous.map(|p| p.pending.as_slice()).unwrap_or_default();
    let made_before: Vec<ObjectRef> = previous
        .map(|p| p.objects.iter().filter(|o| !pending_before.contains(o)).cloned().collect())
        .unwrap_or_default();
    if plan.changed {
        // Every object of before stays listed until it is deleted; what is not known to be this
        // provider's yet stays pending.
        let all_before: &[ObjectRef] = previous.map(|p| p.objects.as_slice()).unwrap_or_default();
        let objects = while_applying(all_before, &plan.inventory.objects);
        let pending: Vec<ObjectRef> = objects.iter().filter(|o| !made_before.contains(o)).cloned().collect();
        let during = Inventory { objects, pending, ..plan.inventory.clone() };
        inventory::write(ctx, object, key, &during).await?;
    }
    let defined: Vec<String> = plan.objects.iter().filter_map(defined_kind).collect();
    let before: &[ObjectRef] = &made_before;
    // An object this provider has not made before is created, not applied over whatever is
    // there; one that exists is taken on only when it carries this provider's labels.
    let ours = |existing: &kube::api::DynamicObject| key.labelled_on(&existing.metadata);
    let mut made: Vec<ObjectRef> = Vec::new();
    let mut adopted: Vec<ObjectRef> = plan.inventory.adopted.clone();
    let earlier = EarlierInstall::new(plan);
    let mut stale_crds: Vec<String> = Vec::new();
    for (wanted, content) in to_apply {
        let r = ObjectRef::of(wanted);
        ctx.drift.begin(&r);
        let waits = defined.contains(&format!("{}/{}", r.group(), r.kind));
        let applied = match before.contains(&r) || adopted.contains(&r) {
            true => ctx.applier.apply(wanted, waits).await,
            false if r.kind == "CustomResourceDefinition" => {
                adopt_crd(ctx, object, key, wanted, waits, &mut adopted, &earlier).await
            }
            false => create_or_take_over(ctx, key, wanted, waits, &ours, &earlier).await,
        };
        match applied {
            Ok((applied, resource)) => {
                if resource.kind == "CustomResourceDefinition"
                    && let Some(stale) =
                        serde_json::to_value(&applied).ok().as_ref().and_then(super::storage::stale)
                {
                    stale_crds.push(stale.name);
                }
                ctx.drift.record_applied(r.clone(), &applied.metadata, content);
                if resource.kind == "Deployment"
                    && let Ok(d) = serde_json::to_value(&applied).and_then(serde_json::from_value)
                {
                    deployments.push(super::context::live_deployment(&d));
                }
                made.push(r);
                // Deployments are watched in full by the controller already.
                if resource.kind != "Deployment" {
                    ctx.drift.watch_kind(&ctx.watches, &resource, &ctx.triggers);
                }
            }
            Err(e) => {
                ctx.drift.forget(&r);
                // The record lists what was there and what this run made, never what it was
                // refused: a provider never deletes what it did not make.
                if plan.changed {
                    let all_before: &[ObjectRef] = previous.map(|p| p.objects.as_slice()).unwrap_or_default();
                    let objects: Vec<ObjectRef> =
                        while_applying(all_before, &made).into_iter().filter(|o| *o != r).collect();
                    let pending = objects
                        .iter()
                        .filter(|o| !before.contains(o) && !made.contains(o))
                        .cloned()
                        .collect();
                    let partial = Inventory {
                        objects,
                        digest: String::new(),
                        pending,
                        adopted,
                        ..plan.inventory.clone()
                    };
                    inventory::write(ctx, object, key, &partial).await?;
                }
                return Err(e);
            }
        }
    }
    for gone in &plan.delete {
        ctx.drift.forget(gone);
        // Only what carries this provider's labels (the inventory could be forged).
        if !ctx.applier.delete_if(gone, |meta| key.labelled_on(meta)).await? {
            tracing::warn!(provider = %key, object = %gone.describe(), "left in place: it does not carry the provider's labels");
        }
    }
    let finished = Inventory { adopted, ..plan.inventory.clone() };
    // Compared whole: an install that made every pending object is recorded as done (else a
    // restart would "create" objects that exist, and the no-change path is never taken).
    let recorded = ctx.inventories.lock().expect("not poisoned").get(&uid_of(object)).cloned();
    if recorded.as_ref() != Some(&finished) {
        inventory::write(ctx, object, key, &finished).await?;
    }
    tracing::info!(provider = %key, version = %plan.inventory.version, "applied the provider's objects");
    migrate_stored(ctx, object, key, stale_crds).await?;
    Ok(deployments)
}

/// Migrates the stored objects of the CRDs `found` stale by this apply and of those the
/// inventory names from before, each named in the inventory until it is done.
async fn migrate_stored<K: ProviderObject>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    found: Vec<String>,
) -> Result<(), String> {
    let recorded = ctx.inventories.lock().expect("not poisoned").get(&uid_of(object)).cloned();
    let Some(mut record) = recorded else { return Ok(()) };
    let mut todo = record.migrating.clone();
    todo.extend(found.into_iter().filter(|name| !record.migrating.contains(name)));
    if todo.is_empty() {
        return Ok(());
    }
    if todo != record.migrating {
        record.migrating = todo.clone();
        inventory::write(ctx, object, key, &record).await?;
    }
    for name in todo {
        let progress = |storage: &str, migrated: super::storage::Migrated| {
            let entry = super::storage::Progress {
                provider: key.clone(),
                storage: storage.to_string(),
                migrated,
                done: false,
            };
            ctx.migrations.lock().expect("not poisoned").insert(name.clone(), entry);
        };
        super::storage::migrate_named(&ctx.client, &name, &progress).await?;
        if let Some(entry) = ctx.migrations.lock().expect("not poisoned").get_mut(&name) {
            entry.done = true;
        }
        record.migrating.retain(|n| *n != name);
        inventory::write(ctx, object, key, &record).await?;
    }
    Ok(())
}
