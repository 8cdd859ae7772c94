//! `butler-e2e`: where a scenario runs, and the scenarios that cross crates.
//!
//! [`Cluster::connect`] gives a scenario a fresh in-memory API server (`butler-apiserver`), or
//! the real cluster named by `BUTLER_E2E_KUBECONFIG` (`make e2e`). Every scenario of the
//! workspace is written against it, so the same scenario proves a behaviour in CI and on a
//! real cluster.

pub mod clients;
pub mod cluster;
pub mod hot_code;
mod lock;
pub mod registry;
pub mod tls;

pub use cluster::Cluster;
