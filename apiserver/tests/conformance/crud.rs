use butler_e2e::Cluster;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{MADE_BY, api_error, config_map};

#[tokio::test]
async fn create_get_replace_delete() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("crud").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);

    let created = api.create(&PostParams::default(), &config_map("a", &[], &[("k", "v")])).await.unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some() && meta.resource_version.is_some());
    assert_eq!(meta.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(api.get("a").await.unwrap(), created);

    let again = api_error(api.create(&PostParams::default(), &config_map("a", &[], &[])).await);
    assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(again.message, "configmaps \"a\" already exists");

    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let replaced = api.replace("a", &PostParams::default(), &changed).await.unwrap();
    assert_ne!(replaced.metadata.resource_version, created.metadata.resource_version);
    assert_eq!(replaced.metadata.uid, created.metadata.uid);

    // `changed` still carries the old resourceVersion.
    let stale = api_error(api.replace("a", &PostParams::default(), &changed).await);
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert!(stale.message.contains("the object has been modified"), "{}", stale.message);

    // A write that changes nothing keeps the resourceVersion.
    let same = api.replace("a", &PostParams::default(), &replaced).await.unwrap();
    assert_eq!(same.metadata.resource_version, replaced.metadata.resource_version);

    api.delete("a", &DeleteParams::default()).await.unwrap();
    let gone = api_error(api.get("a").await);
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
    assert_eq!(gone.message, "configmaps \"a\" not found");
}

#[tokio::test]
async fn generate_name_and_missing_namespaces() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("gen").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let mut cm = config_map("", &[], &[]);
    cm.metadata.name = None;
    cm.metadata.generate_name = Some("made-".into());
    let one = api.create(&PostParams::default(), &cm).await.unwrap();
    let two = api.create(&PostParams::default(), &cm).await.unwrap();
    let (a, b) = (one.metadata.name.unwrap(), two.metadata.name.unwrap());
    assert!(a.starts_with("made-") && a.len() == 10 && a != b, "{a} {b}");

    let missing = cluster.unique("missing");
    let nowhere: Api<ConfigMap> = Api::namespaced(cluster.client(), &missing);
    let error = api_error(nowhere.create(&PostParams::default(), &config_map("x", &[], &[])).await);
    assert_eq!((error.code, error.reason.as_str()), (404, "NotFound"));
    assert_eq!(error.message, format!("namespaces \"{missing}\" not found"));

    let bad = api_error(api.create(&PostParams::default(), &config_map("Not_Valid", &[], &[])).await);
    assert_eq!((bad.code, bad.reason.as_str()), (422, "Invalid"));
}

#[tokio::test]
async fn secrets_fold_string_data_into_data() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("secret").await;
    let api: Api<Secret> = Api::namespaced(cluster.client(), &ns);
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"token": "abc"}})).unwrap();
    let stored = api.create(&PostParams::default(), &secret).await.unwrap();
    assert_eq!(stored.string_data, None);
    assert_eq!(stored.data.unwrap()["token"].0, b"abc");
}

#[tokio::test]
async fn merge_json_and_strategic_patches() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("patch").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    api.create(&PostParams::default(), &config_map("p", &[], &[("a", "1"), ("b", "2")])).await.unwrap();

    let merge = Patch::Merge(json!({"data": {"a": null, "c": "3"}}));
    let merged = api.patch("p", &PatchParams::default(), &merge).await.unwrap();
    assert_eq!(
        merged.data.unwrap(),
        [("b".to_string(), "2".to_string()), ("c".to_string(), "3".to_string())].into()
    );

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/data/b", "value": "20"},
        {"op": "add", "path": "/data/d", "value": "4"}
    ]))
    .unwrap();
    let patched = api.patch("p", &PatchParams::default(), &Patch::<()>::Json(ops)).await.unwrap();
    assert_eq!(patched.data.as_ref().unwrap()["b"], "20");
    assert_eq!(patched.data.as_ref().unwrap()["d"], "4");
    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/b", "value": "nope"}])).unwrap();
    let error = api_error(api.patch("p", &PatchParams::default(), &Patch::<()>::Json(failing)).await);
    assert_eq!(error.code, 422);

    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), &ns);
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "d"},
        "spec": {
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [
                    {"name": "manager", "image": "example/manager:v1"},
                    {"name": "sidecar", "image": "example/sidecar:v1"}
                ]}
            }
        }
    }))
    .unwrap();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();
    let strategic = Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
        {"name": "manager", "image": "example/manager:v2"}
    ]}}}}));
    let patched = deployments.patch("d", &PatchParams::default(), &strategic).await.unwrap();
    let containers = patched.spec.unwrap().template.spec.unwrap().containers;
    let images: Vec<_> = containers.iter().map(|c| (c.name.as_str(), c.image.as_deref().unwrap())).collect();
    assert_eq!(images, [("manager", "example/manager:v2"), ("sidecar", "example/sidecar:v1")]);
}

#[tokio::test]
async fn metadata_only_reads_and_watches() {
    use futures::StreamExt;
    use kube::core::PartialObjectMeta;
    use kube::runtime::{WatchStreamExt, watcher};

    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("metadata").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    api.create(&PostParams::default(), &config_map("a", &[("app", "x")], &[("secret-ish", "value")]))
        .await
        .unwrap();

    let meta: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(cluster.client(), &ns);
    let one = meta.get("a").await.unwrap();
    assert_eq!(one.metadata.labels.unwrap()["app"], "x");
    // The namespace holds what the cluster and other controllers put in every one too
    // (kube-root-ca.crt, a distribution's CA): only the scenario's own objects are counted.
    let list =
        meta.list(&ListParams::default().labels(&format!("{}={}", MADE_BY.0, MADE_BY.1))).await.unwrap();
    let names: Vec<String> = list.items.iter().filter_map(|o| o.metadata.name.clone()).collect();
    assert_eq!(names, ["a"]);
    // The data stays on the server: the answer is metadata alone.
    let raw = cluster
        .client()
        .request_text(
            http::Request::get(format!("/api/v1/namespaces/{ns}/configmaps/a"))
                .header("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    if cluster.is_in_memory() {
        assert!(
            raw.contains("PartialObjectMetadata") && !raw.contains("\"data\"") && !raw.contains("value"),
            "{raw}"
        );
    }

    let mut events = watcher(meta, watcher::Config::default().labels("app=x")).applied_objects().boxed();
    let first = events.next().await.unwrap().unwrap();
    assert_eq!(first.metadata.name.as_deref(), Some("a"));
}

#[tokio::test]
async fn tables_for_kubectl() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("table").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    api.create(&PostParams::default(), &config_map("a", &[], &[("one", "1"), ("two", "2")])).await.unwrap();

    // What kubectl get sends.
    let accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";
    let raw = cluster
        .client()
        .request_text(
            http::Request::get(format!("/api/v1/namespaces/{ns}/configmaps?limit=500"))
                .header("Accept", accept)
                .body(Vec::new())
                .unwrap(),
        )
        .await
        .unwrap();
    let table: serde_json::Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(table["kind"], "Table", "{raw}");
    let columns: Vec<&str> =
        table["columnDefinitions"].as_array().unwrap().iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(columns, ["Name", "Data", "Age"]);
    let row = table["rows"].as_array().unwrap().iter().find(|r| r["cells"][0] == "a").unwrap();
    assert_eq!(row["cells"][1], 2);
    assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
    assert_eq!(row["object"]["metadata"]["namespace"], ns.as_str());
}

#[tokio::test]
async fn every_namespace_publishes_the_cluster_ca() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("root-ca").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    // A real cluster's kube-controller-manager adds it a moment after the namespace.
    let mut found = None;
    for _ in 0..100 {
        found = api.get_opt("kube-root-ca.crt").await.unwrap();
        if found.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let ca = found.expect("kube-root-ca.crt in a new namespace").data.unwrap()["ca.crt"].clone();
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
}

#[tokio::test]
async fn a_strategic_merge_patch_adds_to_the_finalizers_and_can_take_one_out() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("smp").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let mut cm = config_map("held", &[], &[]);
    cm.metadata.finalizers = Some(vec!["example.com/a".into()]);
    api.create(&PostParams::default(), &cm).await.unwrap();
    let add = Patch::Strategic(json!({"metadata": {"finalizers": ["example.com/b"]}}));
    let patched = api.patch("held", &PatchParams::default(), &add).await.unwrap();
    assert_eq!(
        patched.metadata.finalizers.unwrap(),
        ["example.com/b", "example.com/a"],
        "merged, not replaced: the patch's items first, as Kubernetes orders them"
    );
    let remove = Patch::Strategic(
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["example.com/a", "example.com/b"]}}),
    );
    let patched = api.patch("held", &PatchParams::default(), &remove).await.unwrap();
    assert!(patched.metadata.finalizers.unwrap_or_default().is_empty());
}

#[tokio::test]
async fn immutable_fields_are_refused_as_kubernetes_refuses_them() {
    use k8s_openapi::api::rbac::v1::RoleBinding;
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("immutable").await;
    let deployments: Api<Deployment> = Api::namespaced(cluster.client(), &ns);
    let deployment: Deployment = serde_json::from_value(json!({"metadata": {"name": "d"}, "spec": {
        "selector": {"matchLabels": {"app": "a"}},
        "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [{"name": "c", "image": "example/c:v1"}]}}}}))
    .unwrap();
    deployments.create(&PostParams::default(), &deployment).await.unwrap();
    let change = Patch::Merge(
        json!({"spec": {"selector": {"matchLabels": {"app": "b"}}, "template": {"metadata": {"labels": {"app": "b"}}}}}),
    );
    let status = api_error(deployments.patch("d", &PatchParams::default(), &change).await);
    assert_eq!((status.code, status.reason.as_str()), (422, "Invalid"));
    assert!(
        status.message.contains("spec.selector") && status.message.contains("field is immutable"),
        "{}",
        status.message
    );

    let bindings: Api<RoleBinding> = Api::namespaced(cluster.client(), &ns);
    let binding: RoleBinding = serde_json::from_value(json!({"metadata": {"name": "b"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}, "subjects": []}))
    .unwrap();
    bindings.create(&PostParams::default(), &binding).await.unwrap();
    let change = Patch::Merge(json!({"roleRef": {"name": "edit"}}));
    let status = api_error(bindings.patch("b", &PatchParams::default(), &change).await);
    assert_eq!(status.code, 422);
    assert!(status.message.contains("cannot change roleRef"), "{}", status.message);
}

#[tokio::test]
async fn config_maps_and_secrets_hold_at_most_one_mebibyte_and_any_object_at_most_what_etcd_keeps() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("too-large").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    // One byte over 1 MiB of data: refused by validation, long before etcd's 1.5 MiB.
    let over = "x".repeat(1_048_577);
    let refused =
        api_error(maps.create(&PostParams::default(), &config_map("big", &[], &[("data", &over)])).await);
    assert_eq!(refused.code, 422, "{}", refused.message);
    assert!(refused.message.contains("Too long: may not be more than 1048576 bytes"), "{}", refused.message);
    // Spread over two keys it is the same.
    let half = "x".repeat(524_289);
    let refused =
        maps.create(&PostParams::default(), &config_map("halves", &[], &[("a", &half), ("b", &half)])).await;
    assert_eq!(api_error(refused).code, 422);
    let exactly = "x".repeat(1_048_576);
    maps.create(&PostParams::default(), &config_map("fits", &[], &[("data", &exactly)])).await.unwrap();

    let secrets: Api<Secret> = Api::namespaced(cluster.client(), &ns);
    let secret = |name: &str, size: usize| -> Secret {
        serde_json::from_value(json!({"metadata": {"name": name}, "stringData": {"k": "y".repeat(size)}}))
            .unwrap()
    };
    let refused = api_error(secrets.create(&PostParams::default(), &secret("big", 1_048_577)).await);
    assert_eq!(refused.code, 422, "{}", refused.message);
    assert!(refused.message.contains("Too long: may not be more than 1048576 bytes"), "{}", refused.message);
    // Its size is the decoded data's, not the base64 text's (which is a third longer).
    secrets.create(&PostParams::default(), &secret("fits", 1_048_576)).await.unwrap();

    // Any other object over etcd's 1.5 MiB (and under the API server's 3 MiB request limit).
    let widgets = crate::support::widgets(&cluster).await;
    let api = crate::support::widget_api(&cluster, &widgets, &ns);
    let big = "x".repeat(1_677_722);
    let spec = json!({"label": "big", "extra": {"data": big}});
    match api.create(&PostParams::default(), &crate::support::widget(&widgets, "big", spec)).await {
        Err(kube::Error::Api(e)) => assert!(e.message.contains("request is too large"), "{}", e.message),
        other => panic!("a 1.6 MiB object was stored: {other:?}"),
    }
}

/// An object's annotations hold at most 256 KiB, keys and values together: a larger one is
/// refused whatever the kind.
#[tokio::test]
async fn annotations_hold_at_most_256_kibibytes() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("annotations").await;
    let maps: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let annotated = |name: &str, size: usize| -> ConfigMap {
        let mut cm = config_map(name, &[], &[]);
        cm.metadata.annotations = Some([("k".to_string(), "x".repeat(size))].into());
        cm
    };
    let refused = api_error(maps.create(&PostParams::default(), &annotated("over", 262_144)).await);
    assert_eq!(refused.code, 422, "{}", refused.message);
    assert!(
        refused.message.contains("metadata.annotations: Too long: may not be more than 262144 bytes"),
        "{}",
        refused.message
    );
    maps.create(&PostParams::default(), &annotated("fits", 262_143)).await.unwrap();
}
