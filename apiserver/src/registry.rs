//! The kinds the server knows: a fixed set of built-in kinds, and the kinds that
//! CustomResourceDefinitions register while they exist.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

use super::errors::ApiError;

/// How a list is merged by server-side apply and strategic merge patch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListType {
    /// Replaced whole.
    Atomic,
    /// Scalars, merged as a set.
    Set,
    /// Objects, merged by the values of these keys.
    Map(Vec<String>),
}

/// The schema of a custom resource version, with its CEL rules compiled once.
pub struct CustomSchema {
    pub schema: Value,
    pub cel: kube_cel::CompiledSchema,
    /// `additionalPrinterColumns` of the version, for Table output.
    pub columns: Vec<Value>,
    /// The CRD's storage version: objects written now are encoded at it.
    pub storage: String,
    /// Every version the CRD lists, served or not: the encodings its stored objects may have.
    pub decodable: Vec<String>,
}

/// One served kind at one version.
#[derive(Clone)]
pub struct ResourceType {
    pub group: String,
    pub version: String,
    pub kind: String,
    pub plural: String,
    pub singular: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    /// Has the status subresource.
    pub status: bool,
    /// Keeps metadata.generation.
    pub generation: bool,
    /// The schema, for custom resources.
    pub custom: Option<Arc<CustomSchema>>,
    /// The scale subresource, where the kind has one.
    pub scale: Option<ScalePaths>,
}

/// Where a kind with the scale subresource keeps its replicas (JSON paths as a CRD's
/// `subresources.scale` writes them: `.spec.replicas`).
#[derive(Clone, Debug, PartialEq)]
pub struct ScalePaths {
    pub spec_replicas: String,
    pub status_replicas: String,
    /// A string field holding the selector; `None` for a workload whose `.spec.selector` is a
    /// label selector (Deployments).
    pub label_selector: Option<String>,
}

impl ResourceType {
    /// `group/version`, or `v1` for the core group.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() { self.version.clone() } else { format!("{}/{}", self.group, self.version) }
    }

    /// The (group, version, plural) that objects of this type are stored as, when not this
    /// type itself: `events.k8s.io/v1` Events are `v1` Events in storage (see
    /// [`crate::conversion`]).
    pub fn stored_as(&self) -> Option<(&'static str, &'static str, &'static str)> {
        (self.group == "events.k8s.io" && self.plural == "events").then_some(("", "v1", "events"))
    }

    /// Objects are stored once per group and resource, whatever version they are read through.
    /// Events of `events.k8s.io` share the storage of core Events.
    pub fn storage_key(&self) -> (String, String) {
        match self.stored_as() {
            Some((group, _, plural)) => (group.to_string(), plural.to_string()),
            None => (self.group.clone(), self.plural.clone()),
        }
    }

    /// How the list at `path` (field names from the root) merges.
    pub fn list_type(&self, path: &[String]) -> ListType {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        match path.as_slice() {
            ["metadata", "ownerReferences"] => return ListType::Map(vec!["uid".into()]),
            ["metadata", "finalizers"] => return ListType::Set,
            _ => {}
        }
        if let Some(custom) = &self.custom {
            return schema_list_type(&custom.schema, &path);
        }
        builtin_list_type(&path)
    }
}

impl ResourceType {
    /// Whether the object at `path` is owned whole (`x-kubernetes-map-type: atomic`, or a
    /// built-in struct marked atomic, as a binding's `roleRef` and a workload's selector are).
    pub fn atomic_map(&self, path: &[String]) -> bool {
        let path: Vec<&str> = path.iter().map(String::as_str).collect();
        if let Some(custom) = &self.custom {
            return schema_node(&custom.schema, &path)
                .is_some_and(|n| n.get("x-kubernetes-map-type").and_then(Value::as_str) == Some("atomic"));
        }
        matches!(
            (self.group.as_str(), path.as_slice()),
            ("rbac.authorization.k8s.io", ["roleRef"]) | ("apps", ["spec", "selector"])
        )
    }
}

/// The schema node at `path`, through properties, list items and map values.
fn schema_node<'a>(schema: &'a Value, path: &[&str]) -> Option<&'a Value> {
    let mut node = schema;
    for step in path {
        let next = node.get("properties").and_then(|p| p.get(*step));
        let next =
            next.or_else(|| node.get("items").and_then(|i| i.get("properties")).and_then(|p| p.get(*step)));
        node = next.or_else(|| node.get("additionalProperties").filter(|a| a.is_object()))?;
    }
    Some(node)
}

/// The list type the schema declares at `path` (`x-kubernetes-list-type`), atomic by default.
fn schema_list_type(schema: &Value, path: &[&str]) -> ListType {
    let Some(node) = schema_node(schema, path) else { return ListType::Atomic };
    match node.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => ListType::Set,
        Some("map") => ListType::Map(
            node.get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|keys| keys.iter().filter_map(|k| k.as_str().map(String::from)).collect())
                .unwrap_or_default(),
        ),
        _ => ListType::Atomic,
    }
}

/// The merge keys of the built-in kinds' lists that matter here (pod templates, services,
/// conditions, webhooks); every other list is atomic.
fn builtin_list_type(path: &[&str]) -> ListType {
    let keys = |k: &[&str]| ListType::Map(k.iter().map(|s| s.to_string()).collect());
    match path {
        [.., "conditions"] => keys(&["type"]),
        [.., "containers" | "initContainers" | "ephemeralContainers", "env"] => keys(&["name"]),
        [.., "containers" | "initContainers" | "ephemeralContainers", "ports"] => {
            keys(&["containerPort", "protocol"])
        }
        [.., "containers" | "initContainers" | "ephemeralContainers", "volumeMounts"] => keys(&["mountPath"]),
        [.., "containers" | "initContainers" | "ephemeralContainers"] => keys(&["name"]),
        [.., "template", "spec", "volumes" | "imagePullSecrets"] => keys(&["name"]),
        ["spec", "ports"] => keys(&["port", "protocol"]),
        // Admission webhook configurations: webhooks and their match conditions by name.
        ["webhooks"] | ["webhooks", "matchConditions"] => keys(&["name"]),
        _ => ListType::Atomic,
    }
}

/// Every served kind, by (group, version, plural).
pub struct Registry {
    types: BTreeMap<(String, String, String), ResourceType>,
}

struct Builtin(
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
    bool,
    &'static [&'static str],
);

/// group, version, kind, plural, namespaced, status subresource, generation, short names.
const BUILTINS: &[Builtin] = &[
    Builtin("", "v1", "Namespace", "namespaces", false, true, false, &["ns"]),
    Builtin("", "v1", "ConfigMap", "configmaps", true, false, false, &["cm"]),
    Builtin("", "v1", "Secret", "secrets", true, false, false, &[]),
    Builtin("", "v1", "ResourceQuota", "resourcequotas", true, true, false, &["quota"]),
    Builtin("", "v1", "Service", "services", true, true, false, &["svc"]),
    Builtin("", "v1", "ServiceAccount", "serviceaccounts", true, false, false, &["sa"]),
    Builtin("", "v1", "Event", "events", true, false, false, &["ev"]),
    Builtin("", "v1", "Pod", "pods", true, true, false, &["po"]),
    Builtin("apps", "v1", "Deployment", "deployments", true, true, true, &["deploy"]),
    Builtin("apps", "v1", "DaemonSet", "daemonsets", true, true, true, &["ds"]),
    Builtin("apps", "v1", "ReplicaSet", "replicasets", true, true, true, &["rs"]),
    Builtin("apps", "v1", "StatefulSet", "statefulsets", true, true, true, &["sts"]),
    // Jobs are stored and served (helm's hooks run as Jobs); no controller runs them here.
    Builtin("batch", "v1", "Job", "jobs", true, true, true, &[]),
    Builtin("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", true, true, true, &["pdb"]),
    Builtin("rbac.authorization.k8s.io", "v1", "Role", "roles", true, false, false, &[]),
    Builtin("rbac.authorization.k8s.io", "v1", "RoleBinding", "rolebindings", true, false, false, &[]),
    Builtin("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false, false, false, &[]),
    Builtin(
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
        false,
        false,
        &[],
    ),
    Builtin(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
        false,
        false,
        true,
        &[],
    ),
    Builtin(
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
        false,
        false,
        true,
        &[],
    ),
    Builtin(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
        false,
        true,
        true,
        &[],
    ),
    Builtin(
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
        false,
        false,
        true,
        &[],
    ),
    Builtin("coordination.k8s.io", "v1", "Lease", "leases", true, false, false, &[]),
    Builtin("events.k8s.io", "v1", "Event", "events", true, false, false, &["ev"]),
    Builtin(
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
        true,
        true,
        &["crd", "crds"],
    ),
];

impl Registry {
    /// The built-in kinds.
    pub fn builtin() -> Registry {
        let mut types = BTreeMap::new();
        for Builtin(group, version, kind, plural, namespaced, status, generation, short) in BUILTINS {
            let rt = ResourceType {
                group: group.to_string(),
                version: version.to_string(),
                kind: kind.to_string(),
                plural: plural.to_string(),
                singular: kind.to_lowercase(),
                namespaced: *namespaced,
                short_names: short.iter().map(|s| s.to_string()).collect(),
                // kubectl's `get all`: the workloads and Services, as kube-apiserver lists them.
                categories: match *plural {
                    "pods" | "services" | "deployments" | "daemonsets" | "replicasets" | "statefulsets" => {
                        vec!["all".to_string()]
                    }
                    _ => Vec::new(),
                },
                status: *status,
                generation: *generation,
                custom: None,
                scale: matches!(*plural, "deployments" | "replicasets" | "statefulsets").then(|| {
                    ScalePaths {
                        spec_replicas: ".spec.replicas".into(),
                        status_replicas: ".status.replicas".into(),
                        label_selector: None,
                    }
                }),
            };
            types.insert((rt.group.clone(), rt.version.clone(), rt.plural.clone()), rt);
        }
        Registry { types }
    }

    /// The kind served at `group/version/plural`.
    pub fn find(&self, group: &str, version: &str, plural: &str) -> Option<&ResourceType> {
        self.types.get(&(group.to_string(), version.to_string(), plural.to_string()))
    }

    /// Every served kind.
    pub fn all(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.values()
    }

    /// The kinds a CRD serves, read from its spec (every served version).
    pub fn types_of_crd(crd: &Value) -> Result<Vec<ResourceType>, ApiError> {
        let spec = &crd["spec"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let list = |v: &Value| -> Vec<String> {
            v.as_array()
                .map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect())
                .unwrap_or_default()
        };
        let names = &spec["names"];
        let kind = text(&names["kind"]);
        let plural = text(&names["plural"]);
        let mut types = Vec::new();
        let all_versions = spec["versions"].as_array().cloned().unwrap_or_default();
        let storage =
            all_versions.iter().find(|v| v["storage"] == true).map(|v| text(&v["name"])).unwrap_or_default();
        let decodable: Vec<String> = all_versions.iter().map(|v| text(&v["name"])).collect();
        for version in spec["versions"].as_array().into_iter().flatten() {
            if version["served"] == Value::Bool(false) {
                continue;
            }
            let schema = version["schema"]["openAPIV3Schema"].clone();
            let cel = kube_cel::compile_schema(&schema);
            if cel.has_errors() {
                let errors: Vec<String> = cel.compilation_errors().iter().map(|e| e.to_string()).collect();
                return Err(ApiError::bad_request(format!(
                    "CustomResourceDefinition {}: x-kubernetes-validations do not compile: {}",
                    text(&crd["metadata"]["name"]),
                    errors.join("; ")
                )));
            }
            types.push(ResourceType {
                group: text(&spec["group"]),
                version: text(&version["name"]),
                kind: kind.clone(),
                plural: plural.clone(),
                singular: names["singular"].as_str().map(String::from).unwrap_or_else(|| kind.to_lowercase()),
                namespaced: spec["scope"] == "Namespaced",
                short_names: list(&names["shortNames"]),
                categories: list(&names["categories"]),
                status: version["subresources"]["status"].is_object(),
                generation: true,
                custom: Some(Arc::new(CustomSchema {
                    schema,
                    cel,
                    columns: version["additionalPrinterColumns"].as_array().cloned().unwrap_or_default(),
                    storage: storage.clone(),
                    decodable: decodable.clone(),
                })),
                scale: version["subresources"]["scale"].as_object().map(|scale| {
                    let path = |k: &str| scale.get(k).and_then(Value::as_str).map(String::from);
                    ScalePaths {
                        spec_replicas: path("specReplicasPath").unwrap_or_default(),
                        status_replicas: path("statusReplicasPath").unwrap_or_default(),
                        label_selector: path("labelSelectorPath"),
                    }
                }),
            });
        }
        Ok(types)
    }

    /// Serves the kinds of a CRD, replacing what it served before.
    pub fn register(&mut self, group: &str, plural: &str, types: Vec<ResourceType>) {
        self.unregister(group, plural);
        for rt in types {
            self.types.insert((rt.group.clone(), rt.version.clone(), rt.plural.clone()), rt);
        }
    }

    /// Stops serving every version of `plural.group`.
    pub fn unregister(&mut self, group: &str, plural: &str) {
        self.types.retain(|(g, _, p), rt| !(g == group && p == plural && rt.custom.is_some()));
    }

    /// The storage versions' type of a stored group/resource: the first served version.
    pub fn any_version(&self, group: &str, plural: &str) -> Option<&ResourceType> {
        self.types.values().find(|rt| rt.group == group && rt.plural == plural)
    }
}
