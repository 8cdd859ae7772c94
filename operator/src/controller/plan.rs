//! What a reconcile should do, decided from what was observed, without I/O: preflight, the
//! contract and pause rules, the rendered objects, what to delete, and the conditions.

use std::collections::BTreeSet;

use butler_repository::{ComponentsOptions, ImageOverrides, Version, process_components, sha256_hex};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::conditions::{self, Wanted};
use super::customize::customize;
use crate::api::{KindNames, ProviderKind, ProviderSpec};

/// Labels that tie an applied object to its provider object.
pub const LABEL_KIND: &str = "operator.butlerlabs.dev/provider-kind";
pub const LABEL_NAME: &str = "operator.butlerlabs.dev/provider-name";
pub const LABEL_NAMESPACE: &str = "operator.butlerlabs.dev/provider-namespace";
/// The replica count a paused Deployment had, to restore on unpause.
pub const PAUSED_REPLICAS: &str = "operator.butlerlabs.dev/paused-replicas";

/// One provider object, as every reconcile sees the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderView {
    pub kind: ProviderKind,
    pub namespace: String,
    pub name: String,
    /// RFC 3339 creation time, for choosing between duplicates.
    pub created: String,
    /// spec.paused.
    pub paused: bool,
    /// The Deployments are held at 0 replicas (the Paused condition is True): paused, or an
    /// unpause was refused.
    pub held: bool,
    pub contract: Option<String>,
    pub installed_version: Option<String>,
    pub deleting: bool,
}

impl ProviderView {
    pub fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    /// The key of this provider in the operator's records.
    pub fn key(&self) -> (ProviderKind, String, String) {
        (self.kind, self.namespace.clone(), self.name.clone())
    }

    pub fn installed(&self) -> bool {
        self.installed_version.is_some() && self.contract.is_some()
    }
}

/// Why a provider cannot proceed yet; becomes the PreflightCheckPassed condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blocked {
    pub reason: &'static str,
    pub message: String,
    /// Worth trying again by itself soon (waiting for another object).
    pub retry: bool,
}

fn blocked(reason: &'static str, message: String) -> Blocked {
    Blocked { reason, message, retry: false }
}

/// The checks that need no fetching: duplicates, fetchConfig, version, a known name, and the
/// core provider for the others.
pub fn preflight(
    me: &ProviderView,
    spec: &ProviderSpec,
    all: &[ProviderView],
    embedded: bool,
) -> Result<(), Blocked> {
    let older = all
        .iter()
        .filter(|o| o.kind == me.kind && o.name == me.name && o.namespace != me.namespace)
        .find(|o| (o.created.as_str(), o.namespace.as_str()) < (me.created.as_str(), me.namespace.as_str()));
    if let Some(other) = older {
        return Err(blocked(
            "DuplicateProvider",
            format!(
                "{} exists already; a provider may be installed once per cluster. Delete this one or the other",
                other.describe()
            ),
        ));
    }
    if let Some(fetch) = &spec.fetch_config
        && fetch.url.is_some() == fetch.selector.is_some()
    {
        return Err(blocked(
            "InvalidFetchConfig",
            "spec.fetchConfig needs exactly one of url and selector".into(),
        ));
    }
    if spec.fetch_config.is_none() && !embedded {
        return Err(blocked(
            "UnknownProvider",
            format!(
                "no built-in repository knows the {} {:?}; add spec.fetchConfig with the url of its repository, or a selector of ConfigMaps that hold it",
                me.kind, me.name
            ),
        ));
    }
    if let Some(version) = spec.version.as_deref().filter(|v| !v.is_empty())
        && Version::parse(version, "spec.version").is_err()
    {
        return Err(blocked(
            "InvalidVersion",
            format!("spec.version {version:?} is not a semantic version; write it as vX.Y.Z"),
        ));
    }
    if me.kind != ProviderKind::Core {
        match all.iter().find(|o| o.kind == ProviderKind::Core && !o.deleting) {
            Some(core) if core.installed() => {}
            Some(core) => {
                return Err(Blocked {
                    reason: "WaitingForCoreProvider",
                    message: format!("waiting for {} to be installed", core.describe()),
                    retry: true,
                });
            }
            None => {
                return Err(Blocked {
                    reason: "WaitingForCoreProvider",
                    message: "waiting for a CoreProvider: the core provider is installed first".into(),
                    retry: true,
                });
            }
        }
    }
    Ok(())
}

/// A reference to an applied object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectRef {
    pub fn of(object: &Value) -> ObjectRef {
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        ObjectRef {
            api_version: text(&object["apiVersion"]),
            kind: text(&object["kind"]),
            namespace: object["metadata"]["namespace"].as_str().map(String::from),
            name: text(&object["metadata"]["name"]),
        }
    }
}

/// What was installed, recorded so that the next change can delete what dropped out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub version: String,
    pub contract: String,
    /// The digest of the rendered objects; empty while an install is under way.
    pub digest: String,
    pub objects: Vec<ObjectRef>,
}

/// A provider Deployment as it is in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveDeployment {
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    pub available: bool,
    pub paused_replicas: Option<i32>,
}

/// The fetched release of the provider.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub version: Version,
    pub contract: String,
    pub components: String,
}

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
    pub events: Vec<(String, String)>,
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
    let keep = |mut plan: InstallPlan, reason: &'static str, message: String, kind: &'static str| {
        plan.conditions.push(Wanted::new(kind, false, reason, message.clone()));
        plan.events.push((reason.to_string(), message));
        plan.inventory = input.inventory.cloned().unwrap_or_default();
        plan
    };

    // No downgrade across minor versions.
    if let Some(installed) = me.installed_version.as_deref().and_then(|v| Version::parse(v, "status").ok())
        && (fetched.version.major(), fetched.version.minor()) < (installed.major(), installed.minor())
    {
        return keep(
            plan,
            "DowngradeRefused",
            format!(
                "{version} is an older minor version than the installed {installed}; a provider is never downgraded across minor versions"
            ),
            conditions::PREFLIGHT,
        );
    }
    // The contract must be the core provider's, unless this provider is paused mid-upgrade.
    let core_contract = match me.kind {
        ProviderKind::Core => Some(fetched.contract.clone()),
        _ => input
            .all
            .iter()
            .find(|o| o.kind == ProviderKind::Core && !o.deleting)
            .and_then(|c| c.contract.clone()),
    };
    if let Some(core) = &core_contract
        && core != &fetched.contract
        && !me.paused
        && !me.held
    {
        return keep(
            plan,
            "ContractMismatch",
            format!(
                "{version} abides by contract {}, but the core provider abides by {core}; to change contracts, pause every provider (spec.paused: true), upgrade them all, then unpause",
                fetched.contract
            ),
            conditions::PREFLIGHT,
        );
    }
    plan.conditions.push(Wanted::new(conditions::PREFLIGHT, true, "Passed", "the preflight checks passed"));

    // A contract change needs every provider paused.
    let changes_contract = me.contract.as_deref().is_some_and(|c| c != fetched.contract);
    if changes_contract {
        let running: Vec<String> = input
            .all
            .iter()
            .filter(|o| !o.paused && !o.held && !o.deleting)
            .map(ProviderView::describe)
            .collect();
        if !running.is_empty() {
            return keep(
                plan,
                "ContractChangeNeedsPause",
                format!(
                    "{version} changes the contract from {} to {}; pause every provider first (spec.paused: true). Not paused: {}",
                    me.contract.as_deref().unwrap_or_default(),
                    fetched.contract,
                    running.join(", ")
                ),
                conditions::UPGRADED,
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
            .filter(|o| !o.deleting && o.key() != me.key())
            .map(|o| (o.describe(), o.contract.clone().unwrap_or_else(|| "none".into())))
            .collect();
        contracts.push((me.describe(), fetched.contract.clone()));
        let distinct: BTreeSet<&String> = contracts.iter().map(|(_, c)| c).collect();
        if distinct.len() > 1 {
            paused = true;
            let listing: Vec<String> = contracts.iter().map(|(who, c)| format!("{who} {c}")).collect();
            let message = format!(
                "unpause refused: the providers disagree on the contract ({}); upgrade them to one contract, then unpause",
                listing.join(", ")
            );
            plan.conditions.push(Wanted::new(conditions::PAUSED, true, "UnpauseRefused", message.clone()));
            plan.events.push(("UnpauseRefused".into(), message));
        }
    }

    // Render.
    let label = me.kind.label(&me.name);
    let what = format!("{label} {version}");
    let options = ComponentsOptions {
        what: &what,
        provider_label: &label,
        target_namespace: Some(&me.namespace),
        images: input.images,
        variables: input.variables,
    };
    let rendered = process_components(&fetched.components, &options)
        .map_err(|e| e.to_string())
        .and_then(|c| c.objects().map(|o| (o, c.warnings)).map_err(|e| e.to_string()));
    let (mut objects, warnings) = match rendered {
        Ok(r) => r,
        Err(message) => return keep(plan, "RenderFailed", message, conditions::INSTALLED),
    };
    plan.warnings = warnings;
    if let Err(message) = customize(&mut objects, input.spec, &label) {
        return keep(plan, "InvalidCustomization", message, conditions::INSTALLED);
    }
    // The target namespace holds the provider object, so it exists; providers may share it, and
    // their components' Namespace labels would fight, so it is left alone.
    objects.retain(|o| o["kind"] != "Namespace");
    objects.sort_by_key(apply_order);
    for object in objects.iter_mut() {
        object["metadata"]["labels"][LABEL_KIND] = json!(me.kind.kind());
        object["metadata"]["labels"][LABEL_NAME] = json!(me.name);
        object["metadata"]["labels"][LABEL_NAMESPACE] = json!(me.namespace);
        if object["kind"] == "Deployment" {
            set_replicas(object, input.live, paused);
        }
    }

    let refs: Vec<ObjectRef> = objects.iter().map(ObjectRef::of).collect();
    let digest = sha256_hex(serde_json::to_string(&objects).expect("objects serialize").as_bytes());
    let previous = input.inventory.cloned().unwrap_or_default();
    plan.delete = previous
        .objects
        .iter()
        .filter(|o| !refs.contains(o) && o.kind != "CustomResourceDefinition" && o.kind != "Namespace")
        .cloned()
        .collect();
    plan.inventory = Inventory {
        version: version.clone(),
        contract: fetched.contract.clone(),
        digest: digest.clone(),
        objects: refs,
    };
    let unchanged = previous.digest == digest && previous.version == version;
    plan.changed = !unchanged;
    plan.objects = objects;
    plan.running = !paused;

    let upgrade = me.installed_version.as_deref().is_some_and(|v| v != version);
    plan.contract = Some(fetched.contract.clone());
    plan.installed_version = Some(version.clone());
    plan.conditions.push(Wanted::new(
        conditions::INSTALLED,
        true,
        "Installed",
        format!("{version} is installed (contract {})", fetched.contract),
    ));
    if upgrade {
        let from = me.installed_version.clone().unwrap_or_default();
        plan.conditions.push(Wanted::new(
            conditions::UPGRADED,
            true,
            "Upgraded",
            format!("upgraded from {from} to {version}"),
        ));
        plan.events.push(("Upgraded".into(), format!("upgraded from {from} to {version}")));
    } else if previous.version.is_empty() && !unchanged {
        plan.events.push(("Installed".into(), format!("installed {version}")));
    }
    if !plan.conditions.iter().any(|c| c.type_ == conditions::PAUSED) {
        plan.conditions.push(match paused {
            true => {
                Wanted::new(conditions::PAUSED, true, "Paused", "the provider's Deployments are scaled to 0")
            }
            false => Wanted::new(conditions::PAUSED, false, "Running", "the provider's Deployments run"),
        });
        if paused && !was_paused {
            plan.events.push(("Paused".into(), "scaled the provider's Deployments to 0".into()));
        }
        if !paused && was_paused {
            plan.events.push(("Unpaused".into(), "restored the provider's Deployments".into()));
        }
    }
    plan
}

/// CRDs first, so their kinds are served before objects of them; webhook configurations last,
/// so that no webhook points at a Service before it exists. The sort is stable.
fn apply_order(object: &Value) -> u8 {
    match object["kind"].as_str().unwrap_or_default() {
        "CustomResourceDefinition" => 0,
        "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => 2,
        _ => 1,
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

/// The Ready condition: installed, running and every Deployment Available. The Deployments
/// are those the plan wants (so the message does not change while the cache catches up).
pub fn readiness(plan: &InstallPlan, live: &[LiveDeployment]) -> Wanted {
    if plan.installed_version.is_none()
        || plan.conditions.iter().any(|c| !c.status && c.type_ != conditions::PAUSED)
    {
        return Wanted::new(
            conditions::READY,
            false,
            "NotInstalled",
            "the provider is not installed as its spec asks",
        );
    }
    if !plan.running {
        return Wanted::new(conditions::READY, false, "Paused", "the provider is paused");
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
        return Wanted::new(
            conditions::READY,
            false,
            "DeploymentsNotAvailable",
            format!("waiting for Deployments to be Available: {}", waiting.join(", ")),
        );
    }
    Wanted::new(conditions::READY, true, "Ready", "installed, and every Deployment is Available")
}

/// What blocks deleting a provider, as a message; `None` when nothing does.
pub fn deletion_blocker(me: &ProviderView, all: &[ProviderView], users: &[String]) -> Option<String> {
    if me.kind == ProviderKind::Core {
        let others: Vec<String> =
            all.iter().filter(|o| o.kind != ProviderKind::Core).map(ProviderView::describe).collect();
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
