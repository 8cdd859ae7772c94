//! What a reconcile should do, decided from what was observed, without I/O: the contract and
//! pause rules, the rendered objects, what to delete, and the conditions (the checks before
//! any fetch are [`super::preflight`]).

use std::collections::BTreeSet;

use butler_repository::{
    ComponentsOptions, ImageOverrides, ProcessError, Version, core_supports, process_components,
    supported_contracts,
};
use butler_runtime::conditions::Wanted;
use butler_runtime::inventory::dropped_out;
use butler_runtime::objects::{ObjectRef, apply_order};
use serde_json::{Value, json};

use crate::api::{ProviderKind, ProviderSpec};
use crate::controller::install::installed::Inventory;
use crate::controller::report::reason::{PAUSED, Reason};
use crate::controller::vocabulary::{Fetched, LiveDeployment, PAUSED_REPLICAS, ProviderView};
use crate::controller::wanted::customize::customize;

use super::preflight::core_of;

/// Where the operator takes a provider's variables from, for messages.
pub const VARIABLES_PLACE: &str =
    "in the provider's config Secret (spec.configSecret) or in the operator's config file (--config)";

/// Everything the install plan reads.
pub struct InstallInput<'a> {
    pub me: &'a ProviderView,
    pub spec: &'a ProviderSpec,
    pub all: &'a [ProviderView],
    pub fetched: &'a Fetched,
    pub variables: &'a dyn Fn(&str) -> Option<String>,
    pub inventory: Option<&'a Inventory>,
    pub live: &'a [LiveDeployment],
    /// Image overrides of the operator's config file (clusterctl's `images`).
    pub images: &'a ImageOverrides,
    /// What the operator allows a provider's components beyond their own objects.
    pub policy: &'a crate::controller::wanted::policy::Policy,
    /// The rules of the ceiling ClusterRole the policy names, read live.
    pub ceiling: Option<&'a [Value]>,
    /// The YAML of `spec.additionalManifests`, applied with the components.
    pub additional: Option<&'a str>,
    /// The version a ProviderUpgrade rolls this provider back to (its annotation
    /// [`crate::controller::upgrades::engine::ROLLBACK_TO`]): that one downgrade is allowed, and the CRDs
    /// stay as the newer version left them.
    pub rollback_to: Option<&'a str>,
    /// The last rendering of each provider's release, used again while its inputs are the same.
    pub renders: &'a crate::controller::wanted::render::Renders,
    /// What the status says of a name Butler's repository shadows (`fetch::butler_name_shadows`).
    pub shadow: Option<&'a str>,
}

/// The outcome of planning an install or upgrade.
#[derive(Debug, Clone, Default)]
pub struct InstallPlan {
    /// Every object the provider should have, CRDs first and webhook configurations last.
    pub objects: Vec<Value>,
    /// The objects differ from what the inventory says was applied: apply them all.
    pub changed: bool,
    /// Objects of the previous version that are no longer wanted.
    pub delete: Vec<ObjectRef>,
    /// The inventory once the plan is carried out.
    pub inventory: Inventory,
    pub conditions: Vec<Wanted>,
    /// status.contract and status.installedVersion once carried out.
    pub contract: Option<String>,
    pub installed_version: Option<String>,
    pub events: Vec<(Reason, String)>,
    /// The provider's Deployments should be running (not paused).
    pub running: bool,
    pub warnings: Vec<String>,
}

/// Plans an install, an upgrade, a pause or an unpause. Refusals become conditions; the plan
/// then keeps what is installed.
pub fn plan_install(input: &InstallInput<'_>) -> InstallPlan {
    let me = input.me;
    let fetched = input.fetched;
    let version = fetched.version.to_string();
    let mut plan = InstallPlan {
        contract: me.contract.clone(),
        installed_version: me.installed_version.clone(),
        ..Default::default()
    };
    // A refusal keeps what is installed, and says why.
    let keep = |mut plan: InstallPlan, reason: Reason, message: String| {
        plan.conditions.push(reason.wanted(false, message.clone()));
        plan.events.push((reason, message));
        plan.inventory = input.inventory.cloned().unwrap_or_default();
        plan
    };

    // No downgrade across minor versions, but the roll-back of a failed upgrade.
    let rolling_back = input
        .rollback_to
        .and_then(|v| Version::parse(v, "rollback").ok())
        .is_some_and(|v| v == fetched.version);
    if let Some(installed) = me.installed_version.as_deref().and_then(|v| Version::parse(v, "status").ok())
        && (fetched.version.major(), fetched.version.minor()) < (installed.major(), installed.minor())
        && !rolling_back
    {
        return keep(
            plan,
            Reason::DowngradeRefused,
            format!(
                "{version} is an older minor version than the installed {installed}; a provider is never downgraded across minor versions"
            ),
        );
    }
    // The contract must be the core provider's, unless this provider is paused mid-upgrade.
    let core_contract = match me.key.kind {
        ProviderKind::Core => Some(fetched.contract.clone()),
        _ => core_of(input.all).and_then(|c| c.contract.clone()),
    };
    // Cluster API's rule: a core accepts its own contract and the earlier one it still supports.
    if let Some(core) = &core_contract
        && !core_supports(core, &fetched.contract)
        && !me.paused
        && !me.held
    {
        return keep(
            plan,
            Reason::ContractMismatch,
            format!(
                "{version} abides by contract {}, but the core provider abides by {core} and accepts {}; to change contracts, pause every provider (spec.paused: true), upgrade them all, then unpause",
                fetched.contract,
                supported_contracts(core).join(" and ")
            ),
        );
    }
    plan.conditions.push(Reason::Passed.wanted(true, "the preflight checks passed"));

    // A contract change needs every provider paused.
    // A provider other than the core moving between contracts the core accepts (v1beta1 to
    // v1beta2 under a v1beta2 core) changes nothing the others depend on.
    let within_core = me.key.kind != ProviderKind::Core
        && core_contract.as_deref().is_some_and(|core| {
            core_supports(core, &fetched.contract)
                && me.contract.as_deref().is_some_and(|c| core_supports(core, c))
        });
    let changes_contract = me.contract.as_deref().is_some_and(|c| c != fetched.contract) && !within_core;
    if changes_contract {
        // Paused as observed (its Deployments held at 0), not as asked: a provider whose pause
        // has not been carried out (its config Secret is missing, its fetch fails) still runs.
        // This provider counts as paused when it asks to be: this very plan scales it to 0.
        // One that never installed runs nothing and is left out.
        let running: Vec<&ProviderView> = input
            .all
            .iter()
            .filter(|o| !o.deleting && o.installed())
            .filter(|o| !(o.held || (o.key == me.key && me.paused)))
            .collect();
        if !running.is_empty() {
            return keep(
                plan,
                Reason::ContractChangeNeedsPause,
                needs_pause(me, &version, &fetched.contract, &running),
            );
        }
    }

    // Pause, or unpause when every provider agrees on the contract.
    let was_paused = input.live.iter().any(|d| d.paused_replicas.is_some());
    let mut paused = me.paused;
    if !me.paused && was_paused {
        let mut contracts: Vec<(String, String)> = input
            .all
            .iter()
            .filter(|o| !o.deleting && o.key != me.key && o.installed())
            .map(|o| (o.describe(), o.contract.clone().unwrap_or_else(|| "none".into())))
            .collect();
        contracts.push((me.describe(), fetched.contract.clone()));
        // Agreeing means every provider abides by a contract the core accepts.
        let disagree = match &core_contract {
            Some(core) => contracts.iter().any(|(_, c)| !core_supports(core, c)),
            None => contracts.iter().map(|(_, c)| c).collect::<BTreeSet<&String>>().len() > 1,
        };
        if disagree {
            paused = true;
            let listing: Vec<String> = contracts.iter().map(|(who, c)| format!("{who} {c}")).collect();
            let message = format!(
                "unpause refused: the providers disagree on the contract ({}); upgrade them to one contract, then unpause",
                listing.join(", ")
            );
            plan.conditions.push(Reason::UnpauseRefused.wanted(true, message.clone()));
            plan.events.push((Reason::UnpauseRefused, message));
        }
    }

    // Render.
    let label = me.key.kind.label(&me.key.name);
    let what = format!("{label} {version}");
    let options = ComponentsOptions {
        what: &what,
        provider_label: &label,
        target_namespace: Some(&me.key.namespace),
        images: input.images,
        variables: input.variables,
    };
    let rendered = input.renders.render(&me.key, &fetched.components, &options).map_err(|e| match e {
        // The operator takes variables from the provider's config Secret, then its own
        // config file; never from the environment.
        ProcessError::MissingVariables(missing) => missing.message(VARIABLES_PLACE),
        other => other.to_string(),
    });
    let mut objects = match rendered {
        Ok(r) => {
            plan.warnings = r.warnings.clone();
            r.objects()
        }
        Err(message) => return keep(plan, Reason::RenderFailed, message),
    };
    // cluster-api-operator's additionalManifests: processed as the components, then part of
    // them (as there): customised and patched as they are, held to the same policy below and
    // recorded (so pruned) with them.
    if let Some(text) = input.additional {
        let what = format!("spec.additionalManifests of {label}");
        let options = ComponentsOptions { what: &what, ..options };
        match process_components(text, &options)
            .map_err(|e| e.to_string())
            .and_then(|c| c.objects().map_err(|e| e.to_string()))
        {
            Ok(more) => objects.extend(more),
            Err(message) => {
                return keep(plan, Reason::RenderFailed, format!("spec.additionalManifests: {message}"));
            }
        }
    }
    // The release's own pods run as its own accounts (the provider object's customisation,
    // which its administrator writes, may choose another).
    if let Err(message) = crate::controller::wanted::admission::check_accounts(&objects) {
        return keep(plan, Reason::PolicyViolation, message);
    }
    if let Err(message) = customize(&mut objects, input.spec, &label) {
        return keep(plan, Reason::InvalidCustomization, message);
    }
    if let Err(message) = crate::controller::wanted::patches::apply(&mut objects, input.spec) {
        return keep(plan, Reason::InvalidCustomization, message);
    }
    // The target namespace holds the provider object, so it exists; providers may share it, and
    // their components' Namespace labels would fight, so it is left alone.
    objects.retain(|o| o["kind"] != "Namespace");
    // The whole set is admitted before anything is written, or none of it is.
    if let Err(message) =
        crate::controller::wanted::admission::admit(&objects, &me.key.namespace, input.policy, input.ceiling)
    {
        return keep(plan, Reason::PolicyViolation, message);
    }
    objects.sort_by_key(apply_order);
    let labels = me.key.labels();
    for object in objects.iter_mut() {
        for (label, value) in &labels {
            object["metadata"]["labels"][label] = json!(value);
        }
        unowned_aggregated_rules(object);
        if object["kind"] == "Deployment" {
            set_replicas(object, input.live, paused);
        }
    }

    let refs: Vec<ObjectRef> = objects.iter().map(ObjectRef::of).collect();
    // Rolled back, the CRDs stay as the newer version left them: their objects may be stored at
    // a version the older CRDs do not list (they would not apply), and the older controller
    // reads them through the versions the newer CRDs still serve. They stay listed.
    if rolling_back {
        objects.retain(|o| o["kind"] != "CustomResourceDefinition");
    }
    let digest = butler_repository::sha256_json_hex(&objects);
    let previous = input.inventory.cloned().unwrap_or_default();
    plan.delete = dropped_out(&previous.objects, &refs, &["CustomResourceDefinition", "Namespace"]);
    let kept = crate::controller::install::installed::kept_crds(&previous, &refs);
    plan.inventory = Inventory {
        version: version.clone(),
        contract: fetched.contract.clone(),
        digest: digest.clone(),
        adopted: {
            let listed: std::collections::HashSet<&ObjectRef> = refs.iter().collect();
            previous.adopted.iter().filter(|o| listed.contains(o)).cloned().collect()
        },
        objects: refs,
        pending: Vec::new(),
        migrating: previous.migrating.clone(),
        kept,
    };
    // `1.2.0` and `v1.2.0` are one version: writing it the other way changes nothing.
    let same_version = |v: &str| Version::parse(v, "status").is_ok_and(|v| v == fetched.version);
    let unchanged = previous.digest == digest && same_version(&previous.version);
    plan.changed = !unchanged;
    plan.objects = objects;
    plan.running = !paused;

    let upgrade = me.installed_version.as_deref().is_some_and(|v| !same_version(v));
    plan.contract = Some(fetched.contract.clone());
    plan.installed_version = Some(version.clone());
    let still_supported = match core_contract.as_deref() {
        Some(core) if core != fetched.contract && me.key.kind != ProviderKind::Core => {
            format!(", which the core provider's {core} still supports")
        }
        _ => String::new(),
    };
    let shadow = input.shadow.map(|note| format!("; {note}")).unwrap_or_default();
    plan.conditions.push(Reason::Installed.wanted(
        true,
        format!("{version} is installed (contract {}{still_supported}){shadow}", fetched.contract),
    ));
    if upgrade {
        let from = me.installed_version.clone().unwrap_or_default();
        let message = format!("upgraded from {from} to {version}");
        plan.conditions.push(Reason::Upgraded.wanted(true, message.clone()));
        plan.events.push((Reason::Upgraded, message));
    } else if previous.version.is_empty() && !unchanged {
        plan.events.push((Reason::Installed, format!("installed {version}{shadow}")));
    }
    if !plan.conditions.iter().any(|c| c.type_ == PAUSED) {
        plan.conditions.push(match paused {
            true => Reason::Paused.wanted(true, "the provider's Deployments are scaled to 0"),
            false => Reason::Running.wanted(false, "the provider's Deployments run"),
        });
        if paused && !was_paused {
            plan.events.push((Reason::Paused, "scaled the provider's Deployments to 0".into()));
        }
        if !paused && was_paused {
            plan.events.push((Reason::Unpaused, "restored the provider's Deployments".into()));
        }
    }
    plan
}

/// What a contract change refused until every provider is paused says, for the state the user
/// is in: whether this provider is paused already, and which are not, or are still pausing.
fn needs_pause(me: &ProviderView, version: &str, contract: &str, running: &[&ProviderView]) -> String {
    let from = me.contract.as_deref().unwrap_or_default();
    let (asked, not_asked): (Vec<&&ProviderView>, Vec<&&ProviderView>) =
        running.iter().partition(|o| o.paused);
    let names = |list: &[&&ProviderView]| list.iter().map(|o| o.describe()).collect::<Vec<_>>().join(", ");
    let mut message = match me.paused {
        true => format!(
            "{version} changes the contract from {from} to {contract}; this provider is paused at {} and moves once every provider is paused",
            me.installed_version.as_deref().unwrap_or_default()
        ),
        false => format!(
            "{version} changes the contract from {from} to {contract}; pause every provider first (spec.paused: true), this one included"
        ),
    };
    if !not_asked.is_empty() {
        message.push_str(&format!(". Not paused: {}", names(&not_asked)));
    }
    if !asked.is_empty() {
        message
            .push_str(&format!(". Pausing (spec.paused: true, Deployments not yet at 0): {}", names(&asked)));
    }
    message
}

/// The version to carry out a pause at: a provider that asks to be paused is paused whatever
/// its version asks. When the plan refused the version's contract change until every provider
/// is paused, the pause happens at the version installed (else every provider would wait for
/// the others for ever).
pub fn pause_first(plan: &InstallPlan, me: &ProviderView) -> Option<String> {
    let refused = plan.conditions.iter().any(|c| c.reason == Reason::ContractChangeNeedsPause.as_str());
    (refused && me.paused).then(|| me.installed_version.clone()).flatten()
}

/// Kubernetes fills the `rules` of a ClusterRole that has an `aggregationRule`: a release's
/// `rules: []` left in would make the operator own them and fight the aggregation controller
/// for ever, each undoing the other's write.
fn unowned_aggregated_rules(object: &mut Value) {
    if object["kind"] == "ClusterRole"
        && object.get("aggregationRule").is_some_and(|a| !a.is_null())
        && let Some(map) = object.as_object_mut()
    {
        map.remove("rules");
    }
}

/// Replicas of a Deployment: 0 with the count to restore in an annotation while paused; the
/// remembered count when it comes back.
fn set_replicas(object: &mut Value, live: &[LiveDeployment], paused: bool) {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let current = live.iter().find(|d| d.name == name && d.namespace == namespace);
    let rendered = object["spec"]["replicas"].as_i64().unwrap_or(1) as i32;
    if paused {
        let remember = current
            .and_then(|d| d.paused_replicas.or((d.replicas > 0).then_some(d.replicas)))
            .unwrap_or(rendered);
        object["spec"]["replicas"] = json!(0);
        object["metadata"]["annotations"][PAUSED_REPLICAS] = json!(remember.to_string());
    } else if let Some(restore) = current.and_then(|d| d.paused_replicas) {
        object["spec"]["replicas"] = json!(restore);
    }
}

/// The Ready condition: installed, running and every Deployment rolled out. The Deployments
/// are those the plan wants (so the message does not change while the cache catches up).
pub fn readiness(plan: &InstallPlan, live: &[LiveDeployment]) -> Wanted {
    let refusal = plan.conditions.iter().find(|c| !c.status && c.type_ != PAUSED);
    match (plan.installed_version.as_deref(), refusal) {
        (None, None) => return Reason::NotInstalled.not_ready("nothing is installed yet"),
        (None, Some(r)) => {
            return Reason::NotInstalled
                .not_ready(format!("nothing is installed: {}: {}", r.reason, r.message));
        }
        // Installed and running, but not as the spec asks: Ready says why, as the refusal does.
        (Some(_), Some(r)) => {
            return Wanted::new(butler_runtime::conditions::READY, false, &r.reason, r.message.clone());
        }
        (Some(_), None) => {}
    }
    if !plan.running {
        return Reason::Paused.not_ready("the provider is paused");
    }
    let wanted: Vec<(String, String)> = plan
        .objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .map(|o| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            (text(&o["metadata"]["namespace"]), text(&o["metadata"]["name"]))
        })
        .collect();
    let waiting: Vec<String> = wanted
        .iter()
        .filter(|(ns, name)| !live.iter().any(|d| &d.namespace == ns && &d.name == name && d.available))
        .map(|(ns, name)| format!("{ns}/{name}"))
        .collect();
    if !waiting.is_empty() {
        return Reason::DeploymentsNotAvailable.not_ready(format!(
            "waiting for Deployments to finish rolling out (every replica updated, ready and available): {}",
            waiting.join(", ")
        ));
    }
    Reason::Ready.wanted(true, "installed, and every Deployment has rolled out")
}

/// What blocks deleting a provider, as a message; `None` when nothing does.
pub fn deletion_blocker(me: &ProviderView, all: &[ProviderView], users: &[String]) -> Option<String> {
    if me.key.kind == ProviderKind::Core {
        let others: Vec<String> =
            all.iter().filter(|o| o.key.kind != ProviderKind::Core).map(ProviderView::describe).collect();
        if !others.is_empty() {
            return Some(format!(
                "the core provider is deleted last; delete these first: {}",
                others.join(", ")
            ));
        }
    }
    if !users.is_empty() {
        return Some(format!(
            "workload clusters still use this provider: {}; delete them first",
            users.join(", ")
        ));
    }
    None
}

#[cfg(test)]
mod tests;
