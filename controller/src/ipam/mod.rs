//! Butler's IPAM controllers (spec/002): [`networkpool`] serves allocations and is the only writer
//! of their blocks; [`ipallocation`] keeps an allocation's life cycle.
//!
//! What this process wrote is read back before the caches show it ([`Ipam::view`],
//! [`Ipam::pool`]): a reconcile right after a write must not serve an allocation again or
//! publish a capacity event twice because its cache is a moment behind.

pub mod held;
pub mod index;
pub mod ipallocation;
pub mod networkpool;

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use butler_core::api::{IPAllocation, NetworkPool};
use kube::{Resource, ResourceExt};

use crate::clock::Clock;
use crate::filed::names;
use index::AllocationIndex;
use networkpool::serve::{self, waiting};

/// How long a write of this process stands in for a cache that has not shown it.
const WRITTEN_FOR: Duration = Duration::from_secs(60);

/// What the IPAM controllers share.
pub struct Ipam {
    pub allocations: Arc<AllocationIndex>,
    pub clock: Arc<Clock>,
    /// Who hands out blocks, as recorded in `status.allocatedBy`.
    pub allocated_by: String,
    written: Mutex<HashMap<String, (Arc<IPAllocation>, Instant)>>,
    pools: Mutex<HashMap<String, (Arc<NetworkPool>, Instant)>>,
    known: Mutex<HashMap<String, Known>>,
}

/// What this process's last batch of a pool knew once its writes landed: the pool's
/// resourceVersion then, and the blocks it knew to be held that the cache did not show yet
/// (by UID: the allocation's name and block).
struct Known {
    version: String,
    unseen: HashMap<String, (String, (IpAddr, IpAddr))>,
}

fn uid<K: Resource>(o: &K) -> String {
    o.meta().uid.clone().unwrap_or_default()
}

impl Ipam {
    pub fn new(allocations: Arc<AllocationIndex>, clock: Arc<Clock>, allocated_by: String) -> Ipam {
        Ipam {
            allocations,
            clock,
            allocated_by,
            written: Mutex::default(),
            pools: Mutex::default(),
            known: Mutex::default(),
        }
    }

    /// Records an IPAllocation as this process wrote it.
    pub fn wrote(&self, allocation: Arc<IPAllocation>) {
        self.written
            .lock()
            .expect("not poisoned")
            .insert(uid(allocation.as_ref()), (allocation, Instant::now()));
    }

    /// Records a NetworkPool as this process wrote it.
    pub fn wrote_pool(&self, pool: NetworkPool) {
        self.pools.lock().expect("not poisoned").insert(uid(&pool), (Arc::new(pool), Instant::now()));
    }

    /// The allocations of a pool: the cache, with what this process wrote where the cache still
    /// shows the allocation waiting (or not at all yet: a consistent list may be ahead of the
    /// cache). Writes this pool's allocations show by now are forgotten first, each looked up
    /// among them by name (they come sorted by it): the writes are few, the allocations many.
    pub fn view(&self, namespace: &str, pool: &str) -> Vec<Arc<IPAllocation>> {
        let cached = self.allocations.of_pool(namespace, pool);
        let mut written = self.written.lock().expect("not poisoned");
        written.retain(|_, (ours, at)| {
            let shown = cached
                .binary_search_by(|c| names(c.as_ref()).cmp(&names(ours.as_ref())))
                .ok()
                .map(|i| &cached[i]);
            at.elapsed() < WRITTEN_FOR
                && shown.is_none_or(|c| c.metadata.uid == ours.metadata.uid && choose_ours(c, ours))
        });
        if written.is_empty() {
            return cached;
        }
        cached
            .into_iter()
            .map(|a| {
                // Only a waiting allocation can be behind our write (most of a pool is not).
                if !waiting(&a) {
                    return a;
                }
                match written.get(a.meta().uid.as_deref().unwrap_or_default()) {
                    Some((ours, _)) if choose_ours(&a, ours) => ours.clone(),
                    _ => a,
                }
            })
            .collect()
    }

    /// The cached pool with the status this process wrote last, while the cache has not shown
    /// that write: its metadata and spec (a deletion, an edit) always come from the cache. Only
    /// for planning the status; a batch plans from an object it can commit against.
    pub fn pool(&self, cached: Arc<NetworkPool>) -> Arc<NetworkPool> {
        match self.written_pool(&cached) {
            Some(ours) => {
                let mut overlaid = cached.as_ref().clone();
                overlaid.status = ours.status.clone();
                Arc::new(overlaid)
            }
            // A write the cache shows by now (or one too old to stand in) is forgotten.
            None => {
                self.pools.lock().expect("not poisoned").remove(&uid(cached.as_ref()));
                cached
            }
        }
    }

    /// The pool as this process wrote it last, while the cache has not shown that write.
    pub fn written_pool(&self, cached: &NetworkPool) -> Option<Arc<NetworkPool>> {
        let pools = self.pools.lock().expect("not poisoned");
        let (ours, at) = pools.get(&uid(cached))?;
        (at.elapsed() < WRITTEN_FOR && ours.meta().resource_version != cached.meta().resource_version)
            .then(|| ours.clone())
    }

    /// Forgets a pool that is gone.
    pub fn forget_pool(&self, pool: &NetworkPool) {
        self.pools.lock().expect("not poisoned").remove(&uid(pool));
        self.forget_known(pool);
    }

    /// Records what a batch knew once its writes landed: `pool` as it committed against it (or
    /// found it, when nothing was committed); `listed`, the consistent list it planned from
    /// (`None`: it planned from the view, and what was unseen before still may be); `written`,
    /// the allocations it wrote. Of the blocks these hold, those the cache does not show yet
    /// are kept, to be looked for in the view (see [`Ipam::knows`]).
    pub fn remember(
        &self,
        pool: &NetworkPool,
        listed: Option<&[Arc<IPAllocation>]>,
        written: &[Arc<IPAllocation>],
    ) {
        let mut known = self.known.lock().expect("not poisoned");
        let mut unseen = match (listed, known.remove(&uid(pool))) {
            (None, Some(before)) => before.unseen,
            _ => HashMap::new(),
        };
        let namespace = pool.namespace().unwrap_or_default();
        for a in listed.unwrap_or_default().iter().chain(written) {
            let Some(Ok(block)) = serve::held(a) else { continue };
            let cached = self.allocations.object(&namespace, &a.name_any());
            let shown = cached.is_some_and(|c| {
                c.metadata.uid == a.metadata.uid && serve::held(&c).and_then(Result::ok) == Some(block)
            });
            if !shown {
                unseen.insert(uid(a.as_ref()), (a.name_any(), block));
            }
        }
        let version = pool.meta().resource_version.clone().unwrap_or_default();
        known.insert(uid(pool), Known { version, unseen });
    }

    /// A write of `pool` conditional on resourceVersion `from` landed (`written`): no one
    /// committed in between, so what this process's last batch knew at `from` it knows at the
    /// written version too (such a write hands nothing out).
    pub fn moved_on(&self, from: &str, written: &NetworkPool) {
        let mut known = self.known.lock().expect("not poisoned");
        if let Some(known) = known.get_mut(&uid(written))
            && known.version == from
        {
            known.version = written.meta().resource_version.clone().unwrap_or_default();
        }
    }

    /// Forgets what a batch of `pool` knew (its writes' outcome is not known).
    pub fn forget_known(&self, pool: &NetworkPool) {
        self.known.lock().expect("not poisoned").remove(&uid(pool));
    }

    /// Whether the view of `pool` may stand in for a consistent list: only while nothing was
    /// committed to the pool since this process's last batch (its resourceVersion is the one
    /// that batch left; a block is handed out only by a commit) and the view shows every block
    /// that batch knew of and the cache did not show (an allocation gone from the cache is
    /// gone from the server). Blocks the cache shows by now are not looked for again.
    pub fn knows(&self, pool: &NetworkPool) -> bool {
        let mut known = self.known.lock().expect("not poisoned");
        let Some(known) = known.get_mut(&uid(pool)) else { return false };
        if pool.meta().resource_version.as_deref() != Some(known.version.as_str()) {
            return false;
        }
        let namespace = pool.namespace().unwrap_or_default();
        let written = self.written.lock().expect("not poisoned");
        let mut complete = true;
        known.unseen.retain(|id, (name, block)| {
            let cached = self
                .allocations
                .object(&namespace, name)
                .filter(|c| c.metadata.uid.as_deref() == Some(id.as_str()));
            let Some(cached) = cached else { return false };
            if serve::held(&cached).and_then(Result::ok) == Some(*block) {
                return false;
            }
            let ours =
                written.get(id).is_some_and(|(w, _)| serve::held(w).and_then(Result::ok) == Some(*block));
            complete &= ours;
            true
        });
        complete
    }
}

/// Whether an allocation is settled: it holds its block, carries the finalizer and is not
/// being deleted. A change of a settled allocation (this process's own status write showing in
/// the cache, most of all) gives neither IPAM controller anything to decide: the pool's
/// figures were committed with the batch that handed the block out, and the resync looks at
/// every allocation of a pool each minute.
pub fn settled(allocation: &IPAllocation) -> bool {
    serve::holds_block(allocation)
        && allocation.metadata.deletion_timestamp.is_none()
        && butler_runtime::finalizer::has(allocation, butler_core::api::labels::IP_ALLOCATION_FINALIZER)
}

/// Whether our written copy stands in for the cached one: the cache has not seen our write and
/// still shows the allocation waiting for the block we wrote.
fn choose_ours(cached: &IPAllocation, ours: &IPAllocation) -> bool {
    cached.meta().resource_version != ours.meta().resource_version && waiting(cached) && !waiting(ours)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn a(rv: &str, status: serde_json::Value) -> IPAllocation {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": rv},
            "spec": {"poolRef": {"name": "p"}, "tenantClusterRef": {"name": "t", "namespace": "x"}, "type": "nodes"},
            "status": status,
        }))
        .unwrap()
    }

    /// IPAM over an empty cache, and what feeds that cache (the store, then the index, as the
    /// watch does).
    fn with_nothing() -> (Ipam, impl FnMut(kube::runtime::watcher::Event<IPAllocation>)) {
        let (store, mut writer) = kube::runtime::reflector::store();
        let index = Arc::new(AllocationIndex::new(store));
        let ipam = Ipam::new(index.clone(), Arc::default(), "test".into());
        let feed = move |event: kube::runtime::watcher::Event<IPAllocation>| {
            writer.apply_watcher_event(&event);
            index.apply(&event);
        };
        (ipam, feed)
    }

    /// IPAM over a cache holding allocation `a` waiting, and what feeds that cache.
    fn with_one_waiting() -> (Ipam, impl FnMut(kube::runtime::watcher::Event<IPAllocation>)) {
        let (ipam, mut feed) = with_nothing();
        feed(kube::runtime::watcher::Event::Apply(a("1", json!({"phase": "Pending"}))));
        (ipam, feed)
    }

    #[test]
    fn a_write_counts_until_the_cache_shows_it() {
        let (ipam, mut feed) = with_one_waiting();
        let allocated = json!({"phase": "Allocated", "startAddress": "10.0.0.1", "endAddress": "10.0.0.1"});
        ipam.wrote(Arc::new(a("2", allocated.clone())));
        assert_eq!(ipam.view("ns", "p")[0].meta().resource_version.as_deref(), Some("2"));
        // The cache catches up (and moves on): the cache is read from then on.
        feed(kube::runtime::watcher::Event::Apply(a("3", allocated)));
        assert_eq!(ipam.view("ns", "p")[0].meta().resource_version.as_deref(), Some("3"));
        assert!(ipam.written.lock().unwrap().is_empty());
    }

    #[test]
    fn a_write_ahead_of_the_cache_stands_in_once_the_cache_shows_the_allocation_waiting() {
        let (ipam, mut feed) = with_nothing();
        // A consistent list showed the allocation before the cache did; its block was written.
        let allocated = json!({"phase": "Allocated", "startAddress": "10.0.0.1", "endAddress": "10.0.0.1"});
        ipam.wrote(Arc::new(a("2", allocated)));
        assert!(ipam.view("ns", "p").is_empty());
        // The cache now shows its creation, waiting: the write stands in, so it is not served twice.
        feed(kube::runtime::watcher::Event::Apply(a("1", json!({"phase": "Pending"}))));
        assert_eq!(ipam.view("ns", "p")[0].meta().resource_version.as_deref(), Some("2"));
    }

    #[test]
    fn only_an_allocation_that_holds_its_block_with_the_finalizer_is_settled() {
        let held = json!({"phase": "Allocated", "startAddress": "10.0.0.1", "endAddress": "10.0.0.1"});
        let with_finalizer = |status: serde_json::Value| {
            let mut a = a("1", status);
            a.metadata.finalizers = Some(vec![butler_core::api::labels::IP_ALLOCATION_FINALIZER.into()]);
            a
        };
        assert!(settled(&with_finalizer(held.clone())));
        assert!(!settled(&with_finalizer(json!({"phase": "Pending"}))), "waiting");
        assert!(!settled(&a("1", held.clone())), "no finalizer yet");
        let mut going = with_finalizer(held);
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
        assert!(!settled(&going), "being deleted: its block goes back");
    }

    fn pool(rv: &str) -> NetworkPool {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
            "metadata": {"name": "p", "namespace": "ns", "uid": "pool", "resourceVersion": rv},
            "spec": {"cidr": "10.0.0.0/24"},
        }))
        .unwrap()
    }

    #[test]
    fn the_view_stands_in_for_a_list_only_while_nothing_was_committed_and_it_shows_what_was_known() {
        let (ipam, mut feed) = with_one_waiting();
        assert!(!ipam.knows(&pool("5")), "no batch yet: list");
        // A consistent list showed the allocation holding a block the cache does not show yet
        // (another replica wrote it).
        let held = json!({"phase": "Allocated", "startAddress": "10.0.0.1", "endAddress": "10.0.0.1"});
        ipam.remember(&pool("5"), Some(&[Arc::new(a("2", held.clone()))]), &[]);
        assert!(!ipam.knows(&pool("5")), "the view does not show that block");
        feed(kube::runtime::watcher::Event::Apply(a("2", held)));
        assert!(ipam.knows(&pool("5")), "now it does");
        assert!(!ipam.knows(&pool("6")), "a commit since (another planner's): list");
    }
}
