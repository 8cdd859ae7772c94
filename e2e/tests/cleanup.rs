//! A scenario's clean-up on a real cluster: it finishes although the scenario's runtime is the
//! one blocked by the drop, and what the scenario left (a namespace whose objects keep the
//! finalizers of a controller that has stopped, a CRD of its own, cluster-wide objects labelled
//! as its own) goes; CRDs that scenarios share stay. An in-memory server on a runtime of its
//! own plays the real cluster.

use std::sync::mpsc;
use std::time::Duration;

use butler_e2e::Cluster;

mod common;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, PostParams};
use serde_json::json;

fn crd(group: &str) -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{group}")},
        "spec": {"group": group, "scope": "Namespaced",
            "names": {"kind": "Thing", "plural": "things", "singular": "thing", "listKind": "ThingList"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
    }))
    .unwrap()
}

/// Waits up to 5 s for the object `name` to be gone (the namespace controller and the CRD
/// finalizer work a moment later); the caller asserts.
async fn gone<K>(api: &Api<K>, name: &str)
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    for _ in 0..100 {
        if api.get_opt(name).await.unwrap().is_none() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[test]
fn the_clean_up_of_a_real_cluster_finishes_and_leaves_nothing_of_the_scenario() {
    let real = common::RealCluster::start();
    let kubeconfig = real.kubeconfig.clone();

    // The scenario, on a current-thread runtime like #[tokio::test]'s, dropping its Cluster.
    let (done_tx, done_rx) = mpsc::channel();
    let path = kubeconfig.clone();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let names = runtime.block_on(async move {
            let cluster = Cluster::connect_to(&path).await;
            assert!(!cluster.is_in_memory(), "it is treated as a real cluster");
            let ns = cluster.namespace("cleanup").await;
            let held: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": "held", "namespace": ns,
                "finalizers": ["example.com/controller-that-stopped"]}}))
                .unwrap();
            Api::<ConfigMap>::namespaced(cluster.client(), &ns)
                .create(&PostParams::default(), &held)
                .await
                .unwrap();
            let own = crd(&format!("{}.example.com", cluster.unique("own").replace('-', "")));
            cluster.install_own_crd(&own).await;
            let shared = crd("shared.example.com");
            cluster.install_crd(&shared).await;
            // A stand-in goes with the scenario; the real thing of that name is left alone.
            cluster.install_stand_in_crd(&crd("standin.example.com")).await;
            Api::<CustomResourceDefinition>::all(cluster.client())
                .create(&PostParams::default(), &crd("real.example.com"))
                .await
                .unwrap();
            cluster.install_stand_in_crd(&crd("real.example.com")).await;
            // Cluster-wide objects that a controller under test made for the scenario, and one
            // that is not the scenario's.
            let roles: Api<ClusterRole> = Api::all(cluster.client());
            for (name, scenario) in [(format!("{ns}-made"), ns.as_str()), (format!("{ns}-theirs"), "another")]
            {
                let role: ClusterRole = serde_json::from_value(json!({"metadata": {"name": name,
                    "labels": {"example.com/scenario": scenario}}}))
                .unwrap();
                roles.create(&PostParams::default(), &role).await.unwrap();
            }
            cluster.remove_cluster_objects_labelled(&format!("example.com/scenario={ns}"));
            let names = (ns, own.metadata.name.clone().unwrap());
            drop(cluster);
            names
        });
        done_tx.send(names).unwrap();
    });
    let (ns, own) =
        done_rx.recv_timeout(Duration::from_secs(60)).expect("the clean-up finished (it used to hang)");

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let cluster = Cluster::connect_to(&kubeconfig).await;
        let namespaces: Api<Namespace> = Api::all(cluster.client());
        gone(&namespaces, &ns).await;
        assert!(
            namespaces.get_opt(&ns).await.unwrap().is_none(),
            "the namespace is gone, its finalizers released"
        );
        let crds: Api<CustomResourceDefinition> = Api::all(cluster.client());
        gone(&crds, &own).await;
        assert!(crds.get_opt(&own).await.unwrap().is_none(), "the scenario's own CRD is gone");
        assert!(crds.get_opt("things.shared.example.com").await.unwrap().is_some(), "a shared CRD stays");
        gone(&crds, "things.standin.example.com").await;
        assert!(crds.get_opt("things.standin.example.com").await.unwrap().is_none(), "a stand-in goes");
        let real = crds.get_opt("things.real.example.com").await.unwrap().expect("the real CRD stays");
        assert!(real.metadata.labels.unwrap_or_default().is_empty(), "and is not relabelled");
        let roles: Api<ClusterRole> = Api::all(cluster.client());
        assert!(
            roles.get_opt(&format!("{ns}-made")).await.unwrap().is_none(),
            "the scenario's ClusterRole is gone"
        );
        assert!(
            roles.get_opt(&format!("{ns}-theirs")).await.unwrap().is_some(),
            "another's ClusterRole stays"
        );
    });
    drop(real);
}

/// A controller of the scenario that is still running when the clean-up starts (the scenario
/// panicked while its operator ran on another worker thread): it puts its finalizer back
/// whenever it is taken off an object not yet marked for deletion, as the operator does. The
/// clean-up keeps at it until the namespace's objects are marked, after which nobody may add
/// a finalizer, and the namespace goes.
#[test]
fn the_clean_up_outlasts_a_controller_that_still_runs() {
    const FINALIZER: &str = "example.com/still-running";
    let real = common::RealCluster::start();
    let kubeconfig = real.kubeconfig.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));

    let (done_tx, done_rx) = mpsc::channel();
    let path = kubeconfig.clone();
    let controller_stop = stop.clone();
    std::thread::spawn(move || {
        let runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let ns = runtime.block_on(async move {
            let cluster = Cluster::connect_to(&path).await;
            let ns = cluster.namespace("running").await;
            let api: Api<ConfigMap> = Api::namespaced(cluster.client(), &ns);
            let held: ConfigMap = serde_json::from_value(
                json!({"metadata": {"name": "held", "namespace": ns, "finalizers": [FINALIZER]}}),
            )
            .unwrap();
            api.create(&PostParams::default(), &held).await.unwrap();
            // The controller: on this runtime's other worker, it keeps its finalizer on.
            let watched = api.clone();
            tokio::spawn(async move {
                while !controller_stop.load(std::sync::atomic::Ordering::Relaxed) {
                    if let Ok(Some(object)) = watched.get_opt("held").await
                        && object.metadata.deletion_timestamp.is_none()
                        && !object.metadata.finalizers.unwrap_or_default().iter().any(|f| f == FINALIZER)
                    {
                        let patch = json!({"metadata": {"finalizers": [FINALIZER]}});
                        let _ = watched
                            .patch(
                                "held",
                                &kube::api::PatchParams::default(),
                                &kube::api::Patch::Merge(patch),
                            )
                            .await;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            });
            drop(cluster);
            ns
        });
        // The controller stops with the runtime, after the clean-up: the finalizer it put back
        // would hold the namespace for ever.
        drop(runtime);
        done_tx.send(ns).unwrap();
    });
    let ns = done_rx.recv_timeout(Duration::from_secs(90)).expect("the clean-up finished");
    stop.store(true, std::sync::atomic::Ordering::Relaxed);

    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let cluster = Cluster::connect_to(&kubeconfig).await;
        let namespaces: Api<Namespace> = Api::all(cluster.client());
        gone(&namespaces, &ns).await;
        let left = Api::<ConfigMap>::namespaced(cluster.client(), &ns).get_opt("held").await.unwrap();
        assert!(
            namespaces.get_opt(&ns).await.unwrap().is_none(),
            "the namespace is gone; its object was left as {:?}",
            left.map(|o| o.metadata)
        );
    });
    drop(real);
}
