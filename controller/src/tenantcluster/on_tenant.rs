//! The tenant's side of a cluster: elastic IPAM and the MetalLB projection on the tenant's own
//! API server, the conditions they report and when to look again. An unreachable tenant is
//! skipped with a condition and looked at again later.

use std::sync::Arc;
use std::time::Duration;

use butler_core::api::{IPAllocation, TenantCluster, TenantClusterStatus};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::allocations::{create_allocation, delete_allocation};
use super::{
    ELASTIC, MAX_TENANT_SERVERS, METALLB_SYNCED, apply_status, by_age, elastic, named, ours, release, tenant,
};
use crate::context::Context;
use crate::error::Error;
use crate::ipam::held;
use butler_runtime::conditions::Wanted;
use butler_runtime::error::is_not_found;

/// The Team's `maxIPAddresses`, if it has one, and the pool addresses its clusters take now (by
/// each cluster, what its allocations hold or its ProviderConfig will give it), from the caches.
fn team_limit(ctx: &Context, cluster: &TenantCluster) -> Option<elastic::TeamLimit> {
    let namespace = cluster.namespace()?;
    let team = crate::team::plan::team_of_namespace(&namespace)?;
    let team = ctx.teams.teams.get(&ObjectRef::new(team))?;
    let max = team.spec.resource_limits.as_ref()?.max_ip_addresses?;
    let used = ctx
        .teams
        .clusters_in(&namespace)
        .iter()
        .map(|c| {
            let allocations = ctx.ipam.allocations.of_cluster(&namespace, &c.name_any());
            let held = held::total(allocations.iter().map(Arc::as_ref));
            let config = super::plan::config_ref(c)
                .and_then(|(ns, name)| ctx.configs.get(&ObjectRef::new(&name).within(&ns)));
            held::cluster(held, config.map_or(0, |config| super::plan::addresses(c, &config)))
        })
        .fold(0i64, i64::saturating_add);
    Some(elastic::TeamLimit { max, used })
}

/// Elastic IPAM and the MetalLB projection on the tenant: the conditions they report and when
/// to look again. An unreachable tenant is skipped with a condition and looked at again later.
pub(super) async fn tenant_side<'a>(
    ctx: &Context,
    cluster: &TenantCluster,
    config: &butler_core::api::ProviderConfig,
    pool: &(dyn Fn(&str) -> Option<&'a butler_core::api::NetworkPool> + Sync),
    allocations: &[Arc<IPAllocation>],
    servers: &mut Vec<String>,
) -> Result<(Vec<Wanted>, Option<Duration>), Error> {
    let now = ctx.ipam.clock.now();
    let kubeconfig = format!("{}/{}-kubeconfig", cluster.namespace().unwrap_or_default(), cluster.name_any());
    let reached = match ctx.tenants.get(&ctx.client, &ctx.secret_reader, cluster).await {
        Ok(Some(found)) => found,
        Ok(None) => {
            let message = format!(
                "the Secret {kubeconfig} (key value) does not exist yet; MetalLB is set up once it does"
            );
            return Ok((
                vec![Wanted::new(METALLB_SYNCED, false, "WaitingForKubeconfig", message)],
                Some(Duration::from_secs(30)),
            ));
        }
        Err(message) => {
            return Ok((
                vec![Wanted::new(METALLB_SYNCED, false, "KubeconfigInvalid", message)],
                Some(Duration::from_secs(60)),
            ));
        }
    };
    // A tenant that did not answer is left alone until its next try (10 s after the first
    // failure, doubling to 10 minutes): its cluster reports the last failure without waiting
    // on it again.
    if let Some((message, left)) = ctx.tenants.silent(cluster, now) {
        let wait = left.max(Duration::from_secs(1));
        return Ok((vec![Wanted::new(METALLB_SYNCED, false, "TenantUnreachable", message)], Some(wait)));
    }
    // Tenants get at most half the reconcile workers at once: the rest always serve clusters
    // whose work is on the management cluster, however many tenants hang.
    let Some(_turn) = ctx.tenant_turns.take(cluster) else {
        let kept =
            cluster.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == METALLB_SYNCED));
        let wanted = match kept {
            Some(c) => Wanted::new(METALLB_SYNCED, c.status == "True", &c.reason, c.message.clone()),
            None => Wanted::new(
                METALLB_SYNCED,
                false,
                "WaitingForTurn",
                "other tenants' calls are under way; this one follows in a moment",
            ),
        };
        return Ok((vec![wanted], Some(super::WAIT_FOR_TURN)));
    };
    let unreachable = |e: kube::Error| {
        // The wait counts from the failure, not from the reconcile's start (the call itself
        // may have taken its whole time limit).
        let failed_at = ctx.ipam.clock.now();
        let (message, again) = ctx.tenants.failed(cluster, failed_at, |failures, again| {
            format!(
                "the tenant cluster (through {kubeconfig}) does not answer: {}; tried {failures} times, next in {}s",
                release::said(&e),
                again.as_secs()
            )
        });
        (vec![Wanted::new(METALLB_SYNCED, false, "TenantUnreachable", message)], Some(again))
    };
    let (tenant, version) = (reached.client.clone(), reached.version.clone());
    let refs: Vec<&IPAllocation> = allocations.iter().map(Arc::as_ref).collect();
    let mut wanted = Vec::new();
    let mut wake = Some(by_age(cluster, now));
    let mut released: Vec<String> = Vec::new();
    let elastic_mode =
        config.spec.network.as_ref().and_then(|n| n.load_balancer.as_ref()).and_then(|l| l.allocation_mode)
            == Some(butler_core::api::AllocationMode::Elastic);
    if !elastic_mode {
        ctx.tenant_watches.stop(&cluster.meta().uid.clone().unwrap_or_default());
    }
    if elastic_mode {
        let services = match tenant::within(ctx.tenant_deadline, tenant::services(&tenant)).await {
            Ok((services, listed_at)) => {
                // Changes from here on wake the cluster: a watch from the list's version, so
                // nothing is listed outside this turn.
                ctx.tenant_watches.follow(cluster, &version, tenant.clone(), &listed_at);
                services
            }
            Err(e) => return Ok(unreachable(e)),
        };
        let full = tenant::within(ctx.tenant_deadline, async { Ok(tenant::metallb_full(&tenant).await) })
            .await
            .unwrap_or(false);
        // The team's total is read over all its clusters: only when a Service waits, the one
        // case growth (which the limit holds) can follow.
        let waiting = services.iter().any(|s| s.addresses.is_empty());
        let decision = elastic::decide(
            cluster,
            config,
            pool,
            &refs,
            &elastic::Tenant { services: &services, metallb_full: full },
            waiting.then(|| team_limit(ctx, cluster)).flatten(),
            now,
        );
        for grown in &decision.create {
            if let Some(why) = create_allocation(ctx, cluster, grown).await? {
                tracing::warn!(cluster = %named(cluster), "{why}");
                continue;
            }
            tracing::info!(cluster = %named(cluster), allocation = %grown.name_any(), "elastic growth: LoadBalancer Services wait for addresses");
        }
        let namespace = config.namespace().unwrap_or_default();
        // Released only once the tenant's MetalLB no longer lists them (below): an address
        // given back while the tenant still announces it could be another tenant's next.
        released.extend(decision.release.iter().cloned());
        let api: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), &namespace);
        for (name, mark) in &decision.marks {
            let value = mark.map(|t| t.to_string());
            let patch = json!({"metadata": {"annotations": {elastic::IDLE_SINCE: value}}});
            match api.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => {}
                Err(e) => {
                    return Err(Error::kube(format!("marking IPAllocation {namespace}/{name} idle"), e));
                }
            }
        }
        // No counts in the messages: a tenant that changes its Services would have the status
        // written at each look.
        wanted.push(match &decision.shortfall {
            Some(why) => Wanted::new(ELASTIC, false, "DemandNotMet", why.clone()),
            None => Wanted::new(
                ELASTIC,
                true,
                "Satisfied",
                "the tenant's LoadBalancer Services have addresses, or blocks on their way",
            ),
        });
        wake = [wake, decision.wake].into_iter().flatten().min();
    }
    let kept: Vec<&IPAllocation> =
        refs.iter().copied().filter(|a| !released.contains(&a.name_any())).collect();
    let addresses = elastic::metallb_addresses(&kept);
    if addresses.is_empty() {
        // Nothing Allocated (the blocks are on their way, or going with the cluster): the pool
        // is left as it is rather than emptied, and no other pool is touched.
        let message = "no Allocated load-balancer block to give MetalLB; default-pool left as it is";
        wanted.push(Wanted::new(METALLB_SYNCED, false, "NothingAllocated", message));
        return Ok((wanted, wake));
    }
    // The server is recorded before it is given anything: a deletion takes the word of these
    // alone (see `release::witness`), whatever the Secret names by then.
    if !servers.contains(&reached.server) {
        if servers.len() >= MAX_TENANT_SERVERS {
            let message = format!(
                "the Secret {kubeconfig} has named {MAX_TENANT_SERVERS} API servers that were given this cluster's addresses; it is given them no more. Point the Secret back at one of them"
            );
            wanted.push(Wanted::new(METALLB_SYNCED, false, "TooManyTenantServers", message));
            return Ok((wanted, wake));
        }
        servers.push(reached.server.clone());
        let api: Api<TenantCluster> =
            Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
        let existing = cluster.status.clone().unwrap_or_default();
        let conditions = ours(existing.conditions.clone());
        apply_status(
            &api,
            cluster,
            &TenantClusterStatus { conditions, tenant_servers: servers.clone(), ..existing },
        )
        .await?;
    }
    match tenant::within(ctx.tenant_deadline, tenant::sync_metallb(&tenant, &addresses)).await {
        Ok(()) => {
            ctx.tenants.answered(cluster);
            let namespace = config.namespace().unwrap_or_default();
            // An idle block goes back on the word of the one server that was ever given it.
            if servers.iter().any(|s| *s != reached.server) && !released.is_empty() {
                tracing::info!(cluster = %named(cluster), "idle growth blocks kept: other API servers than the Secret's were given them");
                released.clear();
            }
            for name in &released {
                tracing::info!(cluster = %named(cluster), allocation = %name, "elastic shrink: unused for 10 minutes, and no longer in the tenant's MetalLB pool");
                delete_allocation(ctx, cluster, &namespace, name, allocations).await?;
            }
            wanted.push(Wanted::new(
            METALLB_SYNCED,
            true,
            "Synced",
            format!("{}/{}: {}", tenant::METALLB_NAMESPACE, tenant::METALLB_POOL, addresses.join(", ")),
            ));
        }
        Err(e) if is_not_found(&e) => wanted.push(Wanted::new(
            METALLB_SYNCED,
            false,
            "MetalLBMissing",
            format!("the tenant has no MetalLB (namespace {} or the IPAddressPool kind is missing): {}; install MetalLB", tenant::METALLB_NAMESPACE, release::said(&e)),
        )),
        Err(e) => match release::answer(&e) {
            // It answered: not a silent tenant to back off from, but one to ask again soon
            // (someone is likely granting what it refused).
            release::Tenant::Refused(why) => {
                ctx.tenants.answered(cluster);
                let namespace = config.namespace().unwrap_or_default();
                let message = release::refused_sync(&why, &namespace, &released);
                wanted.push(Wanted::new(METALLB_SYNCED, false, "TenantRefused", message));
                wake = [wake, Some(Duration::from_secs(60))].into_iter().flatten().min();
            }
            _ => return Ok(unreachable(e)),
        },
    }
    Ok((wanted, wake))
}
