//! The reconcile of a provider that is not being deleted: observe, preflight, fetch, plan,
//! apply, status.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;

use butler_repository::{ClusterctlConfig, RemoteOptions};

use super::ProviderObject;
use super::conditions::{self, Wanted};
use super::config;
use super::context::{Context, ProviderKey, key_of, view_of};
use super::error::{Error, describe};
use super::fetch::{self, Installed};
use super::inventory;
use super::plan::{self, Fetched, InstallInput, InstallPlan, Inventory, ObjectRef, ProviderView};
use super::status::{self, Outcome};
use crate::api::{KindNames, ProviderKind, ProviderSpec};

/// How often a provider is looked at again with nothing changing: every input is watched, so
/// this is only a safety net (and it notices new ConfigMap versions of an empty spec.version).
const RESYNC: Duration = Duration::from_secs(600);

/// Installs, upgrades, pauses or unpauses a provider.
pub async fn install<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error>
where
    K: ProviderObject,
{
    let key = key_of(object.as_ref());
    let me = view_of(object.as_ref(), ctx.statuses.lock().expect("not poisoned").get(&key));
    let all = ctx.views();
    let spec = object.provider_spec();
    // A failure after the preflight checks also says how they went (`also`), so that a
    // condition of an earlier reconcile (waiting for the core provider, say) does not stay.
    let stop = |type_: &'static str,
                kept: bool,
                reason: &'static str,
                message: String,
                event: bool,
                also: Option<Wanted>| {
        let mut wanted = vec![
            Wanted::new(type_, kept, reason, message.clone()),
            Wanted::new(conditions::READY, false, reason, message.clone()),
        ];
        wanted.extend(also);
        let outcome = Outcome {
            contract: me.contract.clone(),
            installed_version: me.installed_version.clone(),
            conditions: wanted,
            events: if event { vec![(reason.to_string(), message)] } else { vec![] },
        };
        let ctx = ctx.clone();
        let object = object.clone();
        async move { status::write(&ctx, object.as_ref(), outcome).await }
    };

    // Read at every reconcile: a mounted ConfigMap that changes takes effect without a restart.
    let loaded = match &ctx.config_path {
        Some(path) => ClusterctlConfig::load(Some(path)),
        None => Ok(ClusterctlConfig::default()),
    };
    let operator_config = match loaded {
        Ok(c) => c,
        Err(e) => {
            let message = format!("the operator's config file: {e}; fix it (--config), the provider waits");
            stop(conditions::PREFLIGHT, false, "OperatorConfigUnreadable", message, true, None).await?;
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
    };
    if let Err(blocked) = plan::preflight(&me, spec, &all, fetch::known(&operator_config, K::KIND, &key.2)) {
        // Waiting for the core provider ends by a trigger when its status changes.
        stop(conditions::PREFLIGHT, false, blocked.reason, blocked.message, !blocked.retry, None).await?;
        return Ok(Action::requeue(RESYNC));
    }
    let provider_config = match config::load(&ctx.client, &ctx.secrets, &key.1, spec, &ctx.remote).await {
        Ok(c) => c,
        Err(config::Unreadable(message)) => {
            stop(conditions::PREFLIGHT, false, "ConfigSecretUnreadable", message, true, None).await?;
            // A Secret that appears or changes wakes the provider; this is the fallback.
            return Ok(Action::requeue(Duration::from_secs(60)));
        }
    };
    // Servers and renderers quote what they reject: every message from here on is redacted.
    let redactor = config::Redactor::new(&provider_config.variables, &operator_config.variables);
    let fetched = match fetch_release(&ctx, &key, &me, &all, spec, &provider_config.remote, &operator_config)
        .await
    {
        Ok(f) => f,
        Err(message) => {
            let message = redactor.redact(&format!("cannot fetch the provider's release: {message}"));
            let passed = Wanted::new(conditions::PREFLIGHT, true, "Passed", "the preflight checks passed");
            stop(conditions::INSTALLED, me.installed(), "FetchFailed", message.clone(), true, Some(passed))
                .await?;
            return Err(Error::Fetch(message));
        }
    };

    let previous = inventory_of(&ctx, &key).await?;
    let live = ctx.live_deployments(&key);
    // The config Secret first, then the operator's config file; never the operator's own
    // environment.
    let variables = |name: &str| {
        provider_config.variables.get(name).or_else(|| operator_config.variables.get(name)).cloned()
    };
    let plan = plan::plan_install(&InstallInput {
        me: &me,
        spec,
        all: &all,
        fetched: &fetched,
        variables: &variables,
        inventory: previous.as_ref(),
        live: &live,
        images: &operator_config.images,
    });
    for warning in &plan.warnings {
        tracing::warn!(provider = %key.2, kind = %K::KIND, "{}", redactor.redact(warning));
    }
    if let Err(message) = carry_out(&ctx, object.as_ref(), &key, &plan, previous.as_ref()).await {
        let message = redactor.redact(&message);
        let preflight = plan
            .conditions
            .iter()
            .find(|w| w.type_ == conditions::PREFLIGHT)
            .map(|w| Wanted { message: redactor.redact(&w.message), ..w.clone() });
        stop(conditions::INSTALLED, false, "ApplyFailed", message.clone(), true, preflight).await?;
        return Err(Error::Apply(message));
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
        events: plan.events.iter().map(|(reason, m)| (reason.clone(), redactor.redact(m))).collect(),
    };
    status::write(&ctx, object.as_ref(), outcome).await?;
    Ok(Action::requeue(RESYNC))
}

/// Fetches the release the spec and the installed state ask for. Releases of remote URLs are
/// kept in memory, since a published release does not change.
async fn fetch_release(
    ctx: &Context,
    key: &ProviderKey,
    me: &ProviderView,
    all: &[ProviderView],
    spec: &ProviderSpec,
    remote: &RemoteOptions,
    operator_config: &ClusterctlConfig,
) -> Result<Fetched, String> {
    let repo = fetch::repository(&ctx.client, key.0, &key.1, &key.2, spec, remote, operator_config)?;
    let core_contract =
        all.iter().find(|o| o.kind == ProviderKind::Core && !o.deleting).and_then(|c| c.contract.clone());
    let installed = me
        .installed_version
        .as_deref()
        .zip(me.contract.as_deref())
        .map(|(version, contract)| Installed { version, contract });
    let choice = fetch::choose_version(key.0, spec, installed, core_contract.as_deref());
    let version = fetch::resolve(&repo, &choice).await?;
    let cache_key = fetch::remote_url(spec, operator_config, key.0, &key.2).map(|u| format!("{u}#{version}"));
    if let Some(hit) =
        cache_key.as_ref().and_then(|k| ctx.releases.lock().expect("not poisoned").get(k).cloned())
    {
        return Ok(hit);
    }
    let fetched = fetch::release(&repo, version).await?;
    if let Some(k) = cache_key {
        ctx.releases.lock().expect("not poisoned").insert(k, fetched.clone());
    }
    Ok(fetched)
}

/// The provider's inventory. The first call of a process lists every inventory ConfigMap
/// (one request for all providers); from then on this process's records are the truth, since
/// only the leader writes inventories.
pub(crate) async fn inventory_of(ctx: &Context, key: &ProviderKey) -> Result<Option<Inventory>, Error> {
    ctx.inventories_loaded
        .get_or_try_init(|| async {
            let all = inventory::list_all(&ctx.client)
                .await
                .map_err(|e| Error::kube("listing the inventory ConfigMaps", e))?;
            let mut known = ctx.inventories.lock().expect("not poisoned");
            for (key, inventory) in all {
                known.entry(key).or_insert(inventory);
            }
            Ok::<(), Error>(())
        })
        .await?;
    Ok(ctx.inventories.lock().expect("not poisoned").get(key).cloned())
}

async fn write_inventory<K>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    inventory: &Inventory,
) -> Result<(), String>
where
    K: ProviderObject,
{
    let name = inventory::name(K::KIND.plural(), &key.2);
    inventory::write(&ctx.client, object, K::KIND, &name, inventory)
        .await
        .map_err(|e| format!("writing the inventory ConfigMap {}/{name}: {}", key.1, describe(&e)))?;
    ctx.inventories.lock().expect("not poisoned").insert(key.clone(), inventory.clone());
    Ok(())
}

/// Applies the plan. When the objects changed, the inventory first records the new objects
/// and those of the previous set (so a crash at any point leaves every object findable), then
/// everything is applied and what dropped out is deleted; the inventory then forgets those.
/// When they did not change, only objects that drifted (or that this process has not written
/// yet: after a restart, all of them) are applied.
async fn carry_out<K>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    plan: &InstallPlan,
    previous: Option<&Inventory>,
) -> Result<(), String>
where
    K: ProviderObject,
{
    let to_apply: Vec<&serde_json::Value> =
        plan.objects.iter().filter(|o| plan.changed || !ctx.drift.is_current(&ObjectRef::of(o))).collect();
    if to_apply.is_empty() && plan.delete.is_empty() {
        return Ok(());
    }
    if plan.changed {
        let mut during = plan.inventory.clone();
        for old in previous.map(|p| p.objects.as_slice()).unwrap_or_default() {
            if !during.objects.contains(old) {
                during.objects.push(old.clone());
            }
        }
        write_inventory(ctx, object, key, &during).await?;
    }
    let defined: Vec<String> = plan.objects.iter().filter_map(defined_kind).collect();
    for wanted in to_apply {
        let r = ObjectRef::of(wanted);
        ctx.drift.begin(&r);
        let waits = defined.contains(&format!("{}/{}", group_of(&r.api_version), r.kind));
        match ctx.applier.apply(wanted, waits).await {
            Ok((applied, resource)) => {
                ctx.drift.record(r, &applied.metadata);
                if needs_metadata_watch(&resource.kind) {
                    ctx.drift.watch_kind(&ctx.watches, &resource, &ctx.triggers);
                }
            }
            Err(e) => {
                ctx.drift.forget(&r);
                return Err(e);
            }
        }
    }
    for gone in &plan.delete {
        ctx.drift.forget(gone);
        ctx.applier.delete(gone).await?;
    }
    let recorded = ctx.inventories.lock().expect("not poisoned").get(key).map(|i| i.objects.len());
    if recorded != Some(plan.inventory.objects.len()) {
        write_inventory(ctx, object, key, &plan.inventory).await?;
    }
    tracing::info!(provider = %key.2, kind = %K::KIND, version = %plan.inventory.version, "applied the provider's objects");
    Ok(())
}

/// Deployments are watched in full by the controller already.
fn needs_metadata_watch(kind: &str) -> bool {
    kind != "Deployment"
}

fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(g, _)| g)
}

/// `{group}/{kind}` of the kind a CRD defines.
fn defined_kind(object: &serde_json::Value) -> Option<String> {
    (object["kind"] == "CustomResourceDefinition").then(|| {
        let spec = &object["spec"];
        format!(
            "{}/{}",
            spec["group"].as_str().unwrap_or_default(),
            spec["names"]["kind"].as_str().unwrap_or_default()
        )
    })
}
