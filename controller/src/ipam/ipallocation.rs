//! The IPAllocation controller: the thin life cycle of spec/002. It adds the finalizer (the
//! NetworkPool controller serves only allocations that carry it, so the two never race on a new
//! one) and on deletion records `Released` with `releasedAt` before letting the object go; its
//! block returns to the pool only once the object is gone. A new allocation gets one status
//! write, its outcome from the NetworkPool controller; this controller writes `Pending` only to
//! say why nothing comes (its pool does not exist). Every status write carries the
//! resourceVersion it was decided on, so it never overwrites a block the NetworkPool controller
//! wrote meanwhile.

use std::sync::Arc;
use std::time::Duration;

use butler_core::api::labels::IP_ALLOCATION_FINALIZER;
use butler_core::api::{IPAllocation, IPAllocationPhase};
use butler_runtime::conditions::{self, READY, Wanted};
use butler_runtime::error::is_conflict;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::Error;

/// Backstops of spec/002's table; serving itself is driven by events. An allocation that holds
/// its block has none of its own: the NetworkPool controller looks at every allocation of its
/// pool at each resync (spec/002's health check: orphans, overlaps), and a timer per
/// allocation would keep thousands of entries and reconciles that decide nothing.
fn requeue(phase: Option<IPAllocationPhase>) -> Action {
    match phase {
        Some(IPAllocationPhase::Allocated) => Action::await_change(),
        Some(IPAllocationPhase::Failed) => Action::requeue(Duration::from_secs(30)),
        _ => Action::requeue(Duration::from_secs(15)),
    }
}

/// Reconciles one IPAllocation.
pub async fn reconcile(allocation: Arc<IPAllocation>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.scope.holds(&allocation.namespace().unwrap_or_default()) {
        return Ok(Action::await_change());
    }
    ctx.synced().await;
    let started = ctx.metrics.reconcile_started("IPAllocation");
    let result = run(&allocation, &ctx).await;
    ctx.finished(allocation.as_ref(), started, &result);
    result
}

async fn run(allocation: &IPAllocation, ctx: &Context) -> Result<Action, Error> {
    let namespace = allocation.namespace().unwrap_or_default();
    let name = allocation.name_any();
    let what = |doing: &str| format!("{doing} IPAllocation {namespace}/{name}");
    let api: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), &namespace);
    let now = Time(ctx.ipam.clock.now());
    let status = allocation.status.clone().unwrap_or_default();
    let conditional = |status: serde_json::Value| json!({"metadata": {"resourceVersion": allocation.meta().resource_version}, "status": status});
    if allocation.meta().deletion_timestamp.is_some() {
        if !butler_runtime::finalizer::has(allocation, IP_ALLOCATION_FINALIZER) {
            return Ok(Action::await_change());
        }
        let mut current = allocation.clone();
        if status.phase != Some(IPAllocationPhase::Released) {
            let patch = conditional(json!({"phase": "Released", "releasedAt": now}));
            current = match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch)).await {
                Ok(written) => written,
                // Changed meanwhile: decided again on the new version.
                Err(e) if is_conflict(&e) => {
                    return Ok(Action::requeue(Duration::from_millis(200)));
                }
                Err(e) => return Err(Error::kube(what("recording the release of"), e)),
            };
        }
        butler_runtime::finalizer::remove(&api, &current, IP_ALLOCATION_FINALIZER)
            .await
            .map_err(|e| Error::kube(what("removing the finalizer of"), e))?;
        return Ok(Action::await_change());
    }
    let current = if butler_runtime::finalizer::has(allocation, IP_ALLOCATION_FINALIZER) {
        allocation.clone()
    } else {
        butler_runtime::finalizer::add(&api, allocation, IP_ALLOCATION_FINALIZER)
            .await
            .map_err(|e| Error::kube(what("adding the finalizer to"), e))?
    };
    let status = current.status.clone().unwrap_or_default();
    let pool_exists =
        ctx.pools.get(&ObjectRef::new(&current.spec.pool_ref.name).within(&namespace)).is_some();
    let waiting = matches!(status.phase, None | Some(IPAllocationPhase::Pending));
    let mut wanted = None;
    if waiting && !pool_exists {
        let message = format!(
            "NetworkPool {namespace}/{} does not exist; create it or point spec.poolRef at an existing pool",
            current.spec.pool_ref.name
        );
        wanted = Some(Wanted::new(READY, false, "PoolNotFound", message));
    }
    if let Some(wanted) = wanted {
        let merged = conditions::merge(
            &status.conditions,
            std::slice::from_ref(&wanted),
            current.meta().generation,
            &now,
            &[READY],
        );
        if status.phase.is_none() || merged != status.conditions {
            let patch = Patch::Merge(json!({
                "metadata": {"resourceVersion": current.meta().resource_version},
                "status": {"phase": "Pending", "conditions": merged, "observedGeneration": current.meta().generation},
            }));
            match api.patch_status(&name, &PatchParams::default(), &patch).await {
                Ok(_) => {}
                Err(e) if is_conflict(&e) => {
                    return Ok(Action::requeue(Duration::from_millis(200)));
                }
                Err(e) => return Err(Error::kube(what("marking Pending"), e)),
            }
        }
    }
    Ok(requeue(status.phase))
}
