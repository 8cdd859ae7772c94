//! The TenantClusters of one watch, filed by namespace (a Team's usage, a team's quota in
//! admission) and by the ProviderConfig they use (its users), so that no reconcile and no
//! admission request scans every cluster of the management cluster.

use std::sync::Arc;

use butler_core::api::TenantCluster;
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{Store, reflector, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};

use crate::filed::{Indexed, Key};

/// TenantClusters filed over the objects of one store: by namespace, and by the
/// ProviderConfig they use.
pub struct ClusterIndex(Indexed<TenantCluster>);

const BY_NAMESPACE: usize = 0;
const BY_CONFIG: usize = 1;

fn namespace_key(cluster: &TenantCluster) -> Option<Key> {
    Some((cluster.namespace().unwrap_or_default(), String::new()))
}

impl ClusterIndex {
    /// An index over the objects of `store` (filled by the same watch).
    pub fn new(store: Store<TenantCluster>) -> ClusterIndex {
        ClusterIndex(Indexed::new(store, &[namespace_key, crate::tenantcluster::plan::config_ref]))
    }

    /// Files one watch event.
    pub fn apply(&self, event: &watcher::Event<TenantCluster>) {
        self.0.apply(event);
    }

    /// The TenantClusters of a namespace, by name.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<TenantCluster>> {
        self.0.get(BY_NAMESPACE, &(namespace.to_string(), String::new()))
    }

    /// The TenantClusters whose `providerConfigRef` names ProviderConfig `namespace/name`.
    pub fn using(&self, namespace: &str, name: &str) -> Vec<Arc<TenantCluster>> {
        self.0.get(BY_CONFIG, &(namespace.to_string(), name.to_string()))
    }

    /// The TenantCluster `namespace/name`, from the cache.
    pub fn get(&self, namespace: &str, name: &str) -> Option<Arc<TenantCluster>> {
        self.0.object(namespace, name)
    }

    /// Waits until the index holds the first listing. Not the store's own readiness: that
    /// wakes one waiter only, which its controller takes.
    pub async fn wait_until_ready(&self) {
        self.0.wait_until_ready().await;
    }
}

/// One watch of TenantClusters feeding `writer`'s store (shared with subscribers, or not) and
/// then `index`; `gone` is told of each cluster deleted. Yields the clusters it touched,
/// deleted ones included.
pub fn follow(
    client: &kube::Client,
    writer: Writer<TenantCluster>,
    index: Arc<ClusterIndex>,
    gone: impl Fn(&TenantCluster) + Send + 'static,
) -> impl Stream<Item = Result<TenantCluster, watcher::Error>> + Send + 'static {
    let events =
        watcher(Api::<TenantCluster>::all(client.clone()), watcher::Config::default().any_semantic())
            .default_backoff()
            .modify(crate::caches::trim);
    reflector(writer, events)
        .inspect(move |event| {
            if let Ok(event) = event {
                index.apply(event);
                if let watcher::Event::Delete(cluster) = event {
                    gone(cluster);
                }
            }
        })
        .touched_objects()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cluster(ns: &str, name: &str, config: Option<(&str, &str)>) -> TenantCluster {
        let reference = config.map(|(ns, name)| json!({"name": name, "namespace": ns}));
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"providerConfigRef": reference},
        }))
        .unwrap()
    }

    fn names(found: Vec<Arc<TenantCluster>>) -> Vec<String> {
        found.iter().map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any())).collect()
    }

    #[test]
    fn files_by_namespace_and_by_providerconfig() {
        let (store, mut writer) = kube::runtime::reflector::store();
        let index = ClusterIndex::new(store);
        let mut apply = |event: watcher::Event<TenantCluster>| {
            writer.apply_watcher_event(&event);
            index.apply(&event);
        };
        apply(watcher::Event::Init);
        apply(watcher::Event::InitApply(cluster("team-a", "web", Some(("sys", "pc")))));
        apply(watcher::Event::InitApply(cluster("team-b", "web", Some(("", "pc")))));
        apply(watcher::Event::InitDone);
        apply(watcher::Event::Apply(cluster("team-a", "db", None)));
        assert_eq!(names(index.in_namespace("team-a")), ["team-a/db", "team-a/web"]);
        assert_eq!(names(index.using("sys", "pc")), ["team-a/web"]);
        assert_eq!(names(index.using("team-b", "pc")), ["team-b/web"], "no namespace: the cluster's own");
        apply(watcher::Event::Apply(cluster("team-a", "web", Some(("team-a", "local")))));
        assert!(index.using("sys", "pc").is_empty(), "moved to the ProviderConfig it names now");
        apply(watcher::Event::Delete(cluster("team-a", "web", None)));
        apply(watcher::Event::Delete(cluster("team-a", "db", None)));
        assert!(index.in_namespace("team-a").is_empty());
        assert!(index.using("team-a", "local").is_empty());
        assert_eq!(names(index.in_namespace("team-b")), ["team-b/web"]);
    }
}
