//! The IPAM part of a TenantCluster (spec/002 "Static IPAM"), as pure functions: which
//! ProviderConfig settings apply, the initial load-balancer allocation (its size, its pool by
//! priority and free addresses, its name and labels), what the cluster's status says, and what
//! its deletion removes.

use std::collections::BTreeSet;
use std::time::Duration;

use butler_core::api::labels::{
    ALLOCATION_ROLE_INITIAL, LABEL_ALLOCATION_ROLE, LABEL_ALLOCATION_TYPE, LABEL_NETWORK_POOL, LABEL_TEAM,
    LABEL_TENANT,
};
use butler_core::api::{
    AllocationMode, AllocationType, IPAllocation, IPAllocationPhase, IPAllocationSpec, LocalObjectReference,
    NamespacedObjectReference, NetworkMode, NetworkPool, ProviderConfig, TenantCluster,
};
use butler_runtime::conditions::{READY, Wanted};
use kube::ResourceExt;
use kube::api::ObjectMeta;

/// The condition this controller keeps on a TenantCluster.
pub const IPAM_READY: &str = "IPAMReady";

/// Load-balancer addresses when neither the cluster nor the ProviderConfig says (spec/002).
pub const DEFAULT_LB_POOL_SIZE: i32 = 8;
pub const DEFAULT_INITIAL_POOL_SIZE: i32 = 2;

/// The TenantCluster's `Ready` as far as this controller knows it: its addresses are allocated
/// and the tenant's MetalLB has them (`IPAMReady` and `MetalLBSynced`; elastic growth that
/// waits does not make a running cluster unready), or IPAM has nothing to do for it (`ipam`
/// false). False with the first reason that is not.
pub fn readiness(wanted: &[Wanted], ipam: bool) -> Wanted {
    let gating = [IPAM_READY, super::METALLB_SYNCED];
    match wanted.iter().find(|w| gating.contains(&w.type_) && !w.status) {
        Some(first) => Wanted::new(READY, false, &first.reason, first.message.clone()),
        None if ipam => {
            Wanted::new(READY, true, "Ready", "its addresses are allocated and its MetalLB serves them")
        }
        None => Wanted::new(READY, true, "Ready", "IPAM has nothing to do for it"),
    }
}

/// `IPAMReady` of a cluster that IPAM does not serve: true, so that its status says its
/// generation was seen and nothing of IPAM holds it back (issue 39.8).
fn not_served(reason: &str, message: &str) -> Plan {
    Plan { condition: Some(Wanted::new(IPAM_READY, true, reason, message)), ..Plan::default() }
}

/// What the plan reads.
pub struct Observed<'a> {
    pub cluster: &'a TenantCluster,
    /// The ProviderConfig of `spec.providerConfigRef`, if the cluster names one and it exists.
    pub config: Option<&'a ProviderConfig>,
    /// NetworkPools of the ProviderConfig's namespace, by name.
    pub pool: &'a (dyn Fn(&str) -> Option<&'a NetworkPool> + Sync),
    /// The IPAllocations whose tenantClusterRef is this cluster.
    pub allocations: Vec<&'a IPAllocation>,
    /// The team of the cluster's namespace, if it is a team's.
    pub team: Option<&'a str>,
}

/// What should be.
#[derive(Debug, Default)]
pub struct Plan {
    /// Whether IPAM applies: the finalizer is wanted.
    pub ipam: bool,
    pub create: Vec<IPAllocation>,
    /// Allocations of this cluster to delete, (namespace, name).
    pub delete: Vec<(String, String)>,
    pub condition: Option<Wanted>,
    pub lb_allocation_ref: Option<NamespacedObjectReference>,
    pub ip_allocation_ref: Option<NamespacedObjectReference>,
    /// Ranges of the cluster's Allocated load-balancer allocations, `start-end`.
    pub addresses: Vec<String>,
    pub requeue: Option<Duration>,
}

/// The namespace and name of the cluster's ProviderConfig reference, if any.
pub fn config_ref(cluster: &TenantCluster) -> Option<(String, String)> {
    let r = cluster.spec.provider_config_ref.as_ref()?;
    let ns = r.namespace.clone().filter(|n| !n.is_empty()).or(cluster.namespace())?;
    Some((ns, r.name.clone()))
}

/// The longest suffix an allocation name takes (`-lb-` and a growth number).
const LONGEST_SUFFIX: usize = "-lb-4294967295".len();

/// What every allocation name of a cluster starts with: `{namespace}.{name}`. A namespace name
/// holds no '.', so no two clusters share it (joined with '-', as earlier versions did,
/// `a-b`/`c` and `a`/`b-c` both made `a-b-c-lb`); one too long to take a suffix within the
/// 253 characters of a name is cut and ends in 16 hex digits of the sha256 of the whole (the
/// namespace part is never cut, so clusters of two namespaces never meet).
pub fn allocation_base(cluster: &TenantCluster) -> String {
    let whole = format!("{}.{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
    let room = 253 - LONGEST_SUFFIX;
    if whole.len() <= room {
        return whole;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(whole.as_bytes());
    let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let head = whole[..room - hex.len() - 1].trim_end_matches(['-', '.']);
    format!("{head}-{hex}")
}

/// The name of the cluster's initial load-balancer allocation: `{namespace}.{name}-lb`.
pub fn initial_name(cluster: &TenantCluster) -> String {
    format!("{}-lb", allocation_base(cluster))
}

/// The names earlier versions gave a cluster's initial load-balancer and node allocations,
/// `{namespace}-{name}-lb` and `-nodes`: a cluster that has one keeps it (found among the
/// allocations that serve it, so another cluster's of that name is never taken).
pub fn legacy_names(cluster: &TenantCluster) -> (String, String) {
    let base = format!("{}-{}", cluster.namespace().unwrap_or_default(), cluster.name_any());
    (format!("{base}-lb"), format!("{base}-nodes"))
}

/// The name a block of the cluster goes by: `current`, unless the cluster holds an allocation
/// of the name `legacy` an earlier version gave it and none of `current`.
fn block_name(
    cluster: &TenantCluster,
    allocations: &[&IPAllocation],
    namespace: &str,
    current: String,
    legacy: String,
) -> String {
    let held = |name: &str| {
        allocations.iter().any(|a| {
            a.name_any() == name && a.namespace().as_deref() == Some(namespace) && serves(a, cluster)
        })
    };
    if !held(&current) && held(&legacy) { legacy } else { current }
}

/// The value of the `tenant` label of a cluster's allocations: its name, or, for a name longer
/// than a label value may be (63), its first 54 characters and 8 hex digits of its sha256, so
/// that a long name never makes every allocation of the cluster invalid.
pub fn tenant_label(cluster: &TenantCluster) -> String {
    let name = cluster.name_any();
    if name.len() <= 63 {
        return name;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(name.as_bytes());
    let hex: String = digest.iter().take(4).map(|b| format!("{b:02x}")).collect();
    let head = name[..54].trim_end_matches(['-', '.']);
    format!("{head}-{hex}")
}

/// Whether `allocation` says it serves `cluster`.
pub fn serves(allocation: &IPAllocation, cluster: &TenantCluster) -> bool {
    let r = &allocation.spec.tenant_cluster_ref;
    Some(&r.namespace) == cluster.namespace().as_ref() && r.name == cluster.name_any()
}

/// The initial load-balancer size: the cluster's `lbPoolSize`, else `defaultPoolSize`, else 8;
/// elastic mode starts at `initialPoolSize` (else 2); clamped to `maxLoadBalancerIPs`.
pub fn initial_size(cluster: &TenantCluster, config: &ProviderConfig) -> i32 {
    let network = config.spec.network.as_ref();
    let lb = network.and_then(|n| n.load_balancer.as_ref());
    let elastic = lb.and_then(|l| l.allocation_mode) == Some(AllocationMode::Elastic);
    let size = if elastic {
        lb.and_then(|l| l.initial_pool_size).unwrap_or(DEFAULT_INITIAL_POOL_SIZE)
    } else {
        let own = cluster.spec.networking.as_ref().and_then(|n| n.lb_pool_size);
        own.or(lb.and_then(|l| l.default_pool_size)).unwrap_or(DEFAULT_LB_POOL_SIZE)
    };
    let cap = network.and_then(|n| n.quota_per_tenant.as_ref()).and_then(|q| q.max_load_balancer_ips);
    cap.map_or(size, |cap| size.min(cap)).max(1)
}

/// The addresses a cluster takes of its ProviderConfig's pools (load balancer and nodes), as
/// it counts against the Team's `maxIPAddresses`: none outside IPAM mode.
pub fn addresses(cluster: &TenantCluster, config: &ProviderConfig) -> i64 {
    let mode = config.spec.network.as_ref().and_then(|n| n.mode).unwrap_or_default();
    if mode != NetworkMode::Ipam {
        return 0;
    }
    i64::from(initial_size(cluster, config)) + i64::from(node_size(cluster, config).unwrap_or(0))
}

/// The pool names of the ProviderConfig, lowest priority value first (stable).
pub(super) fn pools_by_priority(config: &ProviderConfig) -> Vec<String> {
    let mut refs: Vec<_> =
        config.spec.network.iter().flat_map(|n| n.pool_refs.iter().flatten()).cloned().collect();
    refs.sort_by_key(|r| r.priority.unwrap_or(0));
    refs.into_iter().map(|r| r.name).collect()
}

fn available(pool: Option<&NetworkPool>) -> Option<i64> {
    pool?.status.as_ref()?.available_ips
}

/// Whether the cluster's status says, for its current spec, that its ProviderConfig is missing.
pub fn reported_missing(cluster: &TenantCluster) -> bool {
    cluster.status.iter().flat_map(|s| &s.conditions).any(|c| {
        c.type_ == IPAM_READY
            && c.reason == "ProviderConfigNotFound"
            && c.observed_generation.is_some()
            && c.observed_generation == cluster.metadata.generation
    })
}

/// Plans the IPAM of a live cluster.
pub fn plan(observed: &Observed<'_>) -> Plan {
    let cluster = observed.cluster;
    let Some(config) = observed.config else {
        return match config_ref(cluster) {
            None => not_served(
                "NoProviderConfig",
                "no spec.providerConfigRef: the cluster's addresses are not Butler's IPAM's to give",
            ),
            Some((ns, name)) => Plan {
                condition: Some(Wanted::new(
                    IPAM_READY,
                    false,
                    "ProviderConfigNotFound",
                    format!(
                        "ProviderConfig {ns}/{name} of spec.providerConfigRef does not exist; create it or point the cluster at another"
                    ),
                )),
                requeue: Some(Duration::from_secs(30)),
                ..Plan::default()
            },
        };
    };
    // Another team's ProviderConfig (and its pools) serves this cluster nothing.
    if let Err(why) = crate::providerconfig::plan::scope_allows(config, observed.team) {
        return Plan {
            condition: Some(Wanted::new(IPAM_READY, false, "ProviderConfigNotAllowed", why)),
            ..Plan::default()
        };
    }
    let mode = config.spec.network.as_ref().and_then(|n| n.mode).unwrap_or_default();
    if mode != NetworkMode::Ipam {
        // Cloud mode: the provider's own load balancers; IPAM allocates nothing.
        return not_served(
            "CloudLoadBalancers",
            "its ProviderConfig's network.mode is cloud: the provider's load balancers give its addresses",
        );
    }
    let namespace = config.namespace().unwrap_or_default();
    let order = pools_by_priority(config);
    let mut plan = Plan { ipam: true, ..Plan::default() };
    let mut lb: Vec<&IPAllocation> = observed
        .allocations
        .iter()
        .copied()
        .filter(|a| {
            a.spec.type_ == AllocationType::Loadbalancer && a.namespace().as_deref() == Some(&namespace)
        })
        .collect();
    lb.sort_by_key(|a| a.name_any());
    plan.addresses = lb
        .iter()
        .filter(|a| a.status.as_ref().and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated))
        .filter_map(|a| {
            let s = a.status.as_ref()?;
            Some(format!("{}-{}", s.start_address.as_ref()?, s.end_address.as_ref()?))
        })
        .collect();
    let (legacy_lb, legacy_nodes) = legacy_names(cluster);
    let name = |current: String, legacy: String| {
        block_name(cluster, &observed.allocations, &namespace, current, legacy)
    };
    let mut wanted = vec![Block {
        type_: AllocationType::Loadbalancer,
        name: name(initial_name(cluster), legacy_lb),
        size: initial_size(cluster, config),
        what: "load balancers",
    }];
    if let Some(size) = node_size(cluster, config) {
        let name = name(nodes_name(cluster), legacy_nodes);
        wanted.push(Block { type_: AllocationType::Nodes, name, size, what: "nodes" });
    }
    let mut states = Vec::new();
    for block in &wanted {
        let state = one_block(observed, config, &namespace, &order, block, &mut plan);
        let reference =
            Some(NamespacedObjectReference { name: block.name.clone(), namespace: namespace.clone() });
        if state.exists {
            match block.type_ {
                AllocationType::Loadbalancer => plan.lb_allocation_ref = reference,
                AllocationType::Nodes => plan.ip_allocation_ref = reference,
            }
        }
        states.push(state);
    }
    // Ready when every block is; else the first that is not says why.
    let condition = match states.iter().find(|s| !s.ready) {
        Some(s) => Wanted::new(IPAM_READY, false, s.reason, s.message.clone()),
        None => {
            let messages: Vec<String> = states.iter().map(|s| s.message.clone()).collect();
            Wanted::new(IPAM_READY, true, "Allocated", messages.join("; "))
        }
    };
    plan.condition = Some(condition);
    plan
}

/// A block the cluster wants.
struct Block {
    type_: AllocationType,
    name: String,
    size: i32,
    what: &'static str,
}

/// Where a wanted block stands.
struct BlockState {
    exists: bool,
    ready: bool,
    reason: &'static str,
    message: String,
}

/// The name of the cluster's node-address allocation: `{namespace}.{name}-nodes`.
pub fn nodes_name(cluster: &TenantCluster) -> String {
    format!("{}-nodes", allocation_base(cluster))
}

/// The node addresses the cluster asks for (`spec.networking.nodeIPs`), clamped to
/// `quotaPerTenant.maxNodeIPs`; `None` when it asks for none.
pub fn node_size(cluster: &TenantCluster, config: &ProviderConfig) -> Option<i32> {
    let asked = cluster.spec.networking.as_ref()?.node_ips?;
    let cap =
        config.spec.network.as_ref().and_then(|n| n.quota_per_tenant.as_ref()).and_then(|q| q.max_node_ips);
    Some(cap.map_or(asked, |cap| asked.min(cap)).max(1))
}

/// Plans one block: create it in the first pool with room, follow it, or move it to the next
/// pool when its own refused it.
fn one_block(
    observed: &Observed<'_>,
    config: &ProviderConfig,
    namespace: &str,
    order: &[String],
    block: &Block,
    plan: &mut Plan,
) -> BlockState {
    let cluster = observed.cluster;
    let (name, size) = (&block.name, block.size);
    let fits = |after: Option<&str>| {
        let start = after.and_then(|p| order.iter().position(|n| n == p)).map_or(0, |i| i + 1);
        first_pool_with_room(&order[start.min(order.len())..], observed.pool, size)
    };
    let mut wait = |d: u64| {
        plan.requeue = Some(plan.requeue.map_or(Duration::from_secs(d), |r| r.min(Duration::from_secs(d))))
    };
    let existing = observed
        .allocations
        .iter()
        .copied()
        .find(|a| a.name_any() == *name && a.namespace().as_deref() == Some(namespace));
    // Figures of pools that other teams share are theirs too: a cluster on a ProviderConfig of
    // another namespace is told that no pool has room, not how much each has left.
    let own_pools = cluster.namespace().as_deref() == Some(namespace);
    let state = |ready: bool, reason: &'static str, message: String| BlockState {
        exists: existing.is_some(),
        ready,
        reason,
        message,
    };
    let Some(a) = existing else {
        return match fits(None) {
            Some(pool) => {
                plan.create.push(allocation(cluster, namespace, name, &pool, size, block.type_));
                state(
                    false,
                    "Allocating",
                    format!("asked NetworkPool {namespace}/{pool} for {size} {} addresses", block.what),
                )
            }
            None => {
                let figures: Vec<String> = order
                    .iter()
                    .map(|n| match available((observed.pool)(n)) {
                        Some(free) if own_pools => format!("{n} {free} free"),
                        Some(_) => n.clone(),
                        None if (observed.pool)(n).is_some() => format!("{n} not counted yet"),
                        None => format!("{n} missing"),
                    })
                    .collect();
                let ask = if own_pools { "add capacity or a pool" } else { "ask the platform for capacity" };
                wait(30);
                state(
                    false,
                    "NoPoolCapacity",
                    format!(
                        "no NetworkPool of ProviderConfig {namespace}/{} has {size} free addresses for {} ({}); {ask}",
                        config.name_any(),
                        block.what,
                        figures.join(", ")
                    ),
                )
            }
        };
    };
    let status = a.status.as_ref();
    let message = status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.message.clone())
        .unwrap_or_default();
    match status.and_then(|s| s.phase) {
        _ if a.metadata.deletion_timestamp.is_some() => {
            wait(1);
            state(
                false,
                "Allocating",
                format!("IPAllocation {namespace}/{name} is being deleted; a new one follows"),
            )
        }
        Some(IPAllocationPhase::Allocated) => state(true, "Allocated", format!("{}: {message}", block.what)),
        Some(IPAllocationPhase::Failed) => match fits(Some(&a.spec.pool_ref.name)) {
            // Fall through to the next pool that has room (this allocation is ours: its name
            // and labels are this cluster's).
            Some(next) if a.labels().get(LABEL_TENANT) == Some(&tenant_label(cluster)) => {
                plan.delete.push((namespace.to_string(), name.clone()));
                let why = if own_pools { format!(" ({message})") } else { String::new() };
                state(
                    false,
                    "Allocating",
                    format!(
                        "NetworkPool {} could not serve {name}{why}; moving to {next}",
                        a.spec.pool_ref.name
                    ),
                )
            }
            _ if own_pools => {
                wait(30);
                state(false, "AllocationFailed", format!("IPAllocation {namespace}/{name}: {message}"))
            }
            _ => {
                wait(30);
                state(
                    false,
                    "AllocationFailed",
                    format!(
                        "IPAllocation {namespace}/{name}: NetworkPool {} has no block of {size} addresses left; ask the platform for capacity",
                        a.spec.pool_ref.name
                    ),
                )
            }
        },
        _ => state(
            false,
            "Allocating",
            format!(
                "waiting for NetworkPool {namespace}/{} to serve IPAllocation {name}",
                a.spec.pool_ref.name
            ),
        ),
    }
}

/// The first of `order` whose NetworkPool has `size` free addresses.
pub(super) fn first_pool_with_room<'a>(
    order: &[String],
    pool: &(dyn Fn(&str) -> Option<&'a NetworkPool> + Sync),
    size: i32,
) -> Option<String> {
    order.iter().find(|n| available(pool(n)).is_some_and(|free| free >= i64::from(size))).cloned()
}

/// An allocation of a cluster, with spec/002's labels (role initial).
pub(super) fn allocation(
    cluster: &TenantCluster,
    namespace: &str,
    name: &str,
    pool: &str,
    size: i32,
    type_: AllocationType,
) -> IPAllocation {
    let team = cluster.namespace().unwrap_or_default();
    let labels = [
        (LABEL_TEAM, team.as_str()),
        (LABEL_TENANT, tenant_label(cluster).as_str()),
        (LABEL_NETWORK_POOL, pool),
        (LABEL_ALLOCATION_TYPE, type_.as_str()),
        (LABEL_ALLOCATION_ROLE, ALLOCATION_ROLE_INITIAL),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    IPAllocation {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: IPAllocationSpec {
            pool_ref: LocalObjectReference { name: pool.into() },
            tenant_cluster_ref: NamespacedObjectReference { name: cluster.name_any(), namespace: team },
            type_,
            count: Some(size),
            pinned_range: None,
        },
        status: None,
    }
}

/// What a cluster's deletion removes (spec/002 layer 1): the allocations its status names and
/// those labelled for it, once each, and only those that say they serve it.
pub fn cleanup(
    cluster: &TenantCluster,
    labelled: &[&IPAllocation],
    named: &[&IPAllocation],
) -> Vec<(String, String)> {
    let mut out = BTreeSet::new();
    for a in labelled.iter().chain(named.iter()) {
        if serves(a, cluster) && a.metadata.deletion_timestamp.is_none() {
            out.insert((a.namespace().unwrap_or_default(), a.name_any()));
        }
    }
    out.into_iter().collect()
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
