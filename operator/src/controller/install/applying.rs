//! Writing an install plan: each object created when new (taking over only what this operator
//! made for a provider that is gone, or what clusterctl or cluster-api-operator installed for
//! this one), or applied when the provider's; the inventory recorded before and after, so
//! that a reconcile killed at any point carries on; then stored objects moved to a new
//! storage version.

use std::collections::HashSet;

use butler_runtime::apply::Made;
use butler_runtime::inventory::while_applying;
use butler_runtime::objects::{ObjectRef, defined_kind};

use crate::controller::ProviderObject;
use crate::controller::context::Context;
use crate::controller::install::adopt;
use crate::controller::install::installed::Inventory;
use crate::controller::install::inventory::{self};
use crate::controller::install::plan::InstallPlan;
use crate::controller::vocabulary::{LiveDeployment, ProviderKey, uid_of};

/// Makes an object the provider has not made before, as [`Applier::create_new`] does, and
/// also takes over one this operator made for a provider that is gone (its provider object
/// answers 404: deleted with its finalizer stripped, its namespace force-deleted), which no one
/// else would ever clean up, and one clusterctl or cluster-api-operator installed for this
/// provider ([`adopt`]). Anything else that exists stays refused.
async fn create_or_take_over(
    ctx: &Context,
    key: &ProviderKey,
    wanted: &serde_json::Value,
    waits: bool,
    ours: &(dyn Fn(&kube::api::DynamicObject) -> bool + Sync),
    earlier: &EarlierInstall<'_>,
) -> Result<(kube::api::DynamicObject, kube::discovery::ApiResource), String> {
    let existing = match ctx.applier.create_only(wanted, waits).await? {
        Made::Created(created, resource) => return Ok((created, resource)),
        Made::Gone => return ctx.applier.apply(wanted, waits).await,
        Made::Exists(existing) => existing,
    };
    if ours(&existing) || orphaned(ctx, key, &existing).await? {
        return ctx.applier.apply(wanted, waits).await;
    }
    if let Some(stale_owners) = earlier.installed(ctx, wanted, &existing).await? {
        let r = ObjectRef::of(wanted);
        // Owners first: applied, the object is this provider's and never looked at again.
        if !stale_owners.is_empty() {
            let uid = existing.metadata.uid.as_deref().unwrap_or_default();
            ctx.applier.patch_json(&r, adopt::drop_owners(uid, &stale_owners)).await?;
        }
        tracing::info!(object = %r.describe(), provider = %key, "taking over an object clusterctl or cluster-api-operator installed for this provider");
        return ctx.applier.apply(wanted, waits).await;
    }
    Err(made_elsewhere(&ObjectRef::of(wanted)))
}

/// Why an object that exists is not applied over: no one this provider may take it from made it.
fn made_elsewhere(r: &ObjectRef) -> String {
    format!(
        "{} exists already and was not made by {} (for this provider, or for one that is gone) nor by clusterctl or cluster-api-operator for this provider in this namespace; it is left alone: delete it (or rename it) if it should be made here",
        r.describe(),
        crate::api::FIELD_MANAGER
    )
}

/// Why a CRD is not taken over: another provider of this operator made it and is there.
fn anothers_crd(name: &str, owner: &ProviderKey) -> String {
    format!(
        "CustomResourceDefinition {name} belongs to {owner}, and a provider never takes over another's CRDs; the two providers cannot be installed together"
    )
}

/// An installation of this provider by clusterctl or cluster-api-operator, found by the
/// labels those tools put on what they install. A namespaced object of the rendered set is in
/// the provider's namespace; a cluster-wide one (a ClusterRole, a webhook configuration, a CRD)
/// is taken over only when the provider's Deployment there is theirs too, so that an install
/// in another namespace keeps its own.
struct EarlierInstall<'a> {
    /// The provider's Deployments of the rendered set.
    deployments: Vec<ObjectRef>,
    /// The inventory once the plan is carried out.
    inventory: &'a Inventory,
    here: tokio::sync::OnceCell<bool>,
}

impl<'a> EarlierInstall<'a> {
    fn new(objects: &[serde_json::Value], inventory: &'a Inventory) -> EarlierInstall<'a> {
        let deployments = objects.iter().filter(|o| o["kind"] == "Deployment").map(ObjectRef::of).collect();
        EarlierInstall { deployments, inventory, here: tokio::sync::OnceCell::new() }
    }

    /// The owner references to drop when `existing` is such an installation's, else none.
    async fn installed(
        &self,
        ctx: &Context,
        wanted: &serde_json::Value,
        existing: &kube::api::DynamicObject,
    ) -> Result<Option<Vec<(usize, String)>>, String> {
        let Some(label) = adopt::manifest_label(wanted) else { return Ok(None) };
        // Another provider of this operator labelled it: never taken from it here.
        if existing.metadata.labels.as_ref().and_then(ProviderKey::from_labels).is_some() {
            return Ok(None);
        }
        let adopt::Installed::ByClusterctl { stale_owners } = adopt::judge(&existing.metadata, label) else {
            return Ok(None);
        };
        let namespaced = existing.metadata.namespace.is_some();
        Ok((namespaced || self.in_this_namespace(ctx, label).await?).then_some(stale_owners))
    }

    async fn in_this_namespace(&self, ctx: &Context, label: &str) -> Result<bool, String> {
        let found = self
            .here
            .get_or_try_init(|| async {
                for deployment in &self.deployments {
                    let live = ctx.applier.get(deployment).await?;
                    if live.is_some_and(|d| adopt::judge(&d.metadata, label) != adopt::Installed::Elsewhere) {
                        return Ok::<bool, String>(true);
                    }
                }
                Ok(false)
            })
            .await?;
        Ok(*found)
    }
}

/// Whether an object carries the labels of another provider of this operator that is gone.
async fn orphaned(
    ctx: &Context,
    key: &ProviderKey,
    existing: &kube::api::DynamicObject,
) -> Result<bool, String> {
    let Some(owner) = existing.metadata.labels.as_ref().and_then(ProviderKey::from_labels) else {
        return Ok(false);
    };
    Ok(owner == *key || !present(ctx, &owner).await?)
}

/// Whether a provider object is there, read live (being deleted or not): labels naming it
/// are believed only while it is gone.
async fn present(ctx: &Context, owner: &ProviderKey) -> Result<bool, String> {
    use crate::api::KindNames;
    let api: kube::Api<kube::api::DynamicObject> =
        kube::Api::namespaced_with(ctx.client.clone(), &owner.namespace, &owner.kind.api_resource());
    match api.get_opt(&owner.name).await {
        Ok(found) => Ok(found.is_some()),
        Err(e) => Err(format!("reading {owner}: {}", butler_runtime::error::describe(&e))),
    }
}

/// What an existing CRD is to this provider.
#[derive(Debug, PartialEq, Eq)]
enum CrdClaim {
    /// Made by this provider, or installed for it by clusterctl or cluster-api-operator: its
    /// own from now on (its crdDeletionPolicy applies).
    Own,
    /// Made by someone else and taken over: recorded as adopted, so never deleted.
    Adopted,
}

/// Whether this provider may apply over an existing CRD, read live; else why not (the inner
/// error; the outer one is a failed read). Never one of a provider that is there, of this
/// operator or another, being deleted or not (a release could otherwise rewrite its API); one
/// made by anyone else only in the groups the policy lets providers take over, never the
/// operator's own.
async fn claim_crd(
    ctx: &Context,
    key: &ProviderKey,
    wanted: &serde_json::Value,
    existing: &kube::api::DynamicObject,
    earlier: &EarlierInstall<'_>,
) -> Result<Result<CrdClaim, String>, String> {
    if key.labelled_on(&existing.metadata) {
        return Ok(Ok(CrdClaim::Own));
    }
    let name = existing.metadata.name.as_deref().unwrap_or_default();
    let group = existing.data["spec"]["group"].as_str().unwrap_or_default();
    let owner = existing.metadata.labels.as_ref().and_then(ProviderKey::from_labels);
    match owner {
        Some(owner) if present(ctx, &owner).await? => Ok(Err(anothers_crd(name, &owner))),
        Some(owner) => Ok(ctx
            .policy
            .may_adopt(name, group)
            .map(|()| CrdClaim::Adopted)
            .map_err(|e| format!("{e} (it carries the labels of {owner}, which is gone)"))),
        None if earlier.installed(ctx, wanted, existing).await?.is_some() => Ok(Ok(CrdClaim::Own)),
        None => Ok(ctx.policy.may_adopt(name, group).map(|()| CrdClaim::Adopted)),
    }
}

/// Makes a CRD the provider has not made before. A CRD is one API for the whole cluster: one
/// that was there before is applied over, as clusterctl does, when [`claim_crd`] allows it;
/// one made by someone else is first recorded in the inventory as adopted, so the provider
/// never deletes it.
async fn adopt_crd<K: ProviderObject>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    wanted: &serde_json::Value,
    waits: bool,
    adopted: &mut Vec<ObjectRef>,
    earlier: &EarlierInstall<'_>,
) -> Result<(kube::api::DynamicObject, kube::discovery::ApiResource), String> {
    let existing = match ctx.applier.create_only(wanted, waits).await? {
        Made::Created(created, resource) => return Ok((created, resource)),
        Made::Gone => return ctx.applier.apply(wanted, waits).await,
        Made::Exists(existing) => existing,
    };
    if claim_crd(ctx, key, wanted, &existing, earlier).await?? == CrdClaim::Adopted {
        adopted.push(ObjectRef::of(wanted));
        let recorded = ctx.inventories.lock().expect("not poisoned").get(&uid_of(object)).cloned();
        let record =
            Inventory { adopted: adopted.clone(), ..recorded.unwrap_or_else(|| earlier.inventory.clone()) };
        inventory::write(ctx, object, key, &record).await?;
    }
    ctx.applier.apply(wanted, waits).await
}

/// Applies the plan. When the objects changed, the inventory first records the new objects
/// and those of the previous set (so a crash at any point leaves every object findable), then
/// every object this process has not applied as it is now (or that changed since) is applied
/// and what dropped out is deleted; the inventory then forgets those.
/// When they did not change, only objects that drifted (or that this process has not written
/// yet: after a restart, all of them) are applied.
/// Each object but the Deployments (which readiness reads) is taken out of the plan once it
/// is written: a release's CRDs are most of its memory, and they are written first.
pub(super) async fn apply<K>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    plan: &mut InstallPlan,
    previous: Option<&Inventory>,
) -> Result<Vec<LiveDeployment>, String>
where
    K: ProviderObject,
{
    let mut deployments = Vec::new();
    // What changed goes, and what drifted; what this process applied as it is stays. Each
    // object considered is digested once (and only those: a reconcile that changed nothing
    // digests only what drifted).
    let to_apply: Vec<(usize, String)> = plan
        .objects
        .iter()
        .enumerate()
        .filter_map(|(at, o)| {
            let r = ObjectRef::of(o);
            match plan.changed {
                true => Some(crate::controller::install::drift::content_of(o))
                    .filter(|c| !ctx.drift.unchanged(&r, c)),
                false => {
                    (!ctx.drift.is_current(&r)).then(|| crate::controller::install::drift::content_of(o))
                }
            }
            .map(|content| (at, content))
        })
        .collect();
    let recorded = |ctx: &Context| {
        let inventories = ctx.inventories.lock().expect("not poisoned");
        inventories.get(&uid_of(object)).map(|i| (i.objects.len(), i.pending.is_empty()))
    };
    let finished = recorded(ctx) == Some((plan.inventory.objects.len(), true));
    if to_apply.is_empty() && plan.delete.is_empty() && finished {
        // A storage-version migration cut short goes on.
        return migrate_stored(ctx, object, key, Vec::new()).await.map(|()| Vec::new());
    }
    // Every kind the set needs is served before the first write, or nothing is written.
    let unserved = ctx.applier.unserved(&plan.objects).await;
    if !unserved.is_empty() {
        return Err(unserved.join("; "));
    }
    // Which objects are namespaced is the API server's to say (by group and kind): none of
    // them goes anywhere but the provider's namespace.
    let mut outside = ctx.applier.outside(&plan.objects, &key.namespace).await;
    // A CRD of the set defines kinds of its own, never one the cluster serves already.
    outside.extend(ctx.applier.redefined(&plan.objects).await);
    if !outside.is_empty() {
        return Err(format!("nothing is applied: {}", outside.join("; ")));
    }
    // Made by this provider before (and not still pending from an install that stopped).
    // Looked up in sets from here on: a release may hold 10,000 objects.
    let pending_before: HashSet<&ObjectRef> =
        previous.map(|p| p.pending.iter().collect()).unwrap_or_default();
    let made_before: Vec<ObjectRef> = previous
        .map(|p| p.objects.iter().filter(|o| !pending_before.contains(o)).cloned().collect())
        .unwrap_or_default();
    let before: HashSet<&ObjectRef> = made_before.iter().collect();
    let earlier = EarlierInstall::new(&plan.objects, &plan.inventory);
    // What is to be written, against the cluster as it is, before the first write: an object
    // that exists and is not this provider's (nor one it may take over) refuses the set whole,
    // so that the order of a release never lets its first objects in before a later one is
    // refused. Also when nothing changed: after a restart every object is applied again, and
    // the inventory that says it was made before could be forged.
    let wanted: Vec<&serde_json::Value> = to_apply.iter().map(|(at, _)| &plan.objects[*at]).collect();
    let foreign = claimed_elsewhere(ctx, key, &plan.inventory, &wanted, &before, &earlier).await?;
    if !foreign.is_empty() {
        return Err(format!("nothing is applied: {}", foreign.join("; ")));
    }
    // What Kubernetes itself would refuse (validation, admission, quota), asked of the new set
    // before its first write.
    if plan.changed {
        let refused = ctx.applier.dry_run(&wanted).await;
        if !refused.is_empty() {
            return Err(format!("nothing is applied: {}", refused.join("; ")));
        }
    }
    if plan.changed {
        // Every object of before stays listed until it is deleted; what is not known to be this
        // provider's yet stays pending.
        let all_before: &[ObjectRef] = previous.map(|p| p.objects.as_slice()).unwrap_or_default();
        let objects = while_applying(all_before, &plan.inventory.objects);
        let pending: Vec<ObjectRef> = objects.iter().filter(|o| !before.contains(o)).cloned().collect();
        let during = Inventory { objects, pending, ..plan.inventory.clone() };
        inventory::write(ctx, object, key, &during).await?;
    }
    let defined: Vec<String> = plan.objects.iter().filter_map(defined_kind).collect();
    // An object this provider has not made before is created, not applied over whatever is
    // there; one that exists is taken on only when it carries this provider's labels.
    let ours = |existing: &kube::api::DynamicObject| key.labelled_on(&existing.metadata);
    let mut made: Vec<ObjectRef> = Vec::new();
    let mut adopted: Vec<ObjectRef> = plan.inventory.adopted.clone();
    let mut stale_crds: Vec<String> = Vec::new();
    drop(wanted);
    for (at, content) in to_apply {
        let wanted = match plan.objects[at]["kind"] == "Deployment" {
            true => plan.objects[at].clone(),
            false => std::mem::take(&mut plan.objects[at]),
        };
        let wanted = &wanted;
        let r = ObjectRef::of(wanted);
        ctx.drift.begin(&r);
        let waits = defined.contains(&format!("{}/{}", r.group(), r.kind));
        let applied = match before.contains(&r) || adopted.contains(&r) {
            true => ctx.applier.apply(wanted, waits).await,
            false if r.group() == "apiextensions.k8s.io" && r.kind == "CustomResourceDefinition" => {
                adopt_crd(ctx, object, key, wanted, waits, &mut adopted, &earlier).await
            }
            false => create_or_take_over(ctx, key, wanted, waits, &ours, &earlier).await,
        };
        match applied {
            Ok((applied, resource)) => {
                if resource.kind == "CustomResourceDefinition"
                    && let Some(stale) = serde_json::to_value(&applied)
                        .ok()
                        .as_ref()
                        .and_then(crate::controller::install::storage::stale)
                {
                    stale_crds.push(stale.name);
                }
                ctx.drift.record_applied(r.clone(), &applied.metadata, content);
                if resource.kind == "Deployment"
                    && let Ok(d) = serde_json::to_value(&applied).and_then(serde_json::from_value)
                {
                    deployments.push(crate::controller::context::live_deployment(&d));
                }
                made.push(r);
                // Deployments are watched in full by the controller already.
                if resource.kind != "Deployment" {
                    ctx.drift.watch_kind(&ctx.watches, &resource, &ctx.triggers);
                }
            }
            Err(e) => {
                ctx.drift.forget(&r);
                // The record lists what was there and what this run made, never what it was
                // refused: a provider never deletes what it did not make.
                if plan.changed {
                    let all_before: &[ObjectRef] = previous.map(|p| p.objects.as_slice()).unwrap_or_default();
                    let objects: Vec<ObjectRef> =
                        while_applying(all_before, &made).into_iter().filter(|o| *o != r).collect();
                    let pending = objects
                        .iter()
                        .filter(|o| !before.contains(o) && !made.contains(o))
                        .cloned()
                        .collect();
                    let partial = Inventory {
                        objects,
                        digest: String::new(),
                        pending,
                        adopted,
                        ..plan.inventory.clone()
                    };
                    inventory::write(ctx, object, key, &partial).await?;
                }
                return Err(e);
            }
        }
    }
    for gone in &plan.delete {
        ctx.drift.forget(gone);
        // Only what carries this provider's labels (the inventory could be forged).
        if !ctx.applier.delete_if(gone, |meta| key.labelled_on(meta)).await? {
            tracing::warn!(provider = %key, object = %gone.describe(), "left in place: it does not carry the provider's labels");
        }
    }
    let finished = Inventory { adopted, ..plan.inventory.clone() };
    // Compared whole: an install that made every pending object is recorded as done (else a
    // restart would "create" objects that exist, and the no-change path is never taken).
    let recorded = ctx.inventories.lock().expect("not poisoned").get(&uid_of(object)).cloned();
    if recorded.as_ref() != Some(&finished) {
        inventory::write(ctx, object, key, &finished).await?;
    }
    tracing::info!(provider = %key, version = %plan.inventory.version, "applied the provider's objects");
    migrate_stored(ctx, object, key, stale_crds).await?;
    Ok(deployments)
}

/// The objects of the plan that exist already and that this provider may not apply over, each
/// with why. Ownership is read live, never believed: an object the inventory lists counts as
/// the provider's only when it carries the provider's labels (an inventory is a ConfigMap
/// anyone who may write in the namespace could forge).
async fn claimed_elsewhere(
    ctx: &Context,
    key: &ProviderKey,
    inventory: &Inventory,
    objects: &[&serde_json::Value],
    made_before: &HashSet<&ObjectRef>,
    earlier: &EarlierInstall<'_>,
) -> Result<Vec<String>, String> {
    let mut foreign = Vec::new();
    for &wanted in objects {
        let r = ObjectRef::of(wanted);
        let Some(existing) = ctx.applier.get(&r).await? else { continue };
        if key.labelled_on(&existing.metadata) {
            continue;
        }
        let listed = made_before.contains(&r) || inventory.adopted.contains(&r);
        let why = if r.group() == "apiextensions.k8s.io" && r.kind == "CustomResourceDefinition" {
            claim_crd(ctx, key, wanted, &existing, earlier).await?.err()
        } else if listed {
            Some(format!(
                "{} is listed in the provider's inventory but does not carry its labels (the inventory may have been written by someone else); it is left alone: delete it (or rename it) if it should be made here",
                r.describe()
            ))
        } else if orphaned(ctx, key, &existing).await?
            || earlier.installed(ctx, wanted, &existing).await?.is_some()
        {
            None
        } else {
            Some(made_elsewhere(&r))
        };
        foreign.extend(why);
    }
    Ok(foreign)
}

/// Migrates the stored objects of the CRDs `found` stale by this apply and of those the
/// inventory names from before, each named in the inventory until it is done.
async fn migrate_stored<K: ProviderObject>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
    found: Vec<String>,
) -> Result<(), String> {
    let recorded = ctx.inventories.lock().expect("not poisoned").get(&uid_of(object)).cloned();
    let Some(mut record) = recorded else { return Ok(()) };
    let mut todo = record.migrating.clone();
    todo.extend(found.into_iter().filter(|name| !record.migrating.contains(name)));
    if todo.is_empty() {
        return Ok(());
    }
    if todo != record.migrating {
        record.migrating = todo.clone();
        inventory::write(ctx, object, key, &record).await?;
    }
    for name in todo {
        let progress = |storage: &str, migrated: crate::controller::install::storage::Migrated| {
            let entry = crate::controller::install::storage::Progress {
                provider: key.clone(),
                storage: storage.to_string(),
                migrated,
                done: false,
            };
            ctx.migrations.lock().expect("not poisoned").insert(name.clone(), entry);
        };
        crate::controller::install::storage::migrate_named(&ctx.client, &name, &progress).await?;
        if let Some(entry) = ctx.migrations.lock().expect("not poisoned").get_mut(&name) {
            entry.done = true;
        }
        record.migrating.retain(|n| *n != name);
        inventory::write(ctx, object, key, &record).await?;
    }
    Ok(())
}
