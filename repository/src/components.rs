//! Components YAML turned into the objects to install, the way clusterctl does it: variables
//! expanded, one target namespace, every object labelled, image overrides applied, references
//! to the namespace rewritten, and the clusterctl contract checked.

use serde_json::{Value, json};
use thiserror::Error;

use crate::envsubst::{self, BadSubstitution, ExpandError, MissingVariables, VariableUse};
use crate::images::ImageOverrides;
use crate::retarget::Retarget;
use crate::scope::cluster_scoped_kinds;
use crate::yaml::{Document, split_documents};

/// The label naming an object's provider.
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
/// The label clusterctl puts on everything it installs.
pub const CLUSTERCTL_LABEL: &str = "clusterctl.cluster.x-k8s.io";
/// Why processing failed.
#[derive(Debug, Error)]
pub enum ProcessError {
    #[error("{0}")]
    MissingVariables(#[from] MissingVariables),
    #[error("{what}: {bad}")]
    BadSubstitution { what: String, bad: BadSubstitution },
    #[error("document {index} of {what} is not valid YAML: {message}")]
    Yaml { what: String, index: usize, message: String },
    #[error("{what} holds {count} Namespace objects ({names}); components may hold one at most")]
    SeveralNamespaces { what: String, count: usize, names: String },
    #[error("{what} has no Namespace object, so the target namespace must be given (--target-namespace)")]
    NoTargetNamespace { what: String },
    #[error("{what}: {object}: {message}")]
    Object { what: String, object: String, message: String },
    #[error("{what}: {message}")]
    Invalid { what: String, message: String },
}

/// How to process a components YAML.
pub struct ComponentsOptions<'a> {
    /// What the components are, for messages (`infrastructure-aws v2.0.0`).
    pub what: &'a str,
    /// The provider label (`infrastructure-aws`), also the component name of image overrides.
    pub provider_label: &'a str,
    /// The namespace to install into; the Namespace object of the YAML when unset.
    pub target_namespace: Option<&'a str>,
    pub images: &'a ImageOverrides,
    pub variables: &'a dyn Fn(&str) -> Option<String>,
}

/// Processed components, ready to apply: Namespace first, then CRDs, then the rest in input
/// order.
#[derive(Debug, Clone)]
pub struct Components {
    pub target_namespace: String,
    pub documents: Vec<Document>,
    /// Where the YAML strays from the clusterctl contract.
    pub warnings: Vec<String>,
    /// The variables the YAML uses.
    pub variables: Vec<VariableUse>,
}

impl Components {
    /// Every object, parsed whole.
    pub fn objects(&self) -> Result<Vec<Value>, ProcessError> {
        self.each_object().collect()
    }

    /// Every object, parsed one at a time: a caller that keeps each in a smaller form never
    /// holds the whole release as a tree (Cluster API's core is tens of MB of values).
    pub fn each_object(&self) -> impl Iterator<Item = Result<Value, ProcessError>> + '_ {
        self.documents.iter().map(object_of)
    }

    /// Every object, parsed one at a time, each document let go once it is: the parsed release
    /// and what the caller makes of it are never both whole.
    pub fn into_objects(self) -> impl Iterator<Item = Result<Value, ProcessError>> {
        self.documents.into_iter().map(|d| object_of(&d))
    }

    /// The objects as one YAML stream.
    pub fn to_yaml(&self) -> String {
        self.documents.iter().map(|d| format!("---\n{}", d.to_yaml())).collect()
    }
}

fn object_of(document: &Document) -> Result<Value, ProcessError> {
    document
        .to_value()
        .map_err(|message| ProcessError::Invalid { what: "processed components".into(), message })
}

/// The namespace a release's components declare (their Namespace object), which clusterctl
/// installs them into when no target namespace is given; `None` when they declare none (or
/// more than one, which processing refuses anyway).
pub fn declared_namespace(text: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Head {
        kind: Option<String>,
        metadata: Option<Name>,
    }
    #[derive(serde::Deserialize)]
    struct Name {
        name: Option<String>,
    }
    let names: Vec<String> = crate::yaml::split_documents(text)
        .iter()
        .filter_map(|d| serde_saphyr::from_str::<Head>(d).ok())
        .filter(|h| h.kind.as_deref() == Some("Namespace"))
        .filter_map(|h| h.metadata?.name)
        .filter(|n| !n.is_empty() && !n.contains("${"))
        .collect();
    match names.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    }
}

/// An expansion error of `what` as a processing error.
pub(crate) fn expand_error(what: &str, e: ExpandError) -> ProcessError {
    match e {
        ExpandError::Missing(missing) => ProcessError::MissingVariables(missing),
        ExpandError::Bad(bad) => ProcessError::BadSubstitution { what: what.to_string(), bad },
        other => ProcessError::Invalid { what: what.to_string(), message: other.to_string() },
    }
}

/// The documents of a file (its variables expanded), within the bounds of a whole file: its
/// bytes, its documents and their nodes.
pub(crate) fn parse_file(expanded: &str, what: &str) -> Result<Vec<Document>, ProcessError> {
    let invalid = |message| ProcessError::Invalid { what: what.into(), message };
    crate::yaml::check_size(expanded).map_err(invalid)?;
    let sources = split_documents(expanded);
    crate::yaml::check_count(&sources).map_err(invalid)?;
    let mut budget = crate::yaml::NodeBudget::default();
    let mut documents = Vec::with_capacity(sources.len());
    for (index, source) in sources.iter().enumerate() {
        let document = Document::parse(source).map_err(|message| ProcessError::Yaml {
            what: what.into(),
            index: index + 1,
            message,
        })?;
        budget.spend(&document).map_err(invalid)?;
        documents.push(document);
    }
    Ok(documents)
}

/// Processes a components YAML.
pub fn process_components(text: &str, options: &ComponentsOptions<'_>) -> Result<Components, ProcessError> {
    let what = options.what;
    let parsed = envsubst::Parsed::new(text);
    let variables = parsed.variables();
    let expanded = parsed.expand_text(text, options.variables).map_err(|e| expand_error(what, e))?;
    // Each of these is as large as the release: the parsed text goes once it is expanded, the
    // expanded text once it is parsed, before the objects are worked on.
    drop(parsed);
    let mut documents = parse_file(&expanded, what)?;
    drop(expanded);
    let fail = |object: &str, message: String| ProcessError::Object {
        what: what.into(),
        object: object.into(),
        message,
    };

    // Kinds and names, read once.
    let mut heads = Vec::new();
    let mut versions = Vec::new();
    for doc in &documents {
        let kind = doc
            .get("kind")
            .map_err(|m| fail("an object", m))?
            .and_then(|k| k.as_str().map(String::from))
            .unwrap_or_default();
        let version = doc.get("apiVersion").map_err(|m| fail(&kind, m))?;
        versions.push(version.and_then(|v| v.as_str().map(String::from)).unwrap_or_default());
        let metadata = doc.get("metadata").map_err(|m| fail(&kind, m))?.unwrap_or_else(|| json!({}));
        heads.push((kind, metadata));
    }
    let namespaces: Vec<String> = heads
        .iter()
        .filter(|(kind, _)| kind == "Namespace")
        .map(|(_, meta)| meta["name"].as_str().unwrap_or_default().to_string())
        .collect();
    if namespaces.len() > 1 {
        return Err(ProcessError::SeveralNamespaces {
            what: what.into(),
            count: namespaces.len(),
            names: namespaces.join(", "),
        });
    }
    let original_namespace = namespaces.first().cloned();
    let target = options
        .target_namespace
        .filter(|t| !t.is_empty())
        .map(String::from)
        .or_else(|| original_namespace.clone())
        .ok_or_else(|| ProcessError::NoTargetNamespace { what: what.into() })?;

    let cluster_scoped =
        cluster_scoped_kinds(documents.iter_mut().zip(heads.iter().map(|(k, _)| k.as_str())))
            .map_err(|m| fail("CustomResourceDefinition", m))?;

    let mut warnings = Vec::new();
    let retarget = Retarget { target: &target, original: original_namespace.as_deref(), cluster_scoped };
    for ((doc, (kind, metadata)), version) in documents.iter_mut().zip(heads.iter_mut()).zip(&versions) {
        let name = metadata["name"].as_str().unwrap_or_default().to_string();
        let object = if name.is_empty() { kind.clone() } else { format!("{kind} {name}") };
        if !metadata.is_object() {
            return Err(fail(&object, "metadata is not an object".into()));
        }
        if let Some(ns) = retarget.metadata(version, kind, metadata) {
            warnings.push(format!(
                "{object} was in namespace {ns}, outside the components' namespace; it is moved to {target}"
            ));
        }
        metadata["labels"][PROVIDER_LABEL] = json!(options.provider_label);
        metadata["labels"][CLUSTERCTL_LABEL] = json!("");
        doc.set("metadata", metadata.clone());
        retarget.references(doc, kind).map_err(|m| fail(&object, m))?;
        images_and_contract(doc, kind, &object, options, &mut warnings)?;
    }

    // Namespace first (added when the YAML has none), then CRDs, then the rest in order.
    let mut ordered: Vec<(u8, usize, Document)> = documents
        .into_iter()
        .zip(&heads)
        .enumerate()
        .map(|(i, (doc, (kind, _)))| {
            (
                if kind == "Namespace" {
                    0
                } else if kind == "CustomResourceDefinition" {
                    1
                } else {
                    2
                },
                i,
                doc,
            )
        })
        .collect();
    if original_namespace.is_none() {
        let namespace = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target, "labels": {
            PROVIDER_LABEL: options.provider_label, CLUSTERCTL_LABEL: ""}}});
        ordered.push((0, 0, Document::from_value(namespace)));
    }
    ordered.sort_by_key(|(rank, i, _)| (*rank, *i));
    Ok(Components {
        target_namespace: target,
        documents: ordered.into_iter().map(|(_, _, d)| d).collect(),
        warnings,
        variables,
    })
}

/// Image overrides of Deployments and DaemonSets, and the contract's container check.
fn images_and_contract(
    doc: &mut Document,
    kind: &str,
    object: &str,
    options: &ComponentsOptions<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), ProcessError> {
    if kind != "Deployment" && kind != "DaemonSet" {
        return Ok(());
    }
    let fail =
        |message: String| ProcessError::Object { what: options.what.into(), object: object.into(), message };
    let Some(mut spec) = doc.get("spec").map_err(fail)? else { return Ok(()) };
    let mut names = Vec::new();
    for list in ["containers", "initContainers"] {
        // Read without indexing mutably: that would add `initContainers: null` to every pod.
        let containers = spec.pointer_mut(&format!("/template/spec/{list}")).and_then(Value::as_array_mut);
        for container in containers.into_iter().flatten() {
            if list == "containers" {
                names.push(container["name"].as_str().unwrap_or_default().to_string());
            }
            if let Some(image) = container["image"].as_str().map(String::from) {
                let replaced = options.images.apply(options.provider_label, &image).map_err(fail)?;
                container["image"] = json!(replaced);
            }
        }
    }
    if kind == "Deployment" && !names.iter().any(|n| n == "manager") {
        warnings.push(format!(
            "{object} has no container named manager (it has {}); the clusterctl contract names the controller container manager",
            if names.is_empty() { "none".to_string() } else { names.join(", ") }
        ));
    }
    doc.set("spec", spec);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_declared_namespace_is_the_one_namespace_object() {
        let one = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capa-system\n---\nkind: ConfigMap\nmetadata: {name: x, namespace: capa-system}\n";
        assert_eq!(declared_namespace(one).as_deref(), Some("capa-system"));
        assert_eq!(declared_namespace("kind: ConfigMap\nmetadata: {name: x}\n"), None);
        let two = "kind: Namespace\nmetadata: {name: a}\n---\nkind: Namespace\nmetadata: {name: b}\n";
        assert_eq!(declared_namespace(two), None);
        assert_eq!(declared_namespace("kind: Namespace\nmetadata: {name: '${NS}'}\n"), None);
    }
}
