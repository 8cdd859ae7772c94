//! Deletion: finalizers and deletionTimestamp, propagation (background, foreground, orphan),
//! garbage collection of dependents by ownerReferences, namespace and CRD clean-up.

use std::collections::HashSet;

use serde_json::{Value, json};

use super::hooks::CRD_CLEANUP_FINALIZER;
use super::{Change, ListOptions, Store, name_of, namespace_of};
use crate::errors::ApiError;
use crate::registry::ResourceType;

const FOREGROUND: &str = "foregroundDeletion";
const ORPHAN: &str = "orphan";

/// `propagationPolicy` of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

/// A delete's options (`DeleteOptions`).
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub propagation: Propagation,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
    pub dry_run: bool,
}

impl DeleteOptions {
    /// Reads a `DeleteOptions` body (empty means the defaults).
    pub fn from_body(body: &[u8]) -> Result<DeleteOptions, ApiError> {
        if body.iter().all(u8::is_ascii_whitespace) {
            return Ok(DeleteOptions::default());
        }
        let value: Value = serde_json::from_slice(body)
            .map_err(|e| ApiError::bad_request(format!("DeleteOptions are not valid JSON: {e}")))?;
        let propagation = match value["propagationPolicy"].as_str() {
            None | Some("Background") => Propagation::Background,
            Some("Foreground") => Propagation::Foreground,
            Some("Orphan") => Propagation::Orphan,
            Some(other) => return Err(ApiError::bad_request(format!("unknown propagationPolicy {other:?}"))),
        };
        let propagation = match value["orphanDependents"].as_bool() {
            Some(true) => Propagation::Orphan,
            _ => propagation,
        };
        Ok(DeleteOptions {
            propagation,
            precondition_uid: value["preconditions"]["uid"].as_str().map(String::from),
            precondition_rv: value["preconditions"]["resourceVersion"].as_str().map(String::from),
            dry_run: value["dryRun"].as_array().is_some_and(|a| !a.is_empty()),
        })
    }
}

fn finalizers(object: &Value) -> Vec<String> {
    let mut list: Vec<String> = object["metadata"]["finalizers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f.as_str().map(String::from))
        .collect();
    // A namespace also waits for its spec.finalizers ("kubernetes": its content is gone).
    list.extend(
        object["spec"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(String::from)),
    );
    list
}

fn terminating(object: &Value) -> bool {
    !object["metadata"]["deletionTimestamp"].is_null()
}

/// A deleted object whose orphan or foreground deletion the garbage collector has yet to finish.
pub(super) fn awaits_propagation(object: &Value) -> bool {
    terminating(object)
        && (has_finalizer(object, "metadata", ORPHAN) || has_finalizer(object, "metadata", FOREGROUND))
}

impl Store {
    /// `DELETE` of one object.
    pub fn delete(
        &mut self,
        rt: &ResourceType,
        namespace: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let object = self
            .lookup(rt, namespace, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let failed = |what: &str| {
            ApiError::conflict(&rt.group, &rt.plural, name, &format!("Precondition failed: {what}"))
        };
        if opts.precondition_uid.as_deref().is_some_and(|uid| object["metadata"]["uid"].as_str() != Some(uid))
        {
            return Err(failed("UID in precondition does not match the UID of the object"));
        }
        if opts
            .precondition_rv
            .as_deref()
            .is_some_and(|rv| object["metadata"]["resourceVersion"].as_str() != Some(rv))
        {
            return Err(failed("ResourceVersion in precondition does not match the object"));
        }
        if opts.dry_run {
            return Ok(Store::present(rt, object));
        }
        let result = self.delete_object(rt, object, opts.propagation);
        self.collect_garbage();
        Ok(Store::present(rt, result))
    }

    /// `DELETE` of a collection: every selected object, returned as a list.
    pub fn delete_collection(
        &mut self,
        rt: &ResourceType,
        namespace: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Value, ApiError> {
        let selected = self.snapshot(rt, namespace, list);
        let mut deleted = Vec::new();
        for object in selected {
            if !opts.dry_run {
                deleted.push(Store::present(rt, self.delete_object(rt, object, opts.propagation)));
            } else {
                deleted.push(object);
            }
        }
        self.collect_garbage();
        Ok(json!({
            "apiVersion": rt.api_version(),
            "kind": format!("{}List", rt.kind),
            "metadata": {"resourceVersion": self.rv.to_string()},
            "items": deleted,
        }))
    }

    /// Deletes now, or marks for deletion while finalizers remain; returns the last state.
    fn delete_object(&mut self, rt: &ResourceType, mut object: Value, propagation: Propagation) -> Value {
        let extra = match propagation {
            Propagation::Background => None,
            Propagation::Foreground => Some(FOREGROUND),
            Propagation::Orphan => Some(ORPHAN),
        };
        if let Some(finalizer) = extra
            && !terminating(&object)
        {
            let mut list = object["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
            if !list.iter().any(|f| f == finalizer) {
                list.push(Value::String(finalizer.into()));
            }
            object["metadata"]["finalizers"] = Value::Array(list);
        }
        if finalizers(&object).is_empty() {
            self.remove(rt, &object);
            return object;
        }
        if terminating(&object) && extra.is_none() {
            return object;
        }
        let old = object.clone();
        object["metadata"]["deletionTimestamp"] = Value::String(super::now());
        object["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        if rt.generation {
            let generation = object["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            object["metadata"]["generation"] = json!(generation);
        }
        if rt.kind == "Namespace" && rt.group.is_empty() {
            object["status"]["phase"] = Value::String("Terminating".into());
        }
        if rt.kind == "CustomResourceDefinition" && rt.group == "apiextensions.k8s.io" {
            let mut conditions: Vec<Value> = object["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| c["type"] != "Terminating")
                .cloned()
                .collect();
            conditions.push(
                json!({"type": "Terminating", "status": "True", "reason": "InstanceDeletionInProgress",
                "message": "CustomResource deletion is in progress", "lastTransitionTime": super::now()}),
            );
            object["status"]["conditions"] = Value::Array(conditions);
        }
        self.propagations_due |= awaits_propagation(&object);
        self.namespaces_due |= rt.kind == "Namespace" && rt.group.is_empty();
        self.store_system_write(rt, &old, object)
    }

    /// A write by the server itself (no owner, no checks): bumps the resourceVersion and tells
    /// the watches.
    fn store_system_write(&mut self, rt: &ResourceType, old: &Value, mut object: Value) -> Value {
        self.rv += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        let key = (namespace_of(&object).to_string(), name_of(&object).to_string());
        self.objects.entry(rt.storage_key()).or_default().insert(key, object.clone());
        self.record(rt.storage_key(), Change::Modified, object.clone(), Some(old.clone()));
        object
    }

    fn remove(&mut self, rt: &ResourceType, object: &Value) {
        let key = (namespace_of(object).to_string(), name_of(object).to_string());
        let Some(mut gone) = self.objects.get_mut(&rt.storage_key()).and_then(|m| m.remove(&key)) else {
            return;
        };
        self.rv += 1;
        gone["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        self.record(rt.storage_key(), Change::Deleted, gone.clone(), None);
        if rt.group == "apiextensions.k8s.io" && rt.kind == "CustomResourceDefinition" {
            let group = gone["spec"]["group"].as_str().unwrap_or_default().to_string();
            let plural = gone["spec"]["names"]["plural"].as_str().unwrap_or_default().to_string();
            self.registry.unregister(&group, &plural);
            self.objects.remove(&(group, plural));
        }
    }

    /// Runs what the namespace controller and the garbage collector do, until nothing changes.
    /// The CRD finalizer's work waits for [`Store::finish_crd_deletions`]: on a real server a
    /// deleted CRD stays (Terminating) while its objects are removed.
    pub(super) fn collect_garbage(&mut self) {
        self.collect(Due::default());
    }

    /// What the garbage collector does a moment after an orphan or foreground deletion (here:
    /// at the server's next tick): the dependents are disowned or deleted, then the
    /// `orphan`/`foregroundDeletion` finalizer goes. Until then the object is there, with its
    /// deletion timestamp, as on a real server. Returns whether one was due.
    pub fn finish_propagations(&mut self) -> bool {
        if !self.propagations_due {
            return false;
        }
        self.collect(Due { propagation: true, ..Due::default() });
        // A foreground owner waits for its blocking dependents: still due.
        self.propagations_due = self.objects.values().flat_map(|m| m.values()).any(awaits_propagation);
        true
    }

    /// What apiextensions' CRD finalizer does a moment after a CRD's deletion (here: once it
    /// has been terminating for a second, as its controller takes on a real server): its
    /// objects go, then the CRD. Returns whether a CRD was due.
    pub fn finish_crd_deletions(&mut self) -> bool {
        let now = k8s_openapi::jiff::Timestamp::now();
        let due = |crd: &Value| {
            crd["metadata"]["deletionTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<k8s_openapi::jiff::Timestamp>().ok())
                .is_some_and(|since| now.duration_since(since).as_secs_f64() >= 1.0)
        };
        let terminating_crds = self
            .registry
            .find("apiextensions.k8s.io", "v1", "customresourcedefinitions")
            .cloned()
            .and_then(|rt| self.objects.get(&rt.storage_key()))
            .is_some_and(|crds| crds.values().any(|c| terminating(c) && due(c)));
        if terminating_crds {
            self.collect(Due { crds: true, ..Due::default() });
        }
        terminating_crds
    }

    /// The objects the namespace controller deletes next: those in a terminating namespace
    /// that are not being deleted yet, as (kind, namespace, name). It deletes them through the
    /// API, as its own user, so admission sees each deletion as on a real server (a webhook
    /// that refuses or cannot be reached leaves the namespace Terminating).
    pub fn namespace_content_due(&self) -> Vec<(ResourceType, String, String)> {
        if !self.namespaces_due {
            return Vec::new();
        }
        let Some(namespaces) = self.registry.find("", "v1", "namespaces").cloned() else { return Vec::new() };
        let terminating_namespaces: HashSet<&str> = self
            .objects
            .get(&namespaces.storage_key())
            .into_iter()
            .flat_map(|all| all.values())
            .filter(|n| terminating(n) && has_finalizer(n, "spec", "kubernetes"))
            .map(name_of)
            .collect();
        let mut due = Vec::new();
        for ((group, plural), objects) in &self.objects {
            let Some(rt) = self.registry.any_version(group, plural).filter(|rt| rt.namespaced) else {
                continue;
            };
            for object in objects.values() {
                let namespace = namespace_of(object);
                if terminating_namespaces.contains(namespace) && !terminating(object) {
                    due.push((rt.clone(), namespace.to_string(), name_of(object).to_string()));
                }
            }
        }
        due
    }

    /// What the namespace controller does once a namespace's objects are gone (their
    /// deletions are [`Store::namespace_content_due`]'s): the namespace goes. Returns whether
    /// a namespace was due.
    pub fn finish_namespace_deletions(&mut self) -> bool {
        if !self.namespaces_due {
            return false;
        }
        self.collect(Due { namespaces: true, ..Due::default() });
        let namespaces = self.registry.find("", "v1", "namespaces").cloned();
        self.namespaces_due = namespaces
            .and_then(|rt| self.objects.get(&rt.storage_key()))
            .is_some_and(|all| all.values().any(terminating));
        true
    }

    fn collect(&mut self, due: Due) {
        loop {
            let work = self.garbage_work(due);
            if work.is_empty() {
                return;
            }
            for (rt, (namespace, name), action) in work {
                // Earlier work of this round may have changed or removed the object.
                let Some(current) = self.lookup(&rt, &namespace, &name).cloned() else { continue };
                match action {
                    Action::Remove => self.remove(&rt, &current),
                    Action::Delete => {
                        if !terminating(&current) {
                            self.delete_object(&rt, current, Propagation::Background);
                        }
                    }
                    Action::DropFinalizer(section, finalizer) => {
                        let mut next = current.clone();
                        let list: Vec<Value> =
                            finalizers_in(&current, section).into_iter().filter(|f| f != finalizer).collect();
                        next[section]["finalizers"] = Value::Array(list);
                        self.store_system_write(&rt, &current, next);
                    }
                    Action::Disown(uid) => {
                        let mut next = current.clone();
                        if let Some(refs) =
                            next.pointer_mut("/metadata/ownerReferences").and_then(Value::as_array_mut)
                        {
                            refs.retain(|r| r["uid"].as_str() != Some(uid.as_str()));
                        }
                        self.store_system_write(&rt, &current, next);
                    }
                }
            }
        }
    }

    /// What the controllers would do now, by (kind, (namespace, name)).
    fn garbage_work(&self, due: Due) -> Vec<(ResourceType, (String, String), Action)> {
        let mut all: Vec<(&ResourceType, &Value)> = Vec::new();
        for ((group, plural), objects) in &self.objects {
            if let Some(rt) = self.registry.any_version(group, plural) {
                all.extend(objects.values().map(|o| (rt, o)));
            }
        }
        let uids: HashSet<&str> = all.iter().filter_map(|(_, o)| o["metadata"]["uid"].as_str()).collect();
        let mut work = Vec::new();
        let mut add = |rt: &ResourceType, object: &Value, action: Action| {
            work.push((rt.clone(), (namespace_of(object).to_string(), name_of(object).to_string()), action));
        };
        for &(rt, object) in &all {
            let dying = terminating(object);
            if dying && finalizers(object).is_empty() {
                add(rt, object, Action::Remove);
                continue;
            }
            // Content that goes before its container: a namespace's objects, a CRD's objects,
            // a foreground-deleted owner's dependents.
            // (`delete`: whether the content is deleted here; a namespace's goes through the API.)
            let mut clear = |content: Vec<(&ResourceType, &Value)>, then: Action, delete: bool| {
                if content.is_empty() {
                    add(rt, object, then);
                } else if delete {
                    for (r, o) in content.into_iter().filter(|(_, o)| !terminating(o)) {
                        add(r, o, Action::Delete);
                    }
                }
            };
            if due.namespaces
                && dying
                && rt.kind == "Namespace"
                && rt.group.is_empty()
                && has_finalizer(object, "spec", "kubernetes")
            {
                let name = name_of(object);
                clear(
                    all.iter().filter(|(r, o)| r.namespaced && namespace_of(o) == name).copied().collect(),
                    Action::DropFinalizer("spec", "kubernetes"),
                    false,
                );
            }
            if due.crds
                && dying
                && rt.kind == "CustomResourceDefinition"
                && has_finalizer(object, "metadata", CRD_CLEANUP_FINALIZER)
            {
                let group = object["spec"]["group"].as_str().unwrap_or_default();
                let plural = object["spec"]["names"]["plural"].as_str().unwrap_or_default();
                clear(
                    all.iter().filter(|(r, _)| r.group == group && r.plural == plural).copied().collect(),
                    Action::DropFinalizer("metadata", CRD_CLEANUP_FINALIZER),
                    true,
                );
            }
            let uid = object["metadata"]["uid"].as_str().unwrap_or_default();
            // Foreground: every dependent is deleted, but the owner waits only for those whose
            // owner reference says blockOwnerDeletion.
            if due.propagation && dying && has_finalizer(object, "metadata", FOREGROUND) {
                let dependents: Vec<(&ResourceType, &Value)> =
                    all.iter().filter(|(_, o)| owned_by(o, uid)).copied().collect();
                for (r, o) in dependents.iter().filter(|(_, o)| !terminating(o)) {
                    add(r, o, Action::Delete);
                }
                if !dependents.iter().any(|(_, o)| blocks_owner(o, uid)) {
                    add(rt, object, Action::DropFinalizer("metadata", FOREGROUND));
                }
            }
            if due.propagation && dying && has_finalizer(object, "metadata", ORPHAN) {
                for (r, o) in all.iter().filter(|(_, o)| owned_by(o, uid)) {
                    add(r, o, Action::Disown(uid.to_string()));
                }
                add(rt, object, Action::DropFinalizer("metadata", ORPHAN));
            }
            let mut owners = object["metadata"]["ownerReferences"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|r| r["uid"].as_str())
                .peekable();
            if !dying && owners.peek().is_some() && owners.all(|o| !uids.contains(o)) {
                add(rt, object, Action::Delete);
            }
        }
        work
    }
}

/// Which of the controllers that work a moment later run in this pass (the garbage collector's
/// background deletions always do).
#[derive(Clone, Copy, Default)]
struct Due {
    /// apiextensions' CRD finalizer.
    crds: bool,
    /// The garbage collector's orphan and foreground deletions.
    propagation: bool,
    /// The namespace controller.
    namespaces: bool,
}

enum Action {
    Remove,
    Delete,
    /// Removes a finalizer from `metadata` or (namespaces) `spec`.
    DropFinalizer(&'static str, &'static str),
    Disown(String),
}

fn has_finalizer(object: &Value, section: &str, finalizer: &str) -> bool {
    object[section]["finalizers"].as_array().is_some_and(|l| l.iter().any(|f| f == finalizer))
}

fn finalizers_in(object: &Value, section: &str) -> Vec<Value> {
    object[section]["finalizers"].as_array().cloned().unwrap_or_default()
}

fn owned_by(object: &Value, uid: &str) -> bool {
    object["metadata"]["ownerReferences"].as_array().is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

/// Whether an object's reference to the owner `uid` says blockOwnerDeletion.
fn blocks_owner(object: &Value, uid: &str) -> bool {
    object["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid && r["blockOwnerDeletion"] == true))
}
