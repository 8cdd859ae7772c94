use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, PropagationPolicy};
use serde_json::json;

use crate::support::{config_map, eventually};

fn owned_by(owner: &ConfigMap, name: &str) -> ConfigMap {
    let mut cm = config_map(name, &[], &[]);
    cm.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.metadata.name.clone().unwrap(),
        uid: owner.metadata.uid.clone().unwrap(),
        ..Default::default()
    }]);
    cm
}

async fn gone(api: &Api<ConfigMap>, name: &str) -> Option<()> {
    api.get_opt(name).await.unwrap().is_none().then_some(())
}

#[tokio::test]
async fn finalizers_hold_an_object_until_they_are_removed() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("final").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let mut cm = config_map("held", &[], &[]);
    cm.metadata.finalizers = Some(vec!["e2e.butlerlabs.dev/hold".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    api.delete("held", &DeleteParams::default()).await.unwrap();
    let held = api.get("held").await.unwrap();
    assert!(held.metadata.deletion_timestamp.is_some());
    // A second delete changes nothing.
    api.delete("held", &DeleteParams::default()).await.unwrap();
    // Nobody adds a finalizer to an object being deleted: a controller that comes back after
    // its finalizer was taken off cannot hold the deletion again.
    let added = json!({"metadata": {"finalizers": ["e2e.butlerlabs.dev/hold", "e2e.butlerlabs.dev/again"]}});
    let refused = api.patch("held", &PatchParams::default(), &Patch::Merge(added)).await;
    let status = crate::support::api_error(refused);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"), "{status:?}");
    assert!(
        status.message.contains(
            "metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted"
        ),
        "{}",
        status.message
    );
    api.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    eventually("the object to go once its finalizer is removed", || gone(&api, "held")).await;
}

#[tokio::test]
async fn dependents_follow_their_owner_by_propagation_policy() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gc").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);

    // Background: the owner goes at once, the dependent after it.
    let owner = api.create(&PostParams::default(), &config_map("owner-bg", &[], &[])).await.unwrap();
    api.create(&PostParams::default(), &owned_by(&owner, "dep-bg")).await.unwrap();
    api.delete("owner-bg", &DeleteParams::background()).await.unwrap();
    eventually("the background dependent to go", || gone(&api, "dep-bg")).await;

    // Orphan: the dependent stays, without its owner reference.
    let owner = api.create(&PostParams::default(), &config_map("owner-or", &[], &[])).await.unwrap();
    api.create(&PostParams::default(), &owned_by(&owner, "dep-or")).await.unwrap();
    // The call answers before the garbage collector's work: the owner is still there, marked.
    let answer = api.delete("owner-or", &DeleteParams::orphan()).await.unwrap();
    let marked = answer.left().expect("an orphan deletion answers with the object, not a Status");
    assert!(marked.metadata.deletion_timestamp.is_some());
    assert!(marked.metadata.finalizers.unwrap_or_default().iter().any(|f| f == "orphan"));
    eventually("the orphaned owner to go", || gone(&api, "owner-or")).await;
    let orphan = api.get("dep-or").await.unwrap();
    assert!(orphan.metadata.owner_references.unwrap_or_default().is_empty());

    // Foreground: the owner's dependents are deleted, and it waits for those whose reference
    // says blockOwnerDeletion; a blocking dependent with a finalizer holds it.
    let owner = api.create(&PostParams::default(), &config_map("owner-fg", &[], &[])).await.unwrap();
    let mut dependent = owned_by(&owner, "dep-fg");
    dependent.metadata.owner_references.as_mut().unwrap()[0].block_owner_deletion = Some(true);
    dependent.metadata.finalizers = Some(vec!["e2e.butlerlabs.dev/hold".into()]);
    api.create(&PostParams::default(), &dependent).await.unwrap();
    let mut loose = owned_by(&owner, "dep-fg-loose");
    loose.metadata.finalizers = Some(vec!["e2e.butlerlabs.dev/hold".into()]);
    api.create(&PostParams::default(), &loose).await.unwrap();
    api.delete("owner-fg", &DeleteParams::foreground()).await.unwrap();
    eventually("the dependent to be marked for deletion", || async {
        api.get("dep-fg").await.unwrap().metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    let waiting = api.get("owner-fg").await.unwrap();
    assert!(waiting.metadata.deletion_timestamp.is_some());
    api.patch("dep-fg", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    eventually("the foreground owner to go after its blocking dependent", || gone(&api, "owner-fg")).await;
    // The dependent that did not block is being deleted too, and held the owner up for nothing.
    let loose = api.get("dep-fg-loose").await.unwrap();
    assert!(loose.metadata.deletion_timestamp.is_some());
    api.patch(
        "dep-fg-loose",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_foreground_owner_does_not_wait_for_dependents_that_do_not_block_it() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("fg-loose").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let owner = api.create(&PostParams::default(), &config_map("owner", &[], &[])).await.unwrap();
    let mut dependent = owned_by(&owner, "dependent");
    dependent.metadata.finalizers = Some(vec!["e2e.butlerlabs.dev/hold".into()]);
    api.create(&PostParams::default(), &dependent).await.unwrap();
    api.delete("owner", &DeleteParams::foreground()).await.unwrap();
    eventually("the owner to go without waiting", || gone(&api, "owner")).await;
    eventually("the dependent to be marked for deletion", || async {
        api.get("dependent").await.unwrap().metadata.deletion_timestamp.map(|_| ())
    })
    .await;
    api.patch("dependent", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
}

#[tokio::test]
async fn delete_collection_takes_the_selected_objects() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("delcol").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    for (name, group) in [("a", "x"), ("b", "x"), ("c", "y")] {
        api.create(&PostParams::default(), &config_map(name, &[("group", group)], &[])).await.unwrap();
    }
    api.delete_collection(
        &DeleteParams { propagation_policy: Some(PropagationPolicy::Background), ..Default::default() },
        &ListParams::default().labels("group=x"),
    )
    .await
    .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default().labels("group"))
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert_eq!(left, ["c"]);
}

#[tokio::test]
async fn deleting_a_namespace_removes_what_is_in_it() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("nsdel").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    api.create(&PostParams::default(), &config_map("plain", &[], &[])).await.unwrap();
    let mut held = config_map("held", &[], &[]);
    held.metadata.finalizers = Some(vec!["e2e.butlerlabs.dev/hold".into()]);
    api.create(&PostParams::default(), &held).await.unwrap();
    let namespaces: Api<Namespace> = Api::all(cluster.client());
    namespaces.delete(&ns, &DeleteParams::default()).await.unwrap();
    eventually("the plain object to go with its namespace", || gone(&api, "plain")).await;
    let terminating = namespaces.get(&ns).await.unwrap();
    assert_eq!(terminating.status.and_then(|s| s.phase).as_deref(), Some("Terminating"));
    let refused = api.create(&PostParams::default(), &config_map("late", &[], &[])).await;
    assert!(refused.is_err(), "no new content in a terminating namespace");
    api.patch("held", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    eventually("the namespace to go once it is empty", || async {
        namespaces.get_opt(&ns).await.unwrap().is_none().then_some(())
    })
    .await;
}
