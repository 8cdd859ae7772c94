//! A cluster's own IPAllocations, made and deleted: a name taken by another cluster's
//! allocation is never taken as this one's, and a delete names the UID it read.

use std::sync::Arc;

use butler_core::api::{IPAllocation, TenantCluster};
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use kube::{Resource, ResourceExt};

use super::{named, plan};
use crate::context::Context;
use crate::error::Error;
use butler_runtime::error::{is_conflict, is_not_found};

/// Creates an allocation of `cluster`; one that exists already (made a moment ago by this
/// controller, whose cache has not shown it yet) is fine. `Some(why)` when the name is taken
/// by an allocation of another cluster.
pub(super) async fn create_allocation(
    ctx: &Context,
    cluster: &TenantCluster,
    allocation: &IPAllocation,
) -> Result<Option<String>, Error> {
    let ns = allocation.namespace().unwrap_or_default();
    match Api::<IPAllocation>::namespaced(ctx.client.clone(), &ns)
        .create(&PostParams::default(), allocation)
        .await
    {
        Ok(_) => Ok(None),
        // Made already: by an earlier try of this cluster's (fine), or someone else's object
        // of that name (an error that says so; never taken as this cluster's).
        Err(e) if is_conflict(&e) => {
            let api = Api::<IPAllocation>::namespaced(ctx.client.clone(), &ns);
            let name = allocation.name_any();
            match api.get_opt(&name).await {
                Ok(Some(existing)) if !plan::serves(&existing, cluster) => Ok(Some(format!(
                    "IPAllocation {ns}/{name} exists and serves TenantCluster {}/{}, not this one; rename one of the clusters",
                    existing.spec.tenant_cluster_ref.namespace, existing.spec.tenant_cluster_ref.name,
                ))),
                _ => Ok(None),
            }
        }
        Err(e) => Err(Error::kube(
            format!(
                "creating IPAllocation {ns}/{} for TenantCluster {}",
                allocation.name_any(),
                named(cluster)
            ),
            e,
        )),
    }
}

/// Deletes one allocation of `cluster`, only if it still says it serves the cluster (by UID,
/// so that a newer object of that name is never taken).
pub(super) async fn delete_allocation(
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
        Err(e) if is_not_found(&e) || is_conflict(&e) => Ok(()),
        Err(e) => Err(Error::kube(
            format!("deleting IPAllocation {namespace}/{name} of TenantCluster {}", named(cluster)),
            e,
        )),
    }
}
