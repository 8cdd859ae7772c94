//! Workload cluster templates (`cluster-template.yaml`, `cluster-template-{flavor}.yaml`) and
//! ClusterClass definitions (`clusterclass-{name}.yaml`), processed as clusterctl does:
//! variables expanded and the objects moved to the target namespace as components are. The common variables of
//! `generate cluster` are validated here.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::components::ProcessError;
use crate::envsubst::{Parsed, VariableUse};
use crate::retarget::Retarget;
use crate::scope::cluster_scoped_kinds;
use crate::yaml::Document;

/// The file of the default template, or of a flavor.
pub fn template_file(flavor: Option<&str>) -> String {
    match flavor.filter(|f| !f.is_empty()) {
        Some(flavor) => format!("cluster-template-{flavor}.yaml"),
        None => "cluster-template.yaml".to_string(),
    }
}

/// The file of a ClusterClass definition.
pub fn clusterclass_file(class: &str) -> String {
    format!("clusterclass-{class}.yaml")
}

/// A processed template.
#[derive(Debug, Clone)]
pub struct Template {
    pub documents: Vec<Document>,
    pub variables: Vec<VariableUse>,
}

impl Template {
    pub fn to_yaml(&self) -> String {
        self.documents.iter().map(|d| format!("---\n{}", d.to_yaml())).collect()
    }

    pub fn objects(&self) -> Result<Vec<Value>, ProcessError> {
        self.documents
            .iter()
            .map(|d| {
                d.to_value().map_err(|message| ProcessError::Invalid { what: "the template".into(), message })
            })
            .collect()
    }

    /// The ClusterClasses that the template's Clusters use (`spec.topology.class`, or
    /// `spec.topology.classRef.name`).
    pub fn classes(&self) -> Vec<String> {
        let mut classes: Vec<String> = self
            .objects()
            .unwrap_or_default()
            .iter()
            .filter(|o| o["kind"] == "Cluster")
            .filter_map(|o| {
                let topology = &o["spec"]["topology"];
                topology["class"].as_str().or_else(|| topology["classRef"]["name"].as_str()).map(String::from)
            })
            .collect();
        classes.sort();
        classes.dedup();
        classes
    }
}

/// The variables a template uses, before expansion (for `--list-variables`).
pub fn template_variables(text: &str) -> Vec<VariableUse> {
    Parsed::new(text).variables()
}

/// Expands `text` and, when a target namespace is given, moves the objects there as
/// clusterctl moves components: the Namespace object renamed, namespaced objects moved, binding
/// subjects, webhook and CRD conversion services, `inject-ca-from` and Certificate DNS names
/// following. Without one, objects stay where the template puts them.
pub fn process_template(
    what: &str,
    text: &str,
    namespace: Option<&str>,
    variables: &dyn Fn(&str) -> Option<String>,
) -> Result<Template, ProcessError> {
    let parsed = Parsed::new(text);
    let used = parsed.variables();
    let expanded =
        parsed.expand_text(text, variables).map_err(|e| crate::components::expand_error(what, e))?;
    let invalid = |message: String| ProcessError::Invalid { what: what.into(), message };
    let mut documents = crate::components::parse_file(&expanded, what)?;
    let mut kinds = Vec::with_capacity(documents.len());
    for doc in &documents {
        let kind = doc.get("kind").map_err(invalid)?;
        kinds.push(kind.as_ref().and_then(Value::as_str).unwrap_or_default().to_string());
    }
    let Some(target) = namespace.filter(|n| !n.is_empty()) else {
        return Ok(Template { documents, variables: used });
    };
    let mut original = None;
    for (doc, kind) in documents.iter_mut().zip(&kinds) {
        if kind == "Namespace" && original.is_none() {
            original = doc
                .get_child("metadata", "name")
                .map_err(invalid)?
                .and_then(|n| n.as_str().map(String::from));
        }
    }
    let cluster_scoped =
        cluster_scoped_kinds(documents.iter_mut().zip(kinds.iter().map(String::as_str))).map_err(invalid)?;
    let retarget = Retarget { target, original: original.as_deref(), cluster_scoped };
    for (index, (doc, kind)) in documents.iter_mut().zip(&kinds).enumerate() {
        let version = doc.get("apiVersion").map_err(invalid)?.and_then(|v| v.as_str().map(String::from));
        let mut metadata = doc.get("metadata").map_err(invalid)?.unwrap_or_else(|| json!({}));
        if !metadata.is_object() {
            return Err(invalid(format!("document {}: metadata is not an object", index + 1)));
        }
        retarget.metadata(version.as_deref().unwrap_or_default(), kind, &mut metadata);
        doc.set("metadata", metadata);
        retarget.references(doc, kind).map_err(|m| invalid(format!("document {}: {m}", index + 1)))?;
    }
    Ok(Template { documents, variables: used })
}

/// The common variables of `generate cluster`, as given on the command line.
#[derive(Debug, Clone, Default)]
pub struct ClusterVariables {
    pub cluster_name: String,
    pub namespace: String,
    pub kubernetes_version: Option<String>,
    pub control_plane_machine_count: i64,
    pub worker_machine_count: i64,
}

fn dns_subdomain(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 253
        && text.split('.').all(|label| dns_label(label) && label.len() <= 63)
}

fn dns_label(text: &str) -> bool {
    !text.is_empty()
        && text.len() <= 63
        && text.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !text.starts_with('-')
        && !text.ends_with('-')
}

impl ClusterVariables {
    /// The variables, checked: `CLUSTER_NAME` (a DNS subdomain), `NAMESPACE` (a DNS label),
    /// `KUBERNETES_VERSION` (semantic), `CONTROL_PLANE_MACHINE_COUNT` (at least 1) and
    /// `WORKER_MACHINE_COUNT` (at least 0).
    pub fn validate(&self) -> Result<BTreeMap<String, String>, ProcessError> {
        let invalid = |message: String| ProcessError::Invalid { what: "generate cluster".into(), message };
        if !dns_subdomain(&self.cluster_name) {
            return Err(invalid(format!(
                "the cluster name {:?} is not valid: it must be a lowercase DNS subdomain (letters, digits, '-' and '.', at most 253 characters, starting and ending with a letter or digit)",
                self.cluster_name
            )));
        }
        if !dns_label(&self.namespace) {
            return Err(invalid(format!(
                "the namespace {:?} is not valid: it must be a lowercase DNS label (letters, digits and '-', at most 63 characters)",
                self.namespace
            )));
        }
        let mut variables = BTreeMap::from([
            ("CLUSTER_NAME".to_string(), self.cluster_name.clone()),
            ("NAMESPACE".to_string(), self.namespace.clone()),
        ]);
        if let Some(version) = self.kubernetes_version.as_deref().filter(|v| !v.is_empty()) {
            if semver::Version::parse(version.strip_prefix('v').unwrap_or(version)).is_err() {
                return Err(invalid(format!(
                    "the Kubernetes version {version:?} is not a semantic version (for example v1.30.4)"
                )));
            }
            variables.insert("KUBERNETES_VERSION".into(), version.to_string());
        }
        if self.control_plane_machine_count < 1 {
            return Err(invalid(format!(
                "the control-plane machine count must be at least 1, not {}",
                self.control_plane_machine_count
            )));
        }
        if self.worker_machine_count < 0 {
            return Err(invalid(format!(
                "the worker machine count must be at least 0, not {}",
                self.worker_machine_count
            )));
        }
        variables.insert("CONTROL_PLANE_MACHINE_COUNT".into(), self.control_plane_machine_count.to_string());
        variables.insert("WORKER_MACHINE_COUNT".into(), self.worker_machine_count.to_string());
        Ok(variables)
    }
}
