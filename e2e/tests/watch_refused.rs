//! A kind the account may list but not watch (Cluster API's upstream ClusterRoles give `get`
//! and `list` on its kinds): the metadata watches of `butler-runtime` look by listing instead,
//! so a change is seen within a poll, not at the next resync a minute later.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use butler_e2e::Cluster;
use butler_runtime::watches::{Seen, Watches};
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ApiResource, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_listed_but_not_watched_is_polled_and_changes_are_seen() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("nowatch").await;
    let run = cluster.unique("nowatch");
    let label = format!("nowatch.butlerlabs.dev/run={run}");
    cluster.remove_cluster_objects_labelled(&label);
    let labels = json!({"nowatch.butlerlabs.dev/run": run});
    let post = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client(), &ns);
    accounts
        .create(&post, &serde_json::from_value(json!({"metadata": {"name": "lister"}})).unwrap())
        .await
        .unwrap();
    let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": run, "labels": labels},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]}))
    .unwrap();
    Api::<ClusterRole>::all(cluster.client()).create(&post, &role).await.unwrap();
    let binding: ClusterRoleBinding =
        serde_json::from_value(json!({"metadata": {"name": run, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": run},
        "subjects": [{"kind": "ServiceAccount", "name": "lister", "namespace": ns}]}))
        .unwrap();
    Api::<ClusterRoleBinding>::all(cluster.client()).create(&post, &binding).await.unwrap();
    let config = cluster.service_account_config("lister", &ns, "lister").await;
    let lister = kube::Client::try_from(config).unwrap();
    // RBAC reaches a real server's authorizer a moment after the binding.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Api::<ConfigMap>::all(lister.clone()).list_metadata(&Default::default()).await.is_err() {
        assert!(Instant::now() < deadline, "the binding never took effect");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let record = seen.clone();
    let watches = Watches::new(lister);
    let resource = ApiResource::erase::<ConfigMap>(&());
    watches.ensure(
        "test",
        &resource,
        Some(&label),
        Arc::new(move |event: Seen<'_>| {
            let mut seen = record.lock().unwrap();
            seen.extend(event.objects().iter().filter_map(|m| m.name.clone()));
        }),
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let made: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "made-later", "labels": labels}})).unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    configmaps.create(&post, &made).await.unwrap();
    let deadline = Instant::now() + butler_runtime::watches::POLL_WITHOUT_WATCH + Duration::from_secs(5);
    while !seen.lock().unwrap().contains(&"made-later".to_string()) {
        assert!(Instant::now() < deadline, "a ConfigMap made after the watch was refused was never seen");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // The refusal is told to whoever started the watch (a blocked deletion says so on its
    // provider), in the API server's words.
    let why = watches.refused("test", &resource).expect("the refused watch is told");
    assert!(why.contains("cannot watch resource \"configmaps\""), "{why}");
    assert_eq!(watches.refused("other", &resource), None);
    watches.stop();
}
