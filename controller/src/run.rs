//! Running the controllers: the caches they read, the watches that wake them, and the Team
//! controller itself.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_core::api::labels::FIELD_MANAGER;
use butler_core::api::{IPAllocation, NetworkPool, ProviderConfig, Team, TenantCluster};
use butler_runtime::apply::Applier;
use butler_runtime::metrics::Metrics;
use butler_runtime::shutdown::Shutdown;
use futures::future::BoxFuture;
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::Api;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, ReflectHandle, Store, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use crate::clock::Clock;
use crate::clusters::ClusterIndex;
use crate::context::{Context, TeamCaches};
use crate::error::Error;
use crate::filed::Listed;
use crate::ipam::{self, Ipam, index::AllocationIndex};
use crate::keys::{Gone, failure_key, key_of};
use crate::providerconfig;
use crate::team::{self, plan::LABEL_TEAM, plan::team_of_namespace};
use crate::tenantcluster;

/// How the controllers run.
#[derive(Clone, Debug)]
pub struct Options {
    /// This replica's name, for events.
    pub instance: String,
    /// Reconciles of one kind that may run at once (0: no limit).
    pub concurrency: u16,
    /// The time the controllers read (moved by tests).
    pub clock: Arc<Clock>,
    /// The namespaces they act in (all unless narrowed).
    pub scope: crate::context::Scope,
    /// The ClusterRoles the team roles bind (the components' `butler-team-{role}`).
    pub team_roles: crate::team::rbac::TeamClusterRoles,
    /// The TenantClusters and ProviderConfigs a team namespace may hold (its ResourceQuota).
    pub team_quota: crate::team::quota::TeamQuota,
    /// The controller's ServiceAccount and the ClusterRole that lets it read Secrets, bound in
    /// each team namespace.
    pub secret_reader: crate::secrets::SecretReader,
    /// Local networks the probe of a team's ProviderConfig may reach (`--allow-probe-network`).
    pub probe_networks: Vec<ipnet::IpNet>,
    /// The longest one call to a tenant may take as a whole.
    pub tenant_deadline: std::time::Duration,
}

impl Options {
    /// Options for the controllers running inside another process (a test, the sandbox).
    pub fn in_process(instance: &str) -> Options {
        Options {
            instance: instance.into(),
            concurrency: 0,
            clock: Arc::default(),
            scope: Default::default(),
            team_roles: Default::default(),
            team_quota: Default::default(),
            secret_reader: Default::default(),
            probe_networks: Vec::new(),
            tenant_deadline: crate::tenantcluster::tenant::CALL_DEADLINE,
        }
    }
}

/// The running controllers: their shared context, the future that drives them, and one that
/// resolves once their caches are filled.
pub struct Controllers {
    pub context: Arc<Context>,
    pub run: BoxFuture<'static, ()>,
    pub ready: BoxFuture<'static, ()>,
}

/// A cache of a kind (with a label selector, or all) and the stream of its changes, which
/// must be polled for the cache to fill.
pub(crate) fn reflect<K>(
    client: &kube::Client,
    config: watcher::Config,
) -> (Store<K>, impl Stream<Item = Result<K, watcher::Error>> + Send + 'static)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store::<K>();
    let events = watcher(Api::<K>::all(client.clone()), config).default_backoff().modify(crate::caches::trim);
    let stream = reflector(writer, events).touched_objects();
    (store, stream)
}

/// The ProviderConfigs of the cache that `matches` picks.
fn configs_where(
    store: &Store<ProviderConfig>,
    matches: impl Fn(&ProviderConfig) -> bool,
) -> Vec<ObjectRef<ProviderConfig>> {
    store.state().iter().filter(|c| matches(c)).map(|c| ObjectRef::from_obj(c.as_ref())).collect()
}

/// A controller of `K` over a watch of its own, whose deletions are told to `gone`, so that
/// what the reconciles keep of an object goes with it whoever removed it; and `subscribers`
/// streams of its changes for other controllers (each must be polled: the watch waits for
/// them).
fn forgetting<K>(
    client: &kube::Client,
    gone: Forget,
    concurrency: u16,
    subscribers: usize,
) -> (Controller<K>, Vec<ReflectHandle<K>>, Listed)
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (store, writer) = reflector::store_shared::<K>(1024);
    let handles =
        (0..subscribers).map(|_| writer.subscribe().expect("a shared store has subscribers")).collect();
    let listed = Listed::default();
    let seen = listed.clone();
    let events = watcher(Api::<K>::all(client.clone()), watcher::Config::default().any_semantic())
        .default_backoff()
        .modify(crate::caches::trim);
    let objects = reflector(writer, events)
        .inspect(move |event| match event {
            Ok(watcher::Event::Delete(object)) => {
                let _ = gone.send(Gone::of(object));
            }
            Ok(event) => seen.see(event),
            Err(_) => {}
        })
        .applied_objects();
    let controller = Controller::for_stream(objects, store)
        .with_config(kube::runtime::controller::Config::default().concurrency(concurrency));
    (controller, handles, listed)
}

/// A scope by label selector, resolved: the Namespaces and Teams the API server selects, the
/// test that reads them, and a count that moves when either set changes.
struct Selected {
    scope: crate::context::Scope,
    namespaces: Store<Namespace>,
    teams: Store<Team>,
    changes: tokio::sync::watch::Receiver<u64>,
    driver: BoxFuture<'static, ()>,
}

/// The watches of a [`crate::context::Scope::selected`]; `None` for another scope.
fn select_scope(client: &kube::Client, scope: &crate::context::Scope) -> Option<Selected> {
    let selector = scope.selector()?.to_string();
    let config = || watcher::Config::default().labels(&selector).any_semantic();
    let (namespaces, namespace_events) = reflect::<Namespace>(client, config());
    let (teams, team_events) = reflect::<Team>(client, config());
    let (by_namespace, by_team) = (namespaces.clone(), teams.clone());
    let keep = move |ns: &str| {
        by_namespace.get(&ObjectRef::new(ns)).is_some()
            || team_of_namespace(ns).is_some_and(|team| by_team.get(&ObjectRef::new(team)).is_some())
    };
    let (tx, changes) = tokio::sync::watch::channel(0u64);
    let driver = futures::stream::select(namespace_events.map(|_| ()), team_events.map(|_| ()))
        .for_each(move |_| {
            tx.send_modify(|n| *n += 1);
            futures::future::ready(())
        })
        .boxed();
    Some(Selected {
        scope: crate::context::Scope::only_selected(keep, &selector),
        namespaces,
        teams,
        changes,
        driver,
    })
}

/// Where the watches tell of deleted objects.
type Forget = tokio::sync::mpsc::UnboundedSender<Gone>;

/// The Team named by an object's team label.
fn team_by_label<K: Resource>(object: K) -> Option<ObjectRef<Team>> {
    object.labels().get(LABEL_TEAM).map(|name| ObjectRef::new(name))
}

/// Retries a failed reconcile with a backoff that doubles from 2 seconds to 5 minutes.
fn error_policy<K: Resource<DynamicType = ()>>(object: Arc<K>, error: &Error, ctx: Arc<Context>) -> Action {
    let key = failure_key(object.as_ref());
    let failures = {
        let mut failures = ctx.failures.lock().expect("not poisoned");
        let count = failures.entry(object.meta().uid.clone().unwrap_or_default()).or_default();
        *count = count.saturating_add(1);
        *count
    };
    let delay = Duration::from_secs(2u64.saturating_pow(failures.min(9)).min(300));
    tracing::warn!(object = %key, retry_in = ?delay, "{error}");
    Action::requeue(delay)
}

/// Drives a controller's reconciles until it stops.
fn drive<K>(
    controller: Controller<K>,
    reconcile: impl FnMut(Arc<K>, Arc<Context>) -> BoxFuture<'static, Result<Action, Error>> + Send + 'static,
    ctx: Arc<Context>,
) -> BoxFuture<'static, ()>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let kind = K::kind(&()).to_string();
    controller
        .run(reconcile, error_policy::<K>, ctx.clone())
        .for_each(move |result| {
            match result {
                Ok((object, _)) => ctx.reconciled(&key_of(&kind, object.namespace.as_deref(), &object.name)),
                Err(kube::runtime::controller::Error::ReconcilerFailed(_, object)) => {
                    ctx.reconciled(&key_of(&kind, object.namespace.as_deref(), &object.name));
                }
                Err(e) => tracing::debug!(error = %e, "controller"),
            }
            futures::future::ready(())
        })
        .boxed()
}

/// How many reconciles may call tenants at once: half the workers, at least one (with no limit
/// on workers, no limit).
pub fn tenant_turns(concurrency: u16) -> usize {
    match concurrency {
        0 => tokio::sync::Semaphore::MAX_PERMITS,
        n => usize::from(n / 2).max(1),
    }
}

/// Builds the controllers. Await `run` to drive them until `shutdown` resolves.
pub fn start(
    client: kube::Client,
    metrics: Arc<Metrics>,
    options: Options,
    shutdown: Shutdown,
) -> Controllers {
    let labelled = || watcher::Config::default().labels(LABEL_TEAM).any_semantic();
    let (synced_tx, synced_rx) = tokio::sync::watch::channel(false);
    let selected = select_scope(&client, &options.scope);
    let scope = selected.as_ref().map_or_else(|| options.scope.clone(), |s| s.scope.clone());
    // A namespace (or Team) that joins or leaves a selected scope: every controller looks again.
    let scope_changes = || -> futures::stream::BoxStream<'static, ()> {
        match &selected {
            Some(s) => {
                tokio_stream::wrappers::WatchStream::from_changes(s.changes.clone()).map(|_| ()).boxed()
            }
            None => futures::stream::pending().boxed(),
        }
    };
    let (namespaces, namespace_events) =
        reflect::<Namespace>(&client, watcher::Config::default().any_semantic());
    let (gone, forgotten) = tokio::sync::mpsc::unbounded_channel::<Gone>();
    // One watch of TenantClusters: its store and index serve every controller; the Team
    // controller follows it, the ProviderConfig and TenantCluster controllers subscribe, and a
    // deleted cluster wakes the ProviderConfig it used (whose deletion may wait on it).
    let (cluster_store, cluster_writer) = reflector::store_shared::<TenantCluster>(1024);
    let clusters_for_configs = cluster_writer.subscribe().expect("a shared store has subscribers");
    let clusters_for_ipam = cluster_writer.subscribe().expect("a shared store has subscribers");
    let clusters = Arc::new(ClusterIndex::new(cluster_store.clone()));
    let (config_wake, config_woken) = tokio::sync::mpsc::unbounded_channel::<ObjectRef<ProviderConfig>>();
    let cluster_gone = gone.clone();
    let cluster_events = crate::clusters::follow(&client, cluster_writer, clusters.clone(), move |c| {
        let _ = cluster_gone.send(Gone::of(c));
        if let Some((ns, name)) = tenantcluster::plan::config_ref(c) {
            let _ = config_wake.send(ObjectRef::new(&name).within(&ns));
        }
    });
    let (roles, role_events) = reflect::<Role>(&client, labelled());
    let (role_bindings, role_binding_events) = reflect::<RoleBinding>(&client, labelled());
    let (cluster_roles, cluster_role_events) = reflect::<ClusterRole>(&client, labelled());
    let (cluster_role_bindings, cluster_role_binding_events) =
        reflect::<ClusterRoleBinding>(&client, labelled());
    let (quotas, quota_events) = reflect::<ResourceQuota>(&client, labelled());
    // One watch of NetworkPools: the ProviderConfig controller follows it, the NetworkPool
    // controller subscribes.
    let (pools, pool_writer) = reflector::store_shared::<NetworkPool>(1024);
    let pools_for_ipam = pool_writer.subscribe().expect("a shared store has subscribers");
    let pool_watch =
        watcher(Api::<NetworkPool>::all(client.clone()), watcher::Config::default().any_semantic())
            .default_backoff()
            .modify(crate::caches::trim);
    let pools_listed = Listed::default();
    let seen = pools_listed.clone();
    let pool_events = reflector(pool_writer, pool_watch)
        .inspect(move |event| {
            if let Ok(event) = event {
                seen.see(event);
            }
        })
        .touched_objects();
    let by_namespace =
        |ns: &Option<String>| team_of_namespace(ns.as_deref().unwrap_or_default()).map(ObjectRef::new);
    let (teams, _, _) = forgetting::<Team>(&client, gone.clone(), options.concurrency, 0);
    let caches = TeamCaches {
        namespaces: namespaces.clone(),
        clusters: clusters.clone(),
        roles: roles.clone(),
        role_bindings: role_bindings.clone(),
        cluster_roles: cluster_roles.clone(),
        cluster_role_bindings: cluster_role_bindings.clone(),
        quotas: quotas.clone(),
        teams: teams.store(),
    };
    let teams = teams
        .watches_stream(namespace_events, |ns: Namespace| {
            team_of_namespace(&ns.name_any()).map(ObjectRef::new)
        })
        .watches_stream(cluster_events, move |c: TenantCluster| by_namespace(&c.metadata.namespace))
        .watches_stream(role_events, team_by_label)
        .watches_stream(role_binding_events, team_by_label)
        .watches_stream(cluster_role_events, team_by_label)
        .watches_stream(cluster_role_binding_events, team_by_label)
        .watches_stream(quota_events, team_by_label)
        .reconcile_all_on(scope_changes())
        .graceful_shutdown_on(shutdown.clone());
    // The ProviderConfigs wake the TenantClusters that use them (a config made after its
    // clusters, or changed), so a cluster never reads one the cache does not hold.
    let (configs, mut config_subscribers, configs_listed) =
        forgetting::<ProviderConfig>(&client, gone.clone(), options.concurrency, 1);
    let configs_for_clusters = config_subscribers.pop().expect("one subscriber");
    let config_cache = configs.store();
    // No watch of Secrets: the controller reads them by name only (see `secrets`), and each
    // ProviderConfig re-reads its own on a requeue.
    let by_pool = config_cache.clone();
    let configs = configs
        .watches_stream(pool_events, move |pool: NetworkPool| {
            let (ns, name) = (pool.namespace(), pool.name_any());
            configs_where(&by_pool, |c| {
                c.namespace() == ns
                    && c.spec
                        .network
                        .iter()
                        .flat_map(|n| n.pool_refs.iter().flatten())
                        .any(|r| r.name == name)
            })
        })
        // The ProviderConfig a cluster names, by its key (one the cache does not hold is not
        // reconciled): no scan of the ProviderConfigs at each cluster event.
        .watches_shared_stream(clusters_for_configs, |cluster: Arc<TenantCluster>| {
            tenantcluster::plan::config_ref(&cluster).map(|(ns, name)| ObjectRef::new(&name).within(&ns))
        })
        .reconcile_on(tokio_stream::wrappers::UnboundedReceiverStream::new(config_woken))
        .reconcile_all_on(scope_changes())
        .graceful_shutdown_on(shutdown.clone());
    // One watch of IPAllocations: its store serves the IPAllocation controller and the index the
    // NetworkPool controller; a change of a settled allocation wakes neither (`ipam::settled`).
    let (allocation_store, allocation_writer) = reflector::store_shared::<IPAllocation>(1024);
    let allocation_subscriber = allocation_writer.subscribe().expect("a shared store has subscribers");
    let allocations_for_clusters = allocation_writer.subscribe().expect("a shared store has subscribers");
    let allocations = Arc::new(AllocationIndex::new(allocation_store.clone()));
    let allocation_gone = gone.clone();
    let allocation_events = ipam::index::follow(&client, allocation_writer, allocations.clone(), move |a| {
        let _ = allocation_gone.send(Gone::of(a));
    });
    let by_pool = |a: IPAllocation| {
        // New, waiting and deleted allocations wake their pool; settled ones do not.
        if ipam::settled(&a) {
            return None;
        }
        let ns = a.namespace().unwrap_or_default();
        Some(ObjectRef::<NetworkPool>::new(&a.spec.pool_ref.name).within(&ns))
    };
    let network_pools = Controller::for_shared_stream(pools_for_ipam, pools.clone())
        .with_config(kube::runtime::controller::Config::default().concurrency(options.concurrency))
        .watches_stream(allocation_events, by_pool)
        .reconcile_all_on(options.clock.moved())
        .reconcile_all_on(scope_changes())
        .graceful_shutdown_on(shutdown.clone());
    // A settled allocation gives this controller nothing to do: no reconcile at each of its
    // writes, none queued for each at a start.
    let allocation_subscriber = allocation_subscriber.filter(|a| futures::future::ready(!ipam::settled(a)));
    let ip_allocations = Controller::for_shared_stream(allocation_subscriber, allocation_store)
        .with_config(kube::runtime::controller::Config::default().concurrency(options.concurrency))
        .reconcile_all_on(scope_changes())
        .graceful_shutdown_on(shutdown.clone());
    // The IPAM part of TenantClusters, woken by their allocations within a moment of a change,
    // and by their tenant's Services and MetalLB pools in elastic mode.
    let (tenant_watches, tenants_woken) = tenantcluster::watch::TenantWatches::new();
    let users = clusters.clone();
    let tenant_clusters = Controller::for_shared_stream(clusters_for_ipam, cluster_store)
        .with_config(kube::runtime::controller::Config::default().concurrency(options.concurrency))
        .watches_shared_stream(configs_for_clusters, move |config: Arc<ProviderConfig>| {
            // Only a spec its controller has not seen yet (a new ProviderConfig, or a change):
            // its status, rewritten as pools fill, would wake every cluster each time.
            let observed = config.status.as_ref().and_then(|s| s.observed_generation);
            if observed.is_some() && observed == config.metadata.generation {
                return Vec::new();
            }
            let (ns, name) = (config.namespace().unwrap_or_default(), config.name_any());
            users.using(&ns, &name).into_iter().map(|c| ObjectRef::from_obj(c.as_ref())).collect::<Vec<_>>()
        })
        .watches_shared_stream(allocations_for_clusters, |a: Arc<IPAllocation>| {
            let r = &a.spec.tenant_cluster_ref;
            Some(ObjectRef::<TenantCluster>::new(&r.name).within(&r.namespace))
        })
        .reconcile_all_on(options.clock.moved())
        .reconcile_on(tokio_stream::wrappers::UnboundedReceiverStream::new(tenants_woken))
        .reconcile_all_on(scope_changes())
        .graceful_shutdown_on(shutdown.clone());
    let reporter = Reporter { controller: FIELD_MANAGER.into(), instance: Some(options.instance.clone()) };
    let ctx = Arc::new(Context {
        client: client.clone(),
        applier: Applier::new(client.clone(), FIELD_MANAGER),
        teams: caches,
        team_roles: options.team_roles.clone(),
        team_quota: options.team_quota,
        secret_reader: options.secret_reader.clone(),
        recorder: Recorder::new(client.clone(), reporter),
        metrics,
        team_statuses: Mutex::new(HashMap::new()),
        pools: pools.clone(),
        configs: config_cache.clone(),
        probes: Mutex::new(HashMap::new()),
        probe_network: Arc::new(butler_runtime::network::NetworkPolicy::refusing_local_as(
            "butler-controller",
            "--allow-probe-network",
            options.probe_networks.clone(),
        )),
        config_statuses: Mutex::new(HashMap::new()),
        validated_secrets: Mutex::new(HashMap::new()),
        failures: Mutex::new(HashMap::new()),
        tombstones: Default::default(),
        ipam: Ipam::new(
            allocations.clone(),
            options.clock.clone(),
            format!("{FIELD_MANAGER} ({})", options.instance),
        ),
        tenants: Default::default(),
        tenant_turns: tenantcluster::turns::Turns::new(
            tenant_turns(options.concurrency),
            tenant_watches.waker(),
        ),
        tenant_deadline: options.tenant_deadline,
        tenant_watches,
        scope,
        synced: synced_rx.clone(),
    });
    // Deleted objects leave nothing behind in what the reconciles keep.
    let forgetting_ctx = ctx.clone();
    let forget = tokio_stream::wrappers::UnboundedReceiverStream::new(forgotten).for_each(move |gone| {
        forgetting_ctx.forget(&gone);
        futures::future::ready(())
    });
    let (selection, selected_stores) = match selected {
        Some(s) => (s.driver, Some((s.namespaces, s.teams))),
        None => (futures::future::pending().boxed(), None),
    };
    let controller = futures::future::join(
        forget,
        futures::future::join5(
            drive(teams, |t, c| team::reconcile(t, c).boxed(), ctx.clone()),
            drive(configs, |p, c| providerconfig::reconcile(p, c).boxed(), ctx.clone()),
            drive(network_pools, |p, c| ipam::networkpool::reconcile(p, c).boxed(), ctx.clone()),
            drive(ip_allocations, |a, c| ipam::ipallocation::reconcile(a, c).boxed(), ctx.clone()),
            drive(tenant_clusters, |t, c| tenantcluster::reconcile(t, c).boxed(), ctx.clone()),
        ),
    );
    // The Team cache belongs to its controller, which waits on it itself (a second waiter could
    // take its wake-up); the caches the reconciles compare with are waited on here, and the
    // reconciles wait for them (a reconcile on an empty cache would write what exists).
    let syncing = async move {
        if let Some((namespaces, teams)) = &selected_stores {
            let _ = namespaces.wait_until_ready().await;
            let _ = teams.wait_until_ready().await;
        }
        let _ = namespaces.wait_until_ready().await;
        configs_listed.wait().await;
        clusters.wait_until_ready().await;
        let _ = roles.wait_until_ready().await;
        let _ = role_bindings.wait_until_ready().await;
        let _ = cluster_roles.wait_until_ready().await;
        let _ = cluster_role_bindings.wait_until_ready().await;
        let _ = quotas.wait_until_ready().await;
        pools_listed.wait().await;
        allocations.wait_until_ready().await;
        let _ = synced_tx.send(true);
        // Kept open, so that waiters never see the channel close.
        std::future::pending::<()>().await;
    };
    let run = async move {
        tokio::select! {
            _ = controller => {}
            _ = syncing => {}
            _ = selection => {}
        }
    }
    .boxed();
    let mut synced = synced_rx;
    let ready = async move {
        let _ = synced.wait_for(|s| *s).await;
    }
    .boxed();
    Controllers { context: ctx, run, ready }
}
