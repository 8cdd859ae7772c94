//! What every reconcile shares: the client, the caches of the seven provider kinds and of the
//! providers' Deployments, the operator's own records (inventories, written statuses, drift),
//! the trigger channels, the event recorder and the metrics.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use butler_repository::RemoteOptions;
use butler_runtime::apply::Applier;
use butler_runtime::conditions::is_true;
use butler_runtime::inventory::InventoryStore;
use butler_runtime::watches::Watches;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::core::PartialObjectMeta;
use kube::runtime::events::Recorder;
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};

use super::ProviderObject;
use crate::api::*;
use crate::controller::install::drift::Drift;
use crate::controller::install::installed::Inventory;
use crate::controller::report::reason::PAUSED;
use crate::controller::triggers::Triggers;
use crate::controller::vocabulary::{Fetched, LiveDeployment, PAUSED_REPLICAS, ProviderKey, ProviderView};
use crate::metrics::Metrics;

/// The reflector caches of the seven provider kinds.
#[derive(Clone)]
pub struct Stores {
    pub core: Store<CoreProvider>,
    pub infrastructure: Store<InfrastructureProvider>,
    pub bootstrap: Store<BootstrapProvider>,
    pub control_plane: Store<ControlPlaneProvider>,
    pub addon: Store<AddonProvider>,
    pub ipam: Store<IPAMProvider>,
    pub runtime_extension: Store<RuntimeExtensionProvider>,
}

/// A provider object as the others see it; its status fields come from `written` when this
/// process wrote them last (the cache may not have seen the write yet).
pub fn view_of<K: Provider + Resource>(object: &K, written: Option<&ProviderStatus>) -> ProviderView {
    let status = written.or(object.provider_status());
    ProviderView {
        key: ProviderKey::of(object),
        uid: crate::controller::vocabulary::uid_of(object),
        created: object
            .meta()
            .creation_timestamp
            .as_ref()
            .map(|t| t.0.strftime("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default(),
        paused: object.provider_spec().paused.unwrap_or(false),
        held: status.is_some_and(held),
        contract: status.and_then(|s| s.contract.clone()),
        installed_version: status.and_then(|s| s.installed_version.clone()),
        wanted_version: object.provider_spec().version.clone().filter(|v| !v.is_empty()),
        deleting: object.meta().deletion_timestamp.is_some(),
    }
}

/// Whether a status says the Deployments are held at 0 replicas.
fn held(status: &ProviderStatus) -> bool {
    is_true(&status.conditions, PAUSED)
}

/// A provider object as the watches that wake providers need it.
struct Entry {
    view: ProviderView,
    namespace: String,
    /// The config Secret it reads, `(namespace, name)`.
    secret: Option<(String, String)>,
    /// The ConfigMaps it reads its releases from.
    selector: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector>,
    /// The ConfigMap of its additional manifests.
    additional: Option<String>,
}

/// Everything a reconcile shares with the others.
pub struct Context {
    pub client: kube::Client,
    pub applier: Applier,
    /// Where inventories are kept.
    pub inventory_store: InventoryStore,
    pub stores: Stores,
    pub deployments: crate::controller::deployments::Deployments,
    pub triggers: Triggers,
    pub drift: Arc<Drift>,
    pub watches: Watches,
    /// Providers whose deletion waits for objects of a kind to go, by `{apiVersion} {kind}`.
    pub waiting: Arc<Mutex<HashMap<String, HashSet<ProviderKey>>>>,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// Repository access: HTTP cache, offline mode, the operator's own tokens.
    pub remote: RemoteOptions,
    /// The operator's clusterctl-style config file: providers, images, variables.
    pub config_path: Option<std::path::PathBuf>,
    /// The statuses this process wrote last, by provider UID.
    pub statuses: Mutex<HashMap<String, ProviderStatus>>,
    /// The resourceVersion each of this process's status writes left, by UID: a cached object
    /// older than it has not seen the write yet; a newer one that says otherwise was written
    /// by someone else.
    pub status_versions: Mutex<HashMap<String, String>>,
    /// The inventories this process read or wrote last, by provider UID.
    pub inventories: Mutex<HashMap<String, Inventory>>,
    /// The provider UIDs whose inventory ConfigMap this process has read.
    pub inventories_read: Mutex<std::collections::HashSet<String>>,
    /// Releases fetched from remote repositories, by URL and version: a release never changes.
    pub releases: Mutex<HashMap<String, Fetched>>,
    /// Each provider's last rendered release, used again while its inputs are the same.
    pub renders: crate::controller::wanted::render::Renders,
    /// Config Secrets as last read, valid while the Secret watch sees no change.
    pub secrets: crate::controller::wanted::config::SecretCache,
    /// Consecutive failures, by provider UID, for the backoff.
    pub failures: Mutex<HashMap<String, u32>>,
    /// Providers (UIDs) whose finalizer this process removed: gone, though the cache may still
    /// show them.
    pub gone: Mutex<HashSet<String>>,
    /// The one decision point of unpauses and contract changes: each is decided again under it,
    /// from the views as they are then, and carried out (applied, status written) before the
    /// next is decided, so a provider never unpauses at a contract the core is leaving.
    pub contract_gate: tokio::sync::Mutex<()>,
    /// Where a decided unpause or contract change waits before its writes while someone holds
    /// this for writing: scenarios hold it to make two decisions meet there.
    pub decided: tokio::sync::RwLock<()>,
    /// The one namespace whose providers this operator manages, when it is limited to one.
    pub namespace: Option<String>,
    /// What providers' components may grant beyond their own objects.
    pub policy: crate::controller::wanted::policy::Policy,
    /// The namespaces honoured by their label ([`crate::controller::wanted::policy::Policy::labelled_selector`]),
    /// when the policy names a label and not every namespace is honoured.
    pub labelled: Option<Store<PartialObjectMeta<Namespace>>>,
    /// How often every provider is reconciled when nothing wakes it.
    pub sync_period: std::time::Duration,
    /// Storage-version migrations this process ran or runs, by CRD name, for the upgrades'
    /// status.
    pub migrations: Mutex<HashMap<String, crate::controller::install::storage::Progress>>,
    /// The least time between two checks of a provider's upgrade policy.
    pub upgrade_check_interval: std::time::Duration,
    /// When each provider's upgrade policy was checked last, and for which generation, by UID.
    pub upgrade_checks: Mutex<HashMap<String, (Option<i64>, std::time::Instant)>>,
    /// When this process's controllers started: backoffs stay short for a while after.
    pub started: std::time::Instant,
    /// The longest a provider's whole fetch may take.
    pub fetch_deadline: std::time::Duration,
}

impl Context {
    /// `fetch`, held to `--fetch-deadline` (every request of it together): a repository of
    /// endless pages, or one that answers each just in time, must not hold a reconcile.
    pub async fn within_fetch_deadline<T>(
        &self,
        fetch: impl std::future::Future<Output = Result<T, String>>,
    ) -> Result<T, String> {
        within(self.fetch_deadline, fetch).await
    }

    /// Whether provider objects of `namespace` are honoured: by the policy's list or by the
    /// namespace's label; else why not.
    pub fn honours(&self, namespace: &str) -> Result<(), String> {
        let labelled = self
            .labelled
            .as_ref()
            .is_some_and(|store| store.get(&kube::runtime::reflector::ObjectRef::new(namespace)).is_some());
        self.policy.honours(namespace, labelled)
    }

    /// The provider objects of every kind in `namespace`, honoured or not.
    pub fn providers_in(&self, namespace: &str) -> Vec<ProviderKey> {
        self.all_entries().into_iter().filter(|e| e.namespace == namespace).map(|e| e.view.key).collect()
    }

    /// Every provider object of every kind, honoured or not, with the Secret each reads and the
    /// ConfigMaps it selects as its repository.
    fn all_entries(&self) -> Vec<Entry> {
        fn each<K: ProviderObject>(store: &Store<K>, out: &mut Vec<Entry>) {
            out.extend(store.state().iter().map(|o| {
                let namespace = o.namespace().unwrap_or_default();
                let spec = o.provider_spec();
                let secret = spec.config_secret.as_ref().map(|s| {
                    (
                        s.namespace.clone().filter(|n| !n.is_empty()).unwrap_or(namespace.clone()),
                        s.name.clone(),
                    )
                });
                let selector = spec.fetch_config.as_ref().and_then(|f| f.selector.clone());
                let additional = spec.additional_manifests.as_ref().map(|a| a.name.clone());
                Entry { view: view_of(o.as_ref(), None), namespace, secret, selector, additional }
            }));
        }
        let mut out = Vec::new();
        each(&self.stores.core, &mut out);
        each(&self.stores.infrastructure, &mut out);
        each(&self.stores.bootstrap, &mut out);
        each(&self.stores.control_plane, &mut out);
        each(&self.stores.addon, &mut out);
        each(&self.stores.ipam, &mut out);
        each(&self.stores.runtime_extension, &mut out);
        out
    }

    /// [`Context::all_entries`] where this operator looks: the others are not counted, not for
    /// duplicates, not as the core provider, not as what a deletion waits for.
    fn entries(&self) -> Vec<Entry> {
        let mut out = self.all_entries();
        out.retain(|e| self.honours(&e.namespace).is_ok());
        out
    }

    /// Every provider object of every kind, as the reconciles see each other: with the status
    /// this process wrote last, and without those whose deletion it finished.
    pub fn views(&self) -> Vec<ProviderView> {
        let statuses = self.statuses.lock().expect("not poisoned");
        let gone = self.gone.lock().expect("not poisoned");
        self.entries()
            .into_iter()
            .map(|e| e.view)
            .filter(|v| !(v.deleting && gone.contains(&v.uid)))
            .map(|mut v| {
                if let Some(status) = statuses.get(&v.uid) {
                    v.contract = status.contract.clone();
                    v.installed_version = status.installed_version.clone();
                    v.held = held(status);
                }
                v
            })
            .collect()
    }

    /// Drops every record of a provider whose objects and finalizer are gone.
    pub fn forget(&self, key: &ProviderKey, uid: &str) {
        self.statuses.lock().expect("not poisoned").remove(uid);
        self.inventories.lock().expect("not poisoned").remove(uid);
        self.failures.lock().expect("not poisoned").remove(uid);
        self.renders.forget(key);
        self.gone.lock().expect("not poisoned").insert(uid.to_string());
        self.metrics.provider_installed(key, None);
    }

    /// The provider objects whose `configSecret` is this Secret.
    pub fn config_secret_users(&self, namespace: &str, name: &str) -> Vec<ProviderKey> {
        self.entries()
            .into_iter()
            .filter(|e| e.secret.as_ref().is_some_and(|(ns, n)| ns == namespace && n == name))
            .map(|e| e.view.key)
            .collect()
    }

    /// The provider objects that read the ConfigMap `namespace/name` with these labels: as the
    /// ConfigMap of their additional manifests, or one their `fetchConfig.selector` picks (a
    /// selector that does not read picks nothing).
    pub fn configmap_users(
        &self,
        namespace: &str,
        name: &str,
        labels: &std::collections::BTreeMap<String, String>,
    ) -> Vec<ProviderKey> {
        use kube::core::SelectorExt;
        self.entries()
            .into_iter()
            .filter(|e| e.namespace == namespace)
            .filter(|e| {
                e.additional.as_deref() == Some(name)
                    || e.selector
                        .clone()
                        .and_then(|s| kube::core::Selector::try_from(s).ok())
                        .is_some_and(|s| s.matches(labels))
            })
            .map(|e| e.view.key)
            .collect()
    }

    /// Wakes every provider but `except`.
    pub fn trigger_others(&self, except: &ProviderKey) {
        for view in self.views() {
            if &view.key != except {
                self.triggers.trigger(&view.key);
            }
        }
    }

    /// The provider's Deployments in the cache.
    pub fn live_deployments(&self, key: &ProviderKey) -> Vec<LiveDeployment> {
        let mut live: Vec<LiveDeployment> = self
            .deployments
            // In the provider's namespace only, where its Deployments go: anyone may label a
            // Deployment elsewhere as the provider's (one that never becomes available would
            // hold a pause).
            .in_namespace(&key.namespace)
            .iter()
            .filter(|d| ProviderKey::from_labels(d.labels()).as_ref() == Some(key))
            .map(|d| live_deployment(d))
            .collect();
        live.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        live
    }
}

/// `fetch`, or an error once `deadline` passes.
pub async fn within<T>(
    deadline: std::time::Duration,
    fetch: impl std::future::Future<Output = Result<T, String>>,
) -> Result<T, String> {
    tokio::time::timeout(deadline, fetch).await.unwrap_or_else(|_| {
        Err(format!(
            "the repositories did not answer within {} s (--fetch-deadline, every request together); they are slow or hold too many pages: it is tried again",
            deadline.as_secs()
        ))
    })
}

/// What the plan needs of a Deployment. Available means its rollout is complete, as kstatus
/// says Current: the controller has seen the latest generation, every replica runs the
/// current template and is ready and available, and no old replica is left. The `Available`
/// condition alone stays True while the old pods serve during a rollout that never completes.
pub fn live_deployment(d: &Deployment) -> LiveDeployment {
    let status = d.status.as_ref();
    let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    let count =
        |f: fn(&k8s_openapi::api::apps::v1::DeploymentStatus) -> Option<i32>| status.and_then(f).unwrap_or(0);
    let observed =
        status.and_then(|s| s.observed_generation).is_some_and(|o| o >= d.metadata.generation.unwrap_or(0));
    let condition_available = status
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Available" && c.status == "True"));
    let rolled_out = count(|s| s.replicas) == wanted
        && count(|s| s.updated_replicas) == wanted
        && count(|s| s.ready_replicas) == wanted
        && count(|s| s.available_replicas) == wanted;
    let available = observed && rolled_out && (wanted == 0 || condition_available);
    LiveDeployment {
        namespace: d.namespace().unwrap_or_default(),
        name: d.name_any(),
        replicas: d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1),
        available,
        paused_replicas: d.annotations().get(PAUSED_REPLICAS).and_then(|v| v.parse().ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_fetch_that_never_ends_is_given_up_at_the_deadline() {
        let endless = std::future::pending::<Result<(), String>>();
        let said = within(std::time::Duration::from_millis(20), endless).await.unwrap_err();
        assert!(said.starts_with("the repositories did not answer within 0 s (--fetch-deadline"), "{said}");
        let quick = within(std::time::Duration::from_secs(7), async { Ok::<_, String>(3) }).await;
        assert_eq!(quick, Ok(3));
    }

    fn deployment(generation: i64, replicas: i32, status: serde_json::Value) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "m", "namespace": "n", "generation": generation},
            "spec": {"replicas": replicas, "selector": {}, "template": {}},
            "status": status,
        }))
        .expect("a Deployment")
    }

    fn available() -> serde_json::Value {
        serde_json::json!([{"type": "Available", "status": "True"}])
    }

    #[test]
    fn a_deployment_is_available_once_its_rollout_is_complete() {
        let done = deployment(
            2,
            1,
            serde_json::json!({"observedGeneration": 2, "replicas": 1,
            "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "conditions": available()}),
        );
        assert!(live_deployment(&done).available);
        // Mid-rollout (transcript of kube-controller-manager): the old pod serves, the new one is
        // Pending, and Available stays True.
        let rolling = deployment(
            2,
            1,
            serde_json::json!({"observedGeneration": 2, "replicas": 2,
            "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "unavailableReplicas": 1,
            "conditions": available()}),
        );
        assert!(!live_deployment(&rolling).available);
        let unseen = deployment(
            3,
            1,
            serde_json::json!({"observedGeneration": 2, "replicas": 1,
            "updatedReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "conditions": available()}),
        );
        assert!(!live_deployment(&unseen).available, "the controller has not seen the new template");
        let never = deployment(1, 1, serde_json::json!({}));
        assert!(!live_deployment(&never).available);
        let scaled_down = deployment(4, 0, serde_json::json!({"observedGeneration": 4}));
        assert!(live_deployment(&scaled_down).available);
    }
}
