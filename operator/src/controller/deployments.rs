//! The providers' Deployments in memory, from watches of the namespaces the operator honours
//! only: one watch of every namespace when it honours every one (or of its one namespace), else
//! one watch per honoured namespace, those it names and those labelled, started and stopped as
//! namespaces are labelled. Anyone may label a Deployment as a provider's; one where no provider
//! may be is then never listed, decoded or held.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};

use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use tokio::sync::watch;

use crate::controller::vocabulary::{LABEL_NAME, PAUSED_REPLICAS};

/// What a watch tells of each event.
pub type OnEvent = Arc<dyn Fn(&Result<watcher::Event<Deployment>, watcher::Error>) + Send + Sync>;

/// One watch: its store, whether its first listing is in, and its task.
struct Followed {
    store: Store<Deployment>,
    listed: watch::Receiver<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Followed {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The Deployments of the honoured namespaces.
pub struct Deployments {
    client: kube::Client,
    /// The one namespace watched, or every one (`""`), when the set is not per namespace.
    whole: Option<String>,
    followed: Mutex<BTreeMap<String, Followed>>,
    on_event: OnceLock<OnEvent>,
}

impl Deployments {
    /// Deployments watched in `namespace` (every one when `None`) as a whole, or, with
    /// `per_namespace`, in each namespace [`Deployments::follow`] is given.
    pub fn new(client: kube::Client, namespace: Option<String>, per_namespace: bool) -> Deployments {
        let whole = (!per_namespace).then(|| namespace.unwrap_or_default());
        Deployments { client, whole, followed: Mutex::default(), on_event: OnceLock::new() }
    }

    /// Starts the watches: `on_event` is told of each of their events. The whole watch starts at
    /// once; per-namespace ones as namespaces are followed.
    pub fn start(&self, on_event: OnEvent) {
        let _ = self.on_event.set(on_event);
        if let Some(whole) = self.whole.clone() {
            self.spawn(&whole);
        }
    }

    /// Follows the Deployments of `namespace`, unless they are followed already (or the watch
    /// is of every namespace).
    pub fn follow(&self, namespace: &str) {
        if self.whole.is_none() && !namespace.is_empty() {
            self.spawn(namespace);
        }
    }

    /// Stops following every namespace but those `keep` holds (the whole watch stays).
    pub fn keep_only(&self, keep: &dyn Fn(&str) -> bool) {
        if self.whole.is_some() {
            return;
        }
        self.followed.lock().expect("not poisoned").retain(|namespace, _| keep(namespace));
    }

    fn spawn(&self, namespace: &str) {
        let mut followed = self.followed.lock().expect("not poisoned");
        if followed.get(namespace).is_some_and(|f| !f.task.is_finished()) {
            return;
        }
        let Some(on_event) = self.on_event.get().cloned() else { return };
        let api: Api<Deployment> = match namespace {
            "" => Api::all(self.client.clone()),
            ns => Api::namespaced(self.client.clone(), ns),
        };
        let (store, writer) = reflector::store::<Deployment>();
        let (tell, listed) = watch::channel(false);
        // Small pages: a page is decoded whole before it is slimmed, and anyone may label a
        // Deployment of up to 1.5 MiB as a provider's.
        let events =
            watcher(api, watcher::Config::default().labels(LABEL_NAME).page_size(20)).modify(slim_deployment);
        let task =
            tokio::spawn(reflector::reflector(writer, events).default_backoff().for_each(move |event| {
                if matches!(event, Ok(watcher::Event::InitDone)) {
                    tell.send_replace(true);
                }
                on_event(&event);
                futures::future::ready(())
            }));
        followed.insert(namespace.to_string(), Followed { store, listed, task });
    }

    /// Stops every watch.
    pub fn stop(&self) {
        self.followed.lock().expect("not poisoned").clear();
    }

    /// Every Deployment held.
    pub fn state(&self) -> Vec<Arc<Deployment>> {
        self.followed.lock().expect("not poisoned").values().flat_map(|f| f.store.state()).collect()
    }

    /// The Deployments held of `namespace`.
    pub fn in_namespace(&self, namespace: &str) -> Vec<Arc<Deployment>> {
        let followed = self.followed.lock().expect("not poisoned");
        let of = |f: &Followed| f.store.state();
        match &self.whole {
            Some(_) => followed
                .values()
                .flat_map(of)
                .filter(|d| d.metadata.namespace.as_deref() == Some(namespace))
                .collect(),
            None => followed.get(namespace).map(of).unwrap_or_default(),
        }
    }

    /// The namespaces followed one by one.
    pub fn namespaces(&self) -> Vec<String> {
        match self.whole {
            Some(_) => Vec::new(),
            None => self.followed.lock().expect("not poisoned").keys().cloned().collect(),
        }
    }

    /// Waits until every watch running now has its first listing.
    pub async fn wait_until_ready(&self) {
        let waiting: Vec<watch::Receiver<bool>> =
            self.followed.lock().expect("not poisoned").values().map(|f| f.listed.clone()).collect();
        for mut listed in waiting {
            let _ = listed.wait_for(|l| *l).await;
        }
    }
}

/// A Deployment as the cache keeps it: what [`crate::controller::context::live_deployment`] and drift read (name,
/// namespace, the operator's labels, generation, resourceVersion, the paused-replicas annotation, replicas,
/// status) and nothing else. Anyone may label a Deployment as a provider's, so the cache must
/// not hold whole pod templates, annotations and managed fields of any size.
pub fn slim_deployment(d: &mut Deployment) {
    d.metadata.managed_fields = None;
    // Labels have no size limit but the object's: only the operator's own are read.
    if let Some(labels) = d.metadata.labels.as_mut() {
        labels.retain(|k, _| k.starts_with("operator.butlerlabs.dev/"));
    }
    if let Some(annotations) = d.metadata.annotations.as_mut() {
        annotations.retain(|k, _| k == PAUSED_REPLICAS);
    }
    if let Some(spec) = d.spec.as_mut() {
        spec.template = Default::default();
        spec.selector = Default::default();
    }
    if let Some(status) = d.status.as_mut()
        && let Some(conditions) = status.conditions.as_mut()
    {
        conditions.retain(|c| c.type_ == "Available");
        for condition in conditions.iter_mut() {
            condition.message = None;
        }
    }
}
