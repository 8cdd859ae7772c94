//! The team's limits on a TenantCluster: the Team's resource limits and the ProviderConfig's
//! per-team limits over the team's clusters, and the Team's restrictions (Kubernetes
//! versions, providers, addons).

use butler_core::api::{Team, TeamResourceLimits, TenantCluster};
use kube::ResourceExt;

use super::{Context, over, uses, version_allowed, who};
use crate::team::usage::{Totals, footprint};

/// The Team's and the ProviderConfig's limits, over the team's clusters.
pub(super) fn limits(
    cluster: &TenantCluster,
    ctx: &Context<'_>,
    team: &Team,
    limits: &TeamResourceLimits,
) -> Result<(), String> {
    let mine = footprint(cluster, Some(team));
    let others = Totals::of(team, &ctx.others);
    let mut with_me = others.clone();
    with_me.add(&cluster.name_any(), &mine);
    // Counts.
    if let Some(max) = limits.max_clusters
        && with_me.clusters > max
    {
        return Err(over(
            cluster,
            "Team",
            "maxClusters",
            &others.clusters.to_string(),
            "1",
            &max.to_string(),
        ));
    }
    if let Some(max) = limits.max_nodes_per_cluster
        && mine.replicas > max
    {
        return Err(over(
            cluster,
            "Team",
            "maxNodesPerCluster",
            "0",
            &mine.replicas.to_string(),
            &max.to_string(),
        ));
    }
    if let Some(max) = limits.max_total_nodes
        && with_me.nodes > i64::from(max)
    {
        return Err(over(
            cluster,
            "Team",
            "maxTotalNodes",
            &others.nodes.to_string(),
            &mine.replicas.to_string(),
            &max.to_string(),
        ));
    }
    // Sizes.
    let sized = [
        ("maxCPUCores", limits.max_cpu_cores.as_ref(), &others.cpu, &with_me.cpu, &mine.cpu),
        ("maxMemory", limits.max_memory.as_ref(), &others.memory, &with_me.memory, &mine.memory),
        ("maxStorage", limits.max_storage.as_ref(), &others.storage, &with_me.storage, &mine.storage),
    ];
    for (name, limit, used, total, one) in sized {
        let Some(limit) = limit.and_then(|l| kube_quantity::ParsedQuantity::try_from(l).ok()) else {
            continue;
        };
        let number = |q: &Option<kube_quantity::ParsedQuantity>| {
            q.as_ref().and_then(|q| q.to_bytes_f64()).unwrap_or(0.0)
        };
        if number(total) > limit.to_bytes_f64().unwrap_or(f64::MAX) {
            let text =
                |q: &Option<kube_quantity::ParsedQuantity>| q.as_ref().map_or("0".into(), |q| q.to_string());
            let asked = one.clone().map(|q| q * mine.replicas);
            return Err(over(cluster, "Team", name, &text(used), &text(&asked), &limit.to_string()));
        }
    }
    // Addresses of the pools teams share: what the cluster takes (what its ProviderConfig gives
    // it, or what its allocations hold, whichever is more) and what the team's other clusters
    // take.
    if let Some(max) = limits.max_ip_addresses {
        let planned = ctx.config.map_or(0, |config| crate::tenantcluster::plan::addresses(cluster, config));
        let asked = crate::ipam::held::cluster(ctx.held, planned);
        if asked > 0 && ctx.addresses.saturating_add(asked) > i64::from(max) {
            return Err(over(
                cluster,
                "Team",
                "maxIPAddresses",
                &ctx.addresses.to_string(),
                &asked.to_string(),
                &max.to_string(),
            ));
        }
    }
    // The ProviderConfig's limits, over the team's clusters on it.
    if let Some(config) = ctx.config
        && let Some(limits) = &config.spec.limits
    {
        let on_config: Vec<&TenantCluster> = ctx.others.iter().copied().filter(|c| uses(c, config)).collect();
        let mut totals = Totals::of(team, &on_config);
        let used = totals.clone();
        totals.add(&cluster.name_any(), &mine);
        let owner = format!("ProviderConfig {}", config.name_any());
        if let Some(max) = limits.max_clusters_per_team
            && totals.clusters > max
        {
            return Err(over(
                cluster,
                &owner,
                "maxClustersPerTeam",
                &used.clusters.to_string(),
                "1",
                &max.to_string(),
            ));
        }
        if let Some(max) = limits.max_nodes_per_team
            && totals.nodes > i64::from(max)
        {
            return Err(over(
                cluster,
                &owner,
                "maxNodesPerTeam",
                &used.nodes.to_string(),
                &mine.replicas.to_string(),
                &max.to_string(),
            ));
        }
    }
    Ok(())
}

/// The team's restrictions: allowed Kubernetes versions, providers and addons.
pub(super) fn restrictions(
    cluster: &TenantCluster,
    ctx: &Context<'_>,
    limits: &butler_core::api::TeamResourceLimits,
) -> Result<(), String> {
    if let Some(allowed) = limits.allowed_kubernetes_versions.as_ref().filter(|a| !a.is_empty()) {
        let version = cluster.spec.kubernetes_version.clone().unwrap_or_default();
        if !allowed.iter().any(|p| version_allowed(&version, p)) {
            return Err(format!(
                "{}: Kubernetes {version:?} is not allowed in this team; allowed: {}",
                who(cluster),
                allowed.join(", ")
            ));
        }
    }
    if let (Some(allowed), Some(config)) =
        (limits.allowed_providers.as_ref().filter(|a| !a.is_empty()), ctx.config)
        && !allowed.iter().any(|p| p == config.spec.provider.as_str())
    {
        return Err(format!(
            "{}: the provider {} is not allowed in this team; allowed: {}",
            who(cluster),
            config.spec.provider,
            allowed.join(", ")
        ));
    }
    for addon in cluster.spec.addons.iter().flatten() {
        // Addon names as users write them: `Longhorn` is `longhorn`.
        if limits.denied_addons.iter().flatten().any(|d| d.eq_ignore_ascii_case(&addon.name)) {
            return Err(format!("{}: the addon {} is denied in this team", who(cluster), addon.name));
        }
        if let Some(allowed) = limits.allowed_addons.as_ref().filter(|a| !a.is_empty())
            && !allowed.iter().any(|a| a.eq_ignore_ascii_case(&addon.name))
        {
            return Err(format!(
                "{}: the addon {} is not allowed in this team; allowed: {}",
                who(cluster),
                addon.name,
                allowed.join(", ")
            ));
        }
    }
    Ok(())
}
