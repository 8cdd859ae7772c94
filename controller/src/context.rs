//! What the reconciles share: the client, the applier, the caches of the objects they read
//! and compare with, the event recorder, the metrics, and the statuses this process wrote last
//! (newer than a cache that has not seen them yet).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use butler_core::api::{NetworkPool, ProviderConfig, ProviderConfigStatus, Team, TeamStatus, TenantCluster};
use butler_runtime::apply::Applier;
use butler_runtime::metrics::Metrics;
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::runtime::events::Recorder;
use kube::runtime::reflector::{ObjectRef, Store};
use serde_json::Value;

use crate::keys::Gone;

/// The caches the Team controller reads.
#[derive(Clone)]
pub struct TeamCaches {
    pub namespaces: Store<Namespace>,
    pub clusters: Arc<crate::clusters::ClusterIndex>,
    pub roles: Store<Role>,
    pub role_bindings: Store<RoleBinding>,
    pub cluster_roles: Store<ClusterRole>,
    pub cluster_role_bindings: Store<ClusterRoleBinding>,
    pub quotas: Store<ResourceQuota>,
    /// The Teams (the Team controller's own store).
    pub teams: Store<Team>,
}

impl TeamCaches {
    /// The cached copy of an object the Team controller makes, as JSON: cluster-scoped by
    /// name, namespaced in `namespace`.
    pub fn existing(&self, namespace: &str, kind: &str, name: &str) -> Option<Value> {
        fn json<K: serde::Serialize>(o: Option<Arc<K>>) -> Option<Value> {
            o.and_then(|o| serde_json::to_value(o.as_ref()).ok())
        }
        match kind {
            "Namespace" => json(self.namespaces.get(&ObjectRef::new(name))),
            "Role" => json(self.roles.get(&ObjectRef::new(name).within(namespace))),
            "RoleBinding" => json(self.role_bindings.get(&ObjectRef::new(name).within(namespace))),
            "ClusterRole" => json(self.cluster_roles.get(&ObjectRef::new(name))),
            "ClusterRoleBinding" => json(self.cluster_role_bindings.get(&ObjectRef::new(name))),
            "ResourceQuota" => json(self.quotas.get(&ObjectRef::new(name).within(namespace))),
            _ => None,
        }
    }

    /// The TenantClusters of a namespace.
    pub fn clusters_in(&self, namespace: &str) -> Vec<Arc<TenantCluster>> {
        self.clusters.in_namespace(namespace)
    }
}

/// The last probe of a ProviderConfig's platform.
#[derive(Debug, Clone)]
pub struct ProbeRecord {
    pub at: jiff::Timestamp,
    /// Probes that failed in a row.
    pub failures: u32,
    pub result: crate::providerconfig::probe::Probed,
}

impl ProbeRecord {
    /// How long until the next probe is due.
    pub fn next_in(&self, now: jiff::Timestamp) -> std::time::Duration {
        let after = crate::providerconfig::probe::next_probe_after(self.failures);
        let elapsed = now.duration_since(self.at).unsigned_abs();
        after.saturating_sub(elapsed)
    }

    /// Whether the next probe is due.
    pub fn due(&self, now: jiff::Timestamp) -> bool {
        self.next_in(now).is_zero()
    }
}

/// Everything a reconcile shares with the others.
pub struct Context {
    pub client: kube::Client,
    pub applier: Applier,
    pub teams: TeamCaches,
    /// The ClusterRoles the team roles bind.
    pub team_roles: crate::team::rbac::TeamClusterRoles,
    /// Where the controller reads Secrets, and the binding that lets it in team namespaces.
    pub secret_reader: crate::secrets::SecretReader,
    /// The objects of Butler's kinds a team namespace may hold.
    pub team_quota: crate::team::quota::TeamQuota,
    pub recorder: Recorder,
    pub metrics: Arc<Metrics>,
    /// The Team statuses this process wrote last, by UID.
    pub team_statuses: Mutex<HashMap<String, TeamStatus>>,
    /// The NetworkPools, for the ProviderConfigs' capacity.
    pub pools: Store<NetworkPool>,
    /// The ProviderConfigs, for the TenantClusters' IPAM.
    pub configs: Store<ProviderConfig>,
    /// The last probe of each ProviderConfig's platform, by UID.
    pub probes: Mutex<HashMap<String, ProbeRecord>>,
    /// What the probe of an endpoint a team chose may reach.
    pub probe_network: Arc<butler_runtime::network::NetworkPolicy>,
    /// The ProviderConfig statuses this process wrote last, by UID.
    pub config_statuses: Mutex<HashMap<String, ProviderConfigStatus>>,
    /// The resourceVersion of the credentials Secret each ProviderConfig was validated with.
    pub validated_secrets: Mutex<HashMap<String, String>>,
    /// Consecutive failures, by UID, for the backoff.
    pub failures: Mutex<HashMap<String, u32>>,
    /// Objects deleted in the last minutes, by [`crate::keys::failure_key`], and when.
    pub tombstones: crate::tombstones::Tombstones,
    /// The IPAM controllers' index, clock and own writes.
    pub ipam: crate::ipam::Ipam,
    /// Turns at calling tenants: half the reconcile workers (all when they are unlimited), one
    /// per namespace, in the order asked.
    pub tenant_turns: crate::tenantcluster::turns::Turns,
    /// The longest one call to a tenant may take as a whole.
    pub tenant_deadline: std::time::Duration,
    /// Clients of the tenant clusters, for elastic IPAM and MetalLB.
    pub tenants: crate::tenantcluster::tenant::TenantClients,
    /// Watches of tenants in elastic mode, which wake their TenantClusters.
    pub tenant_watches: crate::tenantcluster::watch::TenantWatches,
    /// The namespaces this instance acts in.
    pub scope: Scope,
    /// True once the caches above have their first listing.
    pub synced: tokio::sync::watch::Receiver<bool>,
}

/// The namespaces an instance of the controllers acts in: all by default; an embedding (a
/// test sharing a cluster with others) may narrow it, and objects outside are left to others.
#[derive(Clone, Default)]
pub struct Scope(Option<Arc<NamespaceTest>>, Option<String>);

/// Whether a namespace is in a [`Scope`].
type NamespaceTest = dyn Fn(&str) -> bool + Send + Sync;

impl Scope {
    /// Only the namespaces `keep` picks.
    pub fn only(keep: impl Fn(&str) -> bool + Send + Sync + 'static) -> Scope {
        Scope(Some(Arc::new(keep)), None)
    }

    /// The namespaces whose labels `selector` (as kubectl writes one) picks, and the namespace
    /// of each Team it picks (a Team's namespace is made by its controller, so the Team's own
    /// labels count for it). The API server evaluates the selector: the controllers watch the
    /// Namespaces and Teams it picks (see `run::start`).
    pub fn selected(selector: &str) -> Scope {
        Scope(None, Some(selector.to_string()))
    }

    /// A selected scope, resolved: `keep` reads what the API server selected.
    pub(crate) fn only_selected(
        keep: impl Fn(&str) -> bool + Send + Sync + 'static,
        selector: &str,
    ) -> Scope {
        Scope(Some(Arc::new(keep)), Some(selector.to_string()))
    }

    /// The label selector of a [`Scope::selected`].
    pub fn selector(&self) -> Option<&str> {
        self.1.as_deref()
    }

    /// Whether objects of `namespace` are this instance's to reconcile.
    pub fn holds(&self, namespace: &str) -> bool {
        self.0.as_ref().is_none_or(|keep| keep(namespace))
    }
}

impl std::fmt::Debug for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Scope(some namespaces)" } else { "Scope(all)" })
    }
}

impl Context {
    /// Ends a reconcile: its metrics, and a success clears the object's failures.
    pub fn finished<K: kube::Resource<DynamicType = ()>, T>(
        &self,
        object: &K,
        started: std::time::Instant,
        result: &Result<T, crate::error::Error>,
    ) {
        let kind = K::kind(&());
        self.metrics.reconcile_finished(
            &kind,
            started,
            result.as_ref().err().map(crate::error::Error::reason),
        );
        if result.is_ok() {
            self.failures
                .lock()
                .expect("not poisoned")
                .remove(object.meta().uid.as_deref().unwrap_or_default());
        }
    }

    /// Forgets what this process keeps of a deleted object (UIDs are unique across kinds):
    /// the statuses it wrote, its probes, its failures, its tenant's client, silence and
    /// watch. Whatever deleted it (a finalizer of ours or not), nothing of it stays behind.
    pub fn forget(&self, gone: &Gone) {
        self.tombstones.bury(gone, std::time::Instant::now());
        self.drop_kept(gone);
    }

    /// After a reconcile of `key` ends: a reconcile that was running when its object was
    /// deleted may have recorded a failure or a status after [`Context::forget`]; that goes too.
    pub fn reconciled(&self, key: &str) {
        if let Some(gone) = self.tombstones.find(key) {
            self.drop_kept(&gone);
        }
    }

    fn drop_kept(&self, gone: &Gone) {
        self.failures.lock().expect("not poisoned").remove(&gone.uid);
        self.team_statuses.lock().expect("not poisoned").remove(&gone.uid);
        self.probes.lock().expect("not poisoned").remove(&gone.uid);
        self.config_statuses.lock().expect("not poisoned").remove(&gone.uid);
        self.validated_secrets.lock().expect("not poisoned").remove(&gone.uid);
        self.tenants.forget(&gone.uid);
        self.tenant_watches.stop(&gone.uid);
        if let Some((namespace, name)) =
            gone.key.strip_prefix("TenantCluster ").and_then(|k| k.split_once('/'))
        {
            self.tenant_turns.forget(namespace, name);
        }
    }

    /// Where this process still keeps something of an object: the names of those maps (none
    /// once it is deleted and forgotten).
    pub fn keeps(&self, object: &Gone) -> Vec<&'static str> {
        let held = [
            ("failures", self.failures.lock().expect("not poisoned").contains_key(&object.uid)),
            ("team statuses", self.team_statuses.lock().expect("not poisoned").contains_key(&object.uid)),
            ("probes", self.probes.lock().expect("not poisoned").contains_key(&object.uid)),
            ("config statuses", self.config_statuses.lock().expect("not poisoned").contains_key(&object.uid)),
            (
                "validated secrets",
                self.validated_secrets.lock().expect("not poisoned").contains_key(&object.uid),
            ),
            ("tenant clients", self.tenants.keeps(&object.uid)),
            ("tenant watches", self.tenant_watches.keeps(&object.uid)),
        ];
        held.into_iter().filter(|(_, kept)| *kept).map(|(name, _)| name).collect()
    }

    /// Waits until the caches have their first listing.
    pub async fn synced(&self) {
        let mut synced = self.synced.clone();
        let _ = synced.wait_for(|s| *s).await;
    }
}
