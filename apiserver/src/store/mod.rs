//! The object store: every object as JSON, one global resourceVersion counter, and the log of
//! changes that watches replay and follow. All writes go through [`Store::save`], which enforces
//! what the API server enforces on every write (immutable metadata, status subresource, schema,
//! field ownership, generation, no-op detection).

mod defaults;
mod delete;
mod hooks;
mod quota;
mod read;
mod webhooks;
mod write;

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast;

use super::apply::record_update;
use super::conversion;
use super::errors::ApiError;
use super::fields::{self, FieldValidation};
use super::registry::{Registry, ResourceType};
use super::schema;

pub use delete::DeleteOptions;
pub use read::ListOptions;

/// How many changes are kept for watches to replay by default; an older resourceVersion gets
/// 410 Expired. Small, as the API server's former default watch cache (100 per resource; here
/// for all kinds together), so that scenarios meet expired watches instead of never seeing one.
pub const DEFAULT_WATCH_HISTORY: usize = 100;

/// The kind of a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    Added,
    Modified,
    Deleted,
}

/// One change, as watches see it.
#[derive(Debug)]
pub struct Event {
    pub rv: u64,
    pub key: (String, String),
    pub change: Change,
    pub object: Value,
    /// The object before the change, for MODIFIED (selectors decide ADDED/DELETED with it).
    pub old: Option<Value>,
}

/// Who writes, and how.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// The field manager; for non-apply writes the default comes from the user agent.
    pub manager: String,
    pub dry_run: bool,
    /// Server-side apply only: take fields over from other managers.
    pub force: bool,
    /// What to do with fields a built-in kind does not declare (not for apply, which refuses them).
    pub validation: FieldValidation,
    /// The warnings the write earned, for the response's `Warning` headers.
    pub warnings: Arc<std::sync::Mutex<Vec<String>>>,
}

type Objects = BTreeMap<(String, String), Value>;

pub struct Store {
    pub registry: Registry,
    objects: BTreeMap<(String, String), Objects>,
    rv: u64,
    counter: u64,
    log: VecDeque<Arc<Event>>,
    history: usize,
    tx: broadcast::Sender<Arc<Event>>,
    /// The cluster CA that every namespace's `kube-root-ca.crt` ConfigMap publishes.
    root_ca: String,
    /// Namespaces made since the last [`Store::publish_root_ca`].
    pub(crate) root_ca_due: Vec<String>,
    /// A neighbour's CA ConfigMap, published with `kube-root-ca.crt` (see `ServerOptions`).
    neighbour_ca: Option<String>,
    /// An orphan or foreground deletion waits for [`Store::finish_propagations`].
    propagations_due: bool,
    /// A deleted namespace's content waits for [`Store::finish_namespace_deletions`].
    namespaces_due: bool,
    /// The rest of each paged list, so that its pages come from one snapshot.
    pages: read::Pages,
}

/// An object without the times of its managedFields entries.
fn without_field_times(object: &Value) -> Value {
    let mut copy = object.clone();
    for entry in
        copy.pointer_mut("/metadata/managedFields").and_then(Value::as_array_mut).into_iter().flatten()
    {
        if let Some(entry) = entry.as_object_mut() {
            entry.remove("time");
        }
    }
    copy
}

/// A stored custom resource reads only while its CRD still lists the version it is encoded at
/// (the API server answers 500 otherwise, and a list fails whole).
pub(super) fn decodable(rt: &ResourceType, stored: &Value) -> Result<(), ApiError> {
    let Some(custom) = &rt.custom else { return Ok(()) };
    let encoded = stored["apiVersion"].as_str().unwrap_or_default();
    let version = encoded.rsplit_once('/').map_or(encoded, |(_, v)| v);
    match custom.decodable.iter().any(|v| v == version) {
        true => Ok(()),
        false => Err(ApiError::internal(format!(
            "{} {}: stored as {encoded}, a version its CustomResourceDefinition no longer lists; the object cannot be read",
            rt.kind,
            stored["metadata"]["name"].as_str().unwrap_or_default()
        ))),
    }
}

/// The fields of a create, update or patch that a built-in kind does not declare, handled as the
/// write's `fieldValidation` asks.
fn check_fields(rt: &ResourceType, object: &mut Value, opts: &WriteOptions) -> Result<(), ApiError> {
    // Strict keeps the object as it came (it is refused whole); Warn and Ignore drop the fields.
    let unknown = fields::undeclared(rt, object, opts.validation != FieldValidation::Strict);
    let named = unknown.iter().map(|p| format!("unknown field \"{}\"", p.trim_start_matches('.')));
    match opts.validation {
        FieldValidation::Strict if !unknown.is_empty() => Err(ApiError::bad_request(format!(
            "{kind} in version \"{version}\" cannot be handled as a {kind}: strict decoding error: {}",
            named.collect::<Vec<_>>().join(", "),
            kind = rt.kind,
            version = rt.version,
        ))),
        FieldValidation::Warn => {
            opts.warnings.lock().unwrap_or_else(|e| e.into_inner()).extend(named);
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A server-side apply of a built-in kind cannot carry a field the kind does not declare: the
/// typed patch cannot be built, whatever `fieldValidation` says.
fn check_applied_fields(rt: &ResourceType, name: &str, applied: &mut Value) -> Result<(), ApiError> {
    let unknown = fields::undeclared(rt, applied, false);
    let list = match unknown.as_slice() {
        [] => return Ok(()),
        [one] => format!("{one}: field not declared in schema"),
        many => format!(
            "errors:\n  {}",
            many.iter()
                .map(|p| format!("{p}: field not declared in schema"))
                .collect::<Vec<_>>()
                .join("\n  ")
        ),
    };
    Err(ApiError::internal(format!(
        "failed to create typed patch object (/{name}; {}/{}, Kind={}): {list}",
        rt.group, rt.version, rt.kind
    )))
}

/// The largest object etcd stores (1.5 MiB, its default request limit).
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// The current time as the API server writes it.
pub fn now() -> String {
    k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn name_of(object: &Value) -> &str {
    object["metadata"]["name"].as_str().unwrap_or_default()
}

fn namespace_of(object: &Value) -> &str {
    object["metadata"]["namespace"].as_str().unwrap_or_default()
}

/// An object without the parts that do not count as a change of its spec.
fn spec_part(rt: &ResourceType, object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("apiVersion");
        map.remove("kind");
        if rt.status {
            map.remove("status");
        }
    }
    copy
}

impl Store {
    /// A store with the standard namespaces that keeps `history` changes for watches.
    pub fn new(history: usize, neighbour_ca: Option<String>) -> Store {
        let (tx, _) = broadcast::channel(10_000);
        let mut store = Store {
            registry: Registry::builtin(),
            objects: BTreeMap::new(),
            rv: 0,
            counter: 0,
            log: VecDeque::new(),
            history: history.max(1),
            tx,
            pages: Default::default(),
            root_ca: butler_runtime::webhook::certificates::new_ca(
                "butler-memory-apiserver-ca",
                k8s_openapi::jiff::Timestamp::now(),
                3650,
            )
            .map(|ca| ca.cert)
            .unwrap_or_default(),
            root_ca_due: Vec::new(),
            neighbour_ca,
            propagations_due: false,
            namespaces_due: false,
        };
        let namespaces =
            store.registry.find("", "v1", "namespaces").cloned().expect("namespaces are built in");
        for name in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
            store
                .create(
                    &namespaces,
                    "",
                    body,
                    &WriteOptions { manager: "kube-apiserver".into(), ..Default::default() },
                )
                .expect("the standard namespaces can be created");
        }
        // Kubernetes' bootstrap superuser role and its binding (a real cluster has them from its
        // first start: a release that would define `cluster-admin` finds it there).
        let defaults = json!({"kubernetes.io/bootstrapping": "rbac-defaults"});
        let bootstrap = [
            (
                "clusterroles",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                    "metadata": {"name": "cluster-admin", "labels": defaults},
                    "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}, {"nonResourceURLs": ["*"], "verbs": ["*"]}]}),
            ),
            (
                "clusterrolebindings",
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                    "metadata": {"name": "cluster-admin", "labels": defaults},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:masters"}]}),
            ),
        ];
        for (plural, body) in bootstrap {
            let resource = store
                .registry
                .find("rbac.authorization.k8s.io", "v1", plural)
                .cloned()
                .expect("RBAC is built in");
            store
                .create(
                    &resource,
                    "",
                    body,
                    &WriteOptions { manager: "kube-apiserver".into(), ..Default::default() },
                )
                .expect("the bootstrap roles can be created");
        }
        store.publish_root_ca(None);
        store
    }

    /// The CA certificate the namespaces' `kube-root-ca.crt` publish.
    pub fn root_ca(&self) -> &str {
        &self.root_ca
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    fn next_uid(&mut self) -> String {
        self.counter += 1;
        let addr = self as *const Store as usize as u64;
        format!("{:08x}-{:04x}-4{:03x}-8{:03x}-{:012x}", addr as u32, (addr >> 32) as u16, 0, 0, self.counter)
    }

    /// Five characters of the kind the API server appends to generateName.
    fn random_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        self.counter += 1;
        let mut x = self.counter.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (self.rv << 17);
        (0..5)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
            })
            .collect()
    }

    fn objects_of(&self, rt: &ResourceType) -> Option<&Objects> {
        self.objects.get(&rt.storage_key())
    }

    pub(super) fn lookup(&self, rt: &ResourceType, namespace: &str, name: &str) -> Option<&Value> {
        self.objects_of(rt)?.get(&(namespace.to_string(), name.to_string()))
    }

    /// The object as read through `rt`'s version.
    pub(super) fn present(rt: &ResourceType, object: Value) -> Value {
        conversion::from_storage(rt, object)
    }

    /// The object to patch: in `rt`'s shape where it is stored in another.
    fn lookup_to_patch(&self, rt: &ResourceType, namespace: &str, name: &str) -> Option<Value> {
        let stored = self.lookup(rt, namespace, name).cloned()?;
        Some(match rt.stored_as() {
            Some(_) => Store::present(rt, stored),
            None => stored,
        })
    }

    fn record(&mut self, key: (String, String), change: Change, object: Value, old: Option<Value>) {
        let event = Arc::new(Event { rv: self.rv, key, change, object, old });
        if self.log.len() >= self.history {
            self.log.pop_front();
        }
        self.log.push_back(event.clone());
        let _ = self.tx.send(event); // Nobody listening is fine.
    }

    /// `GET` of one object.
    pub fn get(&self, rt: &ResourceType, namespace: &str, name: &str) -> Result<Value, ApiError> {
        let stored = self
            .lookup(rt, namespace, name)
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        decodable(rt, stored)?;
        Ok(Store::present(rt, stored.clone()))
    }

    /// Every write ends here. `manager` records field ownership for non-apply writes (apply has
    /// recorded it already); `status_scope` means the write came through `/status`.
    fn save(
        &mut self,
        rt: &ResourceType,
        old: Option<&Value>,
        mut new: Value,
        manager: Option<&str>,
        status_scope: bool,
        dry_run: bool,
    ) -> Result<Value, ApiError> {
        // Written through one group, stored as another: save as the stored kind.
        if let Some((group, version, plural)) = rt.stored_as() {
            let stored_rt = self.registry.find(group, version, plural).expect("built in").clone();
            let stored_old = old.and_then(|o| self.lookup(&stored_rt, namespace_of(o), name_of(o)).cloned());
            let new = conversion::to_storage(rt, new);
            let saved = self.save(&stored_rt, stored_old.as_ref(), new, manager, status_scope, dry_run)?;
            return Ok(Store::present(rt, saved));
        }
        if old.is_none() && rt.namespaced {
            self.check_quota(rt, namespace_of(&new), name_of(&new))?;
        }
        let now = now();
        // The status subresource: each side of the object is written through its own door.
        if rt.status {
            match (old, status_scope) {
                (Some(old), true) => {
                    let status = new.get("status").cloned();
                    let managed = new["metadata"].get("managedFields").cloned();
                    new = old.clone();
                    match status {
                        Some(s) => new["status"] = s,
                        None => {
                            new.as_object_mut().expect("objects").remove("status");
                        }
                    }
                    if manager.is_none()
                        && let Some(m) = managed
                    {
                        new["metadata"]["managedFields"] = m;
                    }
                }
                (Some(old), false) => match old.get("status") {
                    Some(s) => new["status"] = s.clone(),
                    None => {
                        new.as_object_mut().expect("objects").remove("status");
                    }
                },
                (None, _) => {
                    new.as_object_mut().expect("objects").remove("status");
                }
            }
        }
        self.keep_system_metadata(rt, old, &mut new, &now);
        defaults::apply(rt, &mut new);
        hooks::before_save(rt, old, &mut new)?;
        fields::omit_empty(rt, &mut new);
        if let Some(custom) = &rt.custom {
            schema::prune_and_default(&custom.schema, &mut new);
            let old_view = old.map(|o| Store::present(rt, o.clone()));
            let causes = schema::validate(custom, &Store::present(rt, new.clone()), old_view.as_ref());
            if !causes.is_empty() {
                return Err(ApiError::invalid(&rt.group, &rt.kind, name_of(&new), causes));
            }
        }
        if let Some(manager) = manager {
            record_update(rt, old, &mut new, manager, status_scope, &now);
        }
        if rt.generation
            && let Some(old) = old
            && spec_part(rt, old) != spec_part(rt, &new)
        {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            new["metadata"]["generation"] = json!(generation);
        }
        // Custom resources are encoded at the CRD's storage version of the moment, as etcd
        // holds them; a write of an object stored at an older one rewrites it even when
        // nothing else changed (that is how stored objects are migrated).
        let encoding = match &rt.custom {
            Some(custom) if !custom.storage.is_empty() => format!("{}/{}", rt.group, custom.storage),
            _ => rt.api_version(),
        };
        if let Some(old) = old {
            let mut same = new.clone();
            fields::as_stored(rt, &mut same);
            same["metadata"]["resourceVersion"] = old["metadata"]["resourceVersion"].clone();
            same["apiVersion"] = match rt.custom {
                Some(_) => Value::String(encoding.clone()),
                None => old["apiVersion"].clone(),
            };
            // A write that changes nothing but the time of its manager's managedFields entry is
            // no change either, as on a real server.
            if without_field_times(&same) == without_field_times(old) {
                return Ok(Store::present(rt, old.clone()));
            }
        }
        // etcd keeps no value over 1.5 MiB (its default --max-request-bytes): a real server
        // answers such a write with etcd's refusal.
        if serde_json::to_vec(&new).map_or(0, |bytes| bytes.len()) > MAX_OBJECT_BYTES {
            return Err(ApiError::internal("etcdserver: request is too large"));
        }
        if dry_run {
            return Ok(Store::present(rt, new));
        }
        fields::as_stored(rt, &mut new);
        self.rv += 1;
        new["metadata"]["resourceVersion"] = Value::String(self.rv.to_string());
        new["apiVersion"] = Value::String(encoding);
        new["kind"] = Value::String(rt.kind.clone());
        let key = (namespace_of(&new).to_string(), name_of(&new).to_string());
        self.objects.entry(rt.storage_key()).or_default().insert(key, new.clone());
        let change = if old.is_some() { Change::Modified } else { Change::Added };
        self.record(rt.storage_key(), change, new.clone(), old.cloned());
        hooks::after_save(self, rt, &new, old.is_none())?;
        // Only deletions and owner references give the garbage collector work.
        self.propagations_due |= delete::awaits_propagation(&new);
        if !new["metadata"]["deletionTimestamp"].is_null() || new["metadata"]["ownerReferences"].is_array() {
            self.collect_garbage();
        }
        let stored = self.lookup(rt, namespace_of(&new), name_of(&new)).cloned().unwrap_or(new);
        Ok(Store::present(rt, stored))
    }

    /// uid, creation time, deletion time, generation, name and namespace are the server's.
    fn keep_system_metadata(&mut self, rt: &ResourceType, old: Option<&Value>, new: &mut Value, now: &str) {
        if !new["metadata"].is_object() {
            new["metadata"] = json!({});
        }
        let meta = new.get_mut("metadata").and_then(Value::as_object_mut).expect("made an object above");
        meta.remove("resourceVersion");
        meta.remove("selfLink");
        match old {
            Some(old) => {
                for key in [
                    "uid",
                    "creationTimestamp",
                    "deletionTimestamp",
                    "deletionGracePeriodSeconds",
                    "generation",
                    "name",
                    "namespace",
                ] {
                    match old["metadata"].get(key) {
                        Some(v) => meta.insert(key.to_string(), v.clone()),
                        None => meta.remove(key),
                    };
                }
                if !meta.contains_key("managedFields")
                    && let Some(m) = old["metadata"].get("managedFields")
                {
                    meta.insert("managedFields".into(), m.clone());
                }
            }
            None => {
                for key in ["deletionTimestamp", "deletionGracePeriodSeconds", "generation", "uid"] {
                    meta.remove(key);
                }
                meta.insert("creationTimestamp".into(), Value::String(now.to_string()));
                if rt.generation {
                    meta.insert("generation".into(), json!(1));
                }
                let uid = self.next_uid();
                new["metadata"]["uid"] = Value::String(uid);
            }
        }
    }
}
