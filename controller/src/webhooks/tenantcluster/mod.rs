//! The TenantCluster admission rules of spec/001 ("Quota Enforcement") and spec/000
//! ("Limits"), as pure functions: the Team's resource limits and feature restrictions, the
//! ProviderConfig's per-team limits, and the defaults the Team fills in. Each refusal names the
//! limit, what is in use, what is asked for and the limit.

use butler_core::api::{ProviderConfig, Team, TeamResourceLimits, TenantCluster};
use kube::ResourceExt;

mod defaults;
mod limits;

pub use defaults::defaults;
use limits::{limits, restrictions};

use crate::team::usage::footprint;

/// What a TenantCluster is checked against.
#[derive(Default)]
pub struct Context<'a> {
    /// The Team of the cluster's namespace, if any.
    pub team: Option<&'a Team>,
    /// The ProviderConfig the cluster references, if it exists.
    pub config: Option<&'a ProviderConfig>,
    /// The team's other TenantClusters (on update, without this one).
    pub others: Vec<&'a TenantCluster>,
    /// The pool addresses the team's other clusters take (each on its own ProviderConfig).
    pub addresses: i64,
    /// The pool addresses this cluster's allocations hold or wait for now (on update, those of
    /// a ProviderConfig it no longer names too, until they are given back).
    pub held: i64,
}

fn who(cluster: &TenantCluster) -> String {
    format!("TenantCluster {}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any())
}

fn over(
    cluster: &TenantCluster,
    owner: &str,
    limit_name: &str,
    used: &str,
    asked: &str,
    limit: &str,
) -> String {
    format!(
        "{} would exceed the {owner}'s {limit_name}: {used} in use, {asked} requested, limit {limit}; lower the request, remove a cluster, or raise the limit",
        who(cluster)
    )
}

/// Whether a Kubernetes version matches an allowed pattern (`1.30.x`, `1.30.4`, with or without
/// the `v`).
pub fn version_allowed(version: &str, pattern: &str) -> bool {
    let version: Vec<&str> = version.trim().trim_start_matches('v').split(['.', '+', '-']).collect();
    let pattern: Vec<&str> = pattern.trim().trim_start_matches('v').split('.').collect();
    pattern.iter().enumerate().all(|(i, p)| *p == "x" || *p == "*" || version.get(i) == Some(p))
}

/// The sizes of a cluster's machines: quantities Kubernetes can read, and more than zero.
/// (Unreadable or negative sizes would count as nothing, or subtract from the team's use.)
pub fn sizes(cluster: &TenantCluster) -> Result<(), String> {
    let machine = cluster.spec.workers.as_ref().and_then(|w| w.machine_template.as_ref());
    let fields = [
        ("cpu", machine.and_then(|m| m.cpu.as_ref())),
        ("memory", machine.and_then(|m| m.memory.as_ref())),
        ("diskSize", machine.and_then(|m| m.disk_size.as_ref())),
    ];
    for (field, quantity) in fields {
        let Some(quantity) = quantity else { continue };
        let positive = kube_quantity::ParsedQuantity::try_from(quantity)
            .ok()
            .and_then(|q| q.to_bytes_f64())
            .is_some_and(|n| n > 0.0);
        if !positive {
            return Err(format!(
                "{}: spec.workers.machineTemplate.{field} {:?} is not a positive quantity; write it as Kubernetes does, such as 4, 500m, 16Gi",
                who(cluster),
                quantity.0
            ));
        }
    }
    match cluster.spec.workers.as_ref().and_then(|w| w.replicas) {
        Some(replicas) if replicas < 0 => {
            Err(format!("{}: spec.workers.replicas {replicas} is negative; give 0 or more", who(cluster)))
        }
        _ => Ok(()),
    }
}

/// The rules of create: readable sizes, the ProviderConfig's scope, the team's restrictions
/// and every limit.
pub fn validate(cluster: &TenantCluster, ctx: &Context<'_>) -> Result<(), String> {
    sizes(cluster)?;
    scope(cluster, ctx)?;
    check(cluster, ctx, true, true)
}

/// A team-scoped ProviderConfig serves its own team's clusters only. One in another team's
/// namespace is refused by that namespace, whether or not the webhook knows the config yet (the
/// team could make it after, or the cache not have it yet).
fn scope(cluster: &TenantCluster, ctx: &Context<'_>) -> Result<(), String> {
    let namespace = cluster.namespace().unwrap_or_default();
    let team = crate::team::plan::team_of_namespace(&namespace);
    if let Some(r) = cluster.spec.provider_config_ref.as_ref() {
        let target = r.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(&namespace);
        if let Some(owner) = crate::team::plan::team_of_namespace(target)
            && team != Some(owner)
        {
            return Err(format!(
                "{}: the ProviderConfig {target}/{} is in the namespace of the team {owner:?}, and only that team's clusters may use it; point spec.providerConfigRef at a platform ProviderConfig (outside every team's namespace) or one of your team's",
                who(cluster),
                r.name
            ));
        }
    }
    let Some(config) = ctx.config else { return Ok(()) };
    crate::providerconfig::plan::scope_allows(config, team).map_err(|why| format!("{}: {why}", who(cluster)))
}

/// The rules of an update, which must never lock a team out of its own clusters: sizes are
/// readable; the restrictions are checked when what they restrict changes (version, addons,
/// ProviderConfig), the limits when the cluster grows (more workers, or larger ones). A change
/// that shrinks a cluster, or leaves its size alone, passes after the limits were lowered.
pub fn validate_update(
    old: &TenantCluster,
    cluster: &TenantCluster,
    ctx: &Context<'_>,
) -> Result<(), String> {
    sizes(cluster)?;
    let team = ctx.team;
    let (before, after) = (footprint(old, team), footprint(cluster, team));
    let larger = |a: &Option<kube_quantity::ParsedQuantity>, b: &Option<kube_quantity::ParsedQuantity>| {
        let n = |q: &Option<kube_quantity::ParsedQuantity>| {
            q.as_ref().and_then(|q| q.to_bytes_f64()).unwrap_or(0.0)
        };
        n(a) > n(b)
    };
    let addresses =
        |c: &TenantCluster| ctx.config.map_or(0, |config| crate::tenantcluster::plan::addresses(c, config));
    let grows = after.replicas > before.replicas
        || addresses(cluster) > addresses(old)
        || larger(&after.cpu, &before.cpu)
        || larger(&after.memory, &before.memory)
        || larger(&after.storage, &before.storage);
    let (o, n) = (&old.spec, &cluster.spec);
    let restricted = o.kubernetes_version != n.kubernetes_version
        || o.addons != n.addons
        || o.provider_config_ref != n.provider_config_ref;
    // Re-pointed, the cluster counts against the new ProviderConfig's limits as a new one would.
    let re_pointed = o.provider_config_ref != n.provider_config_ref;
    if re_pointed {
        scope(cluster, ctx)?;
    }
    check(cluster, ctx, restricted, grows || re_pointed)
}

fn check(
    cluster: &TenantCluster,
    ctx: &Context<'_>,
    restrictions: bool,
    limits_too: bool,
) -> Result<(), String> {
    let Some(team) = ctx.team else { return Ok(()) };
    let limits = team.spec.resource_limits.clone().unwrap_or_default();
    if restrictions {
        self::restrictions(cluster, ctx, &limits)?;
    }
    if limits_too {
        self::limits(cluster, ctx, team, &limits)?;
    }
    if restrictions {
        unknown_config(cluster, ctx, &limits)?;
    }
    Ok(())
}

/// With `allowedProviders` set, a ProviderConfig the webhook does not know (yet) cannot be
/// checked: the cluster is refused, not let by (else the team could make the config after, of
/// a provider it may not use). Last, so that what else the cluster breaks is said first.
fn unknown_config(
    cluster: &TenantCluster,
    ctx: &Context<'_>,
    limits: &TeamResourceLimits,
) -> Result<(), String> {
    let allowed = limits.allowed_providers.as_ref().filter(|a| !a.is_empty());
    let (Some(allowed), None, Some(r)) = (allowed, ctx.config, cluster.spec.provider_config_ref.as_ref())
    else {
        return Ok(());
    };
    let namespace = r.namespace.clone().filter(|n| !n.is_empty()).or_else(|| cluster.namespace());
    Err(format!(
        "{}: the team allows the providers {} only, and the ProviderConfig {}/{} of spec.providerConfigRef does not exist (yet), so its provider cannot be checked; create it first, or name another",
        who(cluster),
        allowed.join(", "),
        namespace.unwrap_or_default(),
        r.name
    ))
}

/// Whether a cluster references the ProviderConfig (its namespace defaulting to the cluster's).
pub fn uses(cluster: &TenantCluster, config: &ProviderConfig) -> bool {
    let own = cluster.namespace().unwrap_or_default();
    cluster.spec.provider_config_ref.as_ref().is_some_and(|r| {
        r.name == config.name_any()
            && r.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(&own)
                == config.namespace().unwrap_or_default()
    })
}

#[cfg(test)]
mod tests;
