//! The provider API, group `operator.butlerlabs.dev`, version `v1alpha1`: seven namespaced kinds,
//! one per provider type, that share [`ProviderSpec`] and [`ProviderStatus`] (after the Cluster
//! API Provider Operator proposal).

// Each `printcolumn(...)` of kube's derive repeats `type_ = ...`, which this lint mistakes for a
// duplicated attribute.
#![allow(clippy::duplicated_attributes)]

mod kinds;
mod nanos;
mod policy;
mod spec;
mod status;
mod upgrade;

pub use kinds::*;
pub use nanos::NanosOrDuration;
pub use policy::*;
pub use spec::*;
pub use status::*;
pub use upgrade::*;

/// The API group of the provider kinds.
pub const GROUP: &str = "operator.butlerlabs.dev";
/// The API version served by this crate.
pub const VERSION: &str = "v1alpha1";
/// Finalizer that keeps a provider object until its components are removed.
pub const PROVIDER_FINALIZER: &str = "operator.butlerlabs.dev/provider";
/// Field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "butler-operator";
