//! Storage-version migration of 10,000 objects on the in-memory API server: objects stored at
//! v1alpha1, the CRD's storage version moved to v1beta1, then every object written again and
//! `status.storedVersions` trimmed (what the operator does after a release moved it).
//!
//! Measured: the time of the migration (goal: under 30 s; writes are paced at 1,000 a second)
//! and the operator's requests to the API server (goal: at most one write per object).

use std::time::{Duration, Instant};

use butler_apiserver::MemoryApiServer;
use butler_operator::controller::install::storage;
use criterion::Criterion;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

const OBJECTS: usize = 10_000;
const AGENT: &str = "butler-operator";
const GROUP: &str = "bench.example.io";

fn crd(storage: &str) -> CustomResourceDefinition {
    let version = |name: &str| {
        json!({"name": name, "served": true, "storage": name == storage,
               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
                 "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
                 "versions": [version("v1alpha1"), version("v1beta1")]},
    }))
    .unwrap()
}

/// A server holding OBJECTS Gadgets stored at v1alpha1, whose CRD now stores v1beta1.
async fn stale_cluster() -> MemoryApiServer {
    let server = MemoryApiServer::start().await;
    let client = server.client();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = format!("gadgets.{GROUP}");
    let apply = PatchParams::apply("bench").force();
    crds.patch(&name, &apply, &Patch::Apply(crd("v1alpha1"))).await.unwrap();
    await_condition(crds.clone(), &name, conditions::is_crd_established()).await.unwrap();
    for ns in ["a", "b"] {
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta { name: Some(ns.into()), ..Default::default() },
            ..Default::default()
        };
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await.unwrap();
    }
    let gvk = GroupVersionKind::gvk(GROUP, "v1alpha1", "Gadget");
    let resource = ApiResource::from_gvk_with_plural(&gvk, "gadgets");
    futures::stream::iter(0..OBJECTS)
        .map(|i| {
            let ns = if i % 2 == 0 { "a" } else { "b" };
            let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), ns, &resource);
            let gadget: DynamicObject = serde_json::from_value(json!({
                "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "Gadget",
                "metadata": {"name": format!("g{i}")}, "spec": {"size": i},
            }))
            .unwrap();
            async move { api.create(&PostParams::default(), &gadget).await.unwrap() }
        })
        .buffer_unordered(32)
        .collect::<Vec<_>>()
        .await;
    crds.patch(&name, &apply, &Patch::Apply(crd("v1beta1"))).await.unwrap();
    server
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let mut group = c.benchmark_group("storage_migration");
    group.sample_size(10).warm_up_time(Duration::from_millis(1)).measurement_time(Duration::from_secs(1));
    let mut figures = Vec::new();
    group.bench_function("10000_objects", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let (elapsed, requests, writes) = runtime.block_on(async {
                    let server = stale_cluster().await;
                    let client = server.client_as(AGENT);
                    let started = Instant::now();
                    let done = storage::migrate_named(&client, &format!("gadgets.{GROUP}"), &|_, _| {})
                        .await
                        .unwrap()
                        .unwrap();
                    let elapsed = started.elapsed();
                    assert_eq!(done.rewritten, OBJECTS);
                    let crd = Api::<CustomResourceDefinition>::all(server.client())
                        .get(&format!("gadgets.{GROUP}"))
                        .await
                        .unwrap();
                    assert_eq!(crd.status.unwrap().stored_versions.unwrap(), ["v1beta1"]);
                    let requests = server.requests_from(AGENT);
                    let writes = requests
                        .iter()
                        .filter(|(method, path)| method == "PATCH" && path.contains("/gadgets/"))
                        .count();
                    (elapsed, requests.len(), writes)
                });
                figures.push((elapsed, requests, writes));
                total += elapsed;
            }
            total
        })
    });
    group.finish();
    if let Some((elapsed, requests, writes)) = figures.last() {
        let slowest = figures.iter().map(|f| f.0).max().unwrap_or_default();
        println!(
            "migrating {OBJECTS} objects: {elapsed:.2?} (slowest of {} runs {slowest:.2?}; goal under 30 s); {requests} requests, {writes} object writes: {:.4} per object (goal at most 1; the rest are the lists, 500 a page, and the CRD's read and status write)",
            figures.len(),
            *writes as f64 / OBJECTS as f64
        );
    }
}

criterion::criterion_group!(benches, bench);
criterion::criterion_main!(benches);
