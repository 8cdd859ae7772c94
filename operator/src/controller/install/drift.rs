//! Drift: someone else changed or deleted an object the operator applied. The operator records
//! what each of its writes left behind (the generation, or the resourceVersion for kinds that
//! have none) and watches the metadata of every kind it applied; an event that does not match
//! the record marks the object for re-applying and wakes its provider. Nothing is re-applied
//! on a timer.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::ApiResource;

use butler_runtime::objects::ObjectRef;
use butler_runtime::watches::{Handler, Seen, Watches};

use crate::controller::triggers::Triggers;
use crate::controller::vocabulary::{LABEL_NAME, ProviderKey};

/// What a write left on an object: its generation where the kind keeps one (status updates
/// do not change it), else its resourceVersion.
pub fn stamp(meta: &ObjectMeta) -> Option<String> {
    match meta.generation {
        Some(generation) if generation > 0 => Some(format!("generation {generation}")),
        _ => meta.resource_version.as_ref().map(|rv| format!("resourceVersion {rv}")),
    }
}

/// The record of an object whose write has not answered yet.
const PENDING: &str = "pending";

/// The record of an object someone else changed or deleted since this process wrote it.
const DRIFTED: &str = "drifted";

/// The provider an applied object belongs to, from its labels.
pub fn owner_of(meta: &ObjectMeta) -> Option<ProviderKey> {
    ProviderKey::from_labels(meta.labels.as_ref()?)
}

/// What the operator's last write left on an object, the provider it belongs to, and (for an
/// apply) the digest of what was applied.
struct Written {
    stamp: String,
    owner: Option<ProviderKey>,
    content: Option<String>,
}

/// The digest of an object as it is applied: computed once per object an apply considers.
pub fn content_of(wanted: &serde_json::Value) -> String {
    butler_repository::sha256_json_hex(wanted)
}

/// The operator's own writes, and the watches that compare them with what the cluster holds.
#[derive(Default)]
pub struct Drift {
    written: Mutex<HashMap<ObjectRef, Written>>,
}

impl Drift {
    /// Records what the operator's write left on an object.
    pub fn record(&self, object: ObjectRef, meta: &ObjectMeta) {
        self.record_with(object, meta, None);
    }

    /// Records what the operator's apply of `wanted` left on an object.
    /// `content` is [`content_of`] the object applied.
    pub fn record_applied(&self, object: ObjectRef, meta: &ObjectMeta, content: String) {
        self.record_with(object, meta, Some(content));
    }

    fn record_with(&self, object: ObjectRef, meta: &ObjectMeta, content: Option<String>) {
        if let Some(stamp) = stamp(meta) {
            let owner = owner_of(meta);
            self.written.lock().expect("not poisoned").insert(object, Written { stamp, owner, content });
        }
    }

    /// Whether applying `wanted` would change nothing: this process applied exactly that, and
    /// no one has changed it since. A pause or an unpause then applies the Deployments alone,
    /// not a megabyte of CRDs again.
    pub fn unchanged(&self, object: &ObjectRef, content: &str) -> bool {
        let written = self.written.lock().expect("not poisoned");
        let Some(record) = written.get(object) else { return false };
        record.stamp != PENDING && record.stamp != DRIFTED && record.content.as_deref() == Some(content)
    }

    /// Marks an object as being written: watch events that arrive before the write's answer
    /// are the write's own.
    pub fn begin(&self, object: &ObjectRef) {
        let pending = Written { stamp: PENDING.into(), owner: None, content: None };
        self.written.lock().expect("not poisoned").insert(object.clone(), pending);
    }

    /// Forgets an object: it is about to be deleted, or must be applied again.
    pub fn forget(&self, object: &ObjectRef) {
        self.written.lock().expect("not poisoned").remove(object);
    }

    /// Whether the cluster holds what the operator last wrote to this object. An object this
    /// process never wrote is not current, so the first reconcile after a start re-applies it.
    pub fn is_current(&self, object: &ObjectRef) -> bool {
        self.written
            .lock()
            .expect("not poisoned")
            .get(object)
            .is_some_and(|w| w.stamp != PENDING && w.stamp != DRIFTED)
    }

    /// Whether someone else changed or deleted this object since this process wrote it: its
    /// re-apply is a repair, which a deletion under way (the provider's, or its namespace's,
    /// seen late by the cache) must not make.
    pub fn drifted(&self, object: &ObjectRef) -> bool {
        self.written.lock().expect("not poisoned").get(object).is_some_and(|w| w.stamp == DRIFTED)
    }

    /// Compares a watch event with the record. Returns true when the object drifted: it was
    /// written by the operator and is now deleted or changed by someone else. The record is
    /// marked then, so that the next reconcile re-applies it.
    pub fn observe(&self, object: &ObjectRef, seen: Seen<'_>) -> bool {
        let mut written = self.written.lock().expect("not poisoned");
        let Some(record) = written.get_mut(object) else { return false };
        if record.stamp == PENDING || record.stamp == DRIFTED {
            return false;
        }
        let drifted = match seen {
            Seen::Deleted(_) => true,
            Seen::Present(meta) => stamp(meta).is_some_and(|s| s != record.stamp),
            Seen::Relisted(_) => false,
        };
        if drifted {
            record.stamp = DRIFTED.into();
        }
        drifted
    }

    /// Watches the applied objects of a kind (those with the operator's labels).
    pub fn watch_kind(self: &Arc<Self>, watches: &Watches, resource: &ApiResource, triggers: &Triggers) {
        let drift = Arc::clone(self);
        let triggers = triggers.clone();
        let kind = (resource.api_version.clone(), resource.kind.clone());
        let handler: Handler = Arc::new(move |seen| drift.on_event(&kind, seen, &triggers));
        watches.ensure("drift", resource, Some(LABEL_NAME), handler);
    }

    /// After a relist of a kind (its watch had expired): the objects of that kind this
    /// process wrote that are not among `present` were deleted meanwhile; their providers are
    /// woken to put them back, and those still there are compared as usual.
    pub fn relisted(
        &self,
        (api_version, kind): &(String, String),
        present: &[ObjectMeta],
        triggers: &Triggers,
    ) {
        let here: std::collections::HashSet<(Option<&str>, Option<&str>)> =
            present.iter().map(|m| (m.namespace.as_deref(), m.name.as_deref())).collect();
        let gone: Vec<(ObjectRef, Option<ProviderKey>)> = {
            let mut written = self.written.lock().expect("not poisoned");
            written
                .iter_mut()
                .filter(|(r, _)| &r.api_version == api_version && &r.kind == kind)
                .filter(|(_, w)| w.stamp != PENDING && w.stamp != DRIFTED)
                .filter(|(r, _)| !here.contains(&(r.namespace.as_deref(), Some(r.name.as_str()))))
                .map(|(r, w)| {
                    w.stamp = DRIFTED.into();
                    (r.clone(), w.owner.clone())
                })
                .collect()
        };
        for (object, owner) in gone {
            if let Some(owner) = owner {
                tracing::info!(object = %object.describe(), provider = %owner, "an applied object was deleted while the watch was down; applying it again");
                triggers.trigger(&owner);
            }
        }
        for meta in present {
            self.on_event(&(api_version.clone(), kind.clone()), Seen::Present(meta), triggers);
        }
    }

    /// A watch event of an applied object: wakes its provider when it drifted.
    pub fn on_event(&self, kind_of: &(String, String), seen: Seen<'_>, triggers: &Triggers) {
        let (api_version, kind) = kind_of;
        let meta = match seen {
            Seen::Present(meta) | Seen::Deleted(meta) => meta,
            Seen::Relisted(present) => return self.relisted(kind_of, present, triggers),
        };
        let object = ObjectRef {
            api_version: api_version.clone(),
            kind: kind.clone(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone().unwrap_or_default(),
        };
        if self.observe(&object, seen)
            && let Some(owner) = owner_of(meta)
        {
            tracing::info!(object = %object.describe(), provider = %owner, "an applied object drifted; its provider is woken to apply it again");
            triggers.trigger(&owner);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(generation: Option<i64>, rv: &str) -> ObjectMeta {
        ObjectMeta { generation, resource_version: Some(rv.into()), ..Default::default() }
    }

    fn object(name: &str) -> ObjectRef {
        ObjectRef {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    #[test]
    fn only_changes_by_others_count_as_drift() {
        let drift = Drift::default();
        let d = object("manager");
        assert!(
            !drift.observe(&d, Seen::Deleted(&meta(None, "1"))),
            "objects this process never wrote are not tracked"
        );
        assert!(!drift.is_current(&d));
        drift.begin(&d);
        assert!(!drift.observe(&d, Seen::Present(&meta(Some(2), "10"))), "the write's own event");
        assert!(!drift.is_current(&d), "until the write answers");
        drift.record(d.clone(), &meta(Some(2), "10"));
        assert!(drift.is_current(&d));
        assert!(
            !drift.observe(&d, Seen::Present(&meta(Some(2), "11"))),
            "a status update keeps the generation"
        );
        assert!(drift.observe(&d, Seen::Present(&meta(Some(3), "12"))), "someone changed the spec");
        assert!(!drift.is_current(&d), "so it is applied again");
        assert!(drift.drifted(&d), "as a repair");
        assert!(!drift.observe(&d, Seen::Present(&meta(Some(4), "13"))), "woken once");
        drift.record(d.clone(), &meta(Some(5), "14"));
        assert!(!drift.drifted(&d), "repaired");

        let role = ObjectRef {
            kind: "ClusterRole".into(),
            api_version: "rbac.authorization.k8s.io/v1".into(),
            namespace: None,
            name: "r".into(),
        };
        drift.record(role.clone(), &meta(None, "20"));
        assert!(!drift.observe(&role, Seen::Present(&meta(None, "20"))));
        assert!(
            drift.observe(&role, Seen::Present(&meta(None, "21"))),
            "kinds without a generation compare resourceVersions"
        );
        drift.record(role.clone(), &meta(None, "22"));
        assert!(drift.observe(&role, Seen::Deleted(&meta(None, "22"))));
    }

    #[test]
    fn what_was_applied_unchanged_needs_no_apply_until_someone_changes_it() {
        let drift = Drift::default();
        let d = object("manager");
        let wanted = content_of(&serde_json::json!({"spec": {"replicas": 1}}));
        assert!(!drift.unchanged(&d, &wanted), "never applied");
        drift.begin(&d);
        assert!(!drift.unchanged(&d, &wanted), "being applied");
        drift.record_applied(d.clone(), &meta(Some(1), "5"), wanted.clone());
        assert!(drift.unchanged(&d, &wanted));
        let other = content_of(&serde_json::json!({"spec": {"replicas": 0}}));
        assert!(!drift.unchanged(&d, &other), "another content");
        assert!(drift.observe(&d, Seen::Present(&meta(Some(2), "6"))));
        assert!(!drift.unchanged(&d, &wanted), "someone changed it");
        drift.record(d.clone(), &meta(Some(3), "7"));
        assert!(!drift.unchanged(&d, &wanted), "a write that is not an apply of it");
    }

    #[test]
    fn a_relist_finds_what_was_deleted_while_nobody_watched() {
        let drift = Drift::default();
        let (triggers, mut receivers) = crate::controller::triggers::channels();
        let mut stream =
            receivers.take::<crate::api::InfrastructureProvider>(crate::api::ProviderKind::Infrastructure);
        let owned = |name: &str, rv: &str| {
            let mut m = meta(Some(1), rv);
            m.name = Some(name.into());
            m.namespace = Some("ns".into());
            m.labels = Some(ProviderKey::new(crate::api::ProviderKind::Infrastructure, "ns", "aws").labels());
            m
        };
        drift.record(object("kept"), &owned("kept", "1"));
        drift.record(object("deleted"), &owned("deleted", "2"));
        let kind = ("apps/v1".to_string(), "Deployment".to_string());
        drift.on_event(&kind, Seen::Relisted(&[owned("kept", "1")]), &triggers);
        assert!(drift.is_current(&object("kept")));
        assert!(!drift.is_current(&object("deleted")), "so the next reconcile applies it");
        assert!(drift.drifted(&object("deleted")) && !drift.drifted(&object("kept")));
        let woken = futures::executor::block_on(futures::StreamExt::next(&mut stream)).unwrap();
        assert_eq!(woken.name, "aws", "its provider is woken");
    }
}
