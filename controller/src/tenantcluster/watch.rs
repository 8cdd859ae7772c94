//! Watches on tenant clusters in elastic mode: a change of a Service or of MetalLB's pools on
//! the tenant wakes its TenantCluster at once, instead of at the next timed reconcile, so that
//! a Service that MetalLB cannot serve is seen within a moment.

use std::collections::HashMap;
use std::sync::Mutex;

use butler_core::api::TenantCluster;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use kube::Resource;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// The soonest a tenant's changes wake its cluster again.
const WAKE_FLOOR: std::time::Duration = std::time::Duration::from_secs(5);

/// The running watches, by TenantCluster UID, with the kubeconfig version they use.
pub struct TenantWatches {
    wake: mpsc::UnboundedSender<ObjectRef<TenantCluster>>,
    running: Mutex<HashMap<String, (String, JoinHandle<()>)>>,
}

impl TenantWatches {
    /// The watches, and the stream of TenantClusters they wake.
    pub fn new() -> (TenantWatches, mpsc::UnboundedReceiver<ObjectRef<TenantCluster>>) {
        let (wake, woken) = mpsc::unbounded_channel();
        (TenantWatches { wake, running: Mutex::default() }, woken)
    }

    /// What wakes a TenantCluster (reconciles it at once).
    pub fn waker(&self) -> mpsc::UnboundedSender<ObjectRef<TenantCluster>> {
        self.wake.clone()
    }

    /// Follows the tenant of `cluster` through `tenant` (made from kubeconfig `version`),
    /// unless it is followed already with that version.
    pub fn follow(&self, cluster: &TenantCluster, version: &str, tenant: kube::Client) {
        let uid = cluster.meta().uid.clone().unwrap_or_default();
        let mut running = self.running.lock().expect("not poisoned");
        if running.get(&uid).is_some_and(|(v, task)| v == version && !task.is_finished()) {
            return;
        }
        if let Some((_, task)) = running.remove(&uid) {
            task.abort();
        }
        let target = ObjectRef::from_obj(cluster);
        let wake = self.wake.clone();
        let gvk = GroupVersionKind::gvk("metallb.io", "v1beta1", "IPAddressPool");
        let pools: Api<DynamicObject> = Api::namespaced_with(
            tenant.clone(),
            super::tenant::METALLB_NAMESPACE,
            &ApiResource::from_gvk_with_plural(&gvk, "ipaddresspools"),
        );
        let services =
            watcher(Api::<Service>::all(tenant), watcher::Config::default()).default_backoff().map(|_| ());
        let pools = watcher(pools, watcher::Config::default()).default_backoff().map(|_| ());
        let task = tokio::spawn(async move {
            let mut changes = std::pin::pin!(futures::stream::select(services, pools));
            let mut last: Option<tokio::time::Instant> = None;
            while changes.next().await.is_some() {
                // At most one wake per WAKE_FLOOR: a tenant that churns its Services does not
                // set the controller's pace (what changed meanwhile is read at that wake).
                if let Some(last) = last {
                    tokio::time::sleep_until(last + WAKE_FLOOR).await;
                }
                last = Some(tokio::time::Instant::now());
                if wake.send(target.clone()).is_err() {
                    return;
                }
            }
        });
        running.insert(uid, (version.to_string(), task));
    }

    /// Stops following the tenant of the cluster of UID `uid`.
    pub fn stop(&self, uid: &str) {
        if let Some((_, task)) = self.running.lock().expect("not poisoned").remove(uid) {
            task.abort();
            tracing::debug!(cluster = uid, "tenant watch stopped");
        }
    }

    /// Whether the tenant of the cluster of UID `uid` is followed.
    pub fn keeps(&self, uid: &str) -> bool {
        self.running.lock().expect("not poisoned").contains_key(uid)
    }
}

impl Drop for TenantWatches {
    fn drop(&mut self) {
        for (_, (_, task)) in self.running.lock().expect("not poisoned").drain() {
            task.abort();
        }
    }
}
