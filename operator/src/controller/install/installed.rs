//! What a provider installed, as its inventory records it: the applied objects, their digest,
//! the version and the contract, and the CRDs it keeps across releases. The record alone;
//! [`super::inventory`] reads and writes it.

use butler_runtime::objects::ObjectRef;
use serde::{Deserialize, Serialize};

/// What was installed, recorded so that the next change can delete what dropped out.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Inventory {
    pub version: String,
    pub contract: String,
    /// The digest of the rendered objects; empty while an install is under way.
    pub digest: String,
    pub objects: Vec<ObjectRef>,
    /// Objects of `objects` that an install under way has not made yet: whether they are this
    /// provider's is known only once made (one of that name may be someone else's), so they
    /// are created, never applied over, and deleted only when they carry its labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<ObjectRef>,
    /// CRDs of `objects` that existed before the provider and that it applies over (a CRD is
    /// one API for the whole cluster, as clusterctl treats it): never deleted by the provider,
    /// whatever its `crdDeletionPolicy`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub adopted: Vec<ObjectRef>,
    /// CRDs whose stored objects are being written again at a new storage version
    /// ([`crate::controller::install::storage`]): named before the first write, dropped once the CRD's
    /// `storedVersions` is trimmed, so that a migration cut short goes on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub migrating: Vec<String>,
    /// CRDs this provider made that a later release no longer ships (renamed, say): kept, as
    /// clusterctl keeps them on an upgrade, since objects of theirs may be stored, but still
    /// the provider's, so that its deletion with `crdDeletionPolicy: Delete` removes them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept: Vec<ObjectRef>,
}

/// The CRDs kept after an upgrade from `previous` to a release of `objects`: those kept
/// before and those this provider made that the release no longer ships, less any it ships
/// again. A CRD that was there before the provider, or that an install never finished
/// making, was never the provider's to keep.
pub fn kept_crds(previous: &Inventory, objects: &[ObjectRef]) -> Vec<ObjectRef> {
    let dropped = previous.objects.iter().filter(|o| {
        o.kind == "CustomResourceDefinition" && !previous.adopted.contains(o) && !previous.pending.contains(o)
    });
    let mut kept: Vec<ObjectRef> = Vec::new();
    for crd in previous.kept.iter().chain(dropped) {
        if !objects.contains(crd) && !kept.contains(crd) {
            kept.push(crd.clone());
        }
    }
    kept
}
