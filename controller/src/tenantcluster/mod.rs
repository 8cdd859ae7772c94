//! The TenantCluster controller, IPAM part (spec/002): in IPAM mode a cluster gets its initial
//! load-balancer IPAllocation from the first pool of its ProviderConfig (by priority) with room,
//! is told its addresses as soon as the NetworkPool controller serves it (a watch on
//! IPAllocations), and on deletion gives back every allocation it holds. Cloud mode does nothing.

pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use butler_core::api::labels::TENANT_CLUSTER_FINALIZER;
use butler_core::api::{IPAllocation, TenantCluster, TenantClusterStatus};
use butler_runtime::conditions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use plan::{IPAM_READY, Observed};

/// Everything is watched or timed by the plan; this is the safety net.
const RESYNC: Duration = Duration::from_secs(300);

fn is(e: &kube::Error, code: u16) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == code)
}

/// Reconciles the IPAM of one TenantCluster.
pub async fn reconcile(cluster: Arc<TenantCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.synced().await;
    let key = crate::context::failure_key(cluster.as_ref());
    let started = ctx.metrics.reconcile_started("TenantCluster");
    let result = run(&cluster, &ctx).await;
    ctx.metrics.reconcile_finished("TenantCluster", started, result.as_ref().err().map(Error::reason));
    if result.is_ok() {
        ctx.failures.lock().expect("not poisoned").remove(&key);
    }
    result
}

fn named(cluster: &TenantCluster) -> String {
    format!("{}/{}", cluster.namespace().unwrap_or_default(), cluster.name_any())
}

/// The allocations that say they serve `cluster`.
fn allocations_of(ctx: &Context, cluster: &TenantCluster) -> Vec<Arc<IPAllocation>> {
    ctx.ipam.allocations.all(|a| plan::serves(a, cluster))
}

async fn run(cluster: &TenantCluster, ctx: &Context) -> Result<Action, Error> {
    let api: Api<TenantCluster> =
        Api::namespaced(ctx.client.clone(), &cluster.namespace().unwrap_or_default());
    if cluster.meta().deletion_timestamp.is_some() {
        return delete(cluster, ctx, &api).await;
    }
    // From the cache; one that the cache does not show (yet) is read, so that a cache still
    // filling never makes a cluster report its ProviderConfig missing.
    let config = match plan::config_ref(cluster) {
        None => None,
        Some((ns, name)) => match ctx.configs.get(&ObjectRef::new(&name).within(&ns)) {
            Some(config) => Some(config),
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
    let allocations = allocations_of(ctx, cluster);
    let planned = plan::plan(&Observed {
        cluster,
        config: config.as_deref(),
        pool: &lookup,
        allocations: allocations.iter().map(Arc::as_ref).collect(),
    });
    if !planned.ipam && planned.condition.is_none() {
        return Ok(Action::await_change());
    }
    let cluster = if planned.ipam && !butler_runtime::finalizer::has(cluster, TENANT_CLUSTER_FINALIZER) {
        butler_runtime::finalizer::add(&api, cluster, TENANT_CLUSTER_FINALIZER).await.map_err(|e| {
            Error::kube(format!("adding the finalizer to TenantCluster {}", named(cluster)), e)
        })?
    } else {
        cluster.clone()
    };
    if let Some(allocation) = &planned.create {
        let ns = allocation.namespace().unwrap_or_default();
        let allocations: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), &ns);
        match allocations.create(&PostParams::default(), allocation).await {
            Ok(_) => {}
            // Made a moment ago (by this controller, whose cache has not shown it yet).
            Err(e) if is(&e, 409) => {}
            Err(e) => {
                return Err(Error::kube(
                    format!(
                        "creating IPAllocation {ns}/{} for TenantCluster {}",
                        allocation.name_any(),
                        named(&cluster)
                    ),
                    e,
                ));
            }
        }
    }
    for (ns, name) in &planned.delete {
        delete_allocation(ctx, &cluster, ns, name, &allocations).await?;
    }
    // Status: only the IPAM fields and condition.
    let existing = cluster.status.clone().unwrap_or_default();
    let now = Time(ctx.ipam.clock.now());
    let wanted: Vec<_> = planned.condition.iter().cloned().collect();
    let merged = conditions::merge(&existing.conditions, &wanted, cluster.meta().generation, &now, &[]);
    let addresses = (!planned.addresses.is_empty()).then(|| planned.addresses.clone());
    let status = TenantClusterStatus {
        conditions: merged,
        lb_allocation_ref: planned.lb_allocation_ref.clone().or(existing.lb_allocation_ref.clone()),
        load_balancer_addresses: addresses,
        ..existing.clone()
    };
    if status != existing {
        let patch = json!({"status": {
            "conditions": status.conditions,
            "lbAllocationRef": status.lb_allocation_ref,
            "loadBalancerAddresses": status.load_balancer_addresses,
        }});
        api.patch_status(&cluster.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await.map_err(
            |e| Error::kube(format!("writing the status of TenantCluster {}", named(&cluster)), e),
        )?;
    }
    let ready = conditions::is_true(&status.conditions, IPAM_READY);
    Ok(Action::requeue(planned.requeue.unwrap_or(if ready { RESYNC } else { Duration::from_secs(30) })))
}

/// Deletes one allocation of `cluster`, only if it still says it serves the cluster (by UID,
/// so that a newer object of that name is never taken).
async fn delete_allocation(
    ctx: &Context,
    cluster: &TenantCluster,
    namespace: &str,
    name: &str,
    known: &[Arc<IPAllocation>],
) -> Result<(), Error> {
    let api: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), namespace);
    let found =
        match known.iter().find(|a| a.name_any() == name && a.namespace().as_deref() == Some(namespace)) {
            Some(a) => Some(a.as_ref().clone()),
            None => api
                .get_opt(name)
                .await
                .map_err(|e| Error::kube(format!("reading IPAllocation {namespace}/{name}"), e))?,
        };
    let Some(allocation) = found.filter(|a| plan::serves(a, cluster)) else { return Ok(()) };
    let params = DeleteParams {
        preconditions: Some(Preconditions { uid: allocation.meta().uid.clone(), resource_version: None }),
        ..DeleteParams::default()
    };
    match api.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(e) if is(&e, 404) || is(&e, 409) => Ok(()),
        Err(e) => Err(Error::kube(
            format!("deleting IPAllocation {namespace}/{name} of TenantCluster {}", named(cluster)),
            e,
        )),
    }
}

/// Deletion (spec/002 layer 1): the allocations the status names and those labelled for the
/// cluster, each once; then the finalizer goes (the allocations' own finalizers record their
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
                && a.labels().get(butler_core::api::labels::LABEL_TENANT) == Some(&cluster.name_any())
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
    for (ns, name) in plan::cleanup(cluster, &labelled, &named_refs) {
        delete_allocation(ctx, cluster, &ns, &name, &ours).await?;
    }
    butler_runtime::finalizer::remove(api, cluster, TENANT_CLUSTER_FINALIZER)
        .await
        .map_err(|e| Error::kube(format!("removing the finalizer of TenantCluster {}", named(cluster)), e))?;
    Ok(Action::await_change())
}
