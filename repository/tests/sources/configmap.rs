use std::collections::BTreeMap;
use std::io::Write;

use butler_apiserver::MemoryApiServer;
use butler_repository::{ConfigMapSource, Repository, Source};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::support::{METADATA, init};

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

fn selector(label: &str) -> LabelSelector {
    LabelSelector {
        match_labels: Some(BTreeMap::from([("provider-components".to_string(), label.to_string())])),
        ..Default::default()
    }
}

async fn create(api: &Api<ConfigMap>, body: serde_json::Value) {
    api.create(&PostParams::default(), &serde_json::from_value(body).unwrap()).await.unwrap();
}

#[tokio::test]
async fn several_versions_under_one_selector_plain_and_compressed() {
    init();
    let server = MemoryApiServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    create(
        &api,
        json!({"metadata": {"name": "v0.4.8", "labels": {"provider-components": "azure"}},
                        "data": {"metadata": METADATA, "components": "kind: Namespace # v0.4.8\n"}}),
    )
    .await;
    let packed = gzip(b"kind: Namespace # v0.4.9\n");
    create(&api, json!({"metadata": {"name": "azure-newest", "labels": {"provider-components": "azure", "provider.cluster.x-k8s.io/version": "v0.4.9"},
                                     "annotations": {"provider.cluster.x-k8s.io/compressed": "true"}},
                        "data": {"metadata": METADATA},
                        "binaryData": {"components": base64_of(&packed)}})).await;
    let source = ConfigMapSource::new(server.client(), "default", &selector("azure")).unwrap();
    let mut versions: Vec<String> = source.versions().await.unwrap().iter().map(|v| v.to_string()).collect();
    versions.sort();
    assert_eq!(versions, ["v0.4.8", "v0.4.9"]);
    let repo = Repository::new("infrastructure-azure", source, "infrastructure-components.yaml");
    let latest = repo.resolve(None).await.unwrap();
    assert_eq!(latest.to_string(), "v0.4.9");
    assert_eq!(repo.components(&latest).await.unwrap(), b"kind: Namespace # v0.4.9\n");
    assert_eq!(repo.components(&"v0.4.8".parse().unwrap()).await.unwrap(), b"kind: Namespace # v0.4.8\n");
    assert_eq!(repo.metadata(&latest).await.unwrap().release_series.len(), 4);
}

fn base64_of(bytes: &[u8]) -> String {
    // ByteString serializes as base64 in JSON.
    serde_json::to_value(k8s_openapi::ByteString(bytes.to_vec())).unwrap().as_str().unwrap().to_string()
}

#[tokio::test]
async fn errors_name_the_selector_the_namespace_and_the_configmap() {
    init();
    let server = MemoryApiServer::start().await;
    let api: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    let check = |label: &'static str, expect: &'static str| {
        let client = server.client();
        async move {
            let source = ConfigMapSource::new(client, "default", &selector(label))
                .unwrap()
                .with_max_decompressed(1 << 10);
            let error = match source.versions().await {
                Err(e) => e,
                Ok(versions) => match source.file(&versions[0], "infrastructure-components.yaml").await {
                    Err(e) => e,
                    Ok(_) => source.file(&versions[0], "metadata.yaml").await.unwrap_err(),
                },
            };
            let text = error.to_string();
            assert!(
                text.starts_with(&format!(
                    "ConfigMaps selected by \"provider-components={label}\" in namespace default: "
                )),
                "{text}"
            );
            assert!(text.contains(expect), "{label}: {text}");
        }
    };
    check("nothing", "none found").await;
    create(&api, json!({"metadata": {"name": "latest-build", "labels": {"provider-components": "badname"}}, "data": {"metadata": METADATA}})).await;
    check("badname", "\"latest-build\" from the name of ConfigMap latest-build").await;
    create(&api, json!({"metadata": {"name": "x", "labels": {"provider-components": "badlabel", "provider.cluster.x-k8s.io/version": "one"}}, "data": {}})).await;
    check("badlabel", "\"one\" from the label provider.cluster.x-k8s.io/version of ConfigMap x").await;
    create(&api, json!({"metadata": {"name": "v1.0.0", "labels": {"provider-components": "nometa"}}, "data": {"components": "x"}})).await;
    check("nometa", "ConfigMap v1.0.0 has no data key \"metadata\"").await;
    create(&api, json!({"metadata": {"name": "v1.0.1", "labels": {"provider-components": "nocomp"}}, "data": {"metadata": METADATA}})).await;
    check("nocomp", "ConfigMap v1.0.1 has no data key \"components\"").await;
    create(&api, json!({"metadata": {"name": "v1.0.2", "labels": {"provider-components": "badgzip"}, "annotations": {"provider.cluster.x-k8s.io/compressed": "true"}},
                        "data": {"metadata": METADATA}, "binaryData": {"components": base64_of(b"not gzip")}})).await;
    check("badgzip", "the components of ConfigMap v1.0.2 is not valid gzip").await;
    create(&api, json!({"metadata": {"name": "v1.0.3", "labels": {"provider-components": "bomb"}, "annotations": {"provider.cluster.x-k8s.io/compressed": "true"}},
                        "data": {"metadata": METADATA}, "binaryData": {"components": base64_of(&gzip(&[b'a'; 1 << 16]))}})).await;
    check("bomb", "is larger than the limit of 1024 bytes").await;
    for name in ["a", "b"] {
        create(&api, json!({"metadata": {"name": name, "labels": {"provider-components": "dup", "provider.cluster.x-k8s.io/version": "v1.0.0"}}, "data": {"metadata": METADATA}})).await;
    }
    check("dup", "ConfigMaps a and b both hold version v1.0.0; keep one").await;
}
