//! Orphan collection (spec/002 layer 3): an Allocated allocation whose TenantCluster is gone.

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

/// Deletes Allocated allocations whose TenantCluster is gone (404 from the API server, not an
/// absence from a cache, not any error). Returns whether it deleted any.
pub(super) async fn collect(
    ctx: &Context,
    namespace: &str,
    view: &[Arc<IPAllocation>],
) -> Result<bool, Error> {
    let mut collected = false;
    for a in view {
        let allocated = a.status.as_ref().and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated);
        if !allocated || a.meta().deletion_timestamp.is_some() || held(a).is_none() {
            continue;
        }
        let tenant = &a.spec.tenant_cluster_ref;
        if ctx.teams.clusters.get(&ObjectRef::new(&tenant.name).within(&tenant.namespace)).is_some() {
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
