//! `butler-controller`: Butler's core controllers, the binary the core provider's components
//! run. Each controller is written as observe, plan (pure), apply, status, on `butler-runtime`.
//!
//! - [`team`]: a Team's namespace, the roles of its members, its usage against its limits, and
//!   its deletion in order (spec/001).
//! - [`providerconfig`]: a ProviderConfig's credentials, the reachability of its platform, its
//!   pools and their capacity, and its deletion held while clusters use it (spec/000).
//! - [`webhooks`]: the admission rules of ProviderConfigs and TenantClusters, and the Team's
//!   defaults for new clusters, answered from the caches.
//! - [`secrets`]: where the controller may read Secrets (by name, in namespaces bound for it).

pub mod caches;
pub mod clock;
pub mod clusters;
pub mod context;
pub mod error;
pub mod filed;
pub mod ipam;
pub mod keys;
pub mod providerconfig;
pub mod run;
pub mod secrets;
pub mod team;
pub mod tenantcluster;
pub mod tombstones;
pub mod webhooks;

pub use run::{Controllers, Options, start};
