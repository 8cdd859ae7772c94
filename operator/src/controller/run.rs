//! Running the controllers: one per provider kind, a cache of the providers' Deployments, and
//! a watch of Secret metadata that wakes the providers whose config Secret changed.

use std::collections::HashMap;
use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_repository::RemoteOptions;
use futures::StreamExt;
use futures::future::{BoxFuture, FutureExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource};
use kube::core::PartialObjectMeta;
use kube::runtime::controller::Controller;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector;
use kube::runtime::{WatchStreamExt, watcher};

use butler_runtime::apply::Applier;
use butler_runtime::shutdown::Shutdown;
use butler_runtime::watches::{Handler, Seen, Watches};

use super::ProviderObject;
use crate::api::*;
use crate::controller::context::{Context, Stores};
use crate::controller::entry::{error_policy, reconcile};
use crate::controller::install::drift::{Drift, owner_of};
use crate::controller::install::inventory;
use crate::controller::triggers::{self, Receivers};
use crate::metrics::Metrics;

/// How the controllers run.
#[derive(Clone, Debug)]
pub struct Options {
    /// Repository access (HTTP cache, offline mode).
    pub remote: RemoteOptions,
    /// This replica's name, for events.
    pub instance: String,
    /// Reconciles of one kind that may run at once (0: no limit).
    pub concurrency: u16,
    /// A clusterctl config file: `providers` (where providers without a fetchConfig come
    /// from), `images` (overrides for every provider), `overridesFolder`, and variables (after
    /// each provider's config Secret).
    pub config: Option<std::path::PathBuf>,
    /// Only the providers of this namespace (and their Deployments and inventories), as a
    /// Cluster API manager's `--namespace` does; every namespace when none.
    pub namespace: Option<String>,
    /// What providers' components may grant beyond their own objects.
    pub policy: crate::controller::wanted::policy::Policy,
    /// How often every provider is reconciled when nothing wakes it (`--sync-period`).
    pub sync_period: std::time::Duration,
    /// The least time between two checks of a provider's upgrade policy
    /// (`--upgrade-check-interval`); a check happens on a resync.
    pub upgrade_check_interval: std::time::Duration,
    /// The longest a provider's whole fetch may take (`--fetch-deadline`).
    pub fetch_deadline: std::time::Duration,
}

/// The default of `--fetch-deadline`.
pub const FETCH_DEADLINE: std::time::Duration = std::time::Duration::from_secs(120);

impl Options {
    /// Options for the controllers running inside another process (a test, an example, a
    /// benchmark): no repository cache on disk, no limit on reconciles at once.
    pub fn in_process(instance: &str) -> Options {
        Options {
            remote: RemoteOptions {
                http: butler_repository::HttpOptions {
                    cache: None,
                    proxy: butler_repository::ProxySetting::Off,
                    ..Default::default()
                },
                ..Default::default()
            },
            instance: instance.into(),
            concurrency: 0,
            config: None,
            namespace: None,
            policy: Default::default(),
            sync_period: crate::controller::report::status::RESYNC,
            // Tests publish a release and expect the next reconcile to see it.
            upgrade_check_interval: std::time::Duration::ZERO,
            fetch_deadline: FETCH_DEADLINE,
        }
    }
}

fn controller<K>(
    client: &kube::Client,
    receivers: &mut Receivers,
    options: &Options,
    shutdown: &Shutdown,
) -> Controller<K>
where
    K: ProviderObject,
{
    Controller::new(scoped::<K>(client, options), watcher::Config::default().any_semantic())
        .with_config(kube::runtime::controller::Config::default().concurrency(options.concurrency))
        .reconcile_on(receivers.take::<K>(K::KIND))
        .graceful_shutdown_on(shutdown.clone())
}

/// How long reconciles under way may take to finish once the process is asked to stop.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Resolves [`SHUTDOWN_GRACE`] after `shutdown`: a controller whose graceful stop has not
/// ended by then (seen with an idle kube-runtime controller now and then) is stopped.
fn grace_over(shutdown: &Shutdown) -> impl std::future::Future<Output = ()> + Send + Sync + 'static {
    let shutdown = shutdown.clone();
    async move {
        shutdown.await;
        tokio::time::sleep(SHUTDOWN_GRACE).await;
    }
}

/// The objects of a kind in the operator's namespace, or in every namespace.
fn scoped<K>(client: &kube::Client, options: &Options) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match &options.namespace {
        Some(namespace) => Api::namespaced(client.clone(), namespace),
        None => Api::all(client.clone()),
    }
}

fn drive<K>(controller: Controller<K>, ctx: Arc<Context>, shutdown: &Shutdown) -> BoxFuture<'static, ()>
where
    K: ProviderObject,
{
    controller
        .run(reconcile::<K>, error_policy::<K>, ctx)
        .take_until(grace_over(shutdown))
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(error = %e, "controller");
            }
            futures::future::ready(())
        })
        .boxed()
}

/// The running operator: its shared context and the futures that drive it.
pub struct Operator {
    pub context: Arc<Context>,
    pub run: BoxFuture<'static, ()>,
}

/// Builds the controllers. Await `run` to drive them until `shutdown` resolves.
pub fn start(client: kube::Client, metrics: Arc<Metrics>, options: Options, shutdown: Shutdown) -> Operator {
    let (triggers, mut receivers) = triggers::channels();
    let core = controller::<CoreProvider>(&client, &mut receivers, &options, &shutdown);
    let infrastructure = controller::<InfrastructureProvider>(&client, &mut receivers, &options, &shutdown);
    let bootstrap = controller::<BootstrapProvider>(&client, &mut receivers, &options, &shutdown);
    let control_plane = controller::<ControlPlaneProvider>(&client, &mut receivers, &options, &shutdown);
    let addon = controller::<AddonProvider>(&client, &mut receivers, &options, &shutdown);
    let ipam = controller::<IPAMProvider>(&client, &mut receivers, &options, &shutdown);
    let runtime_extension =
        controller::<RuntimeExtensionProvider>(&client, &mut receivers, &options, &shutdown);
    let stores = Stores {
        core: core.store(),
        infrastructure: infrastructure.store(),
        bootstrap: bootstrap.store(),
        control_plane: control_plane.store(),
        addon: addon.store(),
        ipam: ipam.store(),
        runtime_extension: runtime_extension.store(),
    };
    let upgrades_api: Api<ProviderUpgrade> = scoped(&client, &options);
    // Deployments of the honoured namespaces only: one watch per namespace when the operator
    // honours some, not every one.
    let per_namespace = options.namespace.is_none() && options.policy.provider_namespaces.is_some();
    let deployments = crate::controller::deployments::Deployments::new(
        client.clone(),
        options.namespace.clone(),
        per_namespace,
    );
    let reporter = Reporter { controller: FIELD_MANAGER.into(), instance: Some(options.instance.clone()) };
    // The namespaces honoured by their label, when the policy names one.
    let (labelled, labelled_events) = match options.policy.labelled_selector() {
        Some(selector) => {
            let (store, writer) = reflector::store::<PartialObjectMeta<Namespace>>();
            let api: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
            let watch = watcher(api, watcher::Config::default().labels(&selector));
            (Some(store), Some(reflector::reflector(writer, watch).default_backoff()))
        }
        None => (None, None),
    };
    let ctx = Arc::new(Context {
        client: client.clone(),
        applier: Applier::new(client.clone(), FIELD_MANAGER),
        inventory_store: inventory::store(client.clone()),
        stores,
        deployments,
        triggers: triggers.clone(),
        drift: Arc::new(Drift::default()),
        watches: Watches::new(client.clone()),
        waiting: Arc::default(),
        recorder: Recorder::new(client.clone(), reporter),
        metrics,
        remote: options.remote,
        config_path: options.config,
        statuses: Mutex::new(HashMap::new()),
        status_versions: Mutex::new(HashMap::new()),
        inventories: Mutex::new(HashMap::new()),
        inventories_read: Default::default(),
        releases: Mutex::new(HashMap::new()),
        renders: Default::default(),
        secrets: Default::default(),
        failures: Mutex::new(HashMap::new()),
        gone: Mutex::default(),
        contract_gate: tokio::sync::Mutex::new(()),
        decided: tokio::sync::RwLock::new(()),
        namespace: options.namespace.clone(),
        policy: options.policy.clone(),
        labelled,
        sync_period: options.sync_period,
        upgrade_check_interval: options.upgrade_check_interval,
        fetch_deadline: options.fetch_deadline,
        upgrade_checks: Mutex::new(HashMap::new()),
        migrations: Mutex::new(HashMap::new()),
        started: std::time::Instant::now(),
    });

    {
        let weak = Arc::downgrade(&ctx);
        ctx.deployments.start(Arc::new(move |event| {
            if let Some(ctx) = weak.upgrade() {
                on_deployment(&ctx, event);
            }
        }));
        for namespace in options.policy.provider_namespaces.iter().flatten() {
            ctx.deployments.follow(namespace);
        }
    }
    // A config Secret that changes (or appears) wakes the providers that read it.
    let secrets = ApiResource::erase::<Secret>(&());
    let on_secret = weakly(&ctx, |ctx, seen| {
        // After an expired watch: Secrets that are not listed are gone.
        if let Seen::Relisted(present) = &seen {
            ctx.secrets.keep_only(present);
        }
        for meta in seen.objects() {
            let namespace = meta.namespace.clone().unwrap_or_default();
            let name = meta.name.clone().unwrap_or_default();
            let users = ctx.config_secret_users(&namespace, &name);
            // Only the Secrets that providers read are remembered, not every Secret.
            match (&seen, meta.resource_version.as_deref()) {
                (Seen::Deleted(_), _) => ctx.secrets.gone(&namespace, &name),
                (_, Some(rv)) if !users.is_empty() => ctx.secrets.saw(&namespace, &name, rv),
                _ => {}
            }
            for key in users {
                ctx.triggers.trigger(&key);
            }
        }
    });
    ctx.watches.ensure("config-secrets", &secrets, None, on_secret);
    // A ConfigMap that a provider reads (its releases through `fetchConfig.selector`, its
    // additional manifests) wakes it when it comes, changes or goes: a release published again
    // renders within seconds, not at the next resync.
    let configmaps = ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&());
    let on_configmap = weakly(&ctx, |ctx, seen| {
        for meta in seen.objects() {
            let namespace = meta.namespace.clone().unwrap_or_default();
            let name = meta.name.clone().unwrap_or_default();
            let labels = meta.labels.clone().unwrap_or_default();
            for key in ctx.configmap_users(&namespace, &name, &labels) {
                ctx.triggers.trigger(&key);
            }
        }
    });
    ctx.watches.ensure("repository-configmaps", &configmaps, None, on_configmap);
    let watches = ctx.clone();
    let upgrades = Controller::new(upgrades_api, watcher::Config::default().any_semantic());
    // A namespace labelled (or no longer) wakes its provider objects and upgrades, which are
    // honoured (or left alone) from then on.
    let (wake_upgrade, upgrade_wakes) = tokio::sync::mpsc::unbounded_channel();
    let watch_namespaces = match labelled_events {
        Some(events) => {
            let ctx = ctx.clone();
            let upgrade_store = upgrades.store();
            events
                .for_each(move |event| {
                    let namespace = match &event {
                        Ok(watcher::Event::Apply(n) | watcher::Event::InitApply(n)) => {
                            let namespace = n.metadata.name.clone().unwrap_or_default();
                            ctx.deployments.follow(&namespace);
                            namespace
                        }
                        Ok(watcher::Event::Delete(n)) => {
                            // No longer labelled: its Deployments are no longer followed, unless
                            // the operator names it.
                            let namespace = n.metadata.name.clone().unwrap_or_default();
                            let named = ctx.policy.provider_namespaces.clone().unwrap_or_default();
                            ctx.deployments.keep_only(&|ns| ns != namespace || named.iter().any(|n| n == ns));
                            namespace
                        }
                        _ => return futures::future::ready(()),
                    };
                    for key in ctx.providers_in(&namespace) {
                        ctx.triggers.trigger(&key);
                    }
                    for upgrade in upgrade_store.state() {
                        if upgrade.metadata.namespace.as_deref() == Some(namespace.as_str()) {
                            let _ = wake_upgrade.send(reflector::ObjectRef::from_obj(upgrade.as_ref()));
                        }
                    }
                    futures::future::ready(())
                })
                .boxed()
        }
        None => futures::future::pending().boxed(),
    };
    let upgrades = upgrades
        .reconcile_on(tokio_stream::wrappers::UnboundedReceiverStream::new(upgrade_wakes))
        .graceful_shutdown_on(shutdown.clone())
        .run(crate::controller::upgrades::reconcile, crate::controller::upgrades::error_policy, ctx.clone())
        .take_until(grace_over(&shutdown))
        .for_each(|result| {
            if let Err(e) = result {
                tracing::debug!(error = %e, "upgrade controller");
            }
            futures::future::ready(())
        })
        .boxed();
    let controllers = futures::future::join_all([
        upgrades,
        drive(core, ctx.clone(), &shutdown),
        drive(infrastructure, ctx.clone(), &shutdown),
        drive(bootstrap, ctx.clone(), &shutdown),
        drive(control_plane, ctx.clone(), &shutdown),
        drive(addon, ctx.clone(), &shutdown),
        drive(ipam, ctx.clone(), &shutdown),
        drive(runtime_extension, ctx.clone(), &shutdown),
    ]);
    let run = async move {
        // The watches run until the controllers have stopped.
        tokio::select! {
            _ = controllers => {}
            _ = watch_namespaces => {}
        }
        watches.watches.stop();
        watches.deployments.stop();
    }
    .boxed();
    Operator { context: ctx, run }
}

/// A watch handler that holds the context weakly: the watches must not keep it alive.
fn weakly(ctx: &Arc<Context>, on: impl Fn(&Context, Seen<'_>) + Send + Sync + 'static) -> Handler {
    let ctx = Arc::downgrade(ctx);
    Arc::new(move |seen| {
        if let Some(ctx) = ctx.upgrade() {
            on(&ctx, seen);
        }
    })
}

/// A Deployment of a provider changed: check it for drift and wake its provider, whose Ready
/// condition follows the Deployment.
fn on_deployment(ctx: &Context, event: &Result<watcher::Event<Deployment>, watcher::Error>) {
    let kind = ("apps/v1".to_string(), "Deployment".to_string());
    let (deployment, seen_deleted) = match event {
        Ok(watcher::Event::Apply(d) | watcher::Event::InitApply(d)) => (d, false),
        Ok(watcher::Event::Delete(d)) => (d, true),
        // A (re)list is complete: a Deployment the operator wrote that is not in the cache was
        // deleted while the watch was down.
        Ok(watcher::Event::InitDone) => {
            let present: Vec<ObjectMeta> =
                ctx.deployments.state().iter().map(|d| d.metadata.clone()).collect();
            ctx.drift.relisted(&kind, &present, &ctx.triggers);
            return;
        }
        _ => return,
    };
    let seen =
        if seen_deleted { Seen::Deleted(&deployment.metadata) } else { Seen::Present(&deployment.metadata) };
    ctx.drift.on_event(&kind, seen, &ctx.triggers);
    if let Some(owner) = owner_of(&deployment.metadata) {
        ctx.triggers.trigger(&owner);
    }
}

/// Waits until the cache of the providers' Deployments has its first listing. The provider
/// caches belong to their controllers, which wait on them themselves: a second waiter on a
/// kube `Store` can take the wake-up from the first (its readiness signal keeps one waker),
/// and the controller would then never start.
pub async fn caches_ready(ctx: &Context) {
    // The labelled namespaces first: their Deployments are watched as they are listed.
    if let Some(labelled) = &ctx.labelled {
        let _ = labelled.wait_until_ready().await;
    }
    ctx.deployments.wait_until_ready().await;
}
