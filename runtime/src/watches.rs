//! Watches of object metadata, started on demand, once per kind and purpose (the drift of
//! applied objects, the objects that hold up a deletion, the Secrets a controller reads).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, WatchEvent, WatchParams};
use tokio::task::JoinHandle;

/// What a watch reports of an object.
pub enum Seen<'a> {
    Present(&'a ObjectMeta),
    Deleted(&'a ObjectMeta),
    /// After the watch expired (410): every object there is now. What the handler knew of and
    /// is not in the list was deleted while nobody watched.
    Relisted(&'a [ObjectMeta]),
}

/// A handler of watch events.
pub type Handler = Arc<dyn Fn(Seen<'_>) + Send + Sync>;

impl<'a> Seen<'a> {
    /// The objects the event is about: the one seen, or after a relist every one listed.
    pub fn objects(&self) -> Vec<&'a ObjectMeta> {
        match self {
            Seen::Present(meta) | Seen::Deleted(meta) => vec![*meta],
            Seen::Relisted(present) => present.iter().collect(),
        }
    }
}

/// The running metadata watches.
pub struct Watches {
    client: kube::Client,
    running: Arc<Mutex<HashSet<String>>>,
    refused: Refused,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

/// The watches RBAC refuses now, by key, with the API server's message: what a controller
/// tells on its objects (a refusal is silent otherwise: the kind is polled instead).
type Refused = Arc<Mutex<BTreeMap<String, String>>>;

fn key_of(purpose: &str, resource: &ApiResource) -> String {
    format!("{purpose} {} {}", resource.api_version, resource.kind)
}

impl Watches {
    pub fn new(client: kube::Client) -> Watches {
        Watches { client, running: Arc::default(), refused: Arc::default(), tasks: Mutex::new(Vec::new()) }
    }

    /// Why the watch of `resource` for `purpose` is refused, while it is (the kind is polled
    /// every [`POLL_WITHOUT_WATCH`] meanwhile).
    pub fn refused(&self, purpose: &str, resource: &ApiResource) -> Option<String> {
        self.refused.lock().expect("not poisoned").get(&key_of(purpose, resource)).cloned()
    }

    /// Watches the metadata of every object of a kind (those with the label `labels`, when
    /// given) for `purpose`, unless such a watch runs already. The watch ends by itself when
    /// the kind stops being served (its CRD was deleted).
    pub fn ensure(&self, purpose: &str, resource: &ApiResource, labels: Option<&str>, handler: Handler) {
        let key = key_of(purpose, resource);
        if !self.running.lock().expect("not poisoned").insert(key.clone()) {
            return;
        }
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), resource);
        let labels = labels.map(String::from);
        let running = self.running.clone();
        let refused = self.refused.clone();
        let task = tokio::spawn(async move {
            follow_noting(&api, labels.as_deref(), &handler, &key, String::new(), Some(&refused)).await;
            refused.lock().expect("not poisoned").remove(&key);
            running.lock().expect("not poisoned").remove(&key);
        });
        let mut tasks = self.tasks.lock().expect("not poisoned");
        tasks.retain(|t| !t.is_finished());
        tasks.push(task);
    }

    /// Stops every watch.
    pub fn stop(&self) {
        for task in self.tasks.lock().expect("not poisoned").drain(..) {
            task.abort();
        }
    }
}

/// How often a kind whose watch RBAC refuses is listed instead.
pub const POLL_WITHOUT_WATCH: Duration = Duration::from_secs(5);

/// Follows the changes of a kind for as long as it is served. These watches need no listing
/// first: they only compare changes with what the controller knows, so a watch that starts with
/// an unset resourceVersion (whose first events are the objects as they are) costs one request
/// where a reflector costs two. When the resourceVersion expired (410, at the start of a watch
/// or in its stream), the objects are listed and reported as [`Seen::Relisted`], so that a
/// deletion in the gap is not lost, and the watch goes on from the list.
pub async fn follow(api: &Api<DynamicObject>, labels: Option<&str>, handler: &Handler, key: &str) {
    follow_from(api, labels, handler, key, String::new()).await
}

/// [`follow`] from a resourceVersion.
pub async fn follow_from(
    api: &Api<DynamicObject>,
    labels: Option<&str>,
    handler: &Handler,
    key: &str,
    from: String,
) {
    follow_noting(api, labels, handler, key, from, None).await
}

/// [`follow_from`], noting in `refused` while RBAC refuses the watch.
async fn follow_noting(
    api: &Api<DynamicObject>,
    labels: Option<&str>,
    handler: &Handler,
    key: &str,
    from: String,
    refused: Option<&Refused>,
) {
    let note = |why: Option<&str>| {
        if let Some(refused) = refused {
            let mut refused = refused.lock().expect("not poisoned");
            match why {
                Some(why) => refused.insert(key.to_string(), why.to_string()),
                None => refused.remove(key),
            };
        }
    };
    let mut version = from;
    let mut failures = 0u32;
    let mut expired = false;
    loop {
        if expired {
            let mut list = ListParams::default();
            if let Some(selector) = labels {
                list = list.labels(selector);
            }
            match api.list_metadata(&list).await {
                Ok(listed) => {
                    let metas: Vec<ObjectMeta> = listed.items.into_iter().map(|o| o.metadata).collect();
                    handler(Seen::Relisted(&metas));
                    version = listed.metadata.resource_version.unwrap_or_default();
                    expired = false;
                }
                Err(e) if crate::error::is_not_found(&e) => return,
                Err(e) => {
                    failures += 1;
                    tracing::debug!(watch = %key, error = %e, "listing after an expired watch");
                    tokio::time::sleep(Duration::from_millis(500 * u64::from(failures.min(20)))).await;
                    continue;
                }
            }
        }
        let mut params = WatchParams::default().timeout(290);
        if let Some(selector) = labels {
            params = params.labels(selector);
        }
        let stream = match api.watch_metadata(&params, &version).await {
            Ok(stream) => stream,
            Err(e) if crate::error::is_not_found(&e) => return,
            Err(kube::Error::Api(status)) if status.code == 410 => {
                expired = true;
                continue;
            }
            // RBAC gives list but not watch (Cluster API's upstream roles on its kinds): say so
            // once, and look by listing meanwhile, so that a change is seen within a poll
            // rather than at the next resync; the watch is tried again each time.
            Err(kube::Error::Api(status)) if status.code == 403 => {
                failures += 1;
                note(Some(&status.message));
                if failures == 1 {
                    tracing::warn!(watch = %key, error = %status.message, "cannot watch: RBAC refuses it; looking every {}s instead (grant watch to be woken at once)", POLL_WITHOUT_WATCH.as_secs());
                }
                let mut list = ListParams::default();
                if let Some(selector) = labels {
                    list = list.labels(selector);
                }
                if let Ok(listed) = api.list_metadata(&list).await {
                    let metas: Vec<ObjectMeta> = listed.items.into_iter().map(|o| o.metadata).collect();
                    handler(Seen::Relisted(&metas));
                    version = listed.metadata.resource_version.unwrap_or_default();
                }
                // A refusal of a moment (an API server whose authorizer is warming up) is tried
                // again soon; one that lasts, every POLL_WITHOUT_WATCH.
                tokio::time::sleep(Duration::from_millis(500 * u64::from(failures)).min(POLL_WITHOUT_WATCH))
                    .await;
                continue;
            }
            Err(e) => {
                failures += 1;
                tracing::debug!(watch = %key, error = %e, "metadata watch");
                tokio::time::sleep(Duration::from_millis(500 * u64::from(failures.min(20)))).await;
                continue;
            }
        };
        note(None);
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            failures = 0;
            let meta = match event {
                Ok(WatchEvent::Added(o) | WatchEvent::Modified(o)) => {
                    handler(Seen::Present(&o.metadata));
                    o.metadata
                }
                Ok(WatchEvent::Deleted(o)) => {
                    handler(Seen::Deleted(&o.metadata));
                    o.metadata
                }
                Ok(WatchEvent::Bookmark(b)) => {
                    version = b.metadata.resource_version;
                    continue;
                }
                Ok(WatchEvent::Error(status)) => {
                    expired = status.code == 410;
                    tracing::debug!(watch = %key, error = %status.message, "metadata watch");
                    break;
                }
                Err(e) => {
                    tracing::debug!(watch = %key, error = %e, "metadata watch");
                    break;
                }
            };
            if let Some(rv) = meta.resource_version {
                version = rv;
            }
        }
    }
}
