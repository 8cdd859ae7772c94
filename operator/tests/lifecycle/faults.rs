//! Faults a real cluster showed the operator, held: killed again and again in the first
//! seconds of installing seven providers, then the API server restarted under it (connections
//! dropped, refused, 503, a brief 403 on watches). Each time it converges, every inventoried
//! object is there, and deletion then leaves nothing. The scenario prints its figures.

use std::time::{Duration, Instant};

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use butler_operator::controller::ProviderObject;
use butler_runtime::objects::ObjectRef;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::json;

use crate::fixtures::{Part, components, publish};
use crate::support::{Scenario, is};
use crate::upgrade::{installed, spec};

const INFRASTRUCTURE: [&str; 6] = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];

async fn ready<K: ProviderObject>(s: &Scenario, name: &str) -> bool {
    s.api::<K>().get_opt(name).await.ok().flatten().is_some_and(|p| is(&p, "Ready", "True"))
}

/// Waits until the core and every infrastructure provider are Ready, playing the Deployment
/// controller where none runs.
async fn all_ready(s: &Scenario) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        s.mark_available().await;
        let mut waiting = Vec::new();
        if !ready::<CoreProvider>(s, "butler").await {
            waiting.push("butler");
        }
        for name in INFRASTRUCTURE {
            if !ready::<InfrastructureProvider>(s, name).await {
                waiting.push(name);
            }
        }
        if waiting.is_empty() {
            return;
        }
        assert!(Instant::now() < deadline, "not Ready within 60 s: {waiting:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Every object the scenario's providers' inventories list.
async fn inventoried(s: &Scenario) -> Vec<ObjectRef> {
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let inventories = configmaps
        .list(&ListParams::default().labels(butler_operator::controller::install::inventory::LABEL_INVENTORY))
        .await
        .unwrap()
        .items;
    assert_eq!(inventories.len(), 7, "one inventory per provider");
    let mut objects = Vec::new();
    for cm in inventories {
        let record: serde_json::Value =
            serde_json::from_str(&cm.data.unwrap_or_default()["inventory"]).unwrap();
        assert!(record.get("pending").is_none(), "an inventory still pending: {record}");
        objects.extend(serde_json::from_value::<Vec<ObjectRef>>(record["objects"].clone()).unwrap());
    }
    objects
}

async fn exists(s: &Scenario, object: &ObjectRef) -> bool {
    let (group, version) = match object.api_version.split_once('/') {
        Some((g, v)) => (g, v),
        None => ("", object.api_version.as_str()),
    };
    let gvk = GroupVersionKind::gvk(group, version, &object.kind);
    let (resource, _): (ApiResource, _) = kube::discovery::pinned_kind(&s.client, &gvk).await.unwrap();
    let api: Api<DynamicObject> = match &object.namespace {
        Some(ns) => Api::namespaced_with(s.client.clone(), ns, &resource),
        None => Api::all_with(s.client.clone(), &resource),
    };
    api.get_opt(&object.name).await.unwrap().is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seven_providers_converge_through_kills_and_an_api_server_restart_and_leave_nothing() {
    let mut s = Scenario::new("faults").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    for name in INFRASTRUCTURE {
        for version in ["v1.0.0", "v1.1.0"] {
            let release = components(name, version, &[Part::Settings]);
            publish(
                &s,
                &format!("infrastructure-{name}"),
                "infrastructure-components.yaml",
                version,
                &release,
            )
            .await;
        }
    }
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    for name in INFRASTRUCTURE {
        s.create::<InfrastructureProvider>(name, &spec(&format!("infrastructure-{name}"), "v1.0.0")).await;
    }
    // Twelve kills in the first six seconds, at a different point of the install each time.
    let first = Instant::now();
    for kill in 0..12u64 {
        tokio::time::sleep(Duration::from_millis(250 + (kill * 137) % 400)).await;
        s.kill_operator().await;
        s.start_operator();
    }
    let last_start = Instant::now();
    all_ready(&s).await;
    println!(
        "seven providers Ready {} ms after the operator's last start (12 kills in its first {} ms)",
        last_start.elapsed().as_millis(),
        last_start.duration_since(first).as_millis()
    );
    let objects = inventoried(&s).await;
    for object in &objects {
        assert!(exists(&s, object).await, "{} is inventoried but not there", object.describe());
    }

    match s.cluster.server() {
        Some(server) => {
            let restarted = Instant::now();
            server.restart(butler_apiserver::Outage::default()).await;
            println!("the API server restarted in {} ms", restarted.elapsed().as_millis());
            let changed = Instant::now();
            s.patch_spec::<InfrastructureProvider>("alpha", json!({"version": "v1.1.0"})).await;
            s.wait_for::<InfrastructureProvider>("alpha", "v1.1.0 installed", installed("v1.1.0")).await;
            println!(
                "a spec change made right after the restart was applied {} ms later",
                changed.elapsed().as_millis()
            );
            all_ready(&s).await;
        }
        None => println!("skipped on a real cluster: restarting its API server"),
    }

    let objects = inventoried(&s).await;
    for name in INFRASTRUCTURE {
        s.api::<InfrastructureProvider>().delete(name, &Default::default()).await.unwrap();
    }
    s.api::<CoreProvider>().delete("butler", &Default::default()).await.unwrap();
    for name in INFRASTRUCTURE {
        s.wait_gone::<InfrastructureProvider>(name).await;
    }
    s.wait_gone::<CoreProvider>("butler").await;
    let left: Vec<String> = {
        let mut left = Vec::new();
        for object in objects.iter().filter(|o| o.kind != "Namespace") {
            if exists(&s, object).await {
                left.push(object.describe());
            }
        }
        left
    };
    assert!(left.is_empty(), "deletion left {left:?}");
    s.stop_operator().await;
}
