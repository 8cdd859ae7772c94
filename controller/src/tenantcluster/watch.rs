//! Watches on tenant clusters in elastic mode: a change of a Service or of MetalLB's pools on
//! the tenant wakes its TenantCluster at once, instead of at the next timed reconcile, so that
//! a Service that MetalLB cannot serve is seen within a moment.

use std::collections::HashMap;
use std::sync::Mutex;

use butler_core::api::TenantCluster;
use futures::StreamExt;
use kube::Resource;
use kube::api::{WatchEvent, WatchParams};
use kube::runtime::reflector::ObjectRef;

use super::answers::Seen;
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

    /// Follows the tenant of `cluster` through `tenant` (made from kubeconfig `version`) from
    /// the resourceVersion `from` (of the list just read), unless it is followed already with
    /// that kubeconfig. Nothing is listed: the watches start where the reconcile's list left
    /// off, read of each event its resourceVersion alone (see [`super::answers`]), and go on
    /// from the last one seen when the tenant ends them; one the tenant refuses (its version
    /// too old) ends, and the next reconcile starts it again from its own list.
    pub fn follow(&self, cluster: &TenantCluster, version: &str, tenant: kube::Client, from: &str) {
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
        let pools = format!(
            "/apis/metallb.io/v1beta1/namespaces/{}/ipaddresspools",
            super::tenant::METALLB_NAMESPACE
        );
        let services = changes(tenant.clone(), "/api/v1/services".to_string(), from.to_string());
        let pools = changes(tenant, pools, from.to_string());
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

/// The changes of the objects at `path` on the tenant from resourceVersion `from`: one item per
/// added, changed or deleted object. Ends when the tenant refuses the watch (a version too old,
/// an error event) or cannot be reached; a watch the tenant closes, or that stays quiet past the
/// client's read timeout, goes on from the last version seen.
fn changes(tenant: kube::Client, path: String, from: String) -> impl futures::Stream<Item = ()> + Send {
    futures::stream::unfold(
        (tenant, path, from, None),
        |(tenant, path, mut version, mut events)| async move {
            loop {
                let stream: &mut Option<
                    futures::stream::BoxStream<'static, Result<WatchEvent<Seen>, kube::Error>>,
                > = &mut events;
                if stream.is_none() {
                    let params = WatchParams::default().timeout(290);
                    let request = kube::core::Request::new(&path).watch(&params, &version).ok()?;
                    *stream = Some(tenant.request_events::<Seen>(request).await.ok()?.boxed());
                }
                let seen = |o: &Seen| o.metadata.resource_version.clone();
                match stream.as_mut()?.next().await {
                    Some(Ok(WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o))) => {
                        version = seen(&o).unwrap_or(version);
                        return Some(((), (tenant, path, version, events)));
                    }
                    Some(Ok(WatchEvent::Bookmark(b))) => version = b.metadata.resource_version,
                    Some(Ok(WatchEvent::Error(_)) | Err(_)) => return None,
                    None => {
                        // Closed, or quiet past the read timeout: again from the last version.
                        *stream = None;
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
            }
        },
    )
}

impl Drop for TenantWatches {
    fn drop(&mut self) {
        for (_, (_, task)) in self.running.lock().expect("not poisoned").drain() {
            task.abort();
        }
    }
}
