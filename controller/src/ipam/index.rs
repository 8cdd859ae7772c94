//! The IPAllocations by pool (the NetworkPool controller's field index on `spec.poolRef.name`)
//! and by the TenantCluster they serve (`spec.tenantClusterRef`), kept from a watch, so that a
//! pool's or a cluster's reconcile reads its own allocations and never scans them all.

use std::sync::Arc;

use butler_core::api::IPAllocation;
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};

use crate::filed::{Filed, Indexed, Key};

/// IPAllocations filed by (namespace, spec.poolRef.name), each with a value taken from it.
pub type PoolFiled<V> = Filed<IPAllocation, V>;

/// The key of an allocation's pool.
pub fn by_pool(a: &IPAllocation) -> Option<Key> {
    Some((a.namespace().unwrap_or_default(), a.spec.pool_ref.name.clone()))
}

/// The key of the TenantCluster an allocation says it serves.
pub fn by_cluster(a: &IPAllocation) -> Option<Key> {
    let r = &a.spec.tenant_cluster_ref;
    Some((r.namespace.clone(), r.name.clone()))
}

/// IPAllocations filed by pool and by cluster over the objects of the store that the
/// IPAllocation controller shares, so each object is held once.
pub struct AllocationIndex(Indexed<IPAllocation>);

const BY_POOL: usize = 0;
const BY_CLUSTER: usize = 1;

impl AllocationIndex {
    /// An index over the objects of `store` (filled by the same watch).
    pub fn new(store: Store<IPAllocation>) -> AllocationIndex {
        AllocationIndex(Indexed::new(store, &[by_pool, by_cluster]))
    }

    /// Files one watch event.
    pub fn apply(&self, event: &watcher::Event<IPAllocation>) {
        self.0.apply(event);
    }

    /// The allocations that name pool `pool` in `namespace`, by name.
    pub fn of_pool(&self, namespace: &str, pool: &str) -> Vec<Arc<IPAllocation>> {
        self.0.get(BY_POOL, &(namespace.to_string(), pool.to_string()))
    }

    /// The allocation `namespace/name` as the cache holds it.
    pub fn object(&self, namespace: &str, name: &str) -> Option<Arc<IPAllocation>> {
        self.0.object(namespace, name)
    }

    /// The allocations whose `tenantClusterRef` names the TenantCluster `namespace/name`, in
    /// any namespace.
    pub fn of_cluster(&self, namespace: &str, name: &str) -> Vec<Arc<IPAllocation>> {
        self.0.get(BY_CLUSTER, &(namespace.to_string(), name.to_string()))
    }

    /// Waits until the first listing is filed.
    pub async fn wait_until_ready(&self) {
        self.0.wait_until_ready().await;
    }
}

/// One watch of IPAllocations (its first listing a consistent read, managed fields dropped)
/// feeding `writer`'s store (shared with the IPAllocation controller) and then `index`; `gone`
/// is told of each allocation deleted. Yields the objects it touched, deleted ones included,
/// for the NetworkPool controller.
pub fn follow(
    client: &kube::Client,
    writer: Writer<IPAllocation>,
    index: Arc<AllocationIndex>,
    gone: impl Fn(&IPAllocation) + Send + 'static,
) -> impl Stream<Item = Result<IPAllocation, watcher::Error>> + Send + 'static {
    // Pages of 100: the first listing of many allocations does not raise the heap's peak.
    watcher(Api::<IPAllocation>::all(client.clone()), watcher::Config::default().page_size(100))
        .default_backoff()
        // Only what the controllers read is kept (there are thousands).
        .modify(crate::caches::trim_allocation)
        .reflect_shared(writer)
        .inspect(move |event| {
            if let Ok(event) = event {
                index.apply(event);
                if let watcher::Event::Delete(allocation) = event {
                    gone(allocation);
                }
            }
        })
        .touched_objects()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn a(name: &str, pool: &str) -> IPAllocation {
        serving_cluster(name, pool, "t")
    }

    fn serving_cluster(name: &str, pool: &str, cluster: &str) -> IPAllocation {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"poolRef": {"name": pool}, "tenantClusterRef": {"name": cluster, "namespace": "x"}, "type": "nodes"},
        }))
        .unwrap()
    }

    fn names(index: &AllocationIndex, pool: &str) -> Vec<String> {
        index.of_pool("ns", pool).iter().map(|a| a.name_any()).collect()
    }

    fn serving(index: &AllocationIndex, cluster: &str) -> Vec<String> {
        index.of_cluster("x", cluster).iter().map(|a| a.name_any()).collect()
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

    #[test]
    fn files_by_the_cluster_served_and_forgets_emptied_keys() {
        let (store, mut writer) = kube::runtime::reflector::store();
        let index = AllocationIndex::new(store);
        let mut apply = |event| feed(&mut writer, &index, event);
        apply(watcher::Event::Init);
        apply(watcher::Event::InitDone);
        apply(watcher::Event::Apply(serving_cluster("web-lb", "p1", "web")));
        apply(watcher::Event::Apply(serving_cluster("web-nodes", "p2", "web")));
        apply(watcher::Event::Apply(serving_cluster("db-lb", "p1", "db")));
        assert_eq!(serving(&index, "web"), ["web-lb", "web-nodes"], "across pools");
        assert_eq!(serving(&index, "db"), ["db-lb"]);
        assert_eq!(index.0.keys(BY_CLUSTER), 2);
        apply(watcher::Event::Apply(serving_cluster("db-lb", "p1", "web")));
        assert_eq!(
            serving(&index, "web"),
            ["db-lb", "web-lb", "web-nodes"],
            "moved to the cluster it names now"
        );
        for name in ["db-lb", "web-lb", "web-nodes"] {
            apply(watcher::Event::Delete(serving_cluster(name, "p1", "web")));
        }
        assert!(serving(&index, "web").is_empty());
        assert_eq!(
            (index.0.keys(BY_CLUSTER), index.0.keys(BY_POOL)),
            (0, 0),
            "no key is kept for what is gone"
        );
    }
}
