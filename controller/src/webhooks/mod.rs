//! Butler's admission webhooks (spec/000 and spec/001), answered from the controllers' caches:
//! never a list per request. The decisions are the pure functions of [`providerconfig`] and
//! [`tenantcluster`]; this module turns AdmissionReviews into their inputs and back.

pub mod networkpool;
pub mod providerconfig;
pub mod registration;
pub mod serving;
pub mod tenantcluster;

use std::net::IpAddr;
use std::sync::Arc;

use butler_core::api::{IPAllocation, NetworkPool, ProviderConfig, Team, TenantCluster};
use butler_runtime::webhook::Webhooks;
use futures::future::BoxFuture;
use futures::{FutureExt, StreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::core::admission::{AdmissionRequest, AdmissionResponse, Operation};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};

use crate::clusters::ClusterIndex;
use crate::ipam::index::{PoolFiled, by_cluster, by_pool};
use crate::run::reflect;
use crate::team::plan::team_of_namespace;

/// The caches the webhooks answer from; every replica keeps them, leader or not, since the
/// webhook Service sends requests to any.
#[derive(Clone)]
pub struct Caches {
    pub teams: Store<Team>,
    pub configs: Store<ProviderConfig>,
    pub clusters: Arc<ClusterIndex>,
    /// Every NetworkPool, for overlapping CIDRs.
    pub pools: Store<NetworkPool>,
    /// The blocks allocations hold, by pool: only the addresses are kept, not the objects.
    pub blocks: Arc<PoolFiled<Option<(IpAddr, IpAddr)>>>,
    /// The addresses allocations hold or wait for, by the TenantCluster they serve.
    pub held: Arc<crate::filed::Filed<IPAllocation, i64>>,
}

/// The block an allocation's status says it holds.
fn held_block(a: &IPAllocation) -> Option<(IpAddr, IpAddr)> {
    crate::ipam::networkpool::serve::held(a)?.ok()
}

impl Caches {
    /// The caches, the future that fills and follows them, and one that resolves once filled.
    pub fn start(client: &kube::Client) -> (Caches, BoxFuture<'static, ()>, BoxFuture<'static, ()>) {
        let all = || watcher::Config::default().any_semantic();
        let (teams, team_events) = reflect::<Team>(client, all());
        let (configs, config_events) = reflect::<ProviderConfig>(client, all());
        let (cluster_store, cluster_writer) = kube::runtime::reflector::store::<TenantCluster>();
        let clusters = Arc::new(ClusterIndex::new(cluster_store));
        let cluster_events = crate::clusters::follow(client, cluster_writer, clusters.clone(), |_| {});
        let (pools, pool_events) = reflect::<NetworkPool>(client, all());
        let blocks = Arc::new(PoolFiled::new(by_pool, held_block));
        let held = Arc::new(crate::filed::Filed::new(by_cluster, crate::ipam::held::counted));
        let (filing, filing_held) = (blocks.clone(), held.clone());
        // Small pages: only the blocks are kept, and a first listing of many allocations in
        // large pages would leave the process's heap at its peak for good.
        let block_events = watcher(Api::<IPAllocation>::all(client.clone()), all().page_size(50))
            .default_backoff()
            .inspect(move |event| {
                if let Ok(event) = event {
                    filing.apply(event);
                    filing_held.apply(event);
                }
            });
        let caches = Caches { teams, configs, clusters, pools, blocks, held };
        let run = async move {
            let drain =
                |s: futures::stream::BoxStream<'static, ()>| s.for_each(|_| futures::future::ready(()));
            futures::join!(
                drain(team_events.map(|_| ()).boxed()),
                drain(config_events.map(|_| ()).boxed()),
                drain(cluster_events.map(|_| ()).boxed()),
                drain(pool_events.map(|_| ()).boxed()),
                drain(block_events.map(|_| ()).boxed())
            );
        }
        .boxed();
        let waiting = caches.clone();
        let ready = async move {
            let _ = waiting.teams.wait_until_ready().await;
            let _ = waiting.configs.wait_until_ready().await;
            waiting.clusters.wait_until_ready().await;
            let _ = waiting.pools.wait_until_ready().await;
            waiting.blocks.wait_until_ready().await;
            waiting.held.wait_until_ready().await;
        }
        .boxed();
        (caches, run, ready)
    }

    /// The TenantClusters of a namespace.
    pub fn clusters_in(&self, namespace: &str) -> Vec<Arc<TenantCluster>> {
        self.clusters.in_namespace(namespace)
    }

    /// The addresses the allocations serving `cluster` hold or wait for.
    pub fn held_by(&self, cluster: &TenantCluster) -> i64 {
        let key = (cluster.namespace().unwrap_or_default(), cluster.name_any());
        self.held.get(&key).into_iter().map(|(_, n)| n).fold(0i64, i64::saturating_add)
    }
}

/// Where each webhook is served (the paths of the core provider's webhook configurations).
pub const VALIDATE_PROVIDERCONFIG: &str = "/validate-butler-butlerlabs-dev-v1alpha1-providerconfig";
pub const VALIDATE_TENANTCLUSTER: &str = "/validate-butler-butlerlabs-dev-v1alpha1-tenantcluster";
pub const MUTATE_TENANTCLUSTER: &str = "/mutate-butler-butlerlabs-dev-v1alpha1-tenantcluster";
pub const VALIDATE_NETWORKPOOL: &str = "/validate-butler-butlerlabs-dev-v1alpha1-networkpool";

/// The object of a request (the new one; `old` for the one it replaces or deletes).
fn object<K>(object: Option<&K>) -> Result<&K, String> {
    object.ok_or_else(|| "the request carries no object".to_string())
}

fn answer<K: kube::Resource>(
    request: &AdmissionRequest<K>,
    decision: Result<(), String>,
) -> AdmissionResponse {
    let response = AdmissionResponse::from(request);
    match decision {
        Ok(()) => response,
        Err(message) => response.deny(message),
    }
}

/// The ProviderConfig webhook: the rules of create and update, and delete refused while
/// TenantClusters use it.
pub fn validate_providerconfig(
    ctx: &Caches,
    request: &AdmissionRequest<ProviderConfig>,
) -> AdmissionResponse {
    let decision = match request.operation {
        Operation::Delete => object(request.old_object.as_ref()).and_then(|config| {
            let clusters = ctx.clusters.using(&config.namespace().unwrap_or_default(), &config.name_any());
            let users = crate::providerconfig::plan::users(config, clusters.iter().map(Arc::as_ref));
            providerconfig::validate_delete(&users)
        }),
        _ => object(request.object.as_ref()).and_then(providerconfig::validate),
    };
    answer(request, decision)
}

/// What a TenantCluster is checked against, from the caches.
struct Related {
    team: Option<Arc<butler_core::api::Team>>,
    config: Option<Arc<ProviderConfig>>,
    others: Vec<Arc<TenantCluster>>,
}

/// The context of a TenantCluster: its Team, its ProviderConfig and the team's other clusters.
/// The ProviderConfig a cluster references, if the cache holds it.
fn config_of(ctx: &Caches, cluster: &TenantCluster) -> Option<Arc<ProviderConfig>> {
    let namespace = cluster.namespace().unwrap_or_default();
    cluster.spec.provider_config_ref.as_ref().and_then(|r| {
        let ns = r.namespace.clone().filter(|n| !n.is_empty()).unwrap_or(namespace);
        ctx.configs.get(&ObjectRef::new(&r.name).within(&ns))
    })
}

fn cluster_context(ctx: &Caches, cluster: &TenantCluster) -> Related {
    let namespace = cluster.namespace().unwrap_or_default();
    let team = team_of_namespace(&namespace).and_then(|t| ctx.teams.get(&ObjectRef::new(t)));
    let config = config_of(ctx, cluster);
    let others =
        ctx.clusters_in(&namespace).into_iter().filter(|c| c.name_any() != cluster.name_any()).collect();
    Related { team, config, others }
}

/// The TenantCluster validating webhook: the Team's limits and restrictions, and the
/// ProviderConfig's per-team limits.
pub fn validate_tenantcluster(ctx: &Caches, request: &AdmissionRequest<TenantCluster>) -> AdmissionResponse {
    let decision = object(request.object.as_ref()).and_then(|cluster| {
        let related = cluster_context(ctx, cluster);
        // What the team's other clusters take: the blocks they hold, whatever ProviderConfig
        // they name now (one re-pointed at a cloud-mode config keeps its blocks until they are
        // given back), or what their config will give them; counted only for a team that has
        // the limit (a config lookup per cluster).
        let limited = related
            .team
            .as_ref()
            .and_then(|t| t.spec.resource_limits.as_ref())
            .is_some_and(|l| l.max_ip_addresses.is_some());
        let (addresses, held) = match limited {
            true => (
                related
                    .others
                    .iter()
                    .map(|other| {
                        let planned = config_of(ctx, other)
                            .map_or(0, |c| crate::tenantcluster::plan::addresses(other, c.as_ref()));
                        crate::ipam::held::cluster(ctx.held_by(other), planned)
                    })
                    .fold(0i64, i64::saturating_add),
                ctx.held_by(cluster),
            ),
            false => (0, 0),
        };
        let check = tenantcluster::Context {
            team: related.team.as_deref(),
            config: related.config.as_deref(),
            others: related.others.iter().map(Arc::as_ref).collect(),
            addresses,
            held,
        };
        match request.operation {
            Operation::Update => {
                let old = object(request.old_object.as_ref())?;
                tenantcluster::validate_update(old, cluster, &check)
            }
            _ => tenantcluster::validate(cluster, &check),
        }
    });
    answer(request, decision)
}

/// The TenantCluster mutating webhook: the Team's defaults fill what the cluster leaves empty.
pub fn mutate_tenantcluster(ctx: &Caches, request: &AdmissionRequest<TenantCluster>) -> AdmissionResponse {
    let cluster = match object(request.object.as_ref()) {
        Ok(c) => c,
        Err(message) => return AdmissionResponse::from(request).deny(message),
    };
    let Some(team) = cluster_context(ctx, cluster).team else { return AdmissionResponse::from(request) };
    let operations = tenantcluster::defaults(cluster, &team);
    if operations.is_empty() {
        return AdmissionResponse::from(request);
    }
    match serde_json::from_value::<json_patch::Patch>(serde_json::Value::Array(operations)) {
        Ok(patch) => AdmissionResponse::from(request).with_patch(patch).unwrap_or_else(|e| {
            AdmissionResponse::from(request).deny(format!("cannot write the defaults: {e}"))
        }),
        Err(e) => AdmissionResponse::from(request).deny(format!("cannot write the defaults: {e}")),
    }
}

/// The NetworkPool webhook: a readable spec, and no change that strands held blocks.
pub fn validate_networkpool(ctx: &Caches, request: &AdmissionRequest<NetworkPool>) -> AdmissionResponse {
    let decision = object(request.object.as_ref()).and_then(|pool| {
        let old = match request.operation {
            Operation::Update => Some(object(request.old_object.as_ref())?),
            _ => None,
        };
        let changes_cidr = old
            .as_ref()
            .is_none_or(|o| o.spec.cidr != pool.spec.cidr || o.spec.allow_overlap != pool.spec.allow_overlap);
        if changes_cidr {
            let pools = ctx.pools.state();
            let overlaps = crate::ipam::networkpool::spec::overlapping(pool, pools.iter().map(Arc::as_ref));
            if !overlaps.is_empty() {
                return Err(crate::ipam::networkpool::spec::overlap_message(pool, &overlaps));
            }
        }
        let namespace = pool.namespace().unwrap_or_default();
        let held: Vec<(String, (IpAddr, IpAddr))> = ctx
            .blocks
            .get(&(namespace.clone(), pool.name_any()))
            .into_iter()
            .filter_map(|((_, name), block)| Some((name, block?)))
            .collect();
        networkpool::validate(pool, old, &held)
    });
    answer(request, decision)
}

/// The routes of the webhook server; `reached` is set by the first review that arrives (which
/// the API server sent: it is what tells that the API server can reach the webhooks).
pub fn routes(caches: Caches, reached: Arc<std::sync::atomic::AtomicBool>) -> Webhooks {
    fn noting<K: kube::Resource + Send + Sync + 'static>(
        caches: &Caches,
        reached: &Arc<std::sync::atomic::AtomicBool>,
        handler: fn(&Caches, &AdmissionRequest<K>) -> AdmissionResponse,
    ) -> butler_runtime::webhook::Decide<K> {
        let (caches, reached) = (caches.clone(), reached.clone());
        Arc::new(move |r: &AdmissionRequest<K>| {
            reached.store(true, std::sync::atomic::Ordering::Relaxed);
            handler(&caches, r)
        })
    }
    Webhooks::new()
        .route(VALIDATE_PROVIDERCONFIG, noting(&caches, &reached, validate_providerconfig))
        .route(VALIDATE_TENANTCLUSTER, noting(&caches, &reached, validate_tenantcluster))
        .route(MUTATE_TENANTCLUSTER, noting(&caches, &reached, mutate_tenantcluster))
        .route(VALIDATE_NETWORKPOOL, noting(&caches, &reached, validate_networkpool))
}
