//! The reconcile of a provider being deleted: refused while something uses it, then every
//! object it installed is removed (its CRDs only when `crdDeletionPolicy: Delete`, and last),
//! and the finalizer goes.

use std::fmt::Debug;
use std::sync::Arc;

use butler_core::api::{ProviderConfig, Team, TenantCluster};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use butler_runtime::error::not_found_ok;
use butler_runtime::objects::{ObjectRef, delete_order};
use butler_runtime::watches::{Handler, Seen};

use crate::api::{CrdDeletionPolicy, PROVIDER_FINALIZER, ProviderKind};
use crate::controller::ProviderObject;
use crate::controller::context::{Context, view_of};
use crate::controller::error::Error;
use crate::controller::install::inventory::{self, inventory_of};
use crate::controller::install::plan;
use crate::controller::removal::users::{butler_platform, tenant_cluster_users};
use crate::controller::report::reason::Reason;
use crate::controller::report::status::{self, Outcome};
use crate::controller::vocabulary::{ProviderKey, uid_of};

/// How many objects of one CRD a blocked deletion names.
const NAMED: u32 = 5;

/// Deletes a provider's objects, unless something still uses it.
pub async fn cleanup<K>(object: Arc<K>, ctx: Arc<Context>) -> Result<Action, Error>
where
    K: ProviderObject,
{
    let key = ProviderKey::of(object.as_ref());
    if !butler_runtime::finalizer::has(object.as_ref(), PROVIDER_FINALIZER) {
        return Ok(Action::await_change());
    }
    let uid = uid_of(object.as_ref());
    let me = view_of(object.as_ref(), ctx.statuses.lock().expect("not poisoned").get(&uid));
    let all: Vec<_> = ctx.views().into_iter().filter(|v| v.key != me.key).collect();
    let inventory = inventory_of(&ctx, &key, &uid).await?.unwrap_or_default();
    // The CRDs go only when the provider object says so; kept, their objects stay and hold
    // nothing up.
    let delete_crds = object.provider_spec().crd_deletion_policy == Some(CrdDeletionPolicy::Delete);
    // CRDs an upgrade dropped but kept are the provider's too.
    let kept = inventory.kept.iter().filter(|_| delete_crds);
    let doomed: Vec<ObjectRef> = inventory
        .objects
        .iter()
        .filter(|o| delete_crds || o.kind != "CustomResourceDefinition")
        .chain(kept)
        .cloned()
        .collect();
    // A provider that never applied anything (a duplicate, one that failed its preflight)
    // holds nothing up.
    let blocker = match inventory.objects.is_empty() {
        true => None,
        false => {
            let (users, kinds) = users_of(&ctx, &key, &doomed).await?;
            let blocker = plan::deletion_blocker(&me, &all, &users);
            if blocker.is_some() {
                for kind in &kinds {
                    wake_on_deletions(&ctx, kind, &key);
                }
            }
            let unwatched: Vec<String> = kinds
                .iter()
                .filter(|kind| ctx.watches.refused(USERS_WATCH, kind).is_some())
                .map(|kind| format!("{} ({})", kind.plural, kind.group))
                .collect();
            blocker.map(|message| message + &polled_note(&unwatched))
        }
    };
    if let Some(message) = blocker {
        let outcome = Outcome {
            contract: me.contract.clone(),
            installed_version: me.installed_version.clone(),
            conditions: vec![
                Reason::DeletionBlocked.wanted(false, message.clone()),
                Reason::Deleting.not_ready("the provider is being deleted"),
            ],
            events: vec![(Reason::DeletionBlocked, message.clone())],
        };
        status::write(&ctx, object.as_ref(), outcome).await?;
        return Err(Error::DeletionBlocked(format!("{key}: {message}")));
    }

    let mut objects = doomed;
    objects.sort_by_key(delete_order);
    for gone in objects.iter().filter(|o| o.kind != "Namespace") {
        // A CRD that was there before the provider is not the provider's to delete.
        if inventory.adopted.contains(gone) {
            continue;
        }
        ctx.drift.forget(gone);
        // Only what carries this provider's labels: an inventory is a ConfigMap anyone who may
        // write in the namespace could forge, and one an install never finished making may be
        // someone else's.
        if !ctx.applier.delete_if(gone, |meta| key.labelled_on(meta)).await.map_err(Error::Apply)? {
            tracing::warn!(provider = %key, object = %gone.describe(), "left in place: it does not carry the provider's labels");
        }
    }
    inventory::delete(&ctx, &key).await?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &key.namespace);
    butler_runtime::finalizer::remove(&api, object.as_ref(), PROVIDER_FINALIZER)
        .await
        .map_err(|e| Error::kube(format!("removing the finalizer of {key}"), e))?;
    tracing::info!(provider = %key, objects = objects.len(), "deleted the provider's objects");
    ctx.forget(&key, &uid);
    ctx.trigger_others(&key);
    Ok(Action::await_change())
}

/// Says on the provider, at once, why its deletion failed (a refusal names the rule to add),
/// with Ready False as it is being deleted; the error policy retries.
pub async fn failed<K>(ctx: &Context, object: &K, error: Error) -> Result<Action, Error>
where
    K: ProviderObject,
{
    let uid = uid_of(object);
    let me = view_of(object, ctx.statuses.lock().expect("not poisoned").get(&uid));
    let message = crate::controller::install::forbidden::explained(&error.to_string());
    let outcome = Outcome {
        contract: me.contract.clone(),
        installed_version: me.installed_version.clone(),
        conditions: vec![
            Reason::DeletionFailed.wanted(false, message.clone()),
            Reason::Deleting.not_ready("the provider is being deleted"),
        ],
        events: vec![(Reason::DeletionFailed, message)],
    };
    // The status is told when it can be; the failure is what the retry goes by.
    if let Err(e) = status::write(ctx, object, outcome).await {
        tracing::warn!(provider = %ProviderKey::of(object), "cannot write the status: {e}");
    }
    Err(error)
}

/// Wakes a provider whose deletion waits when an object of `kind` is deleted.
fn wake_on_deletions(ctx: &Context, kind: &ApiResource, key: &ProviderKey) {
    let name = format!("{} {}", kind.api_version, kind.kind);
    ctx.waiting.lock().expect("not poisoned").entry(name.clone()).or_default().insert(key.clone());
    let waiting = ctx.waiting.clone();
    let triggers = ctx.triggers.clone();
    let handler: Handler = Arc::new(move |seen| {
        // A deletion (or a relist after the watch expired, which may hide one) wakes them.
        if let Seen::Deleted(_) | Seen::Relisted(_) = seen {
            let woken = waiting.lock().expect("not poisoned").remove(&name).unwrap_or_default();
            for key in woken {
                triggers.trigger(&key);
            }
        }
    });
    ctx.watches.ensure(USERS_WATCH, kind, None, handler);
}

/// The purpose of the watches that wake a blocked deletion.
const USERS_WATCH: &str = "users";

/// What a blocked deletion adds when RBAC refuses the operator `watch` on blocking kinds: the
/// deletion then moves on within a poll of the last one going, not at once.
fn polled_note(unwatched: &[String]) -> String {
    if unwatched.is_empty() {
        return String::new();
    }
    format!(
        ". The operator may list but not watch {}: it looks every {}s instead, so the deletion goes on within that time of the last one going; grant it watch on them to go on at once",
        unwatched.join(", "),
        butler_runtime::watches::POLL_WITHOUT_WATCH.as_secs()
    )
}

/// What still uses a provider: for Butler's infrastructure providers the TenantClusters on
/// their provider type, and for every provider the objects of the CRDs it installed; and the
/// kinds of those objects.
async fn users_of(
    ctx: &Context,
    key: &ProviderKey,
    installed: &[ObjectRef],
) -> Result<(Vec<String>, Vec<ApiResource>), Error> {
    let mut users = Vec::new();
    let mut kinds = Vec::new();
    if key.kind == ProviderKind::Infrastructure
        && let Some(platform) = butler_platform(&key.name)
    {
        let clusters = list_if_served::<TenantCluster>(ctx).await?;
        if !clusters.is_empty() {
            let configs = list_if_served::<ProviderConfig>(ctx).await?;
            let teams = list_if_served::<Team>(ctx).await?;
            let found = tenant_cluster_users(platform, &clusters, &configs, &teams);
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
    not_found_ok(api.list(&ListParams::default()).await)
        .map(|list| list.map(|l| l.items).unwrap_or_default())
        .map_err(|e| Error::kube(format!("listing {}", K::kind(&())), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_blocked_deletion_says_when_it_cannot_watch_what_blocks_it() {
        assert_eq!(polled_note(&[]), "");
        assert_eq!(
            polled_note(&["clusters (cluster.x-k8s.io)".into()]),
            ". The operator may list but not watch clusters (cluster.x-k8s.io): it looks every 5s instead, so the deletion goes on within that time of the last one going; grant it watch on them to go on at once"
        );
    }
}
