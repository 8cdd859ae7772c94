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
}
