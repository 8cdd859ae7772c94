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
//!    with the pool's figures as they are once the writes land (the batch's one pool write);
//! 3. write each allocation's status, conditional on the resourceVersion it was planned from.
//!
//! The journal is not cleared after the writes: an entry whose write landed keeps no block
//! (its allocation's resourceVersion moved on), and the next commit replaces the journal; a
//! reconcile that hands nothing out tidies it.
//!
//! A planner that commits read the pool after every earlier commit, and listed after it: each
//! block handed out before is in that list, or in the journal while its write may still land.
//! A planner whose own batch made the last commit knows every block held then; while the pool
//! stays at that version (only a commit hands a block out) and its view shows each of those
//! blocks, the view stands in for the list (`Ipam::known_view`).
//!
//! Then orphans are collected: an Allocated allocation whose TenantCluster answers 404.

mod batch;
mod orphans;
pub mod serve;
pub mod spec;
pub mod status;

use std::sync::Arc;
use std::time::Duration;

use butler_core::api::labels::NETWORK_POOL_FINALIZER;
use butler_core::api::{IPAllocation, NetworkPool, NetworkPoolStatus};
use butler_runtime::conditions::{self, READY, Wanted};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use butler_runtime::error::is_conflict;

use crate::context::Context;
use crate::error::Error;
use serve::Write;
use status::{CapacityEvent, Shape};

/// spec/002's intervals: after serving or collecting, and otherwise.
const AGAIN_SOON: Duration = Duration::from_secs(5);
const RESYNC: Duration = Duration::from_secs(60);
/// Writes one plan makes: the journal stays far below an object's size limit (about 150 bytes
/// an entry against etcd's 1.5 MiB), and a crash leaves little to resolve.
const CHUNK: usize = 500;

/// Reconciles one NetworkPool.
pub async fn reconcile(pool: Arc<NetworkPool>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.scope.holds(&pool.namespace().unwrap_or_default()) {
        return Ok(Action::await_change());
    }
    ctx.synced().await;
    let started = ctx.metrics.reconcile_started("NetworkPool");
    let result = run(pool.clone(), &ctx).await;
    ctx.finished(pool.as_ref(), started, &result);
    result
}

/// The order in which pools were made: creation time, then namespace and name.
fn first_made(pool: &NetworkPool) -> (Option<jiff::Timestamp>, String, String) {
    (
        pool.metadata.creation_timestamp.as_ref().map(|t| t.0),
        pool.namespace().unwrap_or_default(),
        pool.name_any(),
    )
}

/// `namespace/name` of a pool, for messages.
pub(super) fn named(pool: &NetworkPool) -> String {
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
    // Of two pools that overlap, the older serves and the newer is refused.
    let older: Vec<Arc<NetworkPool>> = ctx
        .pools
        .state()
        .into_iter()
        .filter(|o| ctx.scope.holds(&o.namespace().unwrap_or_default()))
        .filter(|o| first_made(o) < first_made(&pool))
        .collect();
    let overlaps = spec::overlapping(&pool, older.iter().map(Arc::as_ref));
    let checked = spec::allocator(&pool).and_then(|allocator| match overlaps.is_empty() {
        true => Ok(allocator),
        false => Err(spec::overlap_message(&pool, &overlaps)),
    });
    match checked {
        Err(why) => {
            // Nothing is handed out from an invalid spec; waiting allocations say why.
            let writes = refuse(&pool, &refs, &why, now);
            if !writes.is_empty() {
                batch::write_allocations(ctx, &namespace, writes).await;
                again = AGAIN_SOON;
            }
            let (status, events) = status::plan(&pool, Shape::Invalid(&why), now);
            write_pool_status(ctx, &api, &pool, status, None, events).await?;
        }
        Ok(allocator) => {
            let served = serve::serve(&pool, allocator, &refs, now, &ctx.ipam.allocated_by, CHUNK);
            if served.writes.is_empty() {
                let stats = served.allocator.stats();
                let (mut status, events) =
                    status::plan(&pool, Shape::Valid { stats: &stats, problems: &served.problems }, now);
                // A journal some of whose writes landed since is tidied while nothing is handed
                // out (the batches leave it to the next commit), conditional on the pool read.
                let journal = pool.status.as_ref().map(|s| &s.in_flight).filter(|j| **j != served.journal);
                let journal = journal.map(|_| {
                    status.in_flight = served.journal.clone();
                    pool.meta().resource_version.clone()
                });
                write_pool_status(ctx, &api, &pool, status, journal, events).await?;
            } else {
                // When this process's last batch knows the view complete, the view stands in
                // for the batch's list and this plan is its first, committed against the pool
                // as that batch left it: the cache's, or the pool as written while the cache has
                // not shown it (a conflict, should another have committed since, lists).
                let left = ctx.ipam.written_pool(&cached).unwrap_or_else(|| cached.clone());
                let first = (pool.status == left.status && pool.spec == left.spec && ctx.ipam.knows(&left))
                    .then(|| (view.clone(), served));
                let from = if first.is_some() { left } else { cached.clone() };
                batch::batch(ctx, &api, from, first).await?;
                again = AGAIN_SOON;
            }
        }
    }
    if orphans::collect(ctx, &namespace, &view).await? {
        again = AGAIN_SOON;
    }
    Ok(Action::requeue(again))
}

/// Failed statuses for the waiting allocations of a pool whose spec is invalid.
fn refuse(pool: &NetworkPool, refs: &[&IPAllocation], why: &str, now: jiff::Timestamp) -> Vec<Write> {
    let message = format!("NetworkPool {} has an invalid spec: {why}", named(pool));
    refs.iter()
        .filter(|a| serve::servable(a))
        .filter_map(|a| {
            let status = serve::failed(a, "PoolInvalid", message.clone(), now);
            (a.status.as_ref() != Some(&status)).then(|| Write {
                name: a.name_any(),
                uid: a.metadata.uid.clone().unwrap_or_default(),
                resource_version: a.metadata.resource_version.clone().unwrap_or_default(),
                status,
            })
        })
        .collect()
}

/// What became of a pool status write.
pub(super) enum PoolWrite {
    Written(Box<NetworkPool>),
    Unchanged,
    /// Refused: the pool changed since (another planner committed).
    Conflict,
}

/// Writes the pool's status when it changed and publishes its events. With `journal` (the
/// resourceVersion the write requires), the journal is written too; without, it is left as it is.
pub(super) async fn write_pool_status(
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
    match &journal {
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
    if let Some(Some(from)) = &journal {
        ctx.ipam.moved_on(from, &written);
    }
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
