//! A batch of the NetworkPool controller (see the parent module): one consistent list, then
//! chunks, each committed to the pool's journal (with the pool's figures: one pool write a
//! chunk) before its writes.

use std::sync::Arc;

use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool};
use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::serve::{self, Served, Write};
use super::status::{self, Shape};
use butler_runtime::error::{is_conflict, is_not_found};

use super::{CHUNK, PoolWrite, named, spec, write_pool_status};
use crate::context::Context;
use crate::error::Error;
use crate::filed::names;

/// Status writes of one batch in flight at once.
const PARALLEL_WRITES: usize = 16;
/// Commits tried before the reconcile gives way to a competing planner.
const COMMITS: usize = 4;

/// One batch (see the module's documentation), in chunks of at most `CHUNK` writes over one
/// list: each chunk commits against the pool as this batch wrote it last, so a commit that
/// succeeds proves no one else committed since the list. A conflict, or a write whose outcome
/// is not a written object, lists again; a competing planner that keeps committing first makes
/// it give way until the next reconcile.
pub(super) async fn batch(
    ctx: &Context,
    api: &Api<NetworkPool>,
    mut pool: Arc<NetworkPool>,
    first: Option<(Vec<Arc<IPAllocation>>, Served)>,
) -> Result<(), Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let allocations: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), &namespace);
    // 1. A consistent list (no resourceVersion: read from storage, not a cache), unless nothing
    //    was committed to the pool since this process's last batch and the view shows all that
    //    batch knew (`Ipam::knows`; the caller planned from it already): a list of every
    //    allocation at each batch made serving n allocations arriving over time cost n² reads.
    let (mut listed, mut planned) = match first {
        Some((view, served)) => (Some(view), Some(served)),
        None => (None, None),
    };
    // Whether the items are a consistent list (else: the view).
    let mut consistent = listed.is_none();
    let mut conflicts = 0;
    loop {
        let items = match listed.as_mut() {
            Some(items) => items,
            None => {
                consistent = true;
                listed.insert(list_consistent(ctx, &allocations, &name).await.map_err(|e| {
                    Error::kube(format!("listing the IPAllocations of NetworkPool {}", named(&pool)), e)
                })?)
            }
        };
        let now = ctx.ipam.clock.now();
        let served = match planned.take() {
            Some(served) => served,
            None => {
                let allocator = match spec::allocator(&pool) {
                    Ok(allocator) => allocator,
                    // The spec changed under us; the next reconcile reports it.
                    Err(_) => return Ok(()),
                };
                let refs: Vec<&IPAllocation> = items.iter().map(Arc::as_ref).collect();
                serve::serve(&pool, allocator, &refs, now, &ctx.ipam.allocated_by, CHUNK)
            }
        };
        let hands_out = served.writes.iter().any(|w| w.status.phase == Some(IPAllocationPhase::Allocated));
        let Served { allocator, writes, journal, problems, more } = served;
        // The pool's figures as they are once the writes land.
        let stats = allocator.stats();
        let (mut status, events) =
            status::plan(&pool, Shape::Valid { stats: &stats, problems: &problems }, now);
        // 2. Commit the journal with those figures, the batch's one pool write, unless nothing
        //    is handed out (refusals need no journal). The journal is not cleared afterwards:
        //    an entry whose write landed keeps no block (its allocation's resourceVersion moved
        //    on), and the next commit replaces it.
        let committed = if hands_out {
            status.in_flight = journal;
            let rv = pool.meta().resource_version.clone();
            match write_pool_status(ctx, api, &pool, status, Some(rv), events).await? {
                PoolWrite::Written(written) => Arc::new(*written),
                PoolWrite::Unchanged => pool.clone(),
                PoolWrite::Conflict => {
                    conflicts += 1;
                    if conflicts >= COMMITS {
                        tracing::debug!(pool = %named(&pool), "another planner kept committing first; planning again later");
                        return Ok(());
                    }
                    pool =
                        Arc::new(api.get(&name).await.map_err(|e| {
                            Error::kube(format!("reading NetworkPool {namespace}/{name}"), e)
                        })?);
                    listed = None;
                    continue;
                }
            }
        } else {
            // Refusals only: the figures and conditions, the journal as it is.
            status.in_flight = pool.status.clone().unwrap_or_default().in_flight;
            match write_pool_status(ctx, api, &pool, status, None, events).await? {
                PoolWrite::Written(written) => Arc::new(*written),
                PoolWrite::Unchanged | PoolWrite::Conflict => pool.clone(),
            }
        };
        // 3. The allocations; what was written replaces what was listed.
        let count = writes.len();
        let landed = write_allocations(ctx, &namespace, writes).await;
        let mut all_written = landed.len() == count;
        let mut written = Vec::with_capacity(landed.len());
        for outcome in landed {
            match outcome {
                Some(object) => written.push(object),
                None => all_written = false,
            }
        }
        let replaced = replace_written(items, written.into_iter());
        match all_written {
            true => ctx.ipam.remember(&committed, consistent.then_some(&items[..]), &replaced),
            false => ctx.ipam.forget_known(&committed),
        }
        // A later chunk plans from these items, which hold what was listed and written.
        if !more {
            return Ok(());
        }
        pool = committed;
        if !all_written {
            listed = None;
        }
    }
}

/// Puts what was written in place of what was listed, and returns it. The writes are few and
/// the items many: each write is found by name (the items sorted by it, as the cache and the
/// API server give them), not each item looked up among the writes.
fn replace_written(
    items: &mut [Arc<IPAllocation>],
    written: impl Iterator<Item = Arc<IPAllocation>>,
) -> Vec<Arc<IPAllocation>> {
    let by_name = |a: &Arc<IPAllocation>, b: &Arc<IPAllocation>| names(a.as_ref()).cmp(&names(b.as_ref()));
    if !items.is_sorted_by(|a, b| by_name(a, b).is_le()) {
        items.sort_by(by_name);
    }
    let mut replaced = Vec::new();
    for object in written {
        let found = items.binary_search_by(|a| by_name(a, &object));
        if let Ok(i) = found
            && items[i].metadata.uid == object.metadata.uid
        {
            items[i] = object.clone();
            replaced.push(object);
        }
    }
    replaced
}

/// The IPAllocations of a pool, from storage (no resourceVersion: a consistent read), in pages
/// so that a large namespace is never held twice over; kept as the caches keep them. An
/// allocation the cache holds at the version listed is the cache's object: a list of a pool of
/// thousands then costs a page, not a second copy of the pool.
async fn list_consistent(
    ctx: &Context,
    api: &Api<IPAllocation>,
    pool: &str,
) -> Result<Vec<Arc<IPAllocation>>, kube::Error> {
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items.into_iter().filter(|a| a.spec.pool_ref.name == pool).map(|a| {
            let cached = ctx.ipam.allocations.object(&a.namespace().unwrap_or_default(), &a.name_any());
            match cached {
                Some(cached) if same_version(&cached, &a) => cached,
                _ => Arc::new(crate::caches::kept_allocation(a)),
            }
        }));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// Whether two copies are of one object at one version (and so, kept alike, hold the same).
fn same_version(a: &IPAllocation, b: &IPAllocation) -> bool {
    a.metadata.uid.is_some()
        && a.metadata.resource_version.is_some()
        && (&a.metadata.uid, &a.metadata.resource_version) == (&b.metadata.uid, &b.metadata.resource_version)
}

/// Writes allocation statuses, each conditional on the resourceVersion it was planned from.
/// Returns the writes whose outcome is known: the object as written, or `None` when the write
/// was refused because the object changed or went (such a write can never land later).
pub(super) async fn write_allocations(
    ctx: &Context,
    namespace: &str,
    writes: Vec<Write>,
) -> Vec<Option<Arc<IPAllocation>>> {
    let api: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), namespace);
    futures::stream::iter(writes)
        .map(|w| {
            let api = api.clone();
            async move {
                let patch = json!({"metadata": {"resourceVersion": w.resource_version}, "status": w.status});
                match api.patch_status(&w.name, &PatchParams::default(), &Patch::Merge(patch)).await {
                    Ok(written) => {
                        let written = Arc::new(crate::caches::kept_allocation(written));
                        ctx.ipam.wrote(written.clone());
                        Some(Some(written))
                    }
                    Err(e) if is_conflict(&e) || is_not_found(&e) => Some(None),
                    Err(e) => {
                        tracing::warn!(allocation = %format!("{namespace}/{}", w.name), error = %e, "cannot write the status; its block stays taken until it is known");
                        None
                    }
                }
            }
        })
        .buffer_unordered(PARALLEL_WRITES)
        .filter_map(futures::future::ready)
        .collect()
        .await
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn a(name: &str, uid: &str, rv: &str) -> Arc<IPAllocation> {
        Arc::new(
            serde_json::from_value(json!({
                "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
                "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
                "spec": {"poolRef": {"name": "p"}, "tenantClusterRef": {"name": "t", "namespace": "x"}, "type": "nodes"},
            }))
            .unwrap(),
        )
    }

    #[test]
    fn writes_take_the_place_of_the_items_they_were_planned_from_and_of_no_other() {
        // Listed in no particular order.
        let mut items = vec![a("c", "uc", "1"), a("a", "ua", "1"), a("b", "ub", "1")];
        let written = vec![a("b", "ub", "2"), a("a", "another-a", "5")];
        let replaced = replace_written(&mut items, written.into_iter());
        let seen: Vec<(String, String)> = items
            .iter()
            .map(|i| (i.metadata.name.clone().unwrap(), i.metadata.resource_version.clone().unwrap()))
            .collect();
        assert_eq!(seen, [("a".into(), "1".into()), ("b".into(), "2".into()), ("c".into(), "1".into())]);
        assert_eq!(replaced.len(), 1, "a write of another object of that name is not this one's");
    }
}
