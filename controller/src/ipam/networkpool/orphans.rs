//! Orphan collection (spec/002 layer 3): an Allocated allocation whose TenantCluster is gone.
//! "Gone" needs it to have existed: an allocation the TenantCluster controller made for its
//! cluster (it carries `butler.butlerlabs.dev/allocation-role`) is collected once the cluster
//! answers 404; any other (a pinned block made ahead of its cluster, as spec/002's
//! stable-address example does) only after [`ORPHAN_GRACE`] without its cluster.

use std::sync::Arc;

use butler_core::api::{IPAllocation, IPAllocationPhase, TenantCluster};
use kube::api::{Api, DeleteParams, Preconditions};
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};

use super::serve::held;
use crate::context::Context;
use crate::error::Error;
use butler_runtime::error::{is_conflict, is_not_found};

/// How long an allocation that no TenantCluster made waits for its cluster to appear.
pub const ORPHAN_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

/// Whether an allocation without its TenantCluster may be collected at `now`.
pub fn collectable(a: &IPAllocation, now: jiff::Timestamp) -> bool {
    if a.labels().contains_key(butler_core::api::labels::LABEL_ALLOCATION_ROLE) {
        return true;
    }
    let since = a.status.as_ref().and_then(|s| s.allocated_at.as_ref()).map(|t| t.0);
    since.is_some_and(|since| now.duration_since(since).unsigned_abs() >= ORPHAN_GRACE)
}

/// Deletes Allocated allocations whose TenantCluster is gone (404 from the API server, not an
/// absence from a cache, not any error). Returns whether it deleted any.
pub(super) async fn collect(
    ctx: &Context,
    namespace: &str,
    view: &[Arc<IPAllocation>],
) -> Result<bool, Error> {
    let mut collected = false;
    let now = ctx.ipam.clock.now();
    // The cluster found last: the allocations of one cluster come one after another (by name),
    // and a pool of thousands is looked through at each of its reconciles.
    let mut last_found: Option<&butler_core::api::NamespacedObjectReference> = None;
    for a in view {
        let allocated = a.status.as_ref().and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated);
        if !allocated || a.meta().deletion_timestamp.is_some() {
            continue;
        }
        let tenant = &a.spec.tenant_cluster_ref;
        if last_found == Some(tenant) {
            continue;
        }
        if ctx.teams.clusters.get(&tenant.namespace, &tenant.name).is_some() {
            last_found = Some(tenant);
            continue;
        }
        if held(a).is_none() || !collectable(a, now) {
            continue;
        }
        let clusters: Api<TenantCluster> = Api::namespaced(ctx.client.clone(), &tenant.namespace);
        match clusters.get(&tenant.name).await {
            Err(e) if is_not_found(&e) => {}
            Ok(_) => continue,
            Err(e) => {
                tracing::debug!(allocation = %a.name_any(), error = %e, "cannot tell whether its TenantCluster exists; kept");
                continue;
            }
        }
        let api: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions { uid: a.meta().uid.clone(), resource_version: None }),
            ..DeleteParams::default()
        };
        match api.delete(&a.name_any(), &params).await {
            Ok(_) => {
                collected = true;
                let note = format!(
                    "IPAllocation {namespace}/{} released: its TenantCluster {}/{} no longer exists",
                    a.name_any(),
                    tenant.namespace,
                    tenant.name
                );
                tracing::info!("{note}");
                if let Some(pool) = ctx.pools.get(&ObjectRef::new(&a.spec.pool_ref.name).within(namespace)) {
                    let event = Event {
                        type_: EventType::Normal,
                        reason: "OrphanReleased".into(),
                        note: Some(note),
                        action: "CollectOrphans".into(),
                        secondary: Some(a.object_ref(&())),
                    };
                    let _ = ctx.recorder.publish(&event, &pool.object_ref(&())).await;
                }
            }
            Err(e) if is_not_found(&e) || is_conflict(&e) => {}
            Err(e) => {
                return Err(Error::kube(
                    format!("deleting the orphaned IPAllocation {namespace}/{}", a.name_any()),
                    e,
                ));
            }
        }
    }
    Ok(collected)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_a_cluster_made_goes_at_once_the_rest_after_the_grace() {
        let allocation = |labels: serde_json::Value, at: &str| -> IPAllocation {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
                "metadata": {"name": "a", "namespace": "n", "labels": labels},
                "spec": {"poolRef": {"name": "p"}, "tenantClusterRef": {"name": "t", "namespace": "n"}, "type": "loadbalancer"},
                "status": {"phase": "Allocated", "allocatedAt": at}}))
            .unwrap()
        };
        let now: jiff::Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        let made = allocation(
            serde_json::json!({"butler.butlerlabs.dev/allocation-role": "initial"}),
            "2026-11-25T09:59:59Z",
        );
        assert!(collectable(&made, now));
        let pinned = allocation(serde_json::json!({}), "2026-11-25T09:51:00Z");
        assert!(!collectable(&pinned, now), "nine minutes: its cluster may still come");
        let old = allocation(serde_json::json!({}), "2026-11-25T09:50:00Z");
        assert!(collectable(&old, now));
    }
}
