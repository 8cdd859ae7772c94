//! The IPAllocations by pool: the NetworkPool controller's field index on `spec.poolRef.name`,
//! kept from a watch, so that a pool's reconcile reads its own allocations and never scans them
//! all.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};

use butler_core::api::IPAllocation;
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

type PoolKey = (String, String);

#[derive(Default)]
struct Inner {
    by_pool: HashMap<PoolKey, BTreeMap<String, Arc<IPAllocation>>>,
    /// The pool each allocation is filed under, by (namespace, name).
    pool_of: HashMap<PoolKey, String>,
    /// Objects of a relist, swapped in when it is complete.
    relist: Option<Vec<IPAllocation>>,
}

/// IPAllocations filed by (namespace, spec.poolRef.name).
pub struct AllocationIndex {
    inner: RwLock<Inner>,
    ready: watch::Sender<bool>,
}

impl Default for AllocationIndex {
    fn default() -> AllocationIndex {
        AllocationIndex { inner: RwLock::default(), ready: watch::Sender::new(false) }
    }
}

fn key(a: &IPAllocation) -> PoolKey {
    (a.namespace().unwrap_or_default(), a.name_any())
}

impl Inner {
    fn remove(&mut self, a: &IPAllocation) {
        let (ns, name) = key(a);
        if let Some(pool) = self.pool_of.remove(&(ns.clone(), name.clone())) {
            let bucket = (ns, pool);
            if let Some(map) = self.by_pool.get_mut(&bucket) {
                map.remove(&name);
                if map.is_empty() {
                    self.by_pool.remove(&bucket);
                }
            }
        }
    }

    fn insert(&mut self, a: IPAllocation) {
        self.remove(&a);
        let (ns, name) = key(&a);
        let pool = a.spec.pool_ref.name.clone();
        self.pool_of.insert((ns.clone(), name.clone()), pool.clone());
        self.by_pool.entry((ns, pool)).or_default().insert(name, Arc::new(a));
    }
}

impl AllocationIndex {
    /// Files one watch event.
    pub fn apply(&self, event: &watcher::Event<IPAllocation>) {
        let mut inner = self.inner.write().expect("not poisoned");
        match event {
            watcher::Event::Apply(a) => inner.insert(a.clone()),
            watcher::Event::Delete(a) => inner.remove(a),
            watcher::Event::Init => inner.relist = Some(Vec::new()),
            watcher::Event::InitApply(a) => inner.relist.get_or_insert_default().push(a.clone()),
            watcher::Event::InitDone => {
                let listed = inner.relist.take().unwrap_or_default();
                inner.by_pool.clear();
                inner.pool_of.clear();
                for a in listed {
                    inner.insert(a);
                }
                drop(inner);
                self.ready.send_replace(true);
            }
        }
    }

    /// The allocations that name pool `pool` in `namespace`, by name.
    pub fn of_pool(&self, namespace: &str, pool: &str) -> Vec<Arc<IPAllocation>> {
        let inner = self.inner.read().expect("not poisoned");
        inner
            .by_pool
            .get(&(namespace.to_string(), pool.to_string()))
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// Every allocation of a namespace that `keep` picks.
    pub fn in_namespace(
        &self,
        namespace: &str,
        keep: impl Fn(&IPAllocation) -> bool,
    ) -> Vec<Arc<IPAllocation>> {
        let inner = self.inner.read().expect("not poisoned");
        inner
            .by_pool
            .iter()
            .filter(|((ns, _), _)| ns == namespace)
            .flat_map(|(_, m)| m.values())
            .filter(|a| keep(a))
            .cloned()
            .collect()
    }

    /// Waits until the first listing is filed.
    pub async fn wait_until_ready(&self) {
        let _ = self.ready.subscribe().wait_for(|r| *r).await;
    }
}

/// Watches IPAllocations (the first listing a consistent read), files each event in `index`,
/// and yields the objects it touched.
pub fn follow(
    client: &kube::Client,
    index: Arc<AllocationIndex>,
) -> impl Stream<Item = Result<IPAllocation, watcher::Error>> + Send + 'static {
    watcher(Api::<IPAllocation>::all(client.clone()), watcher::Config::default())
        .default_backoff()
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

    #[test]
    fn files_moves_deletes_and_relists() {
        let index = AllocationIndex::default();
        index.apply(&watcher::Event::Apply(a("x", "p1")));
        index.apply(&watcher::Event::Apply(a("y", "p1")));
        index.apply(&watcher::Event::Apply(a("x", "p2")));
        assert_eq!(
            (names(&index, "p1"), names(&index, "p2")),
            (vec!["y".to_string()], vec!["x".to_string()])
        );
        index.apply(&watcher::Event::Delete(a("y", "p1")));
        assert!(names(&index, "p1").is_empty());
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(a("z", "p1")));
        assert_eq!(names(&index, "p2"), ["x"], "a relist replaces the index only when complete");
        index.apply(&watcher::Event::InitDone);
        assert_eq!((names(&index, "p1"), names(&index, "p2")), (vec!["z".to_string()], vec![]));
        assert_eq!(index.in_namespace("ns", |_| true).len(), 1);
    }
}
