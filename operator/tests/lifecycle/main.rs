//! The provider lifecycle, end to end: the operator reconciles provider objects on the
//! in-memory API server (or on the cluster of `BUTLER_E2E_KUBECONFIG`, with `make e2e`).

mod binary;
mod changes;
mod chart;
mod cli;
mod cluster_api;
mod contract;
mod delete;
mod faults;
mod fixtures;
mod install;
mod kept;
mod manifest;
mod migrate;
mod oci;
mod release_shapes;
mod restart;
#[path = "../shapes/cluster_api.rs"]
mod shapes;
mod storage;
mod support;
mod upgrade;
mod upgrade_policy;
mod upgrades;
