//! The reconcile of a provider being deleted: refused while something uses it, then every
//! object it installed is removed, CRDs last, and the finalizer goes.

use std::fmt::Debug;
use std::sync::Arc;

use butler_core::api::{ProviderConfig, Team, TenantCluster};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::ProviderObject;
use super::conditions::{self, Wanted};
use super::context::{Context, ProviderKey, key_of, view_of};
use super::error::Error;
use super::plan::{self, ObjectRef};
use super::reconcile::inventory_of;
use super::status::{self, Outcome};
use super::users::{butler_provider_type, tenant_cluster_users};
use super::watches::{Handler, Seen};
use super::{finalizer, inventory};
use crate::api::{KindNames, ProviderKind};

/// How many objects of one CRD a blocked deletion names.
const NAMED: u32 = 5;

/// Deletes a provider's objects, unless something still uses it.
pub async fn cleanup<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error>
where
    K: ProviderObject,
{
    let key = key_of(object.as_ref());
    if !finalizer::has(object.as_ref()) {
        return Ok(Action::await_change());
    }
    let me = view_of(object.as_ref(), ctx.statuses.lock().expect("not poisoned").get(&key));
    let all: Vec<_> = ctx
        .views()
        .into_iter()
        .filter(|v| (v.kind, &v.namespace, &v.name) != (me.kind, &me.namespace, &me.name))
        .collect();
    let inventory = inventory_of(&ctx, &key).await?.unwrap_or_default();
    // A provider that never applied anything (a duplicate, one that failed its preflight)
    // holds nothing up.
    let blocker = match inventory.objects.is_empty() {
        true => None,
        false => {
            let (users, kinds) = users_of(&ctx, K::KIND, &key.2, &inventory.objects).await?;
            let blocker = plan::deletion_blocker(&me, &all, &users);
            if blocker.is_some() {
                for kind in &kinds {
                    wake_on_deletions(&ctx, kind, &key);
                }
            }
            blocker
        }
    };
    if let Some(message) = blocker {
        let outcome = Outcome {
            contract: me.contract.clone(),
            installed_version: me.installed_version.clone(),
            conditions: vec![
                Wanted::new(conditions::DELETING, false, "DeletionBlocked", message.clone()),
                Wanted::new(conditions::READY, false, "Deleting", "the provider is being deleted"),
            ],
            events: vec![("DeletionBlocked".into(), message.clone())],
        };
        status::write(&ctx, object.as_ref(), outcome).await?;
        return Err(Error::DeletionBlocked(format!("{} {}/{}: {message}", K::KIND, key.1, key.2)));
    }

    // Controllers first, so nothing acts on objects that are going away; CRDs last, since
    // deleting a CRD deletes every object of it.
    let mut objects = inventory.objects.clone();
    objects.sort_by_key(|o| match o.kind.as_str() {
        "Deployment" => 0,
        "CustomResourceDefinition" => 2,
        _ => 1,
    });
    for gone in objects.iter().filter(|o| o.kind != "Namespace") {
        ctx.drift.forget(gone);
        ctx.applier.delete(gone).await.map_err(Error::Apply)?;
    }
    let name = inventory::name(K::KIND.plural(), &key.2);
    inventory::delete(&ctx.client, &key.1, &name)
        .await
        .map_err(|e| Error::kube(format!("deleting the inventory ConfigMap {}/{name}", key.1), e))?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &key.1);
    finalizer::remove(&api, object.as_ref()).await?;
    tracing::info!(provider = %key.2, kind = %K::KIND, objects = objects.len(), "deleted the provider's objects");
    ctx.forget(&key);
    ctx.trigger_others(&key);
    Ok(Action::await_change())
}

/// Wakes a provider whose deletion waits when an object of `kind` is deleted.
fn wake_on_deletions(ctx: &Context, kind: &ApiResource, key: &ProviderKey) {
    let name = format!("{} {}", kind.api_version, kind.kind);
    ctx.waiting.lock().expect("not poisoned").entry(name.clone()).or_default().insert(key.clone());
    let waiting = ctx.waiting.clone();
    let triggers = ctx.triggers.clone();
    let handler: Handler = Arc::new(move |seen| {
        if let Seen::Deleted(_) = seen {
            let woken = waiting.lock().expect("not poisoned").remove(&name).unwrap_or_default();
            for (kind, namespace, name) in woken {
                triggers.trigger(kind, &namespace, &name);
            }
        }
    });
    ctx.watches.ensure("users", kind, None, handler);
}

/// What still uses a provider: for Butler's infrastructure providers the TenantClusters on
/// their provider type, and for every provider the objects of the CRDs it installed; and the
/// kinds of those objects.
async fn users_of(
    ctx: &Context,
    kind: ProviderKind,
    name: &str,
    installed: &[ObjectRef],
) -> Result<(Vec<String>, Vec<ApiResource>), Error> {
    let mut users = Vec::new();
    let mut kinds = Vec::new();
    if kind == ProviderKind::Infrastructure
        && let Some(provider) = butler_provider_type(name)
    {
        let clusters = list_if_served::<TenantCluster>(ctx).await?;
        if !clusters.is_empty() {
            let configs = list_if_served::<ProviderConfig>(ctx).await?;
            let teams = list_if_served::<Team>(ctx).await?;
            let found = tenant_cluster_users(provider, &clusters, &configs, &teams);
            if !found.is_empty() {
                kinds.push(ApiResource::erase::<TenantCluster>(&()));
            }
            users.extend(found);
        }
    }
    let crds: Api<CustomResourceDefinition> = Api::all(ctx.client.clone());
    for crd in installed.iter().filter(|o| o.kind == "CustomResourceDefinition") {
        let Some(found) = crds
            .get_opt(&crd.name)
            .await
            .map_err(|e| Error::kube(format!("reading the CRD {}", crd.name), e))?
        else {
            continue;
        };
        let spec = &found.spec;
        let Some(version) = spec.versions.iter().find(|v| v.storage).or(spec.versions.first()) else {
            continue;
        };
        let gvk = GroupVersionKind::gvk(&spec.group, &version.name, &spec.names.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &spec.names.plural);
        let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &resource);
        let list = api
            .list_metadata(&ListParams::default().limit(NAMED))
            .await
            .map_err(|e| Error::kube(format!("listing the objects of the CRD {}", crd.name), e))?;
        if !list.items.is_empty() {
            kinds.push(resource.clone());
        }
        users.extend(list.items.iter().map(|o| match o.namespace() {
            Some(ns) => format!("{} {ns}/{}", spec.names.kind, o.name_any()),
            None => format!("{} {}", spec.names.kind, o.name_any()),
        }));
    }
    Ok((users, kinds))
}

/// Every object of a Butler kind, or none when the cluster does not serve the kind.
async fn list_if_served<K>(ctx: &Context) -> Result<Vec<K>, Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let api: Api<K> = Api::all(ctx.client.clone());
    match api.list(&ListParams::default()).await {
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(e) => Err(Error::kube(format!("listing {}", K::kind(&())), e)),
    }
}
