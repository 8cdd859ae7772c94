//! Moving a set of objects to a target namespace as clusterctl does for components and
//! templates alike: the Namespace object renamed, namespaced objects moved, and the references
//! that name the namespace followed (binding subjects, webhook and CRD conversion services,
//! `cert-manager.io/inject-ca-from`, Certificate DNS names).

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::scope::group_of;
use crate::yaml::Document;

/// cert-manager's CA injection annotation (`{namespace}/{certificate}`).
pub const INJECT_CA_FROM: &str = "cert-manager.io/inject-ca-from";

/// Where objects go, and the namespace they were written for (the Namespace object of the
/// YAML, if it has one).
pub(crate) struct Retarget<'a> {
    pub target: &'a str,
    pub original: Option<&'a str>,
    /// The kinds left without a namespace, as (group, kind): the known ones and those a CRD of
    /// the same YAML declares cluster-scoped.
    pub cluster_scoped: BTreeSet<(String, String)>,
}

impl Retarget<'_> {
    /// The metadata of an object of `api_version` and `kind` in the target namespace; returns
    /// the namespace it was moved from when that was neither the target nor the original one.
    pub fn metadata(&self, api_version: &str, kind: &str, metadata: &mut Value) -> Option<String> {
        let mut moved_from = None;
        let scope_key = (group_of(api_version).to_string(), kind.to_string());
        if kind == "Namespace" && api_version == "v1" {
            metadata["name"] = json!(self.target);
        } else if !self.cluster_scoped.contains(&scope_key) {
            if let Some(ns) = metadata["namespace"].as_str().filter(|ns| !ns.is_empty() && *ns != self.target)
                && Some(ns) != self.original
            {
                moved_from = Some(ns.to_string());
            }
            metadata["namespace"] = json!(self.target);
        }
        if let Some(from) = metadata["annotations"][INJECT_CA_FROM].as_str().map(String::from)
            && let Some((_, certificate)) = from.split_once('/')
        {
            metadata["annotations"][INJECT_CA_FROM] = json!(format!("{}/{certificate}", self.target));
        }
        moved_from
    }

    /// The references of an object of `kind` that name the namespace.
    pub fn references(&self, doc: &mut Document, kind: &str) -> Result<(), String> {
        match kind {
            "CustomResourceDefinition" => {
                if let Some(mut conversion) = doc.get_child("spec", "conversion")?
                    && let Some(service) =
                        conversion.pointer_mut("/webhook/clientConfig/service").and_then(Value::as_object_mut)
                {
                    service.insert("namespace".into(), json!(self.target));
                    doc.set_child("spec", "conversion", conversion)?;
                }
            }
            "RoleBinding" | "ClusterRoleBinding" => {
                if let Some(mut subjects) = doc.get("subjects")? {
                    for subject in subjects.as_array_mut().into_iter().flatten() {
                        if subject.get("namespace").is_some_and(|n| !n.is_null()) {
                            subject["namespace"] = json!(self.target);
                        }
                    }
                    doc.set("subjects", subjects);
                }
            }
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                if let Some(mut webhooks) = doc.get("webhooks")? {
                    for webhook in webhooks.as_array_mut().into_iter().flatten() {
                        if let Some(service) =
                            webhook.pointer_mut("/clientConfig/service").and_then(Value::as_object_mut)
                        {
                            service.insert("namespace".into(), json!(self.target));
                        }
                    }
                    doc.set("webhooks", webhooks);
                }
            }
            "Certificate" => {
                if let Some(mut spec) = doc.get("spec")? {
                    for name in spec.get_mut("dnsNames").and_then(Value::as_array_mut).into_iter().flatten() {
                        if let Some(text) = name.as_str() {
                            *name = json!(self.service_dns_name(text));
                        }
                    }
                    doc.set("spec", spec);
                }
            }
            // Butler's policies name the install namespace in their expressions (whose requests
            // they match, which subjects they allow): moved with it, or a core installed
            // elsewhere would match no one. clusterctl leaves CEL alone; only the namespace's
            // own quoted name and ServiceAccount user names are rewritten.
            "ValidatingAdmissionPolicy" => {
                if let Some(original) = self.original.filter(|o| *o != self.target)
                    && let Some(mut spec) = doc.get("spec")?
                {
                    let quoted = (format!("'{original}'"), format!("'{}'", self.target));
                    let user = (
                        format!("system:serviceaccount:{original}:"),
                        format!("system:serviceaccount:{}:", self.target),
                    );
                    // What a message says of an object of the namespace (`{original}/{name}`).
                    let placed = (format!("{original}/"), format!("{}/", self.target));
                    for list in ["matchConditions", "validations"] {
                        for entry in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
                            if let Some(text) = entry.get("expression").and_then(Value::as_str) {
                                let moved = text.replace(&quoted.0, &quoted.1).replace(&user.0, &user.1);
                                entry["expression"] = json!(moved);
                            }
                            if let Some(text) = entry.get("message").and_then(Value::as_str) {
                                entry["message"] = json!(text.replace(&placed.0, &placed.1));
                            }
                        }
                    }
                    doc.set("spec", spec);
                }
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
