//! Butler core: Butler's own API (`butler.butlerlabs.dev/v1alpha1`) and the IPAM allocator. No
//! controller and no I/O: the controllers that serve this API live in `butler-controller`.
//!
//! - [`api`]: the custom resources Team, ProviderConfig, NetworkPool, IPAllocation and
//!   TenantCluster, with the finalizer names and label keys they use, and their CRDs.
//! - [`ipam`]: the address allocator, a pure library with no Kubernetes types.

pub mod api;
pub mod ipam;
