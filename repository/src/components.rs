//! Components YAML turned into the objects to install, the way clusterctl does it: variables
//! expanded, one target namespace, every object labelled, image overrides applied, references
//! to the namespace rewritten, and the clusterctl contract checked.

use std::collections::BTreeSet;

use serde_json::{Value, json};
use thiserror::Error;

use crate::envsubst::{self, BadSubstitution, ExpandError, MissingVariables, VariableUse};
use crate::images::ImageOverrides;
use crate::yaml::{Document, split_documents};

/// The label naming an object's provider.
pub const PROVIDER_LABEL: &str = "cluster.x-k8s.io/provider";
/// The label clusterctl puts on everything it installs.
pub const CLUSTERCTL_LABEL: &str = "clusterctl.cluster.x-k8s.io";
/// cert-manager's CA injection annotation (`{namespace}/{certificate}`).
pub const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";

/// Kinds that are not namespaced. Kinds that CRDs of the same file define as cluster-scoped
/// are added to these.
pub const CLUSTER_SCOPED_KINDS: &[&str] = &[
    "Namespace",
    "CustomResourceDefinition",
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
    "APIService",
    "PriorityClass",
    "StorageClass",
    "CSIDriver",
    "IngressClass",
    "RuntimeClass",
    "PersistentVolume",
    "Node",
    "ClusterIssuer",
    "CertificateSigningRequest",
    "VolumeAttachment",
    "CSINode",
    "PodSecurityPolicy",
];

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
        self.documents
            .iter()
            .map(|d| {
                d.to_value()
                    .map_err(|message| ProcessError::Invalid { what: "processed components".into(), message })
            })
            .collect()
    }

    /// The objects as one YAML stream.
    pub fn to_yaml(&self) -> String {
        self.documents.iter().map(|d| format!("---\n{}", d.to_yaml())).collect()
    }
}

/// An expansion error of `what` as a processing error.
pub(crate) fn expand_error(what: &str, e: ExpandError) -> ProcessError {
    match e {
        ExpandError::Missing(missing) => ProcessError::MissingVariables(missing),
        ExpandError::Bad(bad) => ProcessError::BadSubstitution { what: what.to_string(), bad },
    }
}

/// Processes a components YAML.
pub fn process_components(text: &str, options: &ComponentsOptions<'_>) -> Result<Components, ProcessError> {
    let what = options.what;
    let parsed = envsubst::Parsed::new(text);
    let variables = parsed.variables();
    let expanded = parsed.expand_text(text, options.variables).map_err(|e| expand_error(what, e))?;
    let mut documents = Vec::new();
    for (index, source) in split_documents(&expanded).iter().enumerate() {
        let document = Document::parse(source).map_err(|message| ProcessError::Yaml {
            what: what.into(),
            index: index + 1,
            message,
        })?;
        documents.push(document);
    }
    let fail = |object: &str, message: String| ProcessError::Object {
        what: what.into(),
        object: object.into(),
        message,
    };

    // Kinds and names, read once.
    let mut heads = Vec::new();
    for doc in &documents {
        let kind = doc
            .get("kind")
            .map_err(|m| fail("an object", m))?
            .and_then(|k| k.as_str().map(String::from))
            .unwrap_or_default();
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

    let mut cluster_scoped: BTreeSet<String> = CLUSTER_SCOPED_KINDS.iter().map(|k| k.to_string()).collect();
    for (doc, (kind, _)) in documents.iter_mut().zip(&heads) {
        if kind == "CustomResourceDefinition" {
            let names = doc.get_child("spec", "names").map_err(|m| fail(kind, m))?.unwrap_or_default();
            let scope = doc.get_child("spec", "scope").map_err(|m| fail(kind, m))?.unwrap_or_default();
            if scope == "Cluster"
                && let Some(k) = names["kind"].as_str()
            {
                cluster_scoped.insert(k.to_string());
            }
        }
    }

    let mut warnings = Vec::new();
    let context = Context { target: &target, original: original_namespace.as_deref(), options };
    for (doc, (kind, metadata)) in documents.iter_mut().zip(heads.iter_mut()) {
        let name = metadata["name"].as_str().unwrap_or_default().to_string();
        let object = if name.is_empty() { kind.clone() } else { format!("{kind} {name}") };
        if !metadata.is_object() {
            return Err(fail(&object, "metadata is not an object".into()));
        }
        if kind == "Namespace" {
            metadata["name"] = json!(target);
        } else if !cluster_scoped.contains(kind.as_str()) {
            if let Some(ns) = metadata["namespace"].as_str().filter(|ns| !ns.is_empty() && *ns != target)
                && Some(ns) != original_namespace.as_deref()
            {
                warnings.push(format!("{object} was in namespace {ns}, outside the components' namespace; it is moved to {target}"));
            }
            metadata["namespace"] = json!(target);
        }
        metadata["labels"][PROVIDER_LABEL] = json!(options.provider_label);
        metadata["labels"][CLUSTERCTL_LABEL] = json!("");
        if let Some(from) = metadata["annotations"][INJECT_CA_FROM].as_str().map(String::from)
            && let Some((_, certificate)) = from.split_once('/')
        {
            metadata["annotations"][INJECT_CA_FROM] = json!(format!("{target}/{certificate}"));
        }
        doc.set("metadata", metadata.clone());
        context.rewrite(doc, kind, &object, &mut warnings)?;
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

struct Context<'a> {
    target: &'a str,
    original: Option<&'a str>,
    options: &'a ComponentsOptions<'a>,
}

impl Context<'_> {
    /// The kind-specific rewrites: subjects, webhook and conversion services, certificate DNS
    /// names, images; and the contract's container check.
    fn rewrite(
        &self,
        doc: &mut Document,
        kind: &str,
        object: &str,
        warnings: &mut Vec<String>,
    ) -> Result<(), ProcessError> {
        let fail = |message: String| ProcessError::Object {
            what: self.options.what.into(),
            object: object.into(),
            message,
        };
        match kind {
            "CustomResourceDefinition" => {
                if let Some(mut conversion) = doc.get_child("spec", "conversion").map_err(fail)?
                    && let Some(service) = conversion["webhook"]["clientConfig"]["service"].as_object_mut()
                {
                    service.insert("namespace".into(), json!(self.target));
                    doc.set_child("spec", "conversion", conversion).map_err(fail)?;
                }
            }
            "RoleBinding" | "ClusterRoleBinding" => {
                if let Some(mut subjects) = doc.get("subjects").map_err(fail)? {
                    for subject in subjects.as_array_mut().into_iter().flatten() {
                        if subject.get("namespace").is_some_and(|n| !n.is_null()) {
                            subject["namespace"] = json!(self.target);
                        }
                    }
                    doc.set("subjects", subjects);
                }
            }
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                if let Some(mut webhooks) = doc.get("webhooks").map_err(fail)? {
                    for webhook in webhooks.as_array_mut().into_iter().flatten() {
                        if let Some(service) = webhook["clientConfig"]["service"].as_object_mut() {
                            service.insert("namespace".into(), json!(self.target));
                        }
                    }
                    doc.set("webhooks", webhooks);
                }
            }
            "Certificate" => {
                if let Some(mut spec) = doc.get("spec").map_err(fail)? {
                    for name in spec["dnsNames"].as_array_mut().into_iter().flatten() {
                        if let Some(text) = name.as_str() {
                            *name = json!(self.service_dns_name(text));
                        }
                    }
                    doc.set("spec", spec);
                }
            }
            "Deployment" | "DaemonSet" => {
                let Some(mut spec) = doc.get("spec").map_err(fail)? else { return Ok(()) };
                let pod = &mut spec["template"]["spec"];
                let mut names = Vec::new();
                for list in ["containers", "initContainers"] {
                    for container in pod[list].as_array_mut().into_iter().flatten() {
                        if list == "containers" {
                            names.push(container["name"].as_str().unwrap_or_default().to_string());
                        }
                        if let Some(image) = container["image"].as_str().map(String::from) {
                            let replaced = self
                                .options
                                .images
                                .apply(self.options.provider_label, &image)
                                .map_err(fail)?;
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
            }
            _ => {}
        }
        Ok(())
    }

    /// `svc.{namespace}.svc[.cluster.local]` with the target namespace.
    fn service_dns_name(&self, name: &str) -> String {
        let mut labels: Vec<&str> = name.split('.').collect();
        let service_suffix = labels.len() >= 3 && labels[2] == "svc";
        let matches_original = self.original.is_none_or(|o| labels.get(1) == Some(&o));
        if service_suffix && matches_original {
            labels[1] = self.target;
        }
        labels.join(".")
    }
}
