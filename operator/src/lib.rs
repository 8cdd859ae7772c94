//! The Butler provider operator: the provider API (`operator.butlerlabs.dev/v1alpha1`) and its
//! CustomResourceDefinitions.

pub mod api;
pub mod crds;
