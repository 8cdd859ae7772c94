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
