//! The Butler provider operator: the provider API (`operator.butlerlabs.dev/v1alpha1`), its
//! CustomResourceDefinitions, and the `butlerctl` command line.

pub mod api;
pub mod chart;
pub mod cli;
pub mod controller;
pub mod crds;
pub mod manifest;
pub mod metrics;
pub mod reference;
pub mod release;
pub mod upgrade;
