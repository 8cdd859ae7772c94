//! From a cluster-api-operator provider object to this operator's: the same kind, namespace
//! and name, the spec fields this operator has (read as its own CRD schema says, so nothing it
//! would prune is written and every field left behind is named), the version that runs, and
//! the release it came from.

use butler_repository::ClusterctlConfig;
use serde_json::{Map, Value, json};

use crate::api::{GROUP, KindNames, ProviderKind, VERSION};

/// The annotation that ties a provider object to the cluster-api-operator object it was
/// carried over from (`{apiVersion} {kind} {namespace}/{name} {uid}`): a second run finds its
/// work done, and never mistakes someone else's object for it.
pub const MIGRATED_FROM: &str = "operator.butlerlabs.dev/migrated-from";

/// How the note that a Butler name was given clusterctl's URL begins (a cached release read in
/// its place takes it back).
pub const UPSTREAM_URL_NOTE: &str = "spec.fetchConfig.url set to";

/// cluster-api-operator's own annotations, meaningless here.
const THEIR_ANNOTATION_PREFIX: &str = "operator.cluster.x-k8s.io/";

/// A provider object of cluster-api-operator's, as read.
#[derive(Debug, Clone)]
pub struct OldProvider {
    /// `operator.cluster.x-k8s.io/v1alpha2`.
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub object: Value,
}

impl OldProvider {
    pub fn describe(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }

    /// The value of [`MIGRATED_FROM`] for what is carried over from this object.
    pub fn mark(&self) -> String {
        format!("{} {} {}/{} {}", self.api_version, self.kind, self.namespace, self.name, self.uid)
    }

    /// The value of [`MIGRATED_FROM`] for what `migrate --from-file` converted from a file of
    /// this object: its kind, namespace and name (a file has no UID, and may be of another
    /// version of the API).
    pub fn file_mark(&self) -> String {
        format!("{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// What becomes of one old provider object.
#[derive(Debug, Clone, PartialEq)]
pub struct Carried {
    /// The provider object to make; none when this operator has no such kind.
    pub object: Option<Value>,
    /// The version it installs (the old one's spec.version, else the version that runs).
    pub version: Option<String>,
    /// Fields of the old object that are not carried over, each with why.
    pub dropped: Vec<String>,
    /// What was changed on the way, each with why.
    pub notes: Vec<String>,
}

/// The carried-over object of `old`, its spec read against `schema` (the openAPI schema of
/// this operator's `spec`).
pub fn carry(old: &OldProvider, schema: &Value) -> Carried {
    let Some(kind) = ProviderKind::from_kind(&old.kind) else {
        return Carried {
            object: None,
            version: None,
            dropped: vec![format!(
                "the whole provider: this operator has no {} kind; install it another way, or leave it to cluster-api-operator",
                old.kind
            )],
            notes: Vec::new(),
        };
    };
    let mut dropped = Vec::new();
    let mut notes = Vec::new();
    let mut spec = old.object["spec"].clone();
    if !spec.is_object() {
        spec = json!({});
    }
    prune(&mut spec, schema, "spec", &mut dropped);

    // The version that runs, so that moving over upgrades nothing.
    let installed = old.object["status"]["installedVersion"].as_str().filter(|v| !v.is_empty());
    let asked = spec["version"].as_str().filter(|v| !v.is_empty()).map(String::from);
    let version = match (asked, installed) {
        (Some(v), _) => Some(v),
        (None, Some(running)) => {
            notes.push(format!(
                "spec.version was empty (the newest); set to {running}, the version that runs, so that moving over upgrades nothing"
            ));
            spec["version"] = json!(running);
            Some(running.to_string())
        }
        (None, None) => None,
    };

    // cluster-api-operator found a provider without a fetchConfig in clusterctl's list; where
    // Butler has a provider of that name, the name here means Butler's.
    if spec.get("fetchConfig").is_none() {
        let upstream = butler_repository::upstream_providers()
            .into_iter()
            .find(|p| p.type_ == kind && p.name == old.name);
        let here = ClusterctlConfig::default().provider(kind, &old.name).ok();
        if let Some(upstream) = upstream
            && here.is_some_and(|h| h.url != upstream.url)
        {
            notes.push(format!(
                "{UPSTREAM_URL_NOTE} {}: without it the name {} means Butler's provider here, not clusterctl's",
                upstream.url, old.name
            ));
            spec["fetchConfig"] = json!({"url": upstream.url});
        }
    }

    let mut annotations = Map::new();
    // Never what ties the old object to a GitOps tool or a Helm release: with it, the tool
    // would take the new object for its own (and prune it).
    for (key, value) in old.object["metadata"]["annotations"].as_object().into_iter().flatten() {
        if !key.starts_with(THEIR_ANNOTATION_PREFIX) && !super::gitops::tracking(key, value) {
            annotations.insert(key.clone(), value.clone());
        }
    }
    annotations.insert(MIGRATED_FROM.into(), json!(old.mark()));
    let mut metadata = json!({"name": old.name, "namespace": old.namespace, "annotations": annotations});
    let labels: Map<String, Value> = old.object["metadata"]["labels"]
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(key, value)| !super::gitops::tracking(key, value))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    if !labels.is_empty() {
        metadata["labels"] = json!(labels);
    }
    let object = json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": kind.kind(),
        "metadata": metadata,
        "spec": spec,
    });
    Carried { object: Some(object), version, dropped, notes }
}

/// Removes from `value` what `schema` does not define (as the API server prunes), naming each
/// removed field in `dropped`.
pub fn prune(value: &mut Value, schema: &Value, path: &str, dropped: &mut Vec<String>) {
    if schema["x-kubernetes-preserve-unknown-fields"] == true {
        return;
    }
    match value {
        Value::Object(fields) => {
            if let Some(properties) = schema["properties"].as_object() {
                let unknown: Vec<String> =
                    fields.keys().filter(|k| !properties.contains_key(*k)).cloned().collect();
                for key in unknown {
                    fields.remove(&key);
                    dropped.push(format!("{path}.{key}: not a field of this operator's providers"));
                }
                for (key, field) in fields.iter_mut() {
                    prune(field, &properties[key], &format!("{path}.{key}"), dropped);
                }
            } else if schema["additionalProperties"].is_object() {
                for (key, field) in fields.iter_mut() {
                    prune(field, &schema["additionalProperties"], &format!("{path}.{key}"), dropped);
                }
            }
        }
        Value::Array(items) if schema["items"].is_object() => {
            for (index, item) in items.iter_mut().enumerate() {
                prune(item, &schema["items"], &format!("{path}[{index}]"), dropped);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema() -> Value {
        let crd = crate::crds::providers()
            .into_iter()
            .find(|c| c.spec.names.kind == "InfrastructureProvider")
            .unwrap();
        let root =
            serde_json::to_value(&crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema).unwrap();
        root["properties"]["spec"].clone()
    }

    fn old(kind: &str, name: &str, spec: Value, installed: Option<&str>) -> OldProvider {
        OldProvider {
            api_version: "operator.cluster.x-k8s.io/v1alpha2".into(),
            kind: kind.into(),
            namespace: "capa-system".into(),
            name: name.into(),
            uid: "u-1".into(),
            object: json!({
                "metadata": {"name": name, "namespace": "capa-system",
                             "labels": {"team": "platform", "app.kubernetes.io/instance": "capi", "kustomize.toolkit.fluxcd.io/name": "infra"},
                             "annotations": {"operator.cluster.x-k8s.io/applied-spec-hash": "abc", "owner": "ops",
                                             "argocd.argoproj.io/tracking-id": "capi:x", "meta.helm.sh/release-name": "capi"}},
                "spec": spec,
                "status": {"installedVersion": installed},
            }),
        }
    }

    #[test]
    fn the_fields_this_operator_has_are_carried_and_the_others_named() {
        let spec = json!({
            "version": "v2.5.0",
            "configSecret": {"name": "aws-variables", "namespace": "capa-system"},
            "manager": {"featureGates": {"MachinePool": true}, "someFutureField": 1,
                        "controller": {"groupKindConcurrency": {"AWSCluster.infrastructure.cluster.x-k8s.io": 5}}},
            "deployment": {"containers": [{"name": "manager", "imageUrl": "r.example.com/capa:v2.5.0", "shiny": true}]},
        });
        let carried = carry(&old("InfrastructureProvider", "vsphere", spec, Some("v2.5.0")), &schema());
        let object = carried.object.unwrap();
        assert_eq!(object["apiVersion"], "operator.butlerlabs.dev/v1alpha1");
        assert_eq!(object["kind"], "InfrastructureProvider");
        assert_eq!(object["metadata"]["namespace"], "capa-system");
        assert_eq!(object["metadata"]["labels"], json!({"team": "platform"}));
        assert_eq!(
            object["metadata"]["annotations"],
            json!({"owner": "ops", MIGRATED_FROM: "operator.cluster.x-k8s.io/v1alpha2 InfrastructureProvider capa-system/vsphere u-1"})
        );
        assert_eq!(object["spec"]["manager"]["featureGates"], json!({"MachinePool": true}));
        assert_eq!(
            object["spec"]["manager"]["controller"]["groupKindConcurrency"]["AWSCluster.infrastructure.cluster.x-k8s.io"],
            5
        );
        assert_eq!(object["spec"]["deployment"]["containers"][0]["imageUrl"], "r.example.com/capa:v2.5.0");
        assert_eq!(
            carried.dropped,
            vec![
                "spec.deployment.containers[0].shiny: not a field of this operator's providers".to_string(),
                "spec.manager.someFutureField: not a field of this operator's providers".to_string(),
            ]
        );
        assert_eq!(carried.version.as_deref(), Some("v2.5.0"));
        assert!(carried.notes.is_empty(), "{:?}", carried.notes);
    }

    #[test]
    fn an_empty_version_becomes_the_one_that_runs_and_butlers_names_keep_the_upstream_release() {
        let carried = carry(&old("InfrastructureProvider", "aws", json!({}), Some("v2.6.1")), &schema());
        let spec = &carried.object.unwrap()["spec"];
        assert_eq!(spec["version"], "v2.6.1");
        assert_eq!(
            spec["fetchConfig"]["url"],
            "https://github.com/kubernetes-sigs/cluster-api-provider-aws/releases/latest/infrastructure-components.yaml"
        );
        assert_eq!(carried.notes.len(), 2, "{:?}", carried.notes);
        // A name only clusterctl knows resolves the same way here: nothing to add.
        let carried =
            carry(&old("InfrastructureProvider", "vsphere", json!({"version": "v1.9.0"}), None), &schema());
        assert!(carried.object.unwrap()["spec"].get("fetchConfig").is_none());
    }

    #[test]
    fn a_kind_this_operator_lacks_is_not_carried() {
        let carried = carry(&old("FutureProvider", "x", json!({}), None), &schema());
        assert_eq!(carried.object, None);
        assert!(carried.dropped[0].contains("no FutureProvider kind"), "{:?}", carried.dropped);
    }

    #[test]
    fn a_runtime_extension_provider_is_carried_as_one() {
        let spec = json!({"version": "v0.14.0", "fetchConfig": {"url": "https://example.com/r.yaml"}});
        let carried = carry(&old("RuntimeExtensionProvider", "nutanix", spec, None), &schema());
        let object = carried.object.expect("carried");
        assert_eq!(object["kind"], "RuntimeExtensionProvider");
        assert_eq!(object["spec"]["version"], "v0.14.0");
    }
}
