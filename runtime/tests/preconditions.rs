//! A write from a copy of an object that was deleted and made again under its name does not
//! reach the new object: the finalizer helpers test the UID they read.

use butler_apiserver::MemoryApiServer;
use butler_runtime::finalizer;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

const FINALIZER: &str = "test.butlerlabs.dev/cleanup";

#[tokio::test]
async fn a_finalizer_is_not_removed_from_an_object_made_again_under_the_name() {
    let server = MemoryApiServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let made = || -> ConfigMap { serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap() };
    let old = api.create(&PostParams::default(), &made()).await.unwrap();
    let old = finalizer::add(&api, &old, FINALIZER).await.unwrap();
    // Gone without its finalizer's owner: someone stripped it and deleted the object.
    api.patch("x", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    api.delete("x", &DeleteParams::default()).await.unwrap();
    let new = api.create(&PostParams::default(), &made()).await.unwrap();
    assert_ne!(new.metadata.uid, old.metadata.uid);
    let new = finalizer::add(&api, &new, FINALIZER).await.unwrap();

    // The old copy's writes are refused: the new object keeps its finalizer and gets no second.
    let refused = finalizer::remove(&api, &old, FINALIZER).await.unwrap_err();
    assert!(matches!(&refused, kube::Error::Api(s) if s.code == 422), "{refused:?}");
    assert!(finalizer::add(&api, &old, "test.butlerlabs.dev/other").await.is_err());
    let kept = api.get("x").await.unwrap();
    assert_eq!(kept.metadata.finalizers, Some(vec![FINALIZER.to_string()]));
    finalizer::remove(&api, &new, FINALIZER).await.unwrap();
}

#[tokio::test]
async fn a_finalizer_added_from_a_stale_copy_is_added_once_from_the_live_object() {
    let server = MemoryApiServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let made: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "y"}})).unwrap();
    let stale = api.create(&PostParams::default(), &made).await.unwrap();
    // The cache's copy lags: the finalizer went on a moment ago, and another's since.
    finalizer::add(&api, &stale, FINALIZER).await.unwrap();
    let other = "test.butlerlabs.dev/other";
    let live = api.get("y").await.unwrap();
    finalizer::add(&api, &live, other).await.unwrap();

    let again = finalizer::add(&api, &stale, FINALIZER).await.unwrap();
    assert_eq!(again.metadata.finalizers, Some(vec![FINALIZER.to_string(), other.to_string()]));
    // A stale copy without a finalizer that is not there yet adds it to the live list.
    let third = "test.butlerlabs.dev/third";
    let written = finalizer::add(&api, &stale, third).await.unwrap();
    assert_eq!(written.metadata.finalizers, Some(vec![FINALIZER.into(), other.into(), third.into()]));
    api.patch("y", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .unwrap();
    api.delete("y", &DeleteParams::default()).await.unwrap();
}
