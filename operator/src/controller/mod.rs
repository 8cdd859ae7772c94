//! The provider lifecycle controller: one kube-runtime controller per provider kind, sharing
//! one reconcile. Each reconcile observes (the provider, the other providers, its release, its
//! config Secret, its inventory and Deployments), checks and plans without I/O
//! ([`install::plan`]), applies with server-side apply, and writes status
//! ([`report::status`]); every reason it gives is a [`report::reason::Reason`].
//!
//! The folders follow a provider's life: [`wanted`] decides what should run (the release, its
//! rendering for this provider, the policy it must pass); [`install`] makes it so and keeps it
//! so (plan, apply, adoption, storage migration, drift); [`removal`] takes it away; [`report`]
//! tells (status, reasons, events); [`upgrades`] runs ProviderUpgrades. What they all share
//! sits here: the context, the vocabulary, the triggers, the error, where a reconcile starts
//! ([`entry`]) and the running of the controllers ([`run`]).

pub mod context;
pub mod deployments;
pub mod entry;
pub mod error;
pub mod install;
pub mod removal;
pub mod report;
pub mod run;
pub mod triggers;
pub mod upgrades;
pub mod vocabulary;
pub mod wanted;

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
