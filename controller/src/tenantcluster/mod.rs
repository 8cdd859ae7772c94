//! The TenantCluster controller, IPAM part (spec/002): in IPAM mode a cluster gets its initial
//! load-balancer IPAllocation from the first pool of its ProviderConfig (by priority) with room,
//! is told its addresses as soon as the NetworkPool controller serves it (a watch on
//! IPAllocations), and on deletion gives back every allocation it holds. Cloud mode allocates nothing;
//! its status says so (`IPAMReady`, `Ready`, `observedGeneration`).

mod allocations;
pub mod answers;
pub mod elastic;
pub mod former;
pub mod kubeconfig;
mod on_tenant;
pub mod plan;
pub mod release;
pub mod tenant;
pub mod turns;
pub mod watch;

use std::sync::Arc;
use std::time::Duration;

use butler_core::api::labels::TENANT_CLUSTER_FINALIZER;
use butler_core::api::{IPAllocation, TenantCluster, TenantClusterStatus};
use butler_runtime::conditions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use allocations::{create_allocation, delete_allocation};
use butler_runtime::conditions::Wanted;
use on_tenant::tenant_side;
use plan::{IPAM_READY, Observed};

/// The conditions the tenant's side keeps.
pub const METALLB_SYNCED: &str = "MetalLBSynced";
pub const ELASTIC: &str = "ElasticIPAM";

/// When a cluster that waits for a turn at its tenant looks again if it was not woken for it
/// (it is, when its turn comes).
pub(crate) const WAIT_FOR_TURN: Duration = Duration::from_secs(10);

/// The soonest a cluster is looked at again for what its tenant shows.
const TENANT_REQUEUE_FLOOR: Duration = Duration::from_secs(5);

/// The tenant's side of one reconcile takes at most this many calls' deadlines.
const TENANT_BUDGET_CALLS: u32 = 2;

/// Everything is watched or timed by the plan; this is the safety net.
const RESYNC: Duration = Duration::from_secs(300);

/// Reconciles the IPAM of one TenantCluster.
pub async fn reconcile(cluster: Arc<TenantCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.scope.holds(&cluster.namespace().unwrap_or_default()) {
        return Ok(Action::await_change());
    }
    ctx.synced().await;
    let started = ctx.metrics.reconcile_started("TenantCluster");
    let result = run(&cluster, &ctx).await;
    ctx.finished(cluster.as_ref(), started, &result);
    result
}

fn named(cluster: &TenantCluster) -> String {
    format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any())
}

/// The allocations that say they serve `cluster` (from the index: never a scan of them all).
fn allocations_of(ctx: &Context, cluster: &TenantCluster) -> Vec<Arc<IPAllocation>> {
    let namespace = cluster.namespace().unwrap_or_default();
    ctx.ipam.allocations.of_cluster(&namespace, &cluster.name_any())
}

async fn run(cluster: &TenantCluster, ctx: &Context) -> Result<Action, Error> {
    let api: Api<TenantCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    if cluster.meta().deletion_timestamp.is_some() {
        return delete(cluster, ctx, &api).await;
    }
    // From the cache; one it does not show is read, in case the cache has not seen it yet,
    // until the cluster says it is missing: from then on the cache alone (the ProviderConfig's
    // creation wakes the cluster), so a missing one is not read at each of its events.
    let config = match plan::config_ref(cluster) {
        None => None,
        Some((ns, name)) => match ctx.configs.get(&ObjectRef::new(&name).within(&ns)) {
            Some(config) => Some(config),
            None if plan::reported_missing(cluster) => None,
            None => Api::<butler_core::api::ProviderConfig>::namespaced(ctx.client.clone(), &ns)
                .get_opt(&name)
                .await
                .map_err(|e| Error::kube(format!("reading ProviderConfig {ns}/{name}"), e))?
                .map(Arc::new),
        },
    };
    let pool_namespace = config.as_ref().and_then(|c| c.namespace()).unwrap_or_default();
    let pools: Vec<_> =
        ctx.pools.state().into_iter().filter(|p| p.namespace().as_deref() == Some(&pool_namespace)).collect();
    let lookup = |name: &str| pools.iter().find(|p| p.name_any() == name).map(Arc::as_ref);
    // The plan and the tenant's MetalLB read the blocks of the config the cluster names now;
    // those of a config it no longer names are given back below.
    let ipam_mode = config.as_ref().and_then(|c| c.spec.network.as_ref()).and_then(|n| n.mode)
        == Some(butler_core::api::NetworkMode::Ipam);
    let every = allocations_of(ctx, cluster);
    let allocations: Vec<Arc<IPAllocation>> = match ipam_mode {
        true => every.iter().filter(|a| a.namespace().as_deref() == Some(&pool_namespace)).cloned().collect(),
        false => Vec::new(),
    };
    let namespace = cluster.namespace().unwrap_or_default();
    let planned = plan::plan(&Observed {
        cluster,
        config: config.as_deref(),
        pool: &lookup,
        allocations: allocations.iter().map(Arc::as_ref).collect(),
        team: crate::team::plan::team_of_namespace(&namespace),
    });
    let cluster = if planned.ipam && !butler_runtime::finalizer::has(cluster, TENANT_CLUSTER_FINALIZER) {
        butler_runtime::finalizer::add(&api, cluster, TENANT_CLUSTER_FINALIZER).await.map_err(|e| {
            Error::kube(format!("adding the finalizer to TenantCluster {}", named(cluster)), e)
        })?
    } else {
        cluster.clone()
    };
    let mut taken = None;
    for allocation in &planned.create {
        taken = taken.or(create_allocation(ctx, &cluster, allocation).await?);
    }
    for (ns, name) in &planned.delete {
        delete_allocation(ctx, &cluster, ns, name, &allocations).await?;
    }
    // The tenant's side, once the cluster holds its block.
    let mut wanted: Vec<_> = match taken {
        Some(why) => vec![Wanted::new(IPAM_READY, false, "AllocationNameTaken", why)],
        None => planned.condition.iter().cloned().collect(),
    };
    let mut requeue = planned.requeue;
    let holds = planned.ipam && planned.condition.as_ref().is_some_and(|c| c.status);
    let mut servers = cluster.status.as_ref().map(|s| s.tenant_servers.clone()).unwrap_or_default();
    if holds && let Some(config) = config.as_deref() {
        // The tenant's side as a whole gets a budget (each call has its deadline, and there are
        // several): a tenant that answers slowly holds a turn for at most that long.
        let budget = ctx.tenant_deadline * TENANT_BUDGET_CALLS;
        let side = tenant_side(ctx, &cluster, config, &lookup, &allocations, &mut servers);
        let (more, wake) = match tokio::time::timeout(budget, side).await {
            Ok(done) => done?,
            Err(_) => {
                let (message, again) = ctx.tenants.failed(&cluster, ctx.ipam.clock.now(), |failures, again| {
                    format!(
                        "the tenant's calls took longer than {} s together; tried {failures} times, next in {}s",
                        budget.as_secs(),
                        again.as_secs()
                    )
                });
                (vec![Wanted::new(METALLB_SYNCED, false, "TenantUnreachable", message)], Some(again))
            }
        };
        wanted.extend(more);
        // What the tenant shows sets when to look again (a Service about to wait long enough),
        // never sooner than the floor: a tenant does not set the controller's pace.
        requeue = [requeue, wake.map(|w| w.max(TENANT_REQUEUE_FLOOR))].into_iter().flatten().min();
    }
    // Blocks of a ProviderConfig the cluster no longer names: given back once the tenant no
    // longer announces them (counted against the team's maxIPAddresses until then).
    let team = crate::team::plan::team_of_namespace(&namespace);
    let current = config.as_deref().filter(|c| crate::providerconfig::plan::scope_allows(c, team).is_ok());
    let every_ref: Vec<&IPAllocation> = every.iter().map(Arc::as_ref).collect();
    let earlier = former::former(&cluster, current, &every_ref);
    if !earlier.is_empty() {
        let ranges = release::ranges(&earlier);
        let since = cluster.status.iter().flat_map(|s| &s.conditions).find_map(|c| {
            (c.type_ == former::FORMER_ADDRESSES && c.status == "False").then_some(c.last_transition_time.0)
        });
        let held_for =
            since.map_or(Duration::ZERO, |t| ctx.ipam.clock.now().duration_since(t).unsigned_abs());
        let mut step = former::step(&earlier, &ranges, None, held_for);
        if step.ask {
            match ctx.tenant_turns.take(&cluster) {
                Some(_turn) => {
                    let tenant = ask_tenant(ctx, &cluster, &ranges).await;
                    step = former::step(&earlier, &ranges, Some(tenant), held_for);
                }
                None => step.again = Some(WAIT_FOR_TURN),
            }
        }
        for (ns, name) in &step.delete {
            delete_allocation(ctx, &cluster, ns, name, &every).await?;
        }
        requeue = [requeue, step.again].into_iter().flatten().min();
        wanted.push(step.condition);
    }
    // Status: only the IPAM fields, this controller's conditions, Ready and observedGeneration,
    // applied with its own field manager: the conditions are a map by type, so those of other
    // writers stay theirs and are never written back from a cache.
    wanted.push(plan::readiness(&wanted, planned.ipam));
    let existing = cluster.status.clone().unwrap_or_default();
    let now = Time(ctx.ipam.clock.now());
    let generation = cluster.meta().generation;
    let merged = conditions::merge(&existing.conditions, &wanted, generation, &now, &[]);
    let ours: Vec<_> = merged.into_iter().filter(|c| wanted.iter().any(|w| w.type_ == c.type_)).collect();
    let addresses = (!planned.addresses.is_empty()).then(|| planned.addresses.clone());
    let lb_allocation_ref = planned.lb_allocation_ref.clone().or(existing.lb_allocation_ref.clone());
    let ip_allocation_ref = planned.ip_allocation_ref.clone().or(existing.ip_allocation_ref.clone());
    let unchanged = ours.iter().all(|c| existing.conditions.contains(c))
        && existing.observed_generation == generation
        && existing.lb_allocation_ref == lb_allocation_ref
        && existing.ip_allocation_ref == ip_allocation_ref
        && existing.load_balancer_addresses == addresses
        && existing.tenant_servers == servers;
    if !unchanged {
        let status = TenantClusterStatus {
            conditions: ours.clone(),
            observed_generation: generation,
            lb_allocation_ref,
            ip_allocation_ref,
            load_balancer_addresses: addresses,
            tenant_servers: servers,
            ..Default::default()
        };
        apply_status(&api, &cluster, &status).await?;
    }
    let ready = ours.iter().any(|c| c.type_ == IPAM_READY && c.status == "True");
    Ok(Action::requeue(requeue.unwrap_or(if ready { RESYNC } else { Duration::from_secs(30) })))
}

/// The most tenant API servers a cluster's addresses are given to over its life (a Secret
/// re-pointed more often is a Secret to fix).
const MAX_TENANT_SERVERS: usize = 8;

/// Applies the fields of the status this controller keeps (conditions, observedGeneration, the
/// allocation references and addresses) with its own field manager: the conditions are a map
/// by type, so other writers' stay theirs and are never written back from a cache. What is
/// not known is left out (an applied null would be a value of its own).
async fn apply_status(
    api: &Api<TenantCluster>,
    cluster: &TenantCluster,
    status: &TenantClusterStatus,
) -> Result<(), Error> {
    let mut fields = json!({"conditions": status.conditions});
    for (key, value) in [
        ("observedGeneration", json!(status.observed_generation)),
        ("lbAllocationRef", json!(status.lb_allocation_ref)),
        ("ipAllocationRef", json!(status.ip_allocation_ref)),
        ("loadBalancerAddresses", json!(status.load_balancer_addresses)),
        ("tenantServers", json!((!status.tenant_servers.is_empty()).then_some(&status.tenant_servers))),
    ] {
        if !value.is_null() {
            fields[key] = value;
        }
    }
    let patch = json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": cluster.name_any()},
        "status": fields,
    });
    let params = PatchParams::apply(butler_core::api::labels::FIELD_MANAGER).force();
    api.patch_status(&cluster.name_any(), &params, &Patch::Apply(patch))
        .await
        .map_err(|e| Error::kube(format!("writing the status of TenantCluster {}", named(cluster)), e))?;
    Ok(())
}

/// Applies `wanted` over the status this controller wrote last, unless the status holds them
/// already. Everything it applied before is applied again, since a field left out of an apply
/// is a field removed.
async fn write_conditions(
    ctx: &Context,
    api: &Api<TenantCluster>,
    cluster: &TenantCluster,
    wanted: &[Wanted],
) -> Result<(), Error> {
    let existing = cluster.status.clone().unwrap_or_default();
    let now = Time(ctx.ipam.clock.now());
    let merged = conditions::merge(&existing.conditions, wanted, cluster.meta().generation, &now, &[]);
    if merged == existing.conditions {
        return Ok(());
    }
    apply_status(api, cluster, &TenantClusterStatus { conditions: ours(merged), ..existing }).await
}

/// Of a status's conditions, those this controller keeps (an apply of its own carries these
/// alone: other writers' stay theirs).
fn ours(conditions: Vec<Condition>) -> Vec<Condition> {
    let own =
        [IPAM_READY, METALLB_SYNCED, ELASTIC, former::FORMER_ADDRESSES, butler_runtime::conditions::READY];
    conditions.into_iter().filter(|c| own.contains(&c.type_.as_str())).collect()
}

/// How often a Ready cluster is looked at (spec/002's table): young ones often, since elastic
/// IPAM runs at each reconcile.
fn by_age(cluster: &TenantCluster, now: jiff::Timestamp) -> Duration {
    let age = cluster
        .metadata
        .creation_timestamp
        .as_ref()
        .map_or(Duration::ZERO, |t| now.duration_since(t.0).unsigned_abs());
    match age.as_secs() {
        0..3600 => Duration::from_secs(60),
        3600..86400 => Duration::from_secs(300),
        _ => Duration::from_secs(900),
    }
}

/// Deletion (spec/002 layer 1): the allocations the status names and those labelled for the
/// cluster, each once, once the tenant's MetalLB no longer lists their addresses (see
/// [`release`]); then the finalizer goes (the allocations' own finalizers record their
/// release, and orphan collection is the safety net).
async fn delete(cluster: &TenantCluster, ctx: &Context, api: &Api<TenantCluster>) -> Result<Action, Error> {
    if !butler_runtime::finalizer::has(cluster, TENANT_CLUSTER_FINALIZER) {
        return Ok(Action::await_change());
    }
    let ours = allocations_of(ctx, cluster);
    let labelled: Vec<&IPAllocation> = ours
        .iter()
        .map(Arc::as_ref)
        .filter(|a| {
            a.labels().get(butler_core::api::labels::LABEL_TEAM) == cluster.namespace().as_ref()
                && a.labels().get(butler_core::api::labels::LABEL_TENANT)
                    == Some(&plan::tenant_label(cluster))
        })
        .collect();
    let status = cluster.status.clone().unwrap_or_default();
    let mut named_in_status = Vec::new();
    for r in [status.lb_allocation_ref, status.ip_allocation_ref].into_iter().flatten() {
        let api: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), &r.namespace);
        if let Some(a) = api
            .get_opt(&r.name)
            .await
            .map_err(|e| Error::kube(format!("reading IPAllocation {}/{}", r.namespace, r.name), e))?
        {
            named_in_status.push(a);
        }
    }
    let named_refs: Vec<&IPAllocation> = named_in_status.iter().collect();
    let going = plan::cleanup(cluster, &labelled, &named_refs);
    let blocks: Vec<&IPAllocation> = ours
        .iter()
        .map(Arc::as_ref)
        .chain(named_in_status.iter())
        .filter(|a| going.contains(&(a.namespace().unwrap_or_default(), a.name_any())))
        .collect();
    let ranges = release::ranges(&blocks);
    if !ranges.is_empty() {
        // Deletions take turns at the tenants too, so that hanging ones never hold every worker.
        let Some(_turn) = ctx.tenant_turns.take(cluster) else {
            let message = "other tenants' calls are under way; this one follows in a moment";
            let wanted = [Wanted::new(METALLB_SYNCED, false, "WaitingForTurn", message)];
            write_conditions(ctx, api, cluster, &wanted).await?;
            return Ok(Action::requeue(WAIT_FOR_TURN));
        };
        let tenant = ask_tenant(ctx, cluster, &ranges).await;
        let since = cluster.meta().deletion_timestamp.as_ref().map_or(ctx.ipam.clock.now(), |t| t.0);
        let deleting_for = ctx.ipam.clock.now().duration_since(since).unsigned_abs();
        match release::decide(tenant, deleting_for, &ranges) {
            release::Step::Hold { reason, message, again } => {
                let wanted = [Wanted::new(METALLB_SYNCED, false, reason, message)];
                write_conditions(ctx, api, cluster, &wanted).await?;
                return Ok(Action::requeue(again));
            }
            release::Step::Release { note: Some(note) } => {
                tracing::warn!(cluster = %named(cluster), "{note}");
            }
            release::Step::Release { note: None } => {}
        }
    }
    for (ns, name) in going {
        delete_allocation(ctx, cluster, &ns, &name, &ours).await?;
    }
    butler_runtime::finalizer::remove(api, cluster, TENANT_CLUSTER_FINALIZER)
        .await
        .map_err(|e| Error::kube(format!("removing the finalizer of TenantCluster {}", named(cluster)), e))?;
    ctx.forget(&crate::keys::Gone::of(cluster));
    Ok(Action::await_change())
}

/// Asks the tenant to drop `ranges` from its MetalLB pool, when its word counts (see
/// [`release::witness`]): the servers given the addresses are the one the Secret names now.
async fn ask_tenant(ctx: &Context, cluster: &TenantCluster, ranges: &[String]) -> release::Tenant {
    let status = cluster.status.clone().unwrap_or_default();
    let secret = format!("{}/{}-kubeconfig", cluster.namespace().unwrap_or_default(), cluster.name_any());
    let recorded = &status.tenant_servers;
    // The tenant had the addresses (an earlier version recorded no servers): MetalLB was
    // synced, or a release of them is under way.
    let had = ["TenantRefused", "TenantRefusedRelease", "WaitingForTenant", "WaitingForTurn"];
    let synced_before = status
        .conditions
        .iter()
        .any(|c| c.type_ == METALLB_SYNCED && (c.status == "True" || had.contains(&c.reason.as_str())));
    match ctx.tenants.get(&ctx.client, &ctx.secret_reader, cluster).await {
        Ok(reached) => {
            let server = reached.as_ref().map(|r| r.server.as_str());
            match (release::witness(recorded, synced_before, server, &secret), reached) {
                (release::Witness::Nobody, _) => release::Tenant::Clear,
                (release::Witness::Unknown(why), _) => release::Tenant::Silent(why),
                (release::Witness::Ask, None) => release::Tenant::Clear,
                (release::Witness::Ask, Some(reached)) => {
                    let asked = release::ask(&reached.client, ranges);
                    match tokio::time::timeout(ctx.tenant_deadline, asked).await {
                        Ok(answer) => answer,
                        Err(_) => release::Tenant::Silent(tenant::late(ctx.tenant_deadline)),
                    }
                }
            }
        }
        Err(why) => release::Tenant::Silent(why),
    }
}
