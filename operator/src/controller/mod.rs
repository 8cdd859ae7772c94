//! The provider lifecycle controller: one kube-runtime controller per provider kind, sharing
//! one reconcile. Each reconcile observes (the provider, the other providers, its release, its
//! config Secret, its inventory and Deployments), checks and plans without I/O ([`plan`]),
//! applies with server-side apply, and writes status ([`status`]); every reason it gives is a
//! [`reason::Reason`].

pub mod adopt;
pub mod config;
pub mod context;
pub mod customize;
pub mod delete;
pub mod drift;
pub mod error;
pub mod fetch;
pub mod forbidden;
pub mod inventory;
pub mod keep;
pub mod patches;
pub mod plan;
pub mod policy;
pub mod reason;
pub mod reconcile;
pub mod render;
pub mod repair;
pub mod run;
pub mod status;
pub mod storage;
pub mod triggers;
pub mod upgrades;
pub mod users;
pub mod vocabulary;

pub use butler_runtime::shutdown::{Shutdown, shutdown_on, shutdown_switch};
pub use run::{Operator, Options, caches_ready, start};

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
