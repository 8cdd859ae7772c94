//! What particular kinds do on a write: Secrets fold stringData into data, Namespaces get their
//! phase and finalizer, CustomResourceDefinitions are checked, register their kinds and report
//! themselves Established, webhook configurations are defaulted and checked.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use super::Store;
use crate::errors::{ApiError, Cause};
use crate::registry::{Registry, ResourceType};

/// The finalizer the API server puts on CRDs so that their objects go first.
pub const CRD_CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// Names must be DNS subdomains (namespaces: DNS labels).
pub fn check_name(rt: &ResourceType, name: &str) -> Result<(), ApiError> {
    let label = rt.kind == "Namespace";
    let max = if label { 63 } else { 253 };
    let valid = !name.is_empty()
        && name.len() <= max
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (c == '.' && !label))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if valid {
        return Ok(());
    }
    let what = if label { "RFC 1123 label" } else { "RFC 1123 subdomain" };
    Err(ApiError::invalid(
        &rt.group,
        &rt.kind,
        name,
        vec![Cause {
            reason: "FieldValueInvalid",
            message: format!(
                "Invalid value: \"{name}\": a lowercase {what} must consist of lower case alphanumeric characters, '-'{} and must start and end with an alphanumeric character",
                if label { "" } else { " or '.'" }
            ),
            field: "metadata.name".into(),
        }],
    ))
}

/// Kind-specific changes and checks before an object is stored.
pub fn before_save(rt: &ResourceType, old: Option<&Value>, new: &mut Value) -> Result<(), ApiError> {
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("", "Secret") => {
            if let Some(Value::Object(string_data)) = new.as_object_mut().and_then(|m| m.remove("stringData"))
            {
                for (key, value) in string_data {
                    let text = value.as_str().unwrap_or_default().to_string();
                    new["data"][key] = Value::String(STANDARD.encode(text));
                }
            }
            check_data_size(rt, new, "data")?;
        }
        ("", "ConfigMap") => check_data_size(rt, new, "[]")?,
        ("", "Namespace") => {
            if old.is_none() {
                new["spec"]["finalizers"] = json!(["kubernetes"]);
                new["status"] = json!({"phase": "Active"});
            }
            // As kube-apiserver does on every write: selectors can name a namespace by it.
            let name = new["metadata"]["name"].clone();
            new["metadata"]["labels"]["kubernetes.io/metadata.name"] = name;
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => check_crd(old, new)?,
        (
            "admissionregistration.k8s.io",
            kind @ ("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"),
        ) => {
            let causes = super::webhooks::default_and_check(kind, new);
            if !causes.is_empty() {
                let name = new["metadata"]["name"].as_str().unwrap_or_default().to_string();
                return Err(ApiError::invalid(&rt.group, &rt.kind, &name, causes));
            }
        }
        _ => {}
    }
    check_annotations_size(rt, new)?;
    if let Some(old) = old {
        check_no_new_finalizers(rt, old, new)?;
        check_immutable(rt, old, new)?;
    }
    Ok(())
}

/// The most an object's annotations may hold, keys and values together, as Kubernetes' object
/// meta validation counts them.
pub const MAX_ANNOTATIONS_BYTES: usize = 256 * 1024;

fn check_annotations_size(rt: &ResourceType, object: &Value) -> Result<(), ApiError> {
    let size: usize = object["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(k, v)| k.len() + v.as_str().map_or(0, str::len))
        .sum();
    match size <= MAX_ANNOTATIONS_BYTES {
        true => Ok(()),
        false => Err(too_long(
            rt,
            object,
            "metadata.annotations",
            format!("Too long: may not be more than {MAX_ANNOTATIONS_BYTES} bytes"),
        )),
    }
}

/// Kubernetes' refusal of a field over its size (`FieldValueTooLong`, 422).
fn too_long(rt: &ResourceType, object: &Value, field: &str, message: String) -> ApiError {
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    ApiError::invalid(
        &rt.group,
        &rt.kind,
        name,
        vec![Cause { reason: "FieldValueTooLong", message, field: field.into() }],
    )
}

/// An object being deleted may lose finalizers but gain none, as Kubernetes' object meta
/// validation says: a controller that comes back cannot hold a deletion it was done with.
fn check_no_new_finalizers(rt: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    if old["metadata"]["deletionTimestamp"].is_null() {
        return Ok(());
    }
    let list = |o: &Value| -> Vec<String> {
        o["metadata"]["finalizers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str())
            .map(String::from)
            .collect()
    };
    let before = list(old);
    let added: Vec<String> = list(new).into_iter().filter(|f| !before.contains(f)).collect();
    if added.is_empty() {
        return Ok(());
    }
    let quoted: Vec<String> = added.iter().map(|f| format!("{f:?}")).collect();
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(
        &rt.group,
        &rt.kind,
        name,
        vec![Cause {
            reason: "FieldValueForbidden",
            message: format!(
                "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{{{}}}",
                quoted.join(", ")
            ),
            field: "metadata.finalizers".into(),
        }],
    ))
}

/// The most a ConfigMap's or a Secret's data may hold, checked before etcd's own limit.
pub const MAX_DATA_BYTES: usize = 1_048_576;

/// A ConfigMap's `data` and `binaryData` values, or a Secret's decoded `data` values, add up to
/// at most [`MAX_DATA_BYTES`].
fn check_data_size(rt: &ResourceType, object: &Value, field: &str) -> Result<(), ApiError> {
    let values = |key: &str| object.get(key).and_then(Value::as_object).into_iter().flat_map(|m| m.values());
    let text = |v: &Value| v.as_str().unwrap_or_default().len();
    // Base64 values count as the bytes they hold.
    let decoded = |v: &Value| {
        let encoded = v.as_str().unwrap_or_default();
        STANDARD.decode(encoded).map_or(encoded.len(), |bytes| bytes.len())
    };
    let size: usize = match rt.kind.as_str() {
        "Secret" => values("data").map(decoded).sum(),
        // Values only, keys aside, as Kubernetes' validation counts them.
        _ => values("data").map(text).chain(values("binaryData").map(decoded)).sum(),
    };
    match size <= MAX_DATA_BYTES {
        true => Ok(()),
        false => {
            Err(too_long(rt, object, field, format!("Too long: may not be more than {MAX_DATA_BYTES} bytes")))
        }
    }
}

/// The fields Kubernetes refuses to change once set (the ones providers' components meet).
fn check_immutable(rt: &ResourceType, old: &Value, new: &Value) -> Result<(), ApiError> {
    let fields: &[(&str, &str)] = match (rt.group.as_str(), rt.kind.as_str()) {
        ("apps", "Deployment" | "DaemonSet" | "StatefulSet" | "ReplicaSet") => {
            &[("spec.selector", "field is immutable")]
        }
        ("rbac.authorization.k8s.io", "RoleBinding" | "ClusterRoleBinding") => {
            &[("roleRef", "cannot change roleRef")]
        }
        ("batch", "Job") => &[("spec.selector", "field is immutable")],
        // What names a CRD's storage: its group and plural always, its scope and kind once it
        // is established (here: at once).
        ("apiextensions.k8s.io", "CustomResourceDefinition") => &[
            ("spec.group", "field is immutable"),
            ("spec.names.plural", "field is immutable"),
            ("spec.scope", "field is immutable"),
            ("spec.names.kind", "field is immutable"),
        ],
        _ => return Ok(()),
    };
    let mut causes = Vec::new();
    for (field, message) in fields {
        // Read in place: a CRD is large, and this runs at every write of one.
        let path = format!("/{}", field.replace('.', "/"));
        let value = |o: &Value| o.pointer(&path).cloned().unwrap_or(Value::Null);
        let (before, after) = (value(old), value(new));
        if before.is_null() || before == after {
            continue;
        }
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {after}: {message}"),
            field: (*field).into(),
        });
    }
    if causes.is_empty() {
        return Ok(());
    }
    let name = new["metadata"]["name"].as_str().unwrap_or_default();
    Err(ApiError::invalid(&rt.group, &rt.kind, name, causes))
}

/// `status.storedVersions` as Kubernetes keeps it: the storage version when the CRD is made;
/// from then on what was there (or what a write of the status says), with a new storage version
/// added. Every version in it must still be listed in `spec.versions`: objects may be stored
/// at it, and could no longer be read.
fn stored_versions(crd: &Value) -> Result<Vec<String>, Vec<Cause>> {
    let listed: Vec<&str> =
        crd["spec"]["versions"].as_array().into_iter().flatten().filter_map(|v| v["name"].as_str()).collect();
    let storage = crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|v| v["storage"] == Value::Bool(true))
        .and_then(|v| v["name"].as_str());
    let stored = crd["status"]["storedVersions"].as_array().into_iter().flatten();
    let mut stored: Vec<String> = stored.filter_map(Value::as_str).map(String::from).collect();
    if let Some(storage) = storage
        && !stored.iter().any(|v| v == storage)
    {
        stored.push(storage.to_string());
    }
    let causes: Vec<Cause> = stored
        .iter()
        .enumerate()
        .filter(|(_, v)| !listed.contains(&v.as_str()))
        .map(|(i, v)| Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {v:?}: must appear in spec.versions"),
            field: format!("status.storedVersions[{i}]"),
        })
        .collect();
    match causes.is_empty() {
        true => Ok(stored),
        false => Err(causes),
    }
}

fn check_crd(old: Option<&Value>, new: &mut Value) -> Result<(), ApiError> {
    let name = new["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let invalid = |causes: Vec<Cause>| {
        ApiError::invalid("apiextensions.k8s.io", "CustomResourceDefinition", &name, causes)
    };
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(new.clone()).map_err(|e| {
            invalid(vec![Cause {
                reason: "FieldValueInvalid",
                message: format!("Invalid value: {e}"),
                field: "spec".into(),
            }])
        })?;
    // What names a CRD, as Kubernetes' validation has it: a group that is a domain, and the
    // name the plural and the group make.
    let (group, plural) = (&crd.spec.group, &crd.spec.names.plural);
    let mut causes = Vec::new();
    if !group.contains('.') {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {group:?}: should be a domain with at least one dot"),
            field: "spec.group".into(),
        });
    }
    if name != format!("{plural}.{group}") {
        causes.push(Cause {
            reason: "FieldValueInvalid",
            message: format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
            field: "metadata.name".into(),
        });
    }
    if !causes.is_empty() {
        return Err(invalid(causes));
    }
    let problems = butler_runtime::crds::check_structural(&crd);
    if !problems.is_empty() {
        return Err(invalid(
            problems
                .iter()
                .map(|p| Cause {
                    reason: "FieldValueInvalid",
                    message: format!("Invalid value: {}", p.problem),
                    field: format!("spec.validation.openAPIV3Schema{}", p.path),
                })
                .collect(),
        ));
    }
    if let Some(old) = old
        && (old["spec"]["group"] != new["spec"]["group"]
            || old["spec"]["names"]["plural"] != new["spec"]["names"]["plural"])
    {
        return Err(invalid(vec![Cause {
            reason: "FieldValueInvalid",
            message: "Invalid value: field is immutable".into(),
            field: "spec.names.plural".into(),
        }]));
    }
    Registry::types_of_crd(new)?;
    if old.is_none() {
        let finalizers = new["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
        if !finalizers.iter().any(|f| f == CRD_CLEANUP_FINALIZER) {
            let mut finalizers = finalizers;
            finalizers.push(Value::String(CRD_CLEANUP_FINALIZER.into()));
            new["metadata"]["finalizers"] = Value::Array(finalizers);
        }
    }
    let storage = stored_versions(new).map_err(invalid)?;
    let time = old
        .and_then(|o| o["status"]["conditions"][0]["lastTransitionTime"].as_str().map(String::from))
        .unwrap_or_else(super::now);
    let condition = |type_: &str, reason: &str, message: &str| json!({"type": type_, "status": "True", "reason": reason, "message": message, "lastTransitionTime": time});
    new["status"] = json!({
        "acceptedNames": new["spec"]["names"].clone(),
        "storedVersions": storage,
        "conditions": [
            condition("NamesAccepted", "NoConflicts", "no conflicts found"),
            condition("Established", "InitialNamesAccepted", "the initial names have been accepted"),
        ],
    });
    Ok(())
}

/// Kind-specific follow-ups once an object is stored: a CRD serves its kinds; a new namespace
/// is due its `kube-root-ca.crt` ConfigMap, which the server publishes a moment later (as
/// kube-controller-manager does: a watch from the namespace's creation sees it arrive).
pub fn after_save(
    store: &mut Store,
    rt: &ResourceType,
    object: &Value,
    created: bool,
) -> Result<(), ApiError> {
    if created && rt.group.is_empty() && rt.kind == "Namespace" {
        let namespace = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        store.root_ca_due.push(namespace);
    } else if let Some(namespace) = object["metadata"]["namespace"].as_str()
        && store.root_ca_due.iter().any(|n| n == namespace)
    {
        // The first write in a new namespace comes before its kube-root-ca.crt, as it mostly
        // does on a real cluster, so that scenarios meet it the way they would there.
        let namespace = namespace.to_string();
        store.publish_root_ca(Some(&namespace));
    }
    if rt.group == "apiextensions.k8s.io" && rt.kind == "CustomResourceDefinition" {
        let types = Registry::types_of_crd(object)?;
        let group = object["spec"]["group"].as_str().unwrap_or_default();
        let plural = object["spec"]["names"]["plural"].as_str().unwrap_or_default();
        store.registry.register(group, plural, types);
    }
    if rt.group == "rbac.authorization.k8s.io" && rt.kind == "ClusterRole" {
        store.aggregate_cluster_roles();
    }
    Ok(())
}

/// The field manager of kube-controller-manager's ClusterRole aggregation.
pub const AGGREGATION_MANAGER: &str = "clusterrole-aggregation-controller";

/// The rules a ClusterRole with an `aggregationRule` gets: those of every other ClusterRole its
/// selectors select, each once, in the order of the roles' names.
fn aggregated_rules(role: &Value, roles: &[&Value]) -> Vec<Value> {
    let selectors = role["aggregationRule"]["clusterRoleSelectors"].as_array().cloned().unwrap_or_default();
    let mut rules: Vec<Value> = Vec::new();
    for other in roles.iter().filter(|o| o["metadata"]["name"] != role["metadata"]["name"]) {
        if !selectors.iter().any(|s| crate::admission::selector_matches(s, other)) {
            continue;
        }
        for rule in other["rules"].as_array().into_iter().flatten() {
            if !rules.contains(rule) {
                rules.push(rule.clone());
            }
        }
    }
    rules
}

impl Store {
    /// What kube-controller-manager's aggregation controller does: fills `rules` of every
    /// ClusterRole with an `aggregationRule` from the roles it selects, by a forced server-side
    /// apply of its own. (There it happens a moment later; here at once.)
    fn aggregate_cluster_roles(&mut self) {
        let Some(rt) = self.registry.find("rbac.authorization.k8s.io", "v1", "clusterroles").cloned() else {
            return;
        };
        let roles: Vec<Value> =
            self.objects_of(&rt).map(|m| m.values().cloned().collect()).unwrap_or_default();
        let all: Vec<&Value> = roles.iter().collect();
        for role in roles.iter().filter(|r| r["aggregationRule"].is_object()) {
            let rules = aggregated_rules(role, &all);
            if role["rules"].as_array().map_or(rules.is_empty(), |now| *now == rules) {
                continue;
            }
            let name = role["metadata"]["name"].as_str().unwrap_or_default().to_string();
            let body = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": name}, "rules": rules});
            let options = super::WriteOptions {
                manager: AGGREGATION_MANAGER.into(),
                force: true,
                ..Default::default()
            };
            let bytes = body.to_string().into_bytes();
            if let Err(e) =
                self.patch(&rt, "", &name, crate::patch::PatchType::Apply, &bytes, false, &options)
            {
                tracing::warn!(role = %name, error = %e.message, "aggregating a ClusterRole failed");
            }
        }
    }

    /// What kube-apiserver's policy type checker does a moment after a ValidatingAdmissionPolicy
    /// is written: its status says which generation it checked (`typeChecking` holds the
    /// expressions' type warnings, none here).
    pub fn check_policy_types(&mut self) {
        let Some(rt) =
            self.registry.find("admissionregistration.k8s.io", "v1", "validatingadmissionpolicies").cloned()
        else {
            return;
        };
        let due: Vec<(String, Value)> = self
            .objects_of(&rt)
            .into_iter()
            .flat_map(|m| m.values())
            .filter(|p| p["status"]["observedGeneration"] != p["metadata"]["generation"])
            .map(|p| {
                (
                    p["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                    p["metadata"]["generation"].clone(),
                )
            })
            .collect();
        for (name, generation) in due {
            let body = json!({"status": {"observedGeneration": generation, "typeChecking": {}}});
            let options = super::WriteOptions { manager: "kube-apiserver".into(), ..Default::default() };
            let bytes = body.to_string().into_bytes();
            if let Err(e) = self.patch(&rt, "", &name, crate::patch::PatchType::Merge, &bytes, true, &options)
            {
                tracing::warn!(policy = %name, error = %e.message, "recording a policy's type check failed");
            }
        }
    }

    /// Publishes `kube-root-ca.crt` (and makes the ServiceAccount `default`) in the namespaces due it (all, or `only` one) that still
    /// exist and are not terminating, as kube-controller-manager's root-CA publisher does.
    pub fn publish_root_ca(&mut self, only: Option<&str>) {
        let due: Vec<String> = match only {
            None => std::mem::take(&mut self.root_ca_due),
            Some(namespace) => {
                self.root_ca_due.retain(|n| n != namespace);
                vec![namespace.to_string()]
            }
        };
        let (Some(namespaces), Some(configmaps)) = (
            self.registry.find("", "v1", "namespaces").cloned(),
            self.registry.find("", "v1", "configmaps").cloned(),
        ) else {
            return;
        };
        for namespace in due {
            let live = self
                .lookup(&namespaces, "", &namespace)
                .is_some_and(|ns| ns["metadata"]["deletionTimestamp"].is_null());
            if !live {
                continue;
            }
            let mut published = vec![(
                "kube-root-ca.crt".to_string(),
                "kube-controller-manager",
                "Contains a CA bundle that can be used to verify the kube-apiserver when using internal endpoints such as the internal service IP or kubernetes.default.svc. No other usage is guaranteed across distributions of Kubernetes clusters.",
            )];
            if let Some(name) = &self.neighbour_ca {
                published.push((
                    name.clone(),
                    "service-ca-operator",
                    "A CA bundle another controller publishes in every namespace.",
                ));
            }
            for (name, manager, description) in published {
                if self.lookup(&configmaps, &namespace, &name).is_some() {
                    continue;
                }
                let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace,
                                 "annotations": {"kubernetes.io/description": description}},
                    "data": {"ca.crt": self.root_ca()}});
                let options = super::WriteOptions { manager: manager.into(), ..Default::default() };
                let _ = self.create(&configmaps, &namespace, body, &options);
            }
            // kube-controller-manager's service-account controller: every namespace's `default`.
            if let Some(accounts) = self.registry.find("", "v1", "serviceaccounts").cloned()
                && self.lookup(&accounts, &namespace, "default").is_none()
            {
                let body = json!({"apiVersion": "v1", "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": namespace}});
                let options =
                    super::WriteOptions { manager: "kube-controller-manager".into(), ..Default::default() };
                let _ = self.create(&accounts, &namespace, body, &options);
            }
        }
    }
}
