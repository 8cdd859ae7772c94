//! The workspace's own CRDs (`crds/`) install, and every example of the API documents is
//! accepted by them as an API server checks it: schema, defaults and CEL rules.

use std::path::Path;

use butler_e2e::Cluster;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;

fn yaml_documents(dir: &Path) -> Vec<(String, Value)> {
    let mut files: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut documents = Vec::new();
    for file in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "yaml")) {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.file_name().unwrap().to_string_lossy().to_string();
        for doc in serde_saphyr::from_multiple::<Value>(&text).unwrap().into_iter().filter(|d| !d.is_null()) {
            documents.push((name.clone(), doc));
        }
    }
    documents
}

#[tokio::test]
async fn the_workspace_crds_accept_every_document_example() {
    let cluster = Cluster::connect().await;
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut crds = Vec::new();
    for (_, doc) in yaml_documents(&root.join("crds")) {
        let crd: CustomResourceDefinition = serde_json::from_value(doc).unwrap();
        cluster.install_crd(&crd).await;
        crds.push(crd);
    }
    assert_eq!(crds.len(), 13);
    let ns = cluster.namespace("examples").await;
    let mut created = 0;
    for dir in ["butler-core/tests/fixtures", "operator/tests/fixtures"] {
        for (file, mut doc) in yaml_documents(&root.join(dir)) {
            let Some(kind) = doc["kind"].as_str().map(String::from) else { continue };
            let Some(crd) = crds.iter().find(|c| c.spec.names.kind == kind) else { continue };
            let gvk = GroupVersionKind::gvk(&crd.spec.group, &crd.spec.versions[0].name, &kind);
            let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
            // The examples reuse names; each gets its own.
            let name = cluster.unique(&format!("{}-{created}", doc["metadata"]["name"].as_str().unwrap()));
            doc["metadata"]["name"] = Value::String(name.clone());
            let api: Api<DynamicObject> = if crd.spec.scope == "Namespaced" {
                doc["metadata"]["namespace"] = Value::String(ns.clone());
                Api::namespaced_with(cluster.client(), &ns, &resource)
            } else {
                Api::all_with(cluster.client(), &resource)
            };
            let object: DynamicObject = serde_json::from_value(doc).unwrap();
            if let Err(e) = api.create(&PostParams::default(), &object).await {
                panic!("{file}: {kind} {name} is refused: {e}");
            }
            if crd.spec.scope == "Cluster" {
                api.delete(&name, &Default::default()).await.unwrap();
            }
            created += 1;
        }
    }
    // The cross-field rules of the CRDs hold, as CEL rules evaluated by the server.
    let refusals = [
        (
            "providerconfigs",
            "ProviderConfig",
            serde_json::json!({"provider": "aws", "credentialsRef": {"name": "c"}, "scope": {"type": "team"}}),
            "scope.teamRef.name is required when scope.type is team",
        ),
        (
            "providerconfigs",
            "ProviderConfig",
            serde_json::json!({"provider": "harvester", "credentialsRef": {"name": "c"}, "network": {"mode": "ipam"}}),
            "network.poolRefs needs at least one NetworkPool",
        ),
        (
            "infrastructureproviders",
            "InfrastructureProvider",
            serde_json::json!({"fetchConfig": {"url": "https://github.com/o/r/releases/latest/infrastructure-components.yaml", "selector": {"matchLabels": {"a": "b"}}}}),
            "fetchConfig needs exactly one of url, oci or selector",
        ),
        (
            "infrastructureproviders",
            "InfrastructureProvider",
            serde_json::json!({"fetchConfig": {"url": "oci://ghcr.io/o/infrastructure-x", "oci": "ghcr.io/o/infrastructure-x"}}),
            "fetchConfig needs exactly one of url, oci or selector",
        ),
        (
            "providerupgrades",
            "ProviderUpgrade",
            serde_json::json!({"contract": "v1beta2", "providers": [{"kind": "CoreProvider", "name": "butler", "version": "v0.2.0"}]}),
            "give spec.contract or spec.providers, one of them",
        ),
        (
            "infrastructureproviders",
            "InfrastructureProvider",
            serde_json::json!({"upgradePolicy": {"follow": "Patch"}}),
            "spec.upgradePolicy follows releases from spec.version: set spec.version too",
        ),
    ];
    for (plural, kind, spec, message) in refusals {
        let crd = crds.iter().find(|c| c.spec.names.plural == plural).unwrap();
        let gvk = GroupVersionKind::gvk(&crd.spec.group, "v1alpha1", kind);
        let api: Api<DynamicObject> =
            Api::namespaced_with(cluster.client(), &ns, &ApiResource::from_gvk_with_plural(&gvk, plural));
        let object: DynamicObject = serde_json::from_value(serde_json::json!({
            "apiVersion": gvk.api_version(), "kind": kind, "metadata": {"name": "refused"}, "spec": spec
        }))
        .unwrap();
        match api.create(&PostParams::default(), &object).await {
            Err(kube::Error::Api(status)) => assert!(status.message.contains(message), "{}", status.message),
            other => panic!("{kind} should be refused, got {other:?}"),
        }
    }
    // spec/000: 5, spec/001: 3, spec/002: 11, spec/004: 6 provider objects.
    assert_eq!(created, 25, "every ProviderConfig, Team, NetworkPool, IPAllocation and provider example");
}
