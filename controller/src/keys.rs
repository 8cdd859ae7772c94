//! How the controllers name an object they keep something of (a failure, a tombstone) and in
//! logs: `{Kind} {namespace/}{name}`, with its UID once it is gone.

use kube::ResourceExt;

/// How an object is named in logs, failures and tombstones: `{Kind} {namespace/}{name}`.
pub fn failure_key<K: kube::Resource<DynamicType = ()>>(object: &K) -> String {
    key_of(&K::kind(&()), object.namespace().as_deref(), &object.name_any())
}

/// `{kind} {namespace/}{name}`, the [`failure_key`] of an object known by its reference.
pub fn key_of(kind: &str, namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// An object deleted from the cluster, by what this process keeps of it under: its UID and
/// its [`failure_key`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gone {
    pub uid: String,
    pub key: String,
}

impl Gone {
    pub fn of<K: kube::Resource<DynamicType = ()>>(object: &K) -> Gone {
        Gone { uid: object.meta().uid.clone().unwrap_or_default(), key: failure_key(object) }
    }
}
