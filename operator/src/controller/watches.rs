//! Watches of object metadata, started on demand, once per kind and purpose: the drift of
//! applied objects, and the objects that hold up a provider's deletion.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::{WatchStreamExt, watcher};
use tokio::task::JoinHandle;

/// What a watch reports of an object.
pub enum Seen<'a> {
    Present(&'a ObjectMeta),
    Deleted(&'a ObjectMeta),
}

/// A handler of watch events.
pub type Handler = Arc<dyn Fn(Seen<'_>) + Send + Sync>;

/// The running metadata watches.
pub struct Watches {
    client: kube::Client,
    running: Arc<Mutex<HashSet<String>>>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Watches {
    pub fn new(client: kube::Client) -> Watches {
        Watches { client, running: Arc::default(), tasks: Mutex::new(Vec::new()) }
    }

    /// Watches the metadata of every object of a kind (those with the label `labels`, when
    /// given) for `purpose`, unless such a watch runs already. The watch ends by itself when
    /// the kind stops being served (its CRD was deleted).
    pub fn ensure(&self, purpose: &str, resource: &ApiResource, labels: Option<&str>, handler: Handler) {
        let key = format!("{purpose} {} {}", resource.api_version, resource.kind);
        if !self.running.lock().expect("not poisoned").insert(key.clone()) {
            return;
        }
        let api: Api<PartialObjectMeta<DynamicObject>> = Api::all_with(self.client.clone(), resource);
        let config = match labels {
            Some(selector) => watcher::Config::default().labels(selector),
            None => watcher::Config::default(),
        };
        let running = self.running.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                match event {
                    Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => {
                        handler(Seen::Present(&o.metadata))
                    }
                    Ok(watcher::Event::Delete(o)) => handler(Seen::Deleted(&o.metadata)),
                    Ok(_) => {}
                    Err(watcher::Error::InitialListFailed(kube::Error::Api(status)))
                        if status.code == 404 =>
                    {
                        break;
                    }
                    Err(e) => tracing::debug!(watch = %key, error = %e, "metadata watch"),
                }
            }
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
