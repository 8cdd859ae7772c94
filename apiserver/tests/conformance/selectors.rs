use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};

use crate::support::{api_error, config_map, made};

async fn names(api: &Api<ConfigMap>, params: &ListParams) -> Vec<String> {
    // What the scenario made: a real cluster puts more in every namespace.
    let mut names: Vec<String> = api
        .list(params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(made)
        .filter_map(|c| c.metadata.name)
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn label_and_field_selectors() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("select").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    let objects = [
        ("a", vec![("app", "web"), ("tier", "front")]),
        ("b", vec![("app", "web"), ("tier", "back")]),
        ("c", vec![("app", "db")]),
        ("d", vec![]),
    ];
    for (name, labels) in &objects {
        api.create(&PostParams::default(), &config_map(name, labels, &[])).await.unwrap();
    }
    let cases = [
        ("app=web", vec!["a", "b"]),
        ("app==web", vec!["a", "b"]),
        ("app!=web", vec!["c", "d"]),
        ("tier in (front,back)", vec!["a", "b"]),
        ("tier notin (front)", vec!["b", "c", "d"]),
        ("app,!tier", vec!["c"]),
        ("app=web,tier=back", vec!["b"]),
    ];
    for (selector, expect) in cases {
        assert_eq!(names(&api, &ListParams::default().labels(selector)).await, expect, "{selector}");
    }
    assert_eq!(names(&api, &ListParams::default().fields("metadata.name=c")).await, ["c"]);
    assert_eq!(
        names(&api, &ListParams::default().fields("metadata.name!=c").labels("app")).await,
        ["a", "b"]
    );
    let all: Api<ConfigMap> = Api::all(cluster.client());
    let in_ns = names(&all, &ListParams::default().fields(&format!("metadata.namespace={ns}"))).await;
    assert_eq!(in_ns, ["a", "b", "c", "d"]);
    let error = api_error(api.list(&ListParams::default().fields("data.x=1")).await);
    assert_eq!(error.code, 400);
}

#[tokio::test]
async fn paging_with_limit_and_continue() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("page").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    for i in 0..7 {
        api.create(&PostParams::default(), &config_map(&format!("cm-{i}"), &[("paged", "yes")], &[]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut params = ListParams::default().labels("paged=yes").limit(3);
    let mut pages = 0;
    loop {
        let page = api.list(&params).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().filter_map(|c| c.metadata.name));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => break,
        }
    }
    seen.sort();
    assert_eq!(pages, 3);
    assert_eq!(seen, (0..7).map(|i| format!("cm-{i}")).collect::<Vec<_>>());
}

/// Every page of a list comes from the snapshot of its first and says its resourceVersion, so
/// that a watch from there misses nothing made while the pages were read (kube's watcher
/// starts from it: an object made between pages, sorted before the pages read, would
/// otherwise be in neither the list nor the watch).
#[tokio::test]
async fn the_pages_of_a_list_are_one_snapshot() {
    use futures::{StreamExt, TryStreamExt};
    use kube::api::WatchEvent;
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("snapshot").await;
    let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
    for name in ["b", "c", "d", "e"] {
        api.create(&PostParams::default(), &config_map(name, &[("paged", "yes")], &[])).await.unwrap();
    }
    let params = ListParams::default().labels("paged=yes").limit(2);
    let first = api.list(&params).await.unwrap();
    let version = first.metadata.resource_version.clone().unwrap();
    // Made between the pages, before them in the list's order.
    api.create(&PostParams::default(), &config_map("a", &[("paged", "yes")], &[])).await.unwrap();
    let token = first.metadata.continue_.clone().unwrap();
    let second = api.list(&params.clone().continue_token(&token)).await.unwrap();
    assert_eq!(
        second.metadata.resource_version.as_deref(),
        Some(version.as_str()),
        "the first page's version"
    );
    let listed: Vec<String> =
        first.items.iter().chain(&second.items).filter_map(|c| c.metadata.name.clone()).collect();
    assert_eq!(listed, ["b", "c", "d", "e"], "as they were at the first page");
    let watch = kube::api::WatchParams::default().labels("paged=yes").timeout(5);
    let mut events = api.watch(&watch, &version).await.unwrap().boxed();
    let added = loop {
        match events.try_next().await.unwrap() {
            Some(WatchEvent::Added(c)) => break c.metadata.name,
            Some(WatchEvent::Bookmark(_)) => continue,
            other => panic!("{other:?}"),
        }
    };
    assert_eq!(added.as_deref(), Some("a"), "the watch from the list's version sees what the list did not");
}
