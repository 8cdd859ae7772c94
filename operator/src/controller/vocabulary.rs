//! The words every part of the provider controller shares: which provider an object belongs to
//! (its key, and the labels that say so, read in one place), a provider as the others see it,
//! the provider's Deployments as they are, and the release that was fetched.

use std::collections::BTreeMap;
use std::fmt;

use butler_repository::Version;
use kube::{Resource, ResourceExt};

use crate::api::{KindNames, Provider, ProviderKind};

/// Labels that tie an applied object (and an inventory) to its provider object.
pub const LABEL_KIND: &str = "operator.butlerlabs.dev/provider-kind";
pub const LABEL_NAME: &str = "operator.butlerlabs.dev/provider-name";
pub const LABEL_NAMESPACE: &str = "operator.butlerlabs.dev/provider-namespace";
/// The replica count a paused Deployment had, to restore on unpause.
pub const PAUSED_REPLICAS: &str = "operator.butlerlabs.dev/paused-replicas";

/// A provider object: its kind, namespace and name (the key of the operator's records).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProviderKey {
    pub kind: ProviderKind,
    pub namespace: String,
    pub name: String,
}

impl ProviderKey {
    pub fn new(kind: ProviderKind, namespace: &str, name: &str) -> ProviderKey {
        ProviderKey { kind, namespace: namespace.into(), name: name.into() }
    }

    /// The key of a provider object.
    pub fn of<K: Provider + Resource>(object: &K) -> ProviderKey {
        ProviderKey {
            kind: K::KIND,
            namespace: object.namespace().unwrap_or_default(),
            name: object.name_any(),
        }
    }

    /// The provider that the labels of an applied object name, if they name one.
    pub fn from_labels(labels: &BTreeMap<String, String>) -> Option<ProviderKey> {
        Some(ProviderKey {
            kind: ProviderKind::from_kind(labels.get(LABEL_KIND)?)?,
            namespace: labels.get(LABEL_NAMESPACE)?.clone(),
            name: labels.get(LABEL_NAME)?.clone(),
        })
    }

    /// Whether an object carries this provider's labels.
    pub fn labelled_on(&self, meta: &kube::api::ObjectMeta) -> bool {
        meta.labels.as_ref().and_then(ProviderKey::from_labels).as_ref() == Some(self)
    }

    /// The labels that name this provider on what it applies.
    pub fn labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_KIND.to_string(), self.kind.kind().to_string()),
            (LABEL_NAMESPACE.to_string(), self.namespace.clone()),
            (LABEL_NAME.to_string(), self.name.clone()),
        ])
    }
}

/// The UID of a provider object.
pub fn uid_of<K: Resource>(object: &K) -> String {
    object.meta().uid.clone().unwrap_or_default()
}

impl fmt::Display for ProviderKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// One provider object, as every reconcile sees the others.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderView {
    pub key: ProviderKey,
    /// The object's UID: the operator's records are kept by it, so that a provider deleted and
    /// made again starts afresh.
    pub uid: String,
    /// RFC 3339 creation time, for choosing between duplicates.
    pub created: String,
    /// spec.paused.
    pub paused: bool,
    /// The Deployments are held at 0 replicas (the Paused condition is True): paused, or an
    /// unpause was refused.
    pub held: bool,
    pub contract: Option<String>,
    pub installed_version: Option<String>,
    /// spec.version, when one is named.
    pub wanted_version: Option<String>,
    pub deleting: bool,
}

impl ProviderView {
    pub fn describe(&self) -> String {
        self.key.to_string()
    }

    pub fn installed(&self) -> bool {
        self.installed_version.is_some() && self.contract.is_some()
    }

    /// An installed provider at v1.0.0 of contract v1beta1, for tests.
    #[cfg(test)]
    pub fn sample(kind: ProviderKind, namespace: &str, name: &str) -> ProviderView {
        ProviderView {
            key: ProviderKey::new(kind, namespace, name),
            uid: format!("uid-{name}"),
            created: "2026-01-01T00:00:00Z".into(),
            paused: false,
            held: false,
            contract: Some("v1beta1".into()),
            installed_version: Some("v1.0.0".into()),
            wanted_version: None,
            deleting: false,
        }
    }

    /// Installed, and asked for another version (an upgrade or a downgrade under way).
    pub fn moving(&self) -> bool {
        self.installed()
            && self.wanted_version.as_ref().is_some_and(|w| Some(w) != self.installed_version.as_ref())
    }
}

/// A provider Deployment as it is in the cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveDeployment {
    pub namespace: String,
    pub name: String,
    pub replicas: i32,
    pub available: bool,
    pub paused_replicas: Option<i32>,
}

/// The fetched release of the provider.
#[derive(Debug, Clone)]
pub struct Fetched {
    pub version: Version,
    pub contract: String,
    pub components: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_from_the_labels_it_writes() {
        let key = ProviderKey::new(ProviderKind::Infrastructure, "butler-system", "harvester");
        assert_eq!(ProviderKey::from_labels(&key.labels()), Some(key.clone()));
        assert_eq!(key.to_string(), "InfrastructureProvider butler-system/harvester");
        let mut other = key.labels();
        other.insert(LABEL_KIND.into(), "Gadget".into());
        assert_eq!(ProviderKey::from_labels(&other), None);
    }
}
