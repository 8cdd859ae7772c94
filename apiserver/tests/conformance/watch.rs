use std::time::Duration;

use butler_apiserver::{MemoryApiServer, ServerOptions};
use butler_e2e::Cluster;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::watcher;
use serde_json::json;

use crate::support::{config_map, made, skip_on_real_cluster};

/// The next `n` events of a watch that are not bookmarks, as (type, name).
async fn next_events(
    stream: &mut (impl futures::Stream<Item = Result<WatchEvent<ConfigMap>, kube::Error>> + Unpin),
    n: usize,
) -> Vec<(String, String)> {
    let mut events = Vec::new();
    while events.len() < n {
        let event =
            tokio::time::timeout(Duration::from_secs(10), stream.next()).await.expect("an event within 10s");
        let name = |c: &ConfigMap| c.metadata.name.clone().unwrap_or_default();
        let event = event.expect("the watch is open").expect("a watch event");
        // What the cluster and other controllers put in every namespace, whenever they get
        // to it: not the scenario's.
        if let WatchEvent::Added(c) | WatchEvent::Modified(c) | WatchEvent::Deleted(c) = &event
            && !made(c)
        {
            continue;
        }
        match event {
            WatchEvent::Added(c) => events.push(("ADDED".into(), name(&c))),
            WatchEvent::Modified(c) => events.push(("MODIFIED".into(), name(&c))),
            WatchEvent::Deleted(c) => events.push(("DELETED".into(), name(&c))),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error: {e:?}"),
        }
    }
    events
}

fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
    items.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[tokio::test]
async fn a_watch_resumes_from_a_resource_version() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("watch").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let first = api.create(&PostParams::default(), &config_map("one", &[], &[])).await.unwrap();
    let since = first.metadata.resource_version.unwrap();
    api.patch("one", &PatchParams::default(), &Patch::Merge(json!({"data": {"k": "v"}}))).await.unwrap();
    api.create(&PostParams::default(), &config_map("two", &[], &[])).await.unwrap();
    api.delete("one", &DeleteParams::default()).await.unwrap();

    let mut stream = api.watch(&WatchParams::default(), &since).await.unwrap().boxed();
    let events = next_events(&mut stream, 3).await;
    assert_eq!(events, pairs(&[("MODIFIED", "one"), ("ADDED", "two"), ("DELETED", "one")]));

    // The same watch keeps following.
    api.create(&PostParams::default(), &config_map("three", &[], &[])).await.unwrap();
    assert_eq!(next_events(&mut stream, 1).await, pairs(&[("ADDED", "three")]));
}

#[tokio::test]
async fn objects_entering_and_leaving_a_selector_are_added_and_deleted() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("watchsel").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let cm = api.create(&PostParams::default(), &config_map("x", &[("watched", "no")], &[])).await.unwrap();
    let rv = cm.metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default().labels("watched=yes"), &rv).await.unwrap().boxed();
    let label = |v: &str| Patch::Merge(json!({"metadata": {"labels": {"watched": v}}}));
    api.patch("x", &PatchParams::default(), &label("yes")).await.unwrap();
    api.patch("x", &PatchParams::default(), &Patch::Merge(json!({"data": {"a": "b"}}))).await.unwrap();
    api.patch("x", &PatchParams::default(), &label("no")).await.unwrap();
    let events = next_events(&mut stream, 3).await;
    assert_eq!(events, pairs(&[("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x")]));
}

#[tokio::test]
async fn kube_runtime_watchers_list_then_watch_in_both_initial_list_modes() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("watcher").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    for name in ["a", "b", "c"] {
        api.create(&PostParams::default(), &config_map(name, &[("set", "w")], &[])).await.unwrap();
    }
    let mut modes = vec![("list-watch", watcher::Config::default().labels("set=w").page_size(2))];
    if !skip_on_real_cluster(
        &cluster,
        "streaming lists need the WatchList feature, which not every cluster enables",
    ) {
        modes.push(("streaming", watcher::Config::default().labels("set=w").streaming_lists()));
    }
    for (mode, config) in modes {
        let mut stream = watcher(api.clone(), config).boxed();
        let mut initial = Vec::new();
        loop {
            let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
                .await
                .expect("in time")
                .unwrap();
            match event.expect("the watcher runs") {
                watcher::Event::InitApply(cm) => initial.push(cm.metadata.name.unwrap()),
                watcher::Event::InitDone => break,
                _ => {}
            }
        }
        initial.sort();
        assert_eq!(initial, ["a", "b", "c"], "{mode}");
        api.patch("b", &PatchParams::default(), &Patch::Merge(json!({"data": {"mode": mode}})))
            .await
            .unwrap();
        let applied = loop {
            let event = tokio::time::timeout(Duration::from_secs(10), stream.try_next())
                .await
                .expect("in time")
                .unwrap();
            if let Some(watcher::Event::Apply(cm)) = event {
                break cm;
            }
        };
        assert_eq!(applied.data.unwrap()["mode"], mode);
    }
}

#[tokio::test]
async fn an_expired_resource_version_gets_410_and_bookmarks_arrive() {
    // A real cluster keeps minutes of history and sends bookmarks about once a minute; the
    // in-memory server can be told to keep little history.
    let server = MemoryApiServer::start_with(ServerOptions { watch_history: 5, ..Default::default() }).await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let first = api.create(&PostParams::default(), &config_map("old", &[], &[])).await.unwrap();
    for i in 0..10 {
        api.create(&PostParams::default(), &config_map(&format!("n{i}"), &[], &[])).await.unwrap();
    }
    let since = first.metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default(), &since).await.unwrap().boxed();
    match stream.next().await {
        Some(Ok(WatchEvent::Error(e))) => assert_eq!((e.code, e.reason.as_str()), (410, "Expired")),
        other => panic!("expected a 410 event, got {other:?}"),
    }
    let latest = api.list(&Default::default()).await.unwrap().metadata.resource_version.unwrap();
    let mut stream = api.watch(&WatchParams::default(), &latest).await.unwrap().boxed();
    let event =
        tokio::time::timeout(Duration::from_secs(5), stream.next()).await.expect("a bookmark within 5s");
    assert!(matches!(event, Some(Ok(WatchEvent::Bookmark(_)))), "{event:?}");
}

/// A control-plane restart as clients meet it (the in-memory server plays it; a real one is
/// restarted by its operators): the running watch ends, connections are refused, then 503,
/// then a watch is refused with 403 while reads already work, then everything works and every
/// object is still there.
#[tokio::test]
async fn a_restart_drops_connections_then_refuses_then_answers_503_then_403_to_watches() {
    use butler_apiserver::Outage;
    let server = MemoryApiServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let kept = api.create(&PostParams::default(), &config_map("kept", &[], &[])).await.unwrap();
    let version = kept.metadata.resource_version.unwrap();
    let mut running = api.watch(&WatchParams::default().timeout(60), &version).await.unwrap().boxed();

    let phase = Duration::from_millis(600);
    let outage = Outage { refused: phase, unavailable: phase, watches_forbidden: phase };
    let start = tokio::time::Instant::now();
    let restart = server.restart(outage);
    let probes = async {
        // The running watch ends (with an error or its end), without waiting for its timeout.
        let ended = tokio::time::timeout(Duration::from_secs(5), async {
            loop {
                match running.next().await {
                    None | Some(Err(_)) => break,
                    Some(Ok(WatchEvent::Bookmark(_))) => continue,
                    Some(Ok(other)) => panic!("an event during the restart: {other:?}"),
                }
            }
        })
        .await;
        assert!(ended.is_ok(), "the running watch ended");
        tokio::time::sleep_until(start + phase / 2).await;
        let refused = api.get("kept").await;
        assert!(matches!(refused, Err(ref e) if !matches!(e, kube::Error::Api(_))), "{refused:?}");
        tokio::time::sleep_until(start + phase * 3 / 2).await;
        // kube's client retries a 503 by itself: the answer is read as it comes.
        let raw = reqwest::get(format!("{}/api/v1/namespaces/default/configmaps/kept", server.url()))
            .await
            .unwrap();
        assert_eq!(raw.status().as_u16(), 503);
        let unavailable: serde_json::Value = raw.json().await.unwrap();
        assert_eq!(unavailable["reason"], "ServiceUnavailable", "{unavailable}");
        tokio::time::sleep_until(start + phase * 5 / 2).await;
        assert!(api.get("kept").await.is_ok(), "reads work while the authorizer warms up");
        let forbidden = api.watch(&WatchParams::default(), &version).await.map(|_| ());
        let status = crate::support::api_error(forbidden);
        assert_eq!(status.code, 403, "{status:?}");
    };
    tokio::join!(restart, probes);
    assert_eq!(api.get("kept").await.unwrap().metadata.uid, kept.metadata.uid, "objects stay");
    let mut again = api.watch(&WatchParams::default().timeout(5), &version).await.unwrap().boxed();
    api.create(&PostParams::default(), &config_map("after", &[], &[])).await.unwrap();
    let next = tokio::time::timeout(Duration::from_secs(5), again.next()).await.unwrap();
    assert!(matches!(next, Some(Ok(WatchEvent::Added(_)))), "{next:?}");
}
