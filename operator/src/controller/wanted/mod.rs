//! What should run for a provider, decided before anything is written: where its release
//! comes from and fetching it ([`fetch`], [`keep`] for releases kept for a roll-back), its
//! config Secret ([`config`]), the rendering for this provider ([`render`], [`customize`]
//! with [`manager_flags`], [`patches`]) and the checks the rendered objects must pass
//! ([`admission`], against the operator's [`policy`]). These modules read the cluster (Secrets,
//! ConfigMaps) and repositories; of the cluster, only [`keep`] writes (the kept release's
//! ConfigMap).

pub mod admission;
pub mod config;
pub mod customize;
pub mod fetch;
pub mod keep;
pub mod manager_flags;
pub mod patches;
pub mod policy;
pub mod render;
