//! Serving a pool's waiting allocations: the pure heart of the NetworkPool controller.
//!
//! From the pool, its allocator and every IPAllocation that names it, [`serve`] loads the blocks
//! held (oldest first, so that of two overlapping claims the older keeps its block), keeps the
//! journal entries whose write may still land, and serves the waiting allocations oldest first
//! (creationTimestamp, then name): a journal entry's block again, a pinned range exactly, or the
//! best fit of `count` (the pool's per-type default when unset).

use std::collections::HashMap;
use std::net::IpAddr;

use butler_core::api::{
    IPAllocation, IPAllocationPhase, IPAllocationStatus, InFlightAllocation, NetworkPool,
};
use butler_core::ipam::{AddressList, Allocation, IpamError, Pool};
use butler_runtime::conditions::{self, READY, Wanted};
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::ResourceExt;

use super::spec::default_count;

/// A status to write to an IPAllocation, conditional on the resourceVersion it was planned from.
#[derive(Debug, Clone, PartialEq)]
pub struct Write {
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    pub status: IPAllocationStatus,
}

/// What serving decided.
pub struct Served {
    /// The allocator with every held block and every block handed out now.
    pub allocator: Pool,
    /// Statuses to write, oldest allocation first.
    pub writes: Vec<Write>,
    /// The journal to commit before the writes: entries that may still land, and one per block
    /// handed out now.
    pub journal: Vec<InFlightAllocation>,
    /// Allocations whose block breaks the pool's spec or another's block, described.
    pub problems: Vec<String>,
    /// Whether allocations wait beyond the `limit` of writes.
    pub more: bool,
}

/// The block an allocation's status says it holds: both addresses set, whatever the phase (a
/// block is only given back when its object is gone).
pub fn held(allocation: &IPAllocation) -> Option<Result<(IpAddr, IpAddr), String>> {
    let status = allocation.status.as_ref()?;
    let (start, end) = (status.start_address.as_ref()?, status.end_address.as_ref()?);
    let parse = |field: &str, v: &str| {
        v.parse::<IpAddr>().map_err(|_| format!("status.{field} {v:?} is not an IP address"))
    };
    Some(parse("startAddress", start).and_then(|s| Ok((s, parse("endAddress", end)?))))
}

/// Whether the allocation's status names a block (both addresses set), read or not.
pub fn holds_block(allocation: &IPAllocation) -> bool {
    allocation.status.as_ref().is_some_and(|s| s.start_address.is_some() && s.end_address.is_some())
}

/// Whether the allocation waits for a block: none held, not being deleted, phase unset, Pending
/// or Failed.
pub fn waiting(allocation: &IPAllocation) -> bool {
    let phase = allocation.status.as_ref().and_then(|s| s.phase);
    allocation.metadata.deletion_timestamp.is_none()
        && !holds_block(allocation)
        && matches!(phase, None | Some(IPAllocationPhase::Pending) | Some(IPAllocationPhase::Failed))
}

/// Whether the allocation is served now: it waits, and the IPAllocation controller added its
/// finalizer (a write that would make ours conflict, were it to come after; and the deletion of
/// an allocation without it would not be recorded). That write wakes the pool.
pub fn servable(allocation: &IPAllocation) -> bool {
    waiting(allocation)
        && butler_runtime::finalizer::has(allocation, butler_core::api::labels::IP_ALLOCATION_FINALIZER)
}

/// The order of spec/002: creationTimestamp, then name.
fn creation(allocation: &IPAllocation) -> (Option<Timestamp>, &str) {
    let meta = &allocation.metadata;
    (meta.creation_timestamp.as_ref().map(|t| t.0), meta.name.as_deref().unwrap_or_default())
}

/// Serves the waiting allocations of `pool` (see the module's documentation), planning at most
/// `limit` writes; the allocations after those keep their place for the next round.
pub fn serve(
    pool: &NetworkPool,
    mut allocator: Pool,
    allocations: &[&IPAllocation],
    now: Timestamp,
    by: &str,
    limit: usize,
) -> Served {
    let pool_name = format!("{}/{}", pool.namespace().unwrap_or_default(), pool.name_any());
    let mut problems = Vec::new();

    // Held blocks. Of two that overlap (a forged status, a bug), the older allocation keeps its
    // block; without overlaps the order does not matter and the age sort is skipped.
    let mut holding: Vec<(&IPAllocation, (IpAddr, IpAddr))> = Vec::with_capacity(allocations.len());
    for a in allocations.iter().copied() {
        match held(a) {
            None => {}
            Some(Err(why)) => problems.push(format!("{}: {why}", a.name_any())),
            Some(Ok((start, end))) => {
                if let Some(e) = allocator.breaks_spec(start, end) {
                    problems.push(format!("{}: {e}", a.name_any()));
                }
                holding.push((a, (start, end)));
            }
        }
    }
    let blocks: Vec<(IpAddr, IpAddr)> = holding.iter().map(|(_, b)| *b).collect();
    let mut refused = allocator.load(&blocks);
    if refused.iter().any(|(_, e)| matches!(e, IpamError::ConflictsWithAllocation { .. })) {
        holding.sort_by(|(a, _), (b, _)| {
            let at = |x: &IPAllocation| x.status.as_ref().and_then(|s| s.allocated_at.as_ref()).map(|t| t.0);
            let (ta, tb) = (at(a), at(b));
            (ta.is_none(), ta, creation(a)).cmp(&(tb.is_none(), tb, creation(b)))
        });
        let blocks: Vec<(IpAddr, IpAddr)> = holding.iter().map(|(_, b)| *b).collect();
        // The same spec built the allocator a moment ago.
        if let Ok(fresh) = super::spec::allocator(pool) {
            allocator = fresh;
            refused = allocator.load(&blocks);
        }
    }
    for (i, e) in refused {
        problems.push(format!("{}: {e}", holding[i].0.name_any()));
    }

    // Journal entries whose write may still land keep their block.
    // The journal is short (a chunk at most) and the pool's allocations many: each allocation
    // is looked up among the entries, not the other way round.
    let entries = pool.status.iter().flat_map(|s| s.in_flight.iter()).collect::<Vec<_>>();
    let mut found: Vec<Option<&IPAllocation>> = vec![None; entries.len()];
    if !entries.is_empty() {
        let wanted: HashMap<&str, usize> =
            entries.iter().enumerate().map(|(i, e)| (e.uid.as_str(), i)).collect();
        for a in allocations.iter().copied() {
            if let Some(&i) = a.metadata.uid.as_deref().and_then(|uid| wanted.get(uid)) {
                found[i] = Some(a);
            }
        }
    }
    let mut journal = Vec::new();
    let mut claimed: HashMap<String, Allocation> = HashMap::new();
    for (entry, a) in entries.into_iter().zip(found) {
        let Some(a) = a else { continue };
        if a.metadata.resource_version.as_deref() != Some(entry.resource_version.as_str()) {
            continue;
        }
        let (Ok(start), Ok(end)) = (entry.start_address.parse(), entry.end_address.parse()) else { continue };
        if let Ok(block) = allocator.insert_existing(start, end) {
            claimed.insert(entry.uid.clone(), block);
        }
        journal.push(entry.clone());
    }

    // Waiting allocations, oldest first.
    let mut queue: Vec<&IPAllocation> = allocations.iter().copied().filter(|a| servable(a)).collect();
    queue.sort_by(|a, b| creation(a).cmp(&creation(b)));
    let mut writes = Vec::new();
    let mut more = false;
    for a in queue {
        if writes.len() >= limit {
            more = true;
            break;
        }
        let uid = a.metadata.uid.clone().unwrap_or_default();
        let outcome = match claimed.get(&uid) {
            Some(block) => Ok(*block),
            None => take(pool, &mut allocator, a).inspect(|block| {
                journal.push(InFlightAllocation {
                    name: a.name_any(),
                    uid: uid.clone(),
                    resource_version: a.metadata.resource_version.clone().unwrap_or_default(),
                    start_address: block.start().to_string(),
                    end_address: block.end().to_string(),
                })
            }),
        };
        let status = match outcome {
            Ok(block) => allocated(a, block, &pool_name, now, by),
            Err((reason, message)) => failed(a, reason, message, now),
        };
        if a.status.as_ref() != Some(&status) {
            writes.push(Write {
                name: a.name_any(),
                uid,
                resource_version: a.metadata.resource_version.clone().unwrap_or_default(),
                status,
            });
        }
    }
    Served { allocator, writes, journal, problems, more }
}

/// A block for one allocation, or the reason and message of its failure.
fn take(
    pool: &NetworkPool,
    allocator: &mut Pool,
    a: &IPAllocation,
) -> Result<Allocation, (&'static str, String)> {
    let pool_name = pool.name_any();
    if let Some(pinned) = &a.spec.pinned_range {
        let parse = |field: &str, v: &str| {
            v.trim().parse::<IpAddr>().map_err(|_| {
                ("InvalidSpec", format!("spec.pinnedRange.{field} {v:?} is not an IP address; correct it"))
            })
        };
        let start = parse("startAddress", &pinned.start_address)?;
        let end = parse("endAddress", &pinned.end_address)?;
        return allocator.allocate_pinned(start, end).map_err(|e| {
            let what = match e {
                IpamError::ConflictsWithAllocation { .. } | IpamError::ConflictsWithReserved { .. } => {
                    "pinned range conflict"
                }
                _ => "pinned range refused",
            };
            (
                "PinnedRangeConflict",
                format!(
                    "{what} in NetworkPool {pool_name}: {e}; pin a free range or remove spec.pinnedRange"
                ),
            )
        });
    }
    let count = a.spec.count.unwrap_or_else(|| default_count(pool, a.spec.type_));
    if count < 1 {
        return Err(("InvalidSpec", format!("spec.count is {count}; ask for at least 1 address")));
    }
    allocator.allocate(count as u128).map_err(|e| {
        let stats = allocator.stats();
        let message = match e {
            IpamError::Exhausted { .. } | IpamError::Fragmented { .. } => format!(
                "no contiguous block available in NetworkPool {pool_name}: {count} addresses asked, largest free block {}, {} free; release allocations, ask for fewer or add a pool",
                stats.largest_free_block, stats.available
            ),
            other => format!("NetworkPool {pool_name}: {other}"),
        };
        ("PoolExhausted", message)
    })
}

fn allocated(
    a: &IPAllocation,
    block: Allocation,
    pool: &str,
    now: Timestamp,
    by: &str,
) -> IPAllocationStatus {
    let addresses = match block.addresses() {
        AddressList::Listed(list) => Some(list.iter().map(IpAddr::to_string).collect()),
        AddressList::Omitted { .. } => None,
    };
    let message = format!("{block} ({} addresses) from NetworkPool {pool}", block.count());
    IPAllocationStatus {
        phase: Some(IPAllocationPhase::Allocated),
        cidr: Some(block.to_string()),
        start_address: Some(block.start().to_string()),
        end_address: Some(block.end().to_string()),
        addresses,
        allocated_count: Some(i64::try_from(block.count()).unwrap_or(i64::MAX)),
        allocated_at: Some(Time(now)),
        allocated_by: Some(by.to_string()),
        released_at: None,
        observed_generation: a.metadata.generation,
        conditions: ready(a, Wanted::new(READY, true, "Allocated", message), now),
    }
}

/// The allocation's conditions with `Ready` set as wanted (its transition time kept).
fn ready(a: &IPAllocation, wanted: Wanted, now: Timestamp) -> Vec<Condition> {
    let existing = a.status.as_ref().map(|s| s.conditions.as_slice()).unwrap_or_default();
    conditions::merge(existing, &[wanted], a.metadata.generation, &Time(now), &[READY])
}

/// The Failed status of a waiting allocation, with its reason and message.
pub(super) fn failed(a: &IPAllocation, reason: &str, message: String, now: Timestamp) -> IPAllocationStatus {
    IPAllocationStatus {
        phase: Some(IPAllocationPhase::Failed),
        observed_generation: a.metadata.generation,
        conditions: ready(a, Wanted::new(READY, false, reason, message), now),
        ..IPAllocationStatus::default()
    }
}

#[cfg(test)]
#[path = "serve_tests.rs"]
mod tests;
