//! Elastic IPAM and the MetalLB projection (spec/002), as pure functions over what the tenant
//! cluster shows: growth when LoadBalancer Services wait for an address (30 seconds, or at once
//! when MetalLB says its pool is empty), minus the supply already on its way, in one batch and
//! within the quota; shrink of growth blocks that no Service has used for 10 continuous
//! minutes (the idle-since time kept on the allocation); and the addresses of the tenant's
//! `default-pool`.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::time::Duration;

use butler_core::api::labels::{ALLOCATION_ROLE_GROWTH, ALLOCATION_ROLE_INITIAL, LABEL_ALLOCATION_ROLE};
use butler_core::api::{
    AllocationMode, AllocationType, IPAllocation, IPAllocationPhase, NetworkPool, ProviderConfig,
    TenantCluster,
};
use jiff::Timestamp;
use kube::ResourceExt;

use super::plan::{allocation, first_pool_with_room, initial_name, pools_by_priority};

/// Annotation on a growth allocation: since when no Service has used its addresses.
pub const IDLE_SINCE: &str = "butler.butlerlabs.dev/idle-since";
/// How long a LoadBalancer Service waits before it counts as demand (MetalLB's own time).
pub const PENDING_AFTER: Duration = Duration::from_secs(30);
/// How long a growth block must be unused before it is released.
pub const IDLE_FOR: Duration = Duration::from_secs(600);
pub const DEFAULT_GROWTH_INCREMENT: i32 = 2;
/// `loadBalancer.defaultPoolSize` when the ProviderConfig leaves it out (spec/000).
pub const DEFAULT_POOL_SIZE: i32 = 8;

/// A LoadBalancer Service of the tenant cluster.
#[derive(Debug, Clone)]
pub struct Service {
    pub name: String,
    pub created: Timestamp,
    /// Its ingress addresses; none while it waits.
    pub addresses: Vec<IpAddr>,
}

/// What the tenant shows.
pub struct Tenant<'a> {
    pub services: &'a [Service],
    /// MetalLB reports its pool has no free address (IPAddressPool status, MetalLB 0.14+).
    pub metallb_full: bool,
}

/// The role of an allocation: its label, else inferred from its name (spec/002 "migration"):
/// `{initial}-{N}` growth (of this version's initial name or an earlier version's); a pinned
/// one or any other name initial.
pub fn role(a: &IPAllocation, cluster: &TenantCluster) -> &'static str {
    match a.labels().get(LABEL_ALLOCATION_ROLE).map(String::as_str) {
        Some(ALLOCATION_ROLE_GROWTH) => return ALLOCATION_ROLE_GROWTH,
        Some(ALLOCATION_ROLE_INITIAL) => return ALLOCATION_ROLE_INITIAL,
        _ => {}
    }
    if a.spec.pinned_range.is_some() {
        return ALLOCATION_ROLE_INITIAL;
    }
    match growth_number(&a.name_any(), cluster) {
        Some(_) => ALLOCATION_ROLE_GROWTH,
        None => ALLOCATION_ROLE_INITIAL,
    }
}

/// `N` of a growth name `{initial}-{N}`: `{ns}.{name}-lb-{N}`, or `{ns}-{name}-lb-{N}` of an
/// earlier version (numbers go on past both, so a name is never reused).
fn growth_number(name: &str, cluster: &TenantCluster) -> Option<u32> {
    let (legacy, _) = super::plan::legacy_names(cluster);
    [initial_name(cluster), legacy]
        .iter()
        .find_map(|initial| name.strip_prefix(initial.as_str())?.strip_prefix('-'))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))?
        .parse()
        .ok()
}

/// The block an allocation holds.
fn block(a: &IPAllocation) -> Option<(IpAddr, IpAddr)> {
    let s = a.status.as_ref()?;
    if s.phase != Some(IPAllocationPhase::Allocated) {
        return None;
    }
    Some((s.start_address.as_ref()?.parse().ok()?, s.end_address.as_ref()?.parse().ok()?))
}

fn inside(ip: IpAddr, (start, end): (IpAddr, IpAddr)) -> bool {
    match (ip, start, end) {
        (IpAddr::V4(ip), IpAddr::V4(s), IpAddr::V4(e)) => (s..=e).contains(&ip),
        (IpAddr::V6(ip), IpAddr::V6(s), IpAddr::V6(e)) => (s..=e).contains(&ip),
        _ => false,
    }
}

/// The tenant's `default-pool` addresses: every Allocated load-balancer block of the cluster
/// not being deleted, as `start-end`, in address order.
pub fn metallb_addresses(allocations: &[&IPAllocation]) -> Vec<String> {
    let mut blocks: Vec<(IpAddr, IpAddr)> = allocations
        .iter()
        .filter(|a| a.spec.type_ == AllocationType::Loadbalancer && a.metadata.deletion_timestamp.is_none())
        .filter_map(|a| block(a))
        .collect();
    blocks.sort();
    blocks.into_iter().map(|(s, e)| format!("{s}-{e}")).collect()
}

/// The Team's `maxIPAddresses` and the pool addresses its clusters take now (this one's
/// included): growth never takes the team past it.
#[derive(Debug, Clone, Copy)]
pub struct TeamLimit {
    pub max: i32,
    pub used: i64,
}

/// What elastic IPAM decided.
#[derive(Debug, Default)]
pub struct Decision {
    pub create: Vec<IPAllocation>,
    /// Growth allocations to release, by name.
    pub release: Vec<String>,
    /// Idle-since marks to set (`Some(time)`) or clear (`None`), by allocation name.
    pub marks: Vec<(String, Option<Timestamp>)>,
    /// Why demand is not met, when it is not.
    pub shortfall: Option<String>,
    /// When to look again for a rule that is waiting on time.
    pub wake: Option<Duration>,
}

/// Elastic IPAM for one cluster. `allocations` are the cluster's (any type), `pool` looks up
/// NetworkPools of the ProviderConfig's namespace, `team` is the team's address limit if it
/// has one.
pub fn decide<'a>(
    cluster: &TenantCluster,
    config: &ProviderConfig,
    pool: &(dyn Fn(&str) -> Option<&'a NetworkPool> + Sync),
    allocations: &[&IPAllocation],
    tenant: &Tenant<'_>,
    team: Option<TeamLimit>,
    now: Timestamp,
) -> Decision {
    let mut decision = Decision::default();
    let network = config.spec.network.as_ref();
    let lb_config = network.and_then(|n| n.load_balancer.as_ref());
    if lb_config.and_then(|l| l.allocation_mode) != Some(AllocationMode::Elastic) {
        return decision;
    }
    let increment = lb_config.and_then(|l| l.growth_increment).unwrap_or(DEFAULT_GROWTH_INCREMENT).max(1);
    let quota = network.and_then(|n| n.quota_per_tenant.as_ref()).and_then(|q| q.max_load_balancer_ips);
    // spec/000: elastic growth goes "up to defaultPoolSize"; the quota may be lower still.
    let pool_size = lb_config.and_then(|l| l.default_pool_size).unwrap_or(DEFAULT_POOL_SIZE);
    let (ceiling, ceiling_name) = match quota {
        Some(q) if q < pool_size => (q, "quotaPerTenant.maxLoadBalancerIPs"),
        _ => (pool_size, "loadBalancer.defaultPoolSize"),
    };
    let lb: Vec<&IPAllocation> =
        allocations.iter().copied().filter(|a| a.spec.type_ == AllocationType::Loadbalancer).collect();
    let used: Vec<IpAddr> = tenant.services.iter().flat_map(|s| s.addresses.iter().copied()).collect();
    let growth: Vec<&IPAllocation> = lb
        .iter()
        .copied()
        .filter(|a| role(a, cluster) == ALLOCATION_ROLE_GROWTH && a.spec.pinned_range.is_none())
        .collect();

    // Demand: Services waiting long enough (or at once when MetalLB is out of addresses).
    let mut soonest: Option<Duration> = None;
    let mut waiting = 0i64;
    for s in tenant.services.iter().filter(|s| s.addresses.is_empty()) {
        let age = now.duration_since(s.created).unsigned_abs();
        if age >= PENDING_AFTER || tenant.metallb_full {
            waiting += 1;
        } else {
            let left = PENDING_AFTER - age;
            soonest = Some(soonest.map_or(left, |d| d.min(left)));
        }
    }
    // Supply on its way: growth blocks still pending, and addresses of Allocated growth blocks
    // that no Service uses yet.
    let supply: i64 = growth
        .iter()
        .filter(|a| a.metadata.deletion_timestamp.is_none())
        .map(|a| match block(a) {
            None => i64::from(a.spec.count.unwrap_or(increment)),
            Some(b) => {
                let count = a.status.as_ref().and_then(|s| s.allocated_count).unwrap_or(0);
                count - used.iter().filter(|ip| inside(**ip, b)).count() as i64
            }
        })
        .sum();
    let demand = waiting - supply;
    if demand > 0 {
        let mut total: i64 = lb
            .iter()
            .filter(|a| a.metadata.deletion_timestamp.is_none())
            .map(|a| {
                i64::from(a.spec.count.unwrap_or(0))
                    .max(a.status.as_ref().and_then(|s| s.allocated_count).unwrap_or(0))
            })
            .sum();
        let before = total;
        let taken: BTreeSet<u32> =
            allocations.iter().filter_map(|a| growth_number(&a.name_any(), cluster)).collect();
        // Past every number still present (or being deleted): a name is never reused.
        let first = taken.iter().next_back().map_or(1, |n| n + 1);
        let order = pools_by_priority(config);
        let namespace = config.namespace().unwrap_or_default();
        let batches = (demand + i64::from(increment) - 1) / i64::from(increment);
        for next in (first..).take(usize::try_from(batches).unwrap_or(0)) {
            if total + i64::from(increment) > i64::from(ceiling) {
                decision.shortfall = Some(format!(
                    "LoadBalancer Services wait for an address, but growing by {increment} would exceed {ceiling_name} ({ceiling}); raise it or free addresses"
                ));
                break;
            }
            let grown = total - before;
            if let Some(team) = team
                && team.used.saturating_add(grown + i64::from(increment)) > i64::from(team.max)
            {
                decision.shortfall = Some(format!(
                    "LoadBalancer Services wait for an address, but growing by {increment} would take the team past its Team's maxIPAddresses ({}); raise it or free addresses of the team's clusters",
                    team.max
                ));
                break;
            }
            let Some(pool_name) = first_pool_with_room(&order, pool, increment) else {
                decision.shortfall = Some(format!(
                    "LoadBalancer Services wait for an address, but no NetworkPool of ProviderConfig {namespace}/{} has {increment} free addresses; add capacity",
                    config.name_any()
                ));
                break;
            };
            let name = format!("{}-{next}", initial_name(cluster));
            let mut grown =
                allocation(cluster, &namespace, &name, &pool_name, increment, AllocationType::Loadbalancer);
            grown.labels_mut().insert(LABEL_ALLOCATION_ROLE.into(), ALLOCATION_ROLE_GROWTH.into());
            decision.create.push(grown);
            total += i64::from(increment);
        }
    }

    // Shrink: growth blocks no Service uses, for 10 continuous minutes; never while demand waits.
    for a in &growth {
        let Some(b) = block(a) else { continue };
        if a.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let in_use = used.iter().any(|ip| inside(*ip, b));
        let mark = a.annotations().get(IDLE_SINCE).and_then(|t| t.parse::<Timestamp>().ok());
        match (in_use, mark) {
            (true, Some(_)) => decision.marks.push((a.name_any(), None)),
            (true, None) => {}
            (false, None) => {
                decision.marks.push((a.name_any(), Some(now)));
                soonest = Some(soonest.map_or(IDLE_FOR, |d| d.min(IDLE_FOR)));
            }
            (false, Some(since)) => {
                let idle = now.duration_since(since).unsigned_abs();
                if idle >= IDLE_FOR && waiting == 0 {
                    decision.release.push(a.name_any());
                } else {
                    let left = IDLE_FOR.saturating_sub(idle).max(Duration::from_secs(1));
                    soonest = Some(soonest.map_or(left, |d| d.min(left)));
                }
            }
        }
    }
    decision.wake = soonest;
    decision
}

#[cfg(test)]
#[path = "elastic_tests.rs"]
mod tests;
