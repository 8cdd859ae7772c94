//! `butlerctl`: the command line. `generate provider` and `generate cluster` take the flags of
//! `clusterctl generate provider` and `clusterctl generate cluster` and print the same YAML;
//! `publish` pushes provider releases to an OCI registry.

pub mod airgap;
pub mod apply;
pub mod cluster;
pub mod delete;
pub mod describe;
pub mod follow;
mod generate;
pub mod honoured;
pub mod init;
pub mod keep;
pub mod migrate;
pub mod plan;
pub mod provider_ref;
mod publish;
pub mod upgrades;
mod variables;

pub use generate::{
    ClusterArgs, GenerateError, Output, ProviderArgs, ProviderChoice, generate_cluster, generate_provider,
};
pub use publish::{PublishArgs, publish};
pub use variables::format_variables;
