//! The NetworkPool controller (spec/002): the only writer of IPAllocation blocks.
//!
//! A reconcile reads the pool's allocations from the cache (with this process's own writes
//! over it) and plans ([`serve`]). Only when that plan hands out or refuses something does it
//! run a **batch**, which makes two replicas, a restart mid-batch or a stale cache unable to
//! hand out one address twice:
//!
//! 1. list the pool's allocations with a consistent read and plan again from that;
//! 2. commit the journal (`status.inFlight`: every block about to be written, and every older
//!    entry whose write may still land) to the pool, conditional on the pool's resourceVersion:
//!    of two planners, one commits and the other plans again from the newer pool;
//! 3. write each allocation's status, conditional on the resourceVersion it was planned from;
//! 4. write the pool's status with the journal left of writes whose outcome is unknown.
//!
//! A planner that commits read the pool after every earlier commit, and listed after it: each
//! block handed out before is in that list, or in the journal while its write may still land.
//!
//! Then orphans are collected: an Allocated allocation whose TenantCluster answers 404.

pub mod serve;
pub mod spec;
pub mod status;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use butler_core::api::labels::NETWORK_POOL_FINALIZER;
use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool, NetworkPoolStatus, TenantCluster};
use butler_runtime::conditions::{self, READY, Wanted};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use crate::context::Context;
use crate::error::Error;
use serve::{Served, Write, held};
use status::{CapacityEvent, Shape};

/// spec/002's intervals: after serving or collecting, and otherwise.
const AGAIN_SOON: Duration = Duration::from_secs(5);
const RESYNC: Duration = Duration::from_secs(60);
/// Status writes of one batch in flight at once.
const PARALLEL_WRITES: usize = 16;
/// Commits tried before the reconcile gives way to a competing planner.
const COMMITS: usize = 4;
/// Writes of one commit: the journal stays far below an object's size limit (about 150 bytes
/// an entry against etcd's 1.5 MiB), and a crash leaves little to resolve.
const CHUNK: usize = 500;

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Reconciles one NetworkPool.
pub async fn reconcile(pool: Arc<NetworkPool>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.synced().await;
    let key = crate::context::failure_key(pool.as_ref());
    let started = ctx.metrics.reconcile_started("NetworkPool");
    let result = run(pool, &ctx).await;
    ctx.metrics.reconcile_finished("NetworkPool", started, result.as_ref().err().map(Error::reason));
    if result.is_ok() {
        ctx.failures.lock().expect("not poisoned").remove(&key);
    }
    result
}

/// `namespace/name` of a pool, for messages.
fn named(pool: &NetworkPool) -> String {
    format!("{}/{}", pool.namespace().unwrap_or_default(), pool.name_any())
}

async fn run(cached: Arc<NetworkPool>, ctx: &Context) -> Result<Action, Error> {
    let pool = ctx.ipam.pool(cached.clone());
    let namespace = pool.namespace().unwrap_or_default();
    let api: Api<NetworkPool> = Api::namespaced(ctx.client.clone(), &namespace);
    if pool.meta().deletion_timestamp.is_some() {
        return delete(&pool, ctx, &api).await;
    }
    let pool = if butler_runtime::finalizer::has(pool.as_ref(), NETWORK_POOL_FINALIZER) {
        pool
    } else {
        let added = butler_runtime::finalizer::add(&api, pool.as_ref(), NETWORK_POOL_FINALIZER)
            .await
            .map_err(|e| Error::kube(format!("adding the finalizer to NetworkPool {}", named(&pool)), e))?;
        Arc::new(added)
    };
    let now = ctx.ipam.clock.now();
    let view = ctx.ipam.view(&namespace, &pool.name_any());
    let refs: Vec<&IPAllocation> = view.iter().map(Arc::as_ref).collect();
    let mut again = RESYNC;
    match spec::allocator(&pool) {
        Err(why) => {
            // Nothing is handed out from an invalid spec; waiting allocations say why.
            let writes = refuse(&pool, &refs, &why, now);
            if !writes.is_empty() {
                write_allocations(ctx, &namespace, writes).await;
                again = AGAIN_SOON;
            }
            let (status, events) = status::plan(&pool, Shape::Invalid(&why), now);
            write_pool_status(ctx, &api, &pool, status, None, events).await?;
        }
        Ok(allocator) => {
            let served = serve::serve(&pool, allocator, &refs, now, &ctx.ipam.allocated_by, CHUNK);
            if served.writes.is_empty() {
                let stats = served.allocator.stats();
                let (status, events) =
                    status::plan(&pool, Shape::Valid { stats: &stats, problems: &served.problems }, now);
                write_pool_status(ctx, &api, &pool, status, None, events).await?;
            } else {
                batch(ctx, &api, cached.clone()).await?;
                again = AGAIN_SOON;
            }
        }
    }
    if collect_orphans(ctx, &namespace, &view).await? {
        again = AGAIN_SOON;
    }
    Ok(Action::requeue(again))
}

/// Failed statuses for the waiting allocations of a pool whose spec is invalid.
fn refuse(pool: &NetworkPool, refs: &[&IPAllocation], why: &str, now: jiff::Timestamp) -> Vec<Write> {
    let message = format!("NetworkPool {} has an invalid spec: {why}", named(pool));
    refs.iter()
        .filter(|a| serve::waiting(a))
        .filter_map(|a| {
            let existing = a.status.clone().unwrap_or_default();
            let wanted = [Wanted::new(READY, false, "PoolInvalid", message.clone())];
            let status = butler_core::api::IPAllocationStatus {
                phase: Some(IPAllocationPhase::Failed),
                observed_generation: a.metadata.generation,
                conditions: conditions::merge(
                    &existing.conditions,
                    &wanted,
                    a.metadata.generation,
                    &Time(now),
                    &[READY],
                ),
                ..Default::default()
            };
            (a.status.as_ref() != Some(&status)).then(|| Write {
                name: a.name_any(),
                uid: a.metadata.uid.clone().unwrap_or_default(),
                resource_version: a.metadata.resource_version.clone().unwrap_or_default(),
                status,
            })
        })
        .collect()
}

/// One batch (see the module's documentation), in chunks of at most [`CHUNK`] writes over one
/// list: each chunk commits against the pool as this batch wrote it last, so a commit that
/// succeeds proves no one else committed since the list. A conflict, or a write whose outcome
/// is not a written object, lists again; a competing planner that keeps committing first makes
/// it give way until the next reconcile.
async fn batch(ctx: &Context, api: &Api<NetworkPool>, mut pool: Arc<NetworkPool>) -> Result<(), Error> {
    let namespace = pool.namespace().unwrap_or_default();
    let name = pool.name_any();
    let allocations: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), &namespace);
    let mut listed: Option<Vec<IPAllocation>> = None;
    let mut conflicts = 0;
    loop {
        // 1. A consistent list (no resourceVersion: read from storage, not a cache).
        let items = match listed.as_mut() {
            Some(items) => items,
            None => listed.insert(list_consistent(&allocations, &name).await.map_err(|e| {
                Error::kube(format!("listing the IPAllocations of NetworkPool {}", named(&pool)), e)
            })?),
        };
        let now = ctx.ipam.clock.now();
        let allocator = match spec::allocator(&pool) {
            Ok(allocator) => allocator,
            // The spec changed under us; the next reconcile reports it.
            Err(_) => return Ok(()),
        };
        let refs: Vec<&IPAllocation> = items.iter().collect();
        let served = serve::serve(&pool, allocator, &refs, now, &ctx.ipam.allocated_by, CHUNK);
        // 2. Commit the journal, unless nothing is handed out (refusals need none).
        let hands_out = served.writes.iter().any(|w| w.status.phase == Some(IPAllocationPhase::Allocated));
        let committed = if hands_out {
            let patch = json!({
                "metadata": {"resourceVersion": pool.meta().resource_version},
                "status": {"inFlight": served.journal},
            });
            match api.patch_status(&name, &PatchParams::default(), &Patch::Merge(patch)).await {
                Ok(written) => Arc::new(written),
                Err(e) if is_conflict(&e) => {
                    conflicts += 1;
                    if conflicts >= COMMITS {
                        tracing::debug!(pool = %named(&pool), "another planner kept committing first; planning again later");
                        return Ok(());
                    }
                    pool =
                        Arc::new(api.get(&name).await.map_err(|e| {
                            Error::kube(format!("reading NetworkPool {}/{name}", namespace), e)
                        })?);
                    listed = None;
                    continue;
                }
                Err(e) => {
                    return Err(Error::kube(
                        format!("committing the journal of NetworkPool {}", named(&pool)),
                        e,
                    ));
                }
            }
        } else {
            pool.clone()
        };
        // 3. The allocations; what was written replaces what was listed.
        let Served { allocator, writes, journal, problems, more } = served;
        let count = writes.len();
        let landed = write_allocations(ctx, &namespace, writes).await;
        let mut resolved = HashSet::new();
        let mut all_written = landed.len() == count;
        let mut written = std::collections::HashMap::new();
        for (uid, outcome) in landed {
            resolved.insert(uid.clone());
            match outcome {
                Some(object) => {
                    written.insert(uid, object);
                }
                None => all_written = false,
            }
        }
        for item in items.iter_mut() {
            if let Some(object) = item.metadata.uid.as_ref().and_then(|u| written.remove(u)) {
                *item = object;
            }
        }
        // 4. The pool: its figures, and the journal left of writes whose outcome is unknown.
        let stats = allocator.stats();
        let (mut status, events) =
            status::plan(&committed, Shape::Valid { stats: &stats, problems: &problems }, now);
        status.in_flight = journal.into_iter().filter(|e| !resolved.contains(&e.uid)).collect();
        // The journal is written only by the planner that committed, conditional on its commit.
        let journal = hands_out.then(|| committed.meta().resource_version.clone());
        if !hands_out {
            status.in_flight = committed.status.clone().unwrap_or_default().in_flight;
        }
        let next = write_pool_status(ctx, api, &committed, status, journal, events).await?;
        if !more {
            return Ok(());
        }
        match next {
            PoolWrite::Written(pool_now) => pool = Arc::new(*pool_now),
            PoolWrite::Unchanged => pool = committed,
            // Someone else committed: the list is no proof any more.
            PoolWrite::Conflict => {
                pool = Arc::new(
                    api.get(&name)
                        .await
                        .map_err(|e| Error::kube(format!("reading NetworkPool {}/{name}", namespace), e))?,
                );
                all_written = false;
            }
        }
        if !all_written {
            listed = None;
        }
    }
}

/// The IPAllocations of a pool, from storage (no resourceVersion: a consistent read), in pages
/// so that a large namespace is never held twice over; managed fields are dropped.
async fn list_consistent(api: &Api<IPAllocation>, pool: &str) -> Result<Vec<IPAllocation>, kube::Error> {
    let mut out = Vec::new();
    let mut params = ListParams::default().limit(500);
    loop {
        let page = api.list(&params).await?;
        out.extend(page.items.into_iter().filter(|a| a.spec.pool_ref.name == pool).map(|mut a| {
            a.metadata.managed_fields = None;
            a
        }));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

/// Writes allocation statuses, each conditional on the resourceVersion it was planned from.
/// Returns the UIDs whose outcome is known, with the object as written, or `None` when the
/// write was refused because the object changed or went (such a write can never land later).
async fn write_allocations(
    ctx: &Context,
    namespace: &str,
    writes: Vec<Write>,
) -> Vec<(String, Option<IPAllocation>)> {
    let api: Api<IPAllocation> = Api::namespaced(ctx.client.clone(), namespace);
    futures::stream::iter(writes)
        .map(|w| {
            let api = api.clone();
            async move {
                let patch = json!({"metadata": {"resourceVersion": w.resource_version}, "status": w.status});
                match api.patch_status(&w.name, &PatchParams::default(), &Patch::Merge(patch)).await {
                    Ok(mut written) => {
                        written.metadata.managed_fields = None;
                        ctx.ipam.wrote(written.clone());
                        Some((w.uid, Some(written)))
                    }
                    Err(e) if is_conflict(&e) || is_not_found(&e) => Some((w.uid, None)),
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

/// What became of a pool status write.
enum PoolWrite {
    Written(Box<NetworkPool>),
    Unchanged,
    /// Refused: the pool changed since (another planner committed).
    Conflict,
}

/// Writes the pool's status when it changed and publishes its events. With `journal` (the
/// resourceVersion the write requires), the journal is written too; without, it is left as it is.
async fn write_pool_status(
    ctx: &Context,
    api: &Api<NetworkPool>,
    pool: &NetworkPool,
    status: NetworkPoolStatus,
    journal: Option<Option<String>>,
    events: Vec<CapacityEvent>,
) -> Result<PoolWrite, Error> {
    let existing = pool.status.clone().unwrap_or_default();
    if status == existing {
        return Ok(PoolWrite::Unchanged);
    }
    let mut body = serde_json::to_value(&status).unwrap_or(Value::Null);
    let mut patch = json!({});
    match journal {
        Some(rv) => {
            body["inFlight"] = json!(status.in_flight);
            if let Some(rv) = rv {
                patch["metadata"] = json!({"resourceVersion": rv});
            }
        }
        None => {
            if let Some(o) = body.as_object_mut() {
                o.remove("inFlight");
            }
        }
    }
    // Tiers whose time is gone from the map are dropped explicitly (a merge patch keeps keys).
    for tier in existing.capacity_events.keys() {
        if !status.capacity_events.contains_key(tier) {
            body["capacityEvents"][tier] = Value::Null;
        }
    }
    patch["status"] = body;
    let written = match api
        .patch_status(&pool.name_any(), &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(written) => written,
        // Another planner committed meanwhile; it writes the figures.
        Err(e) if is_conflict(&e) => return Ok(PoolWrite::Conflict),
        Err(e) => return Err(Error::kube(format!("writing the status of NetworkPool {}", named(pool)), e)),
    };
    ctx.ipam.wrote_pool(written.clone());
    for event in events {
        let event = Event {
            type_: if event.warning { EventType::Warning } else { EventType::Normal },
            reason: event.reason.into(),
            note: Some(event.message),
            action: "Allocate".into(),
            secondary: None,
        };
        if let Err(e) = ctx.recorder.publish(&event, &pool.object_ref(&())).await {
            tracing::warn!(pool = %named(pool), error = %e, "cannot publish an event");
        }
    }
    Ok(PoolWrite::Written(Box::new(written)))
}

/// Deletes Allocated allocations whose TenantCluster is gone (404 from the API server, not an
/// absence from a cache, not any error). Returns whether it deleted any.
async fn collect_orphans(ctx: &Context, namespace: &str, view: &[Arc<IPAllocation>]) -> Result<bool, Error> {
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

/// Deletion waits while allocations name the pool, then the finalizer goes.
async fn delete(pool: &NetworkPool, ctx: &Context, api: &Api<NetworkPool>) -> Result<Action, Error> {
    if !butler_runtime::finalizer::has(pool, NETWORK_POOL_FINALIZER) {
        return Ok(Action::await_change());
    }
    let namespace = pool.namespace().unwrap_or_default();
    let users = ctx.ipam.view(&namespace, &pool.name_any());
    if !users.is_empty() {
        const LISTED: usize = 10;
        let mut names: Vec<String> = users.iter().take(LISTED).map(|a| a.name_any()).collect();
        if users.len() > LISTED {
            names.push(format!("and {} more", users.len() - LISTED));
        }
        let message = format!(
            "deletion waits: {} IPAllocations use this pool: {}; delete their TenantClusters or the allocations",
            users.len(),
            names.join(", ")
        );
        let existing = pool.status.clone().unwrap_or_default();
        let now = Time(ctx.ipam.clock.now());
        let wanted = [Wanted::new(READY, false, "DeletionBlocked", message)];
        let status = NetworkPoolStatus {
            conditions: conditions::merge(
                &existing.conditions,
                &wanted,
                pool.meta().generation,
                &now,
                status::ORDER,
            ),
            ..existing
        };
        write_pool_status(ctx, api, pool, status, None, Vec::new()).await?;
        return Ok(Action::requeue(RESYNC));
    }
    butler_runtime::finalizer::remove(api, pool, NETWORK_POOL_FINALIZER)
        .await
        .map_err(|e| Error::kube(format!("removing the finalizer of NetworkPool {}", named(pool)), e))?;
    ctx.ipam.forget_pool(pool);
    Ok(Action::await_change())
}
