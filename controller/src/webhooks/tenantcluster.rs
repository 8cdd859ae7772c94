//! The TenantCluster admission rules of spec/001 ("Quota Enforcement") and spec/000
//! ("Limits"), as pure functions: the Team's resource limits and feature restrictions, the
//! ProviderConfig's per-team limits, and the defaults the Team fills in. Each refusal names the
//! limit, what is in use, what is asked for and the limit.

use butler_core::api::{ProviderConfig, Team, TeamResourceLimits, TenantCluster};
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::team::usage::{Totals, footprint};

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

/// A team-scoped ProviderConfig serves its own team's clusters only.
fn scope(cluster: &TenantCluster, ctx: &Context<'_>) -> Result<(), String> {
    let Some(config) = ctx.config else { return Ok(()) };
    let namespace = cluster.namespace().unwrap_or_default();
    crate::providerconfig::plan::scope_allows(config, crate::team::plan::team_of_namespace(&namespace))
        .map_err(|why| format!("{}: {why}", who(cluster)))
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

/// The Team's and the ProviderConfig's limits, over the team's clusters.
fn limits(
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
    // Addresses of the pools teams share: the cluster's (on its ProviderConfig) and what the
    // team's other clusters take.
    if let Some(max) = limits.max_ip_addresses
        && let Some(config) = ctx.config
    {
        let asked = crate::tenantcluster::plan::addresses(cluster, config);
        if asked > 0 && ctx.addresses + asked > i64::from(max) {
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
fn restrictions(
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

/// Whether a cluster references the ProviderConfig (its namespace defaulting to the cluster's).
pub fn uses(cluster: &TenantCluster, config: &ProviderConfig) -> bool {
    let own = cluster.namespace().unwrap_or_default();
    cluster.spec.provider_config_ref.as_ref().is_some_and(|r| {
        r.name == config.name_any()
            && r.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(&own)
                == config.namespace().unwrap_or_default()
    })
}

/// The JSON patch that fills what the cluster leaves empty from its Team: the ProviderConfig,
/// the Kubernetes version, the worker count and sizes, and the addons.
pub fn defaults(cluster: &TenantCluster, team: &Team) -> Vec<Value> {
    let mut patch = Vec::new();
    let defaults = team.spec.cluster_defaults.clone().unwrap_or_default();
    let limits = team.spec.resource_limits.clone().unwrap_or_default();
    let spec = &cluster.spec;
    if spec.provider_config_ref.is_none()
        && let Some(r) = &team.spec.provider_config_ref
    {
        patch.push(json!({"op": "add", "path": "/spec/providerConfigRef", "value": {"name": r.name}}));
    }
    if spec.kubernetes_version.as_deref().is_none_or(str::is_empty)
        && let Some(v) = &defaults.kubernetes_version
    {
        patch.push(json!({"op": "add", "path": "/spec/kubernetesVersion", "value": v}));
    }
    let replicas = defaults.worker_count.or(limits.default_node_count);
    let cpu = defaults.worker_cpu.clone().or(limits.default_cpu_per_node.clone()).map(|q| q.0);
    let memory = defaults
        .worker_memory_gi
        .map(|g| format!("{g}Gi"))
        .or(limits.default_memory_per_node.clone().map(|q| q.0));
    let disk = defaults.worker_disk_gi.map(|g| format!("{g}Gi"));
    let workers = spec.workers.clone().unwrap_or_default();
    let machine = workers.machine_template.clone().unwrap_or_default();
    let fills = [
        ("/spec/workers/replicas", workers.replicas.is_none(), replicas.map(|r| json!(r))),
        ("/spec/workers/machineTemplate/cpu", machine.cpu.is_none(), cpu.map(|c| json!(c))),
        ("/spec/workers/machineTemplate/memory", machine.memory.is_none(), memory.map(|m| json!(m))),
        ("/spec/workers/machineTemplate/diskSize", machine.disk_size.is_none(), disk.map(|d| json!(d))),
    ];
    let mut have_workers = spec.workers.is_some();
    let mut have_machine = workers.machine_template.is_some();
    for (path, empty, value) in fills {
        let Some(value) = value.filter(|_| empty) else { continue };
        if !have_workers {
            patch.push(json!({"op": "add", "path": "/spec/workers", "value": {}}));
            have_workers = true;
        }
        if path.contains("machineTemplate") && !have_machine {
            patch.push(json!({"op": "add", "path": "/spec/workers/machineTemplate", "value": {}}));
            have_machine = true;
        }
        patch.push(json!({"op": "add", "path": path, "value": value}));
    }
    if spec.addons.as_ref().is_none_or(|a| a.is_empty())
        && let Some(addons) = defaults.default_addons.filter(|a| !a.is_empty())
    {
        let value: Vec<Value> = addons.iter().map(|a| json!({"name": a})).collect();
        patch.push(json!({"op": "add", "path": "/spec/addons", "value": value}));
    }
    patch
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(spec: &str) -> Team {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: a}}\nspec:\n  access: {{}}\n{spec}"
        ))
        .unwrap()
    }

    fn cluster(name: &str, spec: &str) -> TenantCluster {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: team-a}}\nspec:\n  kubernetesVersion: 1.30.4\n  providerConfigRef: {{name: pc, namespace: butler-system}}\n{spec}"
        ))
        .unwrap()
    }

    fn config(spec: &str) -> ProviderConfig {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc, namespace: butler-system}}\nspec:\n  provider: harvester\n  credentialsRef: {{name: c}}\n{spec}"
        ))
        .unwrap()
    }

    #[test]
    fn versions_match_patterns() {
        assert!(version_allowed("1.30.4", "1.30.x"));
        assert!(version_allowed("v1.30.4", "1.30.x"));
        assert!(version_allowed("1.30.4+rke2r1", "1.30.4"));
        assert!(!version_allowed("1.31.0", "1.30.x"));
        assert!(!version_allowed("1.3", "1.30.x"));
    }

    #[test]
    fn limits_name_the_use_the_request_and_the_limit() {
        let t = team(
            "  resourceLimits: {maxClusters: 2, maxNodesPerCluster: 5, maxTotalNodes: 8, maxCPUCores: '20', maxMemory: 64Gi}\n",
        );
        let existing = cluster("one", "  workers: {replicas: 4, machineTemplate: {cpu: '4', memory: 8Gi}}\n");
        let ctx = Context { team: Some(&t), config: None, others: vec![&existing], ..Default::default() };
        let cases: &[(&str, Result<(), &str>)] = &[
            ("  workers: {replicas: 2, machineTemplate: {cpu: '1', memory: 4Gi}}\n", Ok(())),
            (
                "  workers: {replicas: 6}\n",
                Err(
                    "TenantCluster team-a/new would exceed the Team's maxNodesPerCluster: 0 in use, 6 requested, limit 5; lower the request, remove a cluster, or raise the limit",
                ),
            ),
            (
                "  workers: {replicas: 5}\n",
                Err(
                    "TenantCluster team-a/new would exceed the Team's maxTotalNodes: 4 in use, 5 requested, limit 8; lower the request, remove a cluster, or raise the limit",
                ),
            ),
            (
                "  workers: {replicas: 1, machineTemplate: {cpu: '5'}}\n",
                Err(
                    "TenantCluster team-a/new would exceed the Team's maxCPUCores: 16 in use, 5 requested, limit 20; lower the request, remove a cluster, or raise the limit",
                ),
            ),
            (
                "  workers: {replicas: 2, machineTemplate: {memory: 20Gi}}\n",
                Err(
                    "TenantCluster team-a/new would exceed the Team's maxMemory: 32Gi in use, 40Gi requested, limit 64Gi; lower the request, remove a cluster, or raise the limit",
                ),
            ),
        ];
        for (spec, expected) in cases {
            let got = validate(&cluster("new", spec), &ctx);
            assert_eq!(got.as_ref().map_err(String::as_str), expected.as_ref().map_err(|e| *e), "{spec}");
        }
        let two = cluster("two", "  workers: {replicas: 1}\n");
        let full =
            Context { team: Some(&t), config: None, others: vec![&existing, &two], ..Default::default() };
        assert!(
            validate(&cluster("three", "  workers: {replicas: 1}\n"), &full)
                .unwrap_err()
                .contains("maxClusters: 2 in use, 1 requested, limit 2")
        );
        let no_team = Context { team: None, config: None, others: vec![], ..Default::default() };
        assert_eq!(validate(&cluster("x", "  workers: {replicas: 99}\n"), &no_team), Ok(()));
    }

    #[test]
    fn a_team_takes_no_more_of_the_shared_pools_than_its_address_limit() {
        let t = team("  resourceLimits: {maxIPAddresses: 16}\n");
        let pc = config(
            "  harvester: {networkName: a/b}\n  network: {mode: ipam, poolRefs: [{name: lab}], loadBalancer: {defaultPoolSize: 4}}\n",
        );
        let with = |used: i64| Context { team: Some(&t), config: Some(&pc), others: vec![], addresses: used };
        let big = cluster("big", "  networking: {lbPoolSize: 12, nodeIPs: 3}\n");
        assert_eq!(
            validate(&big, &with(4)).unwrap_err(),
            "TenantCluster team-a/big would exceed the Team's maxIPAddresses: 4 in use, 15 requested, limit 16; lower the request, remove a cluster, or raise the limit"
        );
        assert_eq!(validate(&big, &with(1)), Ok(()));
        assert_eq!(validate(&cluster("small", ""), &with(12)), Ok(()), "the config's default of 4");
        // Growing is checked; shrinking is not.
        let grown = cluster("big", "  networking: {lbPoolSize: 13, nodeIPs: 3}\n");
        assert!(validate_update(&big, &grown, &with(1)).unwrap_err().contains("maxIPAddresses"));
        assert_eq!(validate_update(&grown, &big, &with(16)), Ok(()));
        // Cloud mode takes no pool addresses.
        let cloud = config("  harvester: {networkName: a/b}\n  network: {mode: cloud}\n");
        let ctx = Context { team: Some(&t), config: Some(&cloud), others: vec![], addresses: 16 };
        assert_eq!(validate(&big, &ctx), Ok(()));
    }

    #[test]
    fn re_pointing_counts_against_the_new_config_and_an_unknown_config_is_no_way_past_the_providers() {
        let t = team("  resourceLimits:\n    allowedProviders: [harvester]\n");
        let full = config("  harvester: {networkName: a/b}\n  limits: {maxClustersPerTeam: 1}\n");
        let there = cluster("there", "");
        let moved = cluster("moved", "  workers: {replicas: 1}\n");
        let mut before = moved.clone();
        before.spec.provider_config_ref.as_mut().unwrap().name = "other".into();
        let ctx = Context { team: Some(&t), config: Some(&full), others: vec![&there], ..Default::default() };
        assert!(
            validate_update(&before, &moved, &ctx)
                .unwrap_err()
                .contains("maxClustersPerTeam: 1 in use, 1 requested"),
            "re-pointed at a full ProviderConfig"
        );
        let unknown = Context { team: Some(&t), config: None, others: vec![], ..Default::default() };
        let refused = validate(&cluster("c", ""), &unknown).unwrap_err();
        assert!(
            refused.contains("the team allows the providers harvester only, and the ProviderConfig butler-system/pc of spec.providerConfigRef does not exist (yet)"),
            "{refused}"
        );
        let open = team("");
        let ctx = Context { team: Some(&open), config: None, others: vec![], ..Default::default() };
        assert_eq!(validate(&cluster("c", ""), &ctx), Ok(()), "no provider restriction: nothing to check");
    }

    #[test]
    fn feature_restrictions_and_provider_limits() {
        let t = team(
            "  resourceLimits:\n    allowedKubernetesVersions: ['1.29.x']\n    allowedProviders: [nutanix]\n    allowedAddons: [cilium, longhorn]\n    deniedAddons: [longhorn]\n",
        );
        let pc = config(
            "  harvester: {networkName: a/b}\n  limits: {maxClustersPerTeam: 1, maxNodesPerTeam: 4}\n",
        );
        let ctx = Context { team: Some(&t), config: Some(&pc), others: vec![], ..Default::default() };
        assert!(
            validate(&cluster("c", ""), &ctx)
                .unwrap_err()
                .contains("Kubernetes \"1.30.4\" is not allowed in this team; allowed: 1.29.x")
        );
        let t = team("  resourceLimits:\n    allowedProviders: [nutanix]\n");
        let ctx = Context { team: Some(&t), config: Some(&pc), others: vec![], ..Default::default() };
        assert!(
            validate(&cluster("c", ""), &ctx)
                .unwrap_err()
                .contains("the provider harvester is not allowed in this team; allowed: nutanix")
        );
        let t =
            team("  resourceLimits:\n    allowedAddons: [cilium, longhorn]\n    deniedAddons: [longhorn]\n");
        let ctx = Context { team: Some(&t), config: Some(&pc), others: vec![], ..Default::default() };
        assert!(
            validate(&cluster("c", "  addons: [{name: LongHorn}]\n"), &ctx).unwrap_err().contains("denied"),
            "names compare without case"
        );
        assert_eq!(validate(&cluster("c", "  addons: [{name: Cilium}]\n"), &ctx), Ok(()));
        assert!(
            validate(&cluster("c", "  addons: [{name: longhorn}]\n"), &ctx)
                .unwrap_err()
                .contains("the addon longhorn is denied"),
            "denied wins over allowed"
        );
        assert!(
            validate(&cluster("c", "  addons: [{name: istio}]\n"), &ctx)
                .unwrap_err()
                .contains("the addon istio is not allowed in this team; allowed: cilium, longhorn")
        );
        let on_pc = cluster("one", "  workers: {replicas: 2}\n");
        let elsewhere = serde_saphyr::from_str::<TenantCluster>("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {name: other, namespace: team-a}\nspec:\n  providerConfigRef: {name: another}\n  workers: {replicas: 9}\n").unwrap();
        let plain = team("");
        let ctx = Context {
            team: Some(&plain),
            config: Some(&pc),
            others: vec![&on_pc, &elsewhere],
            ..Default::default()
        };
        assert!(
            validate(&cluster("c", "  workers: {replicas: 1}\n"), &ctx)
                .unwrap_err()
                .contains("the ProviderConfig pc's maxClustersPerTeam: 1 in use, 1 requested, limit 1")
        );
        assert!(uses(&on_pc, &pc) && !uses(&elsewhere, &pc));
    }

    #[test]
    fn an_update_is_checked_only_for_what_it_raises_or_changes() {
        // The limits were lowered under the team's clusters: 8 nodes in use, 4 allowed now.
        let t = team("  resourceLimits: {maxTotalNodes: 4, allowedKubernetesVersions: ['1.30.x']}\n");
        let other = cluster("other", "  workers: {replicas: 4}\n");
        let ctx = Context { team: Some(&t), config: None, others: vec![&other], ..Default::default() };
        let old = cluster("web", "  workers: {replicas: 4}\n");
        assert_eq!(validate_update(&old, &old, &ctx), Ok(()), "an unchanged spec");
        let smaller = cluster("web", "  workers: {replicas: 2}\n");
        assert_eq!(validate_update(&old, &smaller, &ctx), Ok(()), "scaling down is always allowed");
        let larger = cluster("web", "  workers: {replicas: 5}\n");
        let refused = validate_update(&old, &larger, &ctx).unwrap_err();
        assert!(refused.contains("maxTotalNodes: 4 in use, 5 requested, limit 4"), "{refused}");
        let was = cluster("web", "  workers: {replicas: 4, machineTemplate: {cpu: '4'}}\n");
        let bigger_machines = cluster("web", "  workers: {replicas: 4, machineTemplate: {cpu: '8'}}\n");
        assert!(validate_update(&was, &bigger_machines, &ctx).is_err(), "larger machines raise usage");
        // A version the team may no longer use stays, until it is changed.
        let mut old_version = cluster("web", "  workers: {replicas: 4}\n");
        old_version.spec.kubernetes_version = Some("1.29.1".into());
        let mut down = old_version.clone();
        down.spec.workers.as_mut().unwrap().replicas = Some(1);
        assert_eq!(validate_update(&old_version, &down, &ctx), Ok(()));
        let mut moved = old_version.clone();
        moved.spec.kubernetes_version = Some("1.29.2".into());
        let refused = validate_update(&old_version, &moved, &ctx).unwrap_err();
        assert!(refused.contains("is not allowed in this team"), "{refused}");
    }

    #[test]
    fn sizes_must_be_positive_quantities() {
        let t = team("  resourceLimits: {maxCPUCores: '8'}\n");
        let ctx = Context { team: Some(&t), config: None, others: vec![], ..Default::default() };
        for (spec, field) in [
            ("  workers: {replicas: 1, machineTemplate: {cpu: lots}}\n", "cpu \"lots\""),
            ("  workers: {replicas: 1, machineTemplate: {cpu: '-4'}}\n", "cpu \"-4\""),
            ("  workers: {replicas: 1, machineTemplate: {memory: '0'}}\n", "memory \"0\""),
            ("  workers: {replicas: 1, machineTemplate: {diskSize: 10XB}}\n", "diskSize \"10XB\""),
        ] {
            let refused = validate(&cluster("c", spec), &ctx).unwrap_err();
            assert!(
                refused.starts_with(&format!(
                    "TenantCluster team-a/c: spec.workers.machineTemplate.{field} is not a positive quantity"
                )),
                "{refused}"
            );
        }
        let refused = validate(&cluster("c", "  workers: {replicas: -3}\n"), &ctx).unwrap_err();
        assert!(refused.contains("spec.workers.replicas -3 is negative"), "{refused}");
        assert_eq!(
            validate(
                &cluster("c", "  workers: {replicas: 1, machineTemplate: {cpu: 500m, memory: 2Gi}}\n"),
                &ctx
            ),
            Ok(())
        );
    }

    #[test]
    fn defaults_fill_only_what_is_empty() {
        let t = team(
            "  providerConfigRef: {name: team-pc}\n  resourceLimits: {defaultNodeCount: 2, defaultCPUPerNode: '2'}\n  clusterDefaults: {kubernetesVersion: 1.30.4, workerMemoryGi: 16, workerDiskGi: 100, defaultAddons: [cilium]}\n",
        );
        let bare: TenantCluster = serde_saphyr::from_str("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {name: c, namespace: team-a}\nspec: {}\n").unwrap();
        let mut object = serde_json::to_value(&bare).unwrap();
        let patch: json_patch::Patch = serde_json::from_value(Value::Array(defaults(&bare, &t))).unwrap();
        json_patch::patch(&mut object, &patch).unwrap();
        assert_eq!(
            object["spec"],
            json!({"providerConfigRef": {"name": "team-pc"}, "kubernetesVersion": "1.30.4",
                   "workers": {"replicas": 2, "machineTemplate": {"cpu": "2", "memory": "16Gi", "diskSize": "100Gi"}},
                   "addons": [{"name": "cilium"}]})
        );
        let full = cluster(
            "c",
            "  workers: {replicas: 5, machineTemplate: {cpu: '8', memory: 1Gi, diskSize: 1Gi}}\n  addons: [{name: x}]\n",
        );
        assert_eq!(defaults(&full, &t), Vec::<Value>::new());
    }
}
