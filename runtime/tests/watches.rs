//! A metadata watch whose resourceVersion expired (410) lists again and reports every object
//! there is, so that a deletion in the gap is found, then goes on watching from the list.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_apiserver::{MemoryApiServer, ServerOptions};
use butler_runtime::watches::{Handler, Seen, follow_from};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::json;

#[derive(Debug, Clone, PartialEq)]
enum Heard {
    Present(String),
    Deleted(String),
    Relisted(Vec<String>),
}

async fn heard_until(log: &Arc<Mutex<Vec<Heard>>>, what: impl Fn(&[Heard]) -> bool) -> Vec<Heard> {
    for _ in 0..200 {
        let seen = log.lock().unwrap().clone();
        if what(&seen) {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("not heard within 5 s: {:?}", log.lock().unwrap());
}

#[tokio::test]
async fn an_expired_watch_lists_again_and_a_deletion_in_the_gap_is_found() {
    let server = MemoryApiServer::start_with(ServerOptions { watch_history: 5, ..Default::default() }).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let make = |name: &str, labelled: bool| -> ConfigMap {
        let labels = if labelled { json!({"watched": "yes"}) } else { json!({}) };
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
    };
    let start = configmaps.create(&PostParams::default(), &make("a", true)).await.unwrap();
    let from = start.metadata.resource_version.unwrap();
    configmaps.create(&PostParams::default(), &make("b", true)).await.unwrap();
    configmaps.delete("a", &DeleteParams::default()).await.unwrap();
    // More changes than the server keeps: a watch from `from` has expired.
    for i in 0..10 {
        configmaps.create(&PostParams::default(), &make(&format!("noise-{i}"), false)).await.unwrap();
    }

    let log = Arc::new(Mutex::new(Vec::new()));
    let handler: Handler = {
        let log = log.clone();
        Arc::new(move |seen| {
            let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
                m.name.clone().unwrap_or_default()
            };
            let heard = match seen {
                Seen::Present(m) => Heard::Present(name(m)),
                Seen::Deleted(m) => Heard::Deleted(name(m)),
                Seen::Relisted(all) => Heard::Relisted(all.iter().map(name).collect()),
            };
            log.lock().unwrap().push(heard);
        })
    };
    let resource = ApiResource::erase::<ConfigMap>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &resource);
    let watch =
        tokio::spawn(async move { follow_from(&api, Some("watched=yes"), &handler, "test", from).await });

    let seen = heard_until(&log, |h| h.iter().any(|e| matches!(e, Heard::Relisted(_)))).await;
    assert_eq!(seen[0], Heard::Relisted(vec!["b".into()]), "only b is there: a went in the gap");
    configmaps.create(&PostParams::default(), &make("c", true)).await.unwrap();
    heard_until(&log, |h| h.contains(&Heard::Present("c".into()))).await;
    watch.abort();
}
