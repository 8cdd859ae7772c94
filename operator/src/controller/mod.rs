//! The provider lifecycle controller: one kube-runtime controller per provider kind, sharing
//! one reconcile. Each reconcile observes (the provider, the other providers, its release, its
//! config Secret, its inventory and Deployments), plans without I/O ([`plan`]), applies with
//! server-side apply, and writes status.

pub mod apply;
pub mod conditions;
pub mod config;
pub mod context;
pub mod customize;
pub mod delete;
pub mod drift;
pub mod error;
pub mod fetch;
pub mod finalizer;
pub mod inventory;
pub mod plan;
pub mod reconcile;
pub mod run;
pub mod status;
pub mod triggers;
pub mod users;
pub mod watches;

pub use run::{Operator, Options, Shutdown, caches_ready, shutdown_on, shutdown_switch, start};

use std::fmt::Debug;

use kube::Resource;
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::api::Provider;

/// What the shared code needs of a provider kind; every kind of [`crate::api`] is one.
pub trait ProviderObject:
    Provider
    + Resource<DynamicType = (), Scope = NamespaceResourceScope>
    + Clone
    + DeserializeOwned
    + Serialize
    + Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> ProviderObject for K where
    K: Provider
        + Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}
