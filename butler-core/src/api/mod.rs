//! Butler's API, group `butler.butlerlabs.dev`, version `v1alpha1`.
//!
//! The types follow Butler's published API documents field for field; where a field is optional
//! in the documents it is an `Option` here, quantities stay [`Quantity`], timestamps stay [`Time`].
//! Defaults, enums and minimums live in the OpenAPI schema so that the API server enforces them.
//!
//! Enums used in optional fields carry plain comments, not doc comments: schemars would put an
//! enum's doc text in place of the field's own description in the CRD.
//!
//! [`Quantity`]: k8s_openapi::apimachinery::pkg::api::resource::Quantity
//! [`Time`]: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time

// Each `printcolumn(...)` of kube's derive repeats `type_ = ...`, which this lint mistakes for a
// duplicated attribute.
#![allow(clippy::duplicated_attributes)]

pub mod ip_allocation;
pub mod labels;
pub mod network_pool;
pub mod platforms;
pub mod provider_config;
pub mod refs;
pub mod team;
pub mod tenant_cluster;

pub use ip_allocation::*;
pub use network_pool::*;
pub use platforms::*;
pub use provider_config::*;
pub use refs::*;
pub use team::*;
pub use tenant_cluster::*;

/// The API group of every Butler resource.
pub const GROUP: &str = "butler.butlerlabs.dev";
/// The API version served by this crate.
pub const VERSION: &str = "v1alpha1";
/// The `kubectl get` category every Butler resource belongs to (`kubectl get butler`).
pub const CATEGORY: &str = "butler";

/// A quantity that is not negative (`4`, `500m`, `16Gi`, `1e3`): Kubernetes' quantity pattern
/// without the minus sign, which the CRDs put on every size and limit (with `minimum: 0` for a
/// quantity written as an integer), so the API server refuses `-4` or `lots` before Butler
/// counts it.
pub const NON_NEGATIVE_QUANTITY: &str = r"^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";

/// The CustomResourceDefinitions of Butler's API, in a stable order, as the derive makes them
/// (`butler_runtime::crds` tidies and renders them).
pub fn crds()
-> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> {
    use kube::CustomResourceExt;
    vec![Team::crd(), ProviderConfig::crd(), NetworkPool::crd(), IPAllocation::crd(), TenantCluster::crd()]
        .into_iter()
        .map(bounded)
        .collect()
}

/// The longest string any field of Butler's kinds takes where the type says no less: a team
/// writes these objects, and every byte of them is held by both controller replicas and read
/// by every CEL rule (whose cost the API server bounds by these lengths).
pub const MAX_STRING: u64 = 4096;

/// A CRD whose every string field without a length, an enumeration or a format of its own is
/// at most [`MAX_STRING`] long.
fn bounded(
    crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    fn walk(node: &mut serde_json::Value) {
        match node {
            serde_json::Value::Object(map) => {
                let open_string = map.get("type").is_some_and(|t| t == "string")
                    && !map.contains_key("maxLength")
                    && !map.contains_key("enum")
                    && !map.contains_key("format");
                if open_string {
                    map.insert("maxLength".into(), MAX_STRING.into());
                }
                map.values_mut().for_each(walk);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(walk),
            _ => {}
        }
    }
    let mut value = serde_json::to_value(&crd).expect("a CRD serializes");
    let versions = value.pointer_mut("/spec/versions").and_then(serde_json::Value::as_array_mut);
    for schema in versions.into_iter().flatten().filter_map(|v| v.get_mut("schema")) {
        walk(schema);
    }
    serde_json::from_value(value).unwrap_or(crd)
}

#[cfg(test)]
mod bounds {
    /// The paths of the schema nodes of Butler's CRDs that `unbounded` says lack a bound.
    fn unbounded(unbounded: fn(&serde_json::Map<String, serde_json::Value>) -> bool) -> Vec<String> {
        fn walk(
            node: &serde_json::Value,
            path: &str,
            unbounded: fn(&serde_json::Map<String, serde_json::Value>) -> bool,
            found: &mut Vec<String>,
        ) {
            match node {
                serde_json::Value::Object(map) => {
                    if unbounded(map) {
                        found.push(path.to_string());
                    }
                    for (key, value) in map {
                        walk(value, &format!("{path}.{key}"), unbounded, found);
                    }
                }
                serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, path, unbounded, found)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        for crd in super::crds() {
            let value = serde_json::to_value(&crd).unwrap();
            let name = crd.metadata.name.unwrap_or_default();
            for version in value["spec"]["versions"].as_array().into_iter().flatten() {
                walk(&version["schema"], &name, unbounded, &mut found);
            }
        }
        found
    }

    #[test]
    fn every_string_of_butlers_kinds_has_a_bound() {
        let found = unbounded(|map| {
            map.get("type").is_some_and(|t| t == "string")
                && !["maxLength", "enum", "format"].iter().any(|k| map.contains_key(*k))
        });
        assert_eq!(found, Vec::<String>::new(), "strings without a bound");
        let tenants = super::crds().into_iter().find(|c| c.spec.names.kind == "TenantCluster").unwrap();
        let text = serde_json::to_string(&tenants).unwrap();
        assert!(text.contains(&format!("\"maxLength\":{}", super::MAX_STRING)), "{text}");
    }

    /// A team writes these objects, and the admission webhooks decode what the API server
    /// passes them: no list is longer than its field says (each chooses its own bound).
    #[test]
    fn every_array_of_butlers_kinds_has_a_bound() {
        let found =
            unbounded(|map| map.get("type").is_some_and(|t| t == "array") && !map.contains_key("maxItems"));
        assert_eq!(found, Vec::<String>::new(), "arrays without maxItems");
    }
}
