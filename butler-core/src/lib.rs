//! Butler core: Butler's own API (`butler.butlerlabs.dev/v1alpha1`), the IPAM allocator and the
//! Butler core controllers.
//!
//! - [`api`]: the custom resources Team, ProviderConfig, NetworkPool, IPAllocation and
//!   TenantCluster, with the finalizer names and label keys they use.
//! - [`crds`]: the CustomResourceDefinitions generated from those types.
//! - [`ipam`]: the address allocator, a pure library with no Kubernetes types.

pub mod api;
pub mod crds;
pub mod ipam;
