//! The examples of the book and the README cannot rot: every Kubernetes object of
//! `docs/examples/` and of the README's YAML blocks goes through a server-side dry run on an API
//! server with every CRD of the workspace and the controller's webhooks: one the API would refuse
//! fails here, and so does one a real kubectl refuses (`apply --dry-run=server`, validation on).
//! (The clusterctl config files among the examples are read by the operator's tests.)

use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Scope, pinned_kind};
use serde_json::Value;

use crate::support::{Scenario, serve_webhooks};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Every example document, with where it comes from.
fn examples() -> Vec<(String, Value)> {
    let mut texts: Vec<(String, String)> = Vec::new();
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(root().join("docs/examples")).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    for file in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        texts.push((format!("docs/examples/{name}"), std::fs::read_to_string(&file).unwrap()));
    }
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    for (i, block) in readme.split("```yaml\n").skip(1).enumerate() {
        let body = block.split("```").next().unwrap_or_default();
        texts.push((format!("README.md, YAML block {}", i + 1), body.to_string()));
    }
    texts
        .into_iter()
        .flat_map(|(from, text)| {
            let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
                .unwrap_or_else(|e| panic!("{from} does not parse as YAML: {e}"));
            documents.into_iter().filter(|d| !d.is_null()).map(move |d| (from.clone(), d))
        })
        .collect()
}

// Two threads: kubectl runs as a blocking process while the server and its HTTPS front answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_example_of_the_book_and_the_readme_passes_a_server_dry_run() {
    let s = Scenario::start().await;
    // The operator's CRDs too, as `crds/` holds them.
    for entry in std::fs::read_dir(root().join("crds")).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().starts_with("operator.butlerlabs.dev_") {
            let crd: CustomResourceDefinition =
                serde_saphyr::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
            s.cluster.install_crd(&crd).await;
        }
    }
    let namespace = s.namespace("docs").await;
    let _webhooks = match s.webhooks_allowed() {
        true => Some(serve_webhooks(&s, &namespace).await),
        false => None,
    };
    let mut checked = 0;
    let mut refused = Vec::new();
    for (from, mut object) in examples() {
        if object.get("apiVersion").is_none() {
            // A clusterctl config file, not an object.
            continue;
        }
        let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g.to_string(), v.to_string()),
            None => (String::new(), object["apiVersion"].as_str().unwrap().to_string()),
        };
        let kind = object["kind"].as_str().unwrap().to_string();
        let gvk = GroupVersionKind::gvk(&group, &version, &kind);
        let (resource, caps) = pinned_kind(&s.client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("{from}: {kind} is no kind the API server serves: {e}"));
        let name = object["metadata"]["name"].as_str().unwrap().to_string();
        // Into the scenario's namespace: the examples name `butler-system`, which a shared cluster
        // may not have, and a dry run leaves nothing behind anyway.
        let api: Api<DynamicObject> = match caps.scope {
            Scope::Namespaced => {
                object["metadata"]["namespace"] = Value::String(namespace.clone());
                Api::namespaced_with(s.client.clone(), &namespace, &resource)
            }
            Scope::Cluster => Api::all_with(s.client.clone(), &resource),
        };
        let params = PatchParams::apply("docs-examples").dry_run();
        match api.patch(&name, &params, &Patch::Apply(&object)).await {
            Ok(_) => checked += 1,
            Err(e) => refused.push(format!("{from}: {kind} {name}: {}", crate::support::api_message(&e))),
        }
    }
    assert!(refused.is_empty(), "examples the API refuses:\n{}", refused.join("\n"));
    assert!(checked >= 12, "only {checked} example objects were checked");

    // The same through a real kubectl, as a reader pastes them: validation on (kubectl's
    // default), a server-side dry run.
    let Some(kubectl) = butler_e2e::clients::Client::new("kubectl", &s.cluster).await else { return };
    for (from, mut object) in examples().into_iter().filter(|(_, o)| o.get("apiVersion").is_some()) {
        if object["metadata"]["namespace"].is_string() {
            object["metadata"]["namespace"] = Value::String(namespace.clone());
        }
        let run = kubectl
            .run(&["apply", "--dry-run=server", "-n", &namespace, "-f", "-"], Some(&object.to_string()));
        assert!(run.success, "{from}: kubectl apply --dry-run=server refuses it: {}", run.stderr);
    }
}
