//! The IPAllocations by pool: the NetworkPool controller's field index on `spec.poolRef.name`,
//! kept from a watch, so that a pool's reconcile reads its own allocations and never scans them
//! all.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use butler_core::api::IPAllocation;
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

type PoolKey = (String, String);

struct Inner<V> {
    /// Allocations by (namespace, pool): name and the value kept of each.
    by_pool: HashMap<PoolKey, BTreeMap<String, V>>,
    /// The pool each allocation is filed under, by (namespace, name).
    pool_of: HashMap<PoolKey, String>,
    /// Entries of a relist, swapped in when it is complete.
    relist: Option<Vec<(PoolKey, String, V)>>,
}

impl<V> Default for Inner<V> {
    fn default() -> Self {
        Inner { by_pool: HashMap::new(), pool_of: HashMap::new(), relist: None }
    }
}

fn key(a: &IPAllocation) -> PoolKey {
    (a.namespace().unwrap_or_default(), a.name_any())
}

impl<V> Inner<V> {
    fn remove(&mut self, object: &PoolKey) {
        if let Some(pool) = self.pool_of.remove(object) {
            let bucket = (object.0.clone(), pool);
            if let Some(entries) = self.by_pool.get_mut(&bucket) {
                entries.remove(&object.1);
                if entries.is_empty() {
                    self.by_pool.remove(&bucket);
                }
            }
        }
    }

    fn insert(&mut self, object: PoolKey, pool: String, value: V) {
        self.remove(&object);
        self.by_pool.entry((object.0.clone(), pool.clone())).or_default().insert(object.1.clone(), value);
        self.pool_of.insert(object, pool);
    }
}

/// IPAllocations filed by (namespace, spec.poolRef.name), each with a value taken from it
/// (`()` where the objects live in a store, a block where only that is needed).
pub struct PoolFiled<V> {
    extract: fn(&IPAllocation) -> V,
    inner: RwLock<Inner<V>>,
    ready: watch::Sender<bool>,
}

impl<V: Clone> PoolFiled<V> {
    pub fn new(extract: fn(&IPAllocation) -> V) -> PoolFiled<V> {
        PoolFiled { extract, inner: RwLock::default(), ready: watch::Sender::new(false) }
    }

    /// Files one watch event.
    pub fn apply(&self, event: &watcher::Event<IPAllocation>) {
        let mut inner = self.inner.write().expect("not poisoned");
        match event {
            watcher::Event::Apply(a) => inner.insert(key(a), a.spec.pool_ref.name.clone(), (self.extract)(a)),
            watcher::Event::Delete(a) => inner.remove(&key(a)),
            watcher::Event::Init => inner.relist = Some(Vec::new()),
            watcher::Event::InitApply(a) => {
                let entry = (key(a), a.spec.pool_ref.name.clone(), (self.extract)(a));
                inner.relist.get_or_insert_default().push(entry)
            }
            watcher::Event::InitDone => {
                let listed = inner.relist.take().unwrap_or_default();
                inner.by_pool.clear();
                inner.pool_of.clear();
                for (object, pool, value) in listed {
                    inner.insert(object, pool, value);
                }
                drop(inner);
                self.ready.send_replace(true);
            }
        }
    }

    /// The allocations filed under pool `pool` of `namespace`: name and value.
    pub fn of_pool(&self, namespace: &str, pool: &str) -> Vec<(String, V)> {
        let inner = self.inner.read().expect("not poisoned");
        inner
            .by_pool
            .get(&(namespace.to_string(), pool.to_string()))
            .map(|m| m.iter().map(|(n, v)| (n.clone(), v.clone())).collect())
            .unwrap_or_default()
    }

    /// Waits until the first listing is filed.
    pub async fn wait_until_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }
}

/// IPAllocations filed by pool over the objects of the store that the IPAllocation controller
/// shares, so each object is held once.
pub struct AllocationIndex {
    store: Store<IPAllocation>,
    filed: PoolFiled<()>,
}

impl AllocationIndex {
    /// An index over the objects of `store` (filled by the same watch).
    pub fn new(store: Store<IPAllocation>) -> AllocationIndex {
        AllocationIndex { store, filed: PoolFiled::new(|_| ()) }
    }

    /// Files one watch event.
    pub fn apply(&self, event: &watcher::Event<IPAllocation>) {
        self.filed.apply(event);
    }

    /// The allocations that name pool `pool` in `namespace`, by name.
    pub fn of_pool(&self, namespace: &str, pool: &str) -> Vec<Arc<IPAllocation>> {
        self.filed
            .of_pool(namespace, pool)
            .into_iter()
            .filter_map(|(name, ())| self.store.get(&ObjectRef::new(&name).within(namespace)))
            .collect()
    }

    /// Every allocation that `keep` picks (a scan of the store).
    pub fn all(&self, keep: impl Fn(&IPAllocation) -> bool) -> Vec<Arc<IPAllocation>> {
        self.store.state().into_iter().filter(|a| keep(a)).collect()
    }

    /// Waits until the first listing is filed.
    pub async fn wait_until_ready(&self) {
        self.filed.wait_until_ready().await;
    }
}

/// One watch of IPAllocations (its first listing a consistent read, managed fields dropped)
/// feeding `writer`'s store (shared with the IPAllocation controller) and then `index`; yields
/// the objects it touched, deleted ones included, for the NetworkPool controller.
pub fn follow(
    client: &kube::Client,
    writer: Writer<IPAllocation>,
    index: Arc<AllocationIndex>,
) -> impl Stream<Item = Result<IPAllocation, watcher::Error>> + Send + 'static {
    // Pages of 100: the first listing of many allocations does not raise the heap's peak.
    watcher(Api::<IPAllocation>::all(client.clone()), watcher::Config::default().page_size(100))
        .default_backoff()
        // Nothing here reads who manages which field: most of each object's size.
        .modify(|a| a.metadata.managed_fields = None)
        .reflect_shared(writer)
        .inspect(move |event| {
            if let Ok(event) = event {
                index.apply(event);
            }
        })
        .touched_objects()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn a(name: &str, pool: &str) -> IPAllocation {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"poolRef": {"name": pool}, "tenantClusterRef": {"name": "t", "namespace": "x"}, "type": "nodes"},
        }))
        .unwrap()
    }

    fn names(index: &AllocationIndex, pool: &str) -> Vec<String> {
        index.of_pool("ns", pool).iter().map(|a| a.name_any()).collect()
    }

    /// Applies an event to the store, then to the index, as the watch does.
    fn feed(writer: &mut Writer<IPAllocation>, index: &AllocationIndex, event: watcher::Event<IPAllocation>) {
        writer.apply_watcher_event(&event);
        index.apply(&event);
    }

    #[test]
    fn files_moves_deletes_and_relists() {
        let (store, mut writer) = kube::runtime::reflector::store();
        let index = AllocationIndex::new(store);
        let mut apply = |event| feed(&mut writer, &index, event);
        apply(watcher::Event::Apply(a("x", "p1")));
        apply(watcher::Event::Apply(a("y", "p1")));
        apply(watcher::Event::Apply(a("x", "p2")));
        assert_eq!(
            (names(&index, "p1"), names(&index, "p2")),
            (vec!["y".to_string()], vec!["x".to_string()])
        );
        apply(watcher::Event::Delete(a("y", "p1")));
        assert!(names(&index, "p1").is_empty());
        apply(watcher::Event::Init);
        apply(watcher::Event::InitApply(a("z", "p1")));
        assert_eq!(names(&index, "p2"), ["x"], "a relist replaces the index only when complete");
        apply(watcher::Event::InitDone);
        assert_eq!((names(&index, "p1"), names(&index, "p2")), (vec!["z".to_string()], vec![]));
    }
}
