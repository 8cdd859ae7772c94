//! Every YAML example of the API documents (spec/000 ProviderConfig, spec/001 Team, spec/002
//! IPAM) deserializes into our types and serializes back to exactly the same document.

use std::path::Path;

use butler_core::api::{IPAllocation, NetworkConfig, NetworkPool, ProviderConfig, Team, TenantCluster};
use k8s_openapi::api::core::v1::Secret;
use kube::api::DynamicObject;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Deserializes `doc` as `T` and serializes it back; the two must be equal.
fn round_trip<T: DeserializeOwned + Serialize>(doc: &Value, origin: &str) {
    let typed: T =
        serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{origin}: does not deserialize: {e}"));
    let back = serde_json::to_value(&typed).unwrap();
    assert_eq!(&back, doc, "{origin}: changed on the way through {}", std::any::type_name::<T>());
}

fn check_document(doc: &Value, origin: &str) {
    match doc["kind"].as_str() {
        Some("ProviderConfig") => round_trip::<ProviderConfig>(doc, origin),
        Some("Team") => round_trip::<Team>(doc, origin),
        Some("NetworkPool") => round_trip::<NetworkPool>(doc, origin),
        Some("IPAllocation") => round_trip::<IPAllocation>(doc, origin),
        Some("TenantCluster") => round_trip::<TenantCluster>(doc, origin),
        Some("Secret") => round_trip::<Secret>(doc, origin),
        Some(_) => round_trip::<DynamicObject>(doc, origin),
        // A fragment of a ProviderConfig spec, as the IPAM document shows them.
        None => round_trip::<NetworkConfig>(&doc["spec"]["network"], origin),
    }
}

#[test]
fn every_document_example_round_trips() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut documents = 0;
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let origin = file.file_name().unwrap().to_string_lossy().to_string();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("{origin}: {e}"));
        for doc in docs.iter().filter(|d| !d.is_null()) {
            check_document(doc, &origin);
            documents += 1;
        }
    }
    // 6 Secrets and 5 ProviderConfigs (spec/000), 3 Teams (spec/001), 14 documents (spec/002).
    assert_eq!(documents, 28, "a fixture went missing");
}

#[test]
fn a_changed_document_is_caught() {
    // The round trip must notice a field our types do not know.
    let doc: Value = serde_json::json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "Team",
        "metadata": {"name": "t"}, "spec": {"access": {}, "unknownField": 1}
    });
    let result = std::panic::catch_unwind(|| round_trip::<Team>(&doc, "inline"));
    assert!(result.is_err());
}
