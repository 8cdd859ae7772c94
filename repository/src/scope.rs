//! Which kinds are cluster-scoped: the known ones, by API group and kind, and those the CRDs of
//! the same file declare so. Both the processing of components and their retargeting read it.

use std::collections::BTreeSet;

use crate::yaml::Document;

/// Kinds that are not namespaced, by API group and kind (never by kind alone: a CRD may name
/// its kind `Deployment`). Kinds that CRDs of the same file define as cluster-scoped are added
/// to these, with their group.
pub const CLUSTER_SCOPED_KINDS: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicyBinding"),
    ("apiregistration.k8s.io", "APIService"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("networking.k8s.io", "IngressClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("", "PersistentVolume"),
    ("", "Node"),
    ("cert-manager.io", "ClusterIssuer"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "CSINode"),
    ("policy", "PodSecurityPolicy"),
];

/// The API group of an `apiVersion` (`""` for the core group).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// Whether an object of `api_version` and `kind` is one of the known cluster-scoped kinds.
pub fn known_cluster_scoped(api_version: &str, kind: &str) -> bool {
    CLUSTER_SCOPED_KINDS.contains(&(group_of(api_version), kind))
}

/// The kinds (group, kind) that CRDs among `documents` declare cluster-scoped, with the known
/// ones.
pub(crate) fn cluster_scoped_kinds<'d>(
    documents: impl Iterator<Item = (&'d mut Document, &'d str)>,
) -> Result<BTreeSet<(String, String)>, String> {
    let mut kinds: BTreeSet<(String, String)> =
        CLUSTER_SCOPED_KINDS.iter().map(|(g, k)| (g.to_string(), k.to_string())).collect();
    for (doc, kind) in documents {
        if kind == "CustomResourceDefinition" {
            let names = doc.get_child("spec", "names")?.unwrap_or_default();
            let scope = doc.get_child("spec", "scope")?.unwrap_or_default();
            let group = doc.get_child("spec", "group")?.unwrap_or_default();
            if scope == "Cluster"
                && let (Some(k), Some(g)) = (names["kind"].as_str(), group.as_str())
            {
                kinds.insert((g.to_string(), k.to_string()));
            }
        }
    }
    Ok(kinds)
}
