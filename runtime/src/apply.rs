//! Server-side apply of objects of any kind, with the discovery of their kinds cached, and
//! their deletion.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use serde_json::Value;

use crate::error::{describe, not_found_ok};
use crate::objects::ObjectRef;

/// The kinds every supported Kubernetes serves, whose discovery would be a wasted request.
pub fn builtin(api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
    use k8s_openapi::api::{admissionregistration::v1 as admission, apps::v1 as apps, core::v1 as core};
    use k8s_openapi::api::{policy::v1 as policy, rbac::v1 as rbac};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    fn of<K: kube::Resource<DynamicType = ()>>(namespaced: bool) -> Option<(ApiResource, bool)> {
        Some((ApiResource::erase::<K>(&()), namespaced))
    }
    match (api_version, kind) {
        ("v1", "ServiceAccount") => of::<core::ServiceAccount>(true),
        ("v1", "Service") => of::<core::Service>(true),
        ("v1", "ConfigMap") => of::<core::ConfigMap>(true),
        ("v1", "Secret") => of::<core::Secret>(true),
        ("v1", "Namespace") => of::<core::Namespace>(false),
        ("apps/v1", "Deployment") => of::<apps::Deployment>(true),
        ("apps/v1", "DaemonSet") => of::<apps::DaemonSet>(true),
        ("apps/v1", "StatefulSet") => of::<apps::StatefulSet>(true),
        ("rbac.authorization.k8s.io/v1", "Role") => of::<rbac::Role>(true),
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => of::<rbac::RoleBinding>(true),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => of::<rbac::ClusterRole>(false),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => of::<rbac::ClusterRoleBinding>(false),
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            of::<admission::ValidatingWebhookConfiguration>(false)
        }
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            of::<admission::MutatingWebhookConfiguration>(false)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            of::<admission::ValidatingAdmissionPolicy>(false)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            of::<admission::ValidatingAdmissionPolicyBinding>(false)
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => of::<CustomResourceDefinition>(false),
        ("policy/v1", "PodDisruptionBudget") => of::<policy::PodDisruptionBudget>(true),
        _ => None,
    }
}

/// The kinds (by group and kind, never by kind alone: a CRD may call its kind `Deployment`)
/// that may be deleted and made anew when a field of theirs cannot change: they hold no data
/// of other objects, and their controllers make what they run again. Anything else (a CRD,
/// whose deletion deletes every object of it; a Secret, a volume claim) is refused instead.
const REPLACEABLE: &[(&str, &str)] = &[
    ("apps", "Deployment"),
    ("apps", "DaemonSet"),
    ("apps", "StatefulSet"),
    ("apps", "ReplicaSet"),
    ("batch", "Job"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("", "Service"),
];

/// Whether an object may be deleted and made anew.
pub fn replaceable(r: &ObjectRef) -> bool {
    REPLACEABLE.contains(&(r.group(), r.kind.as_str()))
}

/// Why an object whose immutable field would change is not replaced.
fn never_made_anew(r: &ObjectRef) -> String {
    format!(
        "a {} is never deleted and made anew (that would delete what it holds): change the field back in the release, or replace the object by hand",
        r.kind
    )
}

/// Whether the API server refused a change of a field that cannot change.
fn immutable(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status)
        if status.code == 422 && (status.message.contains("field is immutable") || status.message.contains("cannot change roleRef")))
}

/// The kinds of one API group version: resource and whether it is namespaced, by kind.
type GroupVersionKinds = HashMap<String, (ApiResource, bool)>;

/// How long a discovery that lacks a kind stands before the group version is asked again: kinds
/// come and go on a running cluster (one provider's CRDs are another's prerequisites), and a
/// missing kind must not be missing until a restart, nor cost a request per object.
const REDISCOVER_AFTER: Duration = Duration::from_secs(2);

/// What [`Applier::create_only`] found.
pub enum Made {
    /// Created now.
    Created(DynamicObject, ApiResource),
    /// One of that name was there already, as it is.
    Exists(DynamicObject),
    /// One was there at the create, and gone at the read after.
    Gone,
}

/// Applies and deletes objects of any kind, as one field manager.
pub struct Applier {
    client: kube::Client,
    field_manager: String,
    /// Discovery, one request per group version, with when it was made; the lock makes
    /// concurrent misses one request.
    kinds: tokio::sync::Mutex<HashMap<String, (Instant, GroupVersionKinds)>>,
}

impl Applier {
    pub fn new(client: kube::Client, field_manager: &str) -> Applier {
        Applier {
            client,
            field_manager: field_manager.into(),
            kinds: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// The resource of a kind, and whether it is namespaced. A group version is asked for
    /// once, and again when it lacks the kind: at most every [`REDISCOVER_AFTER`], or, when a
    /// CRD of this apply has just defined the kind (`wait`), until it is served.
    pub async fn resource(
        &self,
        api_version: &str,
        kind: &str,
        wait: bool,
    ) -> Result<(ApiResource, bool), String> {
        if let Some(known) = builtin(api_version, kind) {
            return Ok(known);
        }
        let attempts = if wait { 40 } else { 1 };
        for attempt in 0..attempts {
            {
                let mut kinds = self.kinds.lock().await;
                let cached = kinds.get(api_version);
                let known = cached.is_some_and(|(_, k)| k.contains_key(kind));
                let stale = cached.is_none_or(|(at, _)| at.elapsed() >= REDISCOVER_AFTER);
                if !known && (attempt > 0 || stale) {
                    let found = self.discover(api_version).await;
                    kinds.insert(api_version.to_string(), (Instant::now(), found));
                }
                if let Some(found) = kinds.get(api_version).and_then(|(_, k)| k.get(kind)) {
                    return Ok(found.clone());
                }
            }
            if attempt + 1 < attempts {
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        let group = api_version.split_once('/').map_or("the core group", |(g, _)| g);
        Err(format!("{api_version} {kind} is not served by the cluster; install what defines {group} first"))
    }

    /// The kinds a group version serves; none when it is not served (yet).
    async fn discover(&self, api_version: &str) -> GroupVersionKinds {
        let list = match api_version.split_once('/') {
            Some(_) => self.client.list_api_group_resources(api_version).await,
            None => self.client.list_core_api_resources(api_version).await,
        };
        let Ok(list) = list else { return HashMap::new() };
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        list.resources
            .into_iter()
            .filter(|r| !r.name.contains('/'))
            .map(|r| {
                let resource = ApiResource {
                    group: group.to_string(),
                    version: version.to_string(),
                    api_version: api_version.to_string(),
                    kind: r.kind.clone(),
                    plural: r.name,
                };
                (r.kind, (resource, r.namespaced))
            })
            .collect()
    }

    /// The kinds of `objects` the cluster does not serve (each once, as the error says it),
    /// leaving out those a CRD among them defines: checked before the first write of a set, so
    /// that a set is never half applied for want of a kind.
    pub async fn unserved(&self, objects: &[Value]) -> Vec<String> {
        let defined: Vec<String> = objects.iter().filter_map(crate::objects::defined_kind).collect();
        let mut missing = Vec::new();
        let mut checked = std::collections::HashSet::new();
        for object in objects {
            let r = ObjectRef::of(object);
            if defined.contains(&format!("{}/{}", r.group(), r.kind))
                || !checked.insert((r.api_version.clone(), r.kind.clone()))
            {
                continue;
            }
            if let Err(e) = self.resource(&r.api_version, &r.kind, false).await {
                missing.push(e);
            }
        }
        missing
    }

    /// The objects of `objects` that are namespaced (by discovery, or, for a kind the server
    /// does not serve yet, by the scope a CRD among them gives it) and not in `namespace`, each
    /// as a message: a release's namespaced objects go to its provider's namespace, never
    /// another. Discovery comes first: a CRD of the set that says a served kind is
    /// cluster-wide changes nothing about where the server puts its objects.
    pub async fn outside(&self, objects: &[Value], namespace: &str) -> Vec<String> {
        // The scope of each kind the objects' own CRDs define, by `group/kind`.
        let defined: HashMap<String, bool> = objects
            .iter()
            .filter_map(|o| Some((crate::objects::defined_kind(o)?, o["spec"]["scope"] == "Namespaced")))
            .collect();
        let mut found = Vec::new();
        for object in objects {
            let r = ObjectRef::of(object);
            let namespaced = match self.resource(&r.api_version, &r.kind, false).await {
                Ok((_, namespaced)) => namespaced,
                Err(_) => match defined.get(&format!("{}/{}", r.group(), r.kind)) {
                    Some(namespaced) => *namespaced,
                    None => continue,
                },
            };
            if namespaced && r.namespace.as_deref() != Some(namespace) {
                found.push(format!(
                    "{} {}/{} is namespaced and outside the provider's namespace {namespace}",
                    r.kind,
                    r.namespace.as_deref().unwrap_or_default(),
                    r.name
                ));
            }
        }
        found
    }

    /// The CRDs of `objects` that would define a kind the cluster serves already under another
    /// resource, each as a message: another CRD's (a decoy `Certificate` in `cert-manager.io`
    /// beside cert-manager's own), or Kubernetes' own APIs' or an aggregated API's (served,
    /// with no CRD of that name). Discovery is the truth about what the server serves; a CRD is
    /// read only when one collides.
    pub async fn redefined(&self, objects: &[Value]) -> Vec<String> {
        use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let mut found = Vec::new();
        for crd in objects.iter().filter(|o| crate::objects::defined_kind(o).is_some()) {
            let spec = &crd["spec"];
            let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
            let (name, group) = (text(&crd["metadata"]["name"]), text(&spec["group"]));
            let (kind, plural) = (text(&spec["names"]["kind"]), text(&spec["names"]["plural"]));
            let mut exists: Option<Result<bool, kube::Error>> = None;
            for version in spec["versions"].as_array().into_iter().flatten() {
                let api_version = format!("{group}/{}", text(&version["name"]));
                // Another resource serving the kind (one of the CRD's own plural is this CRD,
                // made before, whose ownership the applier's caller judges); asked as every kind
                // is, from discovery's cache.
                let Ok((other, _)) = self.resource(&api_version, &kind, false).await else { continue };
                if other.plural == plural {
                    // The CRD's own resource, when the CRD of that name is there (read once);
                    // served without it (an aggregated API of that group and plural), another's.
                    if exists.is_none() {
                        exists = Some(crds.get_metadata_opt(&name).await.map(|c| c.is_some()));
                    }
                    match exists.as_ref().expect("read above") {
                        Ok(true) => continue,
                        Ok(false) => found.push(format!(
                            "CustomResourceDefinition {name} would define {kind} ({plural}) in {api_version}, which the API server serves already without a CustomResourceDefinition (an aggregated API); a provider's CRDs define kinds of their own"
                        )),
                        Err(e) => found.push(format!(
                            "CustomResourceDefinition {name} cannot be read to tell whose {plural} in {api_version} the API server serves: {}",
                            describe(e)
                        )),
                    }
                    // Said once for the CRD, whichever of its versions found it.
                    break;
                }
                let resource = format!("{}.{group}", other.plural);
                let by = match crds.get_metadata_opt(&resource).await {
                    Ok(Some(_)) => format!("the CustomResourceDefinition {resource} defines it"),
                    Ok(None) => "the API server serves it without a CustomResourceDefinition (Kubernetes' own API or an aggregated one)".to_string(),
                    Err(e) => format!("the CustomResourceDefinition {resource} cannot be read: {}", describe(&e)),
                };
                found.push(format!(
                    "CustomResourceDefinition {name} would define {kind} ({plural}) in {api_version}, which the cluster serves already: {by}; a provider's CRDs define kinds of their own"
                ));
            }
        }
        found
    }

    /// What the API server would refuse of `objects`, each as a message, asked with a
    /// server-side dry run (`dryRun=All`: validation, admission webhooks and policies, quota;
    /// nothing is stored). Objects of kinds that a CRD among `objects` defines are left to the
    /// apply: their CRD (new, or changed by this release) is not served as it will be yet.
    /// An immutable field that would change is left to the apply too, which makes an object
    /// of a [`replaceable`] kind anew.
    pub async fn dry_run(&self, objects: &[&Value]) -> Vec<String> {
        let defined: std::collections::HashSet<String> =
            objects.iter().filter_map(|o| crate::objects::defined_kind(o)).collect();
        let params = PatchParams::apply(&self.field_manager).force().dry_run();
        let mut refused = Vec::new();
        for object in objects {
            let r = ObjectRef::of(object);
            if defined.contains(&format!("{}/{}", r.group(), r.kind)) {
                continue;
            }
            let Ok((resource, namespaced)) = self.resource(&r.api_version, &r.kind, false).await else {
                continue;
            };
            let api = self.api(&resource, namespaced, r.namespace.as_deref());
            match api.patch(&r.name, &params, &Patch::Apply(object)).await {
                Ok(_) => {}
                Err(e) if immutable(&e) && replaceable(&r) => {}
                Err(e) if immutable(&e) => refused.push(format!(
                    "{} would be refused: {}; {}",
                    r.describe(),
                    describe(&e),
                    never_made_anew(&r)
                )),
                Err(e) => refused.push(format!("{} would be refused: {}", r.describe(), describe(&e))),
            }
        }
        refused
    }

    fn api(&self, resource: &ApiResource, namespaced: bool, namespace: Option<&str>) -> Api<DynamicObject> {
        match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(self.client.clone(), ns, resource),
            _ => Api::all_with(self.client.clone(), resource),
        }
    }

    /// Server-side applies an object as this applier's field manager, taking its fields over.
    /// `wait` says that a CRD of this apply defines the kind, so it may take a moment to be
    /// served. An object whose change the API server refuses as immutable (a Deployment's
    /// selector, a binding's roleRef) is deleted and made anew, as `kubectl replace --force`
    /// does, when it is of a [`replaceable`] kind; any other is refused, naming the field. Returns the object as the API server answered, and its resource.
    pub async fn apply(&self, object: &Value, wait: bool) -> Result<(DynamicObject, ApiResource), String> {
        self.apply_with(object, wait, true).await
    }

    /// [`Applier::apply`], but an object whose immutable field would change is left as it is
    /// and the refusal returned: for objects of a name someone else may have made, which only
    /// their maker may replace.
    pub async fn apply_in_place(&self, object: &Value) -> Result<(DynamicObject, ApiResource), String> {
        self.apply_with(object, false, false).await
    }

    async fn apply_with(
        &self,
        object: &Value,
        wait: bool,
        replace: bool,
    ) -> Result<(DynamicObject, ApiResource), String> {
        let r = ObjectRef::of(object);
        let (resource, namespaced) = self.resource(&r.api_version, &r.kind, wait).await?;
        let api = self.api(&resource, namespaced, r.namespace.as_deref());
        let where_ = r.namespace.as_deref().map(|ns| format!(" in {ns}")).unwrap_or_default();
        let failed = |e: &kube::Error| format!("applying {} {}{where_}: {}", r.kind, r.name, describe(e));
        let params = PatchParams::apply(&self.field_manager).force();
        match api.patch(&r.name, &params, &Patch::Apply(object)).await {
            Ok(applied) => {
                // Made by a create (of this version or an earlier one): what it wrote is still
                // the create's, which an apply cannot remove. Moved to the apply entry, the same
                // apply again removes what this release dropped. Once per object's life.
                match self.move_to_apply(&api, &applied).await {
                    true => api
                        .patch(&r.name, &params, &Patch::Apply(object))
                        .await
                        .map(|a| (a, resource))
                        .map_err(|e| failed(&e)),
                    false => Ok((applied, resource)),
                }
            }
            Err(e) if immutable(&e) && replace && !replaceable(&r) => {
                Err(format!("{}; {}", failed(&e), never_made_anew(&r)))
            }
            Err(e) if replace && immutable(&e) => {
                tracing::info!(object = %r.describe(), "a field that cannot change did: making the object anew");
                self.delete(&r).await?;
                self.wait_gone(&api, &r).await?;
                let applied =
                    api.patch(&r.name, &params, &Patch::Apply(object)).await.map_err(|e| failed(&e))?;
                Ok((applied, resource))
            }
            Err(e) => Err(failed(&e)),
        }
    }

    /// Creates an object when absent; one of that name that exists already is handed back
    /// as it is, untouched, for the caller to judge.
    pub async fn create_only(&self, object: &Value, wait: bool) -> Result<Made, String> {
        let r = ObjectRef::of(object);
        let (resource, namespaced) = self.resource(&r.api_version, &r.kind, wait).await?;
        let api = self.api(&resource, namespaced, r.namespace.as_deref());
        let wanted: DynamicObject = serde_json::from_value(object.clone())
            .map_err(|e| format!("{}: not an object: {e}", r.describe()))?;
        let params =
            kube::api::PostParams { field_manager: Some(self.field_manager.clone()), ..Default::default() };
        match api.create(&params, &wanted).await {
            Ok(created) => Ok(Made::Created(created, resource)),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let existing = not_found_ok(api.get(&r.name).await)
                    .map_err(|e| format!("reading {}: {}", r.describe(), describe(&e)))?;
                Ok(existing.map(Made::Exists).unwrap_or(Made::Gone))
            }
            Err(e) => Err(format!("creating {}: {}", r.describe(), describe(&e))),
        }
    }

    /// Makes an object the caller has not made before: created when absent. One that exists
    /// already is applied only when `ours` says it is the caller's (it carries the caller's
    /// labels from an earlier life); else it is refused, named, and left as it is: a controller
    /// never takes over, nor later deletes, what someone else made.
    pub async fn create_new(
        &self,
        object: &Value,
        wait: bool,
        ours: &(dyn Fn(&DynamicObject) -> bool + Sync),
    ) -> Result<(DynamicObject, ApiResource), String> {
        match self.create_only(object, wait).await? {
            Made::Created(created, resource) => Ok((created, resource)),
            Made::Exists(existing) if ours(&existing) => self.apply(object, wait).await,
            Made::Exists(_) => Err(format!(
                "{} exists already and was not made by {}; it is left alone: delete it (or rename it) if it should be made here",
                ObjectRef::of(object).describe(),
                self.field_manager
            )),
            // Gone in between: make it now.
            Made::Gone => self.apply(object, wait).await,
        }
    }

    /// Waits (a little) until a deleted object is gone: objects with finalizers take a moment.
    async fn wait_gone(&self, api: &Api<DynamicObject>, r: &ObjectRef) -> Result<(), String> {
        for _ in 0..100 {
            match not_found_ok(api.get(&r.name).await) {
                Ok(None) => return Ok(()),
                Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(e) => return Err(format!("waiting for {} to go: {}", r.describe(), describe(&e))),
            }
        }
        Err(format!("{} is still being deleted after 10 s; it is made anew at the next try", r.describe()))
    }

    /// Deletes an object; one that is gone already is fine.
    pub async fn delete(&self, r: &ObjectRef) -> Result<(), String> {
        let Ok((resource, namespaced)) = self.resource(&r.api_version, &r.kind, false).await else {
            return Ok(());
        };
        let api = self.api(&resource, namespaced, r.namespace.as_deref());
        not_found_ok(api.delete(&r.name, &DeleteParams::background()).await)
            .map(|_| ())
            .map_err(|e| format!("deleting {} {}: {}", r.kind, r.name, describe(&e)))
    }

    /// Deletes an object only when `ours` says its metadata is the caller's (its labels, say),
    /// with its uid as the deletion's precondition, so one made anew meanwhile by someone else
    /// stays. Returns false when the object is there but not the caller's (left alone); true
    /// when it was deleted or was gone already.
    pub async fn delete_if(
        &self,
        r: &ObjectRef,
        ours: impl Fn(&kube::api::ObjectMeta) -> bool,
    ) -> Result<bool, String> {
        let Ok((resource, namespaced)) = self.resource(&r.api_version, &r.kind, false).await else {
            return Ok(true);
        };
        let api = self.api(&resource, namespaced, r.namespace.as_deref());
        let what = || format!("{} {}", r.kind, r.name);
        let Some(found) = api
            .get_metadata_opt(&r.name)
            .await
            .map_err(|e| format!("reading {}: {}", what(), describe(&e)))?
        else {
            return Ok(true);
        };
        if !ours(&found.metadata) {
            return Ok(false);
        }
        let params = DeleteParams {
            preconditions: Some(kube::api::Preconditions {
                uid: found.metadata.uid.clone(),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&r.name, &params).await {
            Ok(_) => Ok(true),
            Err(e) if crate::error::is_not_found(&e) => Ok(true),
            // 409: the precondition failed, the object is another of that name now.
            Err(e) if crate::error::is_conflict(&e) => Ok(false),
            Err(e) => Err(format!("deleting {}: {}", what(), describe(&e))),
        }
    }

    /// Whether any object of a kind exists, in any namespace.
    pub async fn any(&self, api_version: &str, kind: &str) -> Result<bool, String> {
        let Ok((resource, _)) = self.resource(api_version, kind, false).await else { return Ok(false) };
        let api: Api<DynamicObject> = Api::all_with(self.client.clone(), &resource);
        api.list_metadata(&ListParams::default().limit(1))
            .await
            .map(|list| !list.items.is_empty())
            .map_err(|e| format!("listing {kind}: {}", describe(&e)))
    }

    /// Folds what this applier's field manager wrote by create or update into its apply entry
    /// ([`crate::managed_fields::moved_to_apply`]), at the object's version (a JSON patch whose
    /// `test` makes it lose to any write in between, which a later apply folds again). Whether
    /// anything was moved; a failure only delays the move: it is logged.
    async fn move_to_apply(&self, api: &Api<DynamicObject>, object: &DynamicObject) -> bool {
        use json_patch::{PatchOperation, ReplaceOperation, TestOperation};
        let entries: Vec<Value> = object
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|e| serde_json::to_value(e).ok())
            .collect();
        let now = jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let Some(moved) = crate::managed_fields::moved_to_apply(&entries, &self.field_manager, &now) else {
            return false;
        };
        let (Some(name), Some(version)) =
            (object.metadata.name.as_deref(), object.metadata.resource_version.clone())
        else {
            return false;
        };
        let ops = vec![
            PatchOperation::Test(TestOperation {
                path: json_patch::jsonptr::PointerBuf::parse("/metadata/resourceVersion").expect("a pointer"),
                value: Value::String(version),
            }),
            PatchOperation::Replace(ReplaceOperation {
                path: json_patch::jsonptr::PointerBuf::parse("/metadata/managedFields").expect("a pointer"),
                value: Value::Array(moved),
            }),
        ];
        match api.patch(name, &PatchParams::default(), &Patch::<()>::Json(json_patch::Patch(ops))).await {
            Ok(_) => true,
            Err(e) => {
                tracing::debug!(object = %name, error = %describe(&e), "moving the fields a create wrote to the apply entry: next time");
                false
            }
        }
    }

    /// Applies a JSON patch (RFC 6902) to an object, as this applier's field manager; its
    /// `test` operations make it all or nothing.
    pub async fn patch_json(
        &self,
        r: &ObjectRef,
        ops: Vec<json_patch::PatchOperation>,
    ) -> Result<(), String> {
        let (resource, namespaced) = self.resource(&r.api_version, &r.kind, false).await?;
        let params = PatchParams { field_manager: Some(self.field_manager.clone()), ..Default::default() };
        self.api(&resource, namespaced, r.namespace.as_deref())
            .patch(&r.name, &params, &Patch::<()>::Json(json_patch::Patch(ops)))
            .await
            .map(|_| ())
            .map_err(|e| format!("patching {}: {}", r.describe(), describe(&e)))
    }

    /// Reads an object, if it exists.
    pub async fn get(&self, r: &ObjectRef) -> Result<Option<DynamicObject>, String> {
        let Ok((resource, namespaced)) = self.resource(&r.api_version, &r.kind, false).await else {
            return Ok(None);
        };
        self.api(&resource, namespaced, r.namespace.as_deref())
            .get_opt(&r.name)
            .await
            .map_err(|e| describe(&e))
    }
}
