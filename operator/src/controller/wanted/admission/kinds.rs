//! The kinds a release may create, by API group and kind: those Cluster API's and Butler's
//! providers ship, the kinds of the CRDs the release itself defines, and what the operator's
//! configuration adds (`--allow-kind GROUP/KIND`). Anything else is refused, whatever it is
//! called: a kind no rule names is a kind no rule checks.

use std::collections::BTreeSet;

/// The kinds providers ship, as (API group, kind); the security page is this table.
pub const SHIPPED: &[(&str, &str)] = &[
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "Service"),
    ("", "ServiceAccount"),
    ("admissionregistration.k8s.io", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding"),
    ("admissionregistration.k8s.io", "ValidatingWebhookConfiguration"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("batch", "CronJob"),
    ("batch", "Job"),
    ("cert-manager.io", "Certificate"),
    ("cert-manager.io", "Issuer"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
];

/// Whether a release may create an object of `group` and `kind`: a shipped kind, a kind of a
/// CRD of the release (`own`, by group and kind), or one `allowed` names as `GROUP/KIND`
/// (`/KIND` or `KIND` for the core group).
pub fn may_create(group: &str, kind: &str, own: &BTreeSet<(&str, &str)>, allowed: &[String]) -> bool {
    let named = |entry: &String| match entry.rsplit_once('/') {
        Some((g, k)) => g == group && k == kind,
        None => group.is_empty() && entry == kind,
    };
    SHIPPED.contains(&(group, kind)) || own.contains(&(group, kind)) || allowed.iter().any(named)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_own_and_allowed_kinds_pass_and_nothing_else() {
        let own = BTreeSet::from([("p.test.io", "Gadget")]);
        let allowed = vec!["monitoring.coreos.com/ServiceMonitor".to_string(), "LimitRange".to_string()];
        for (group, kind) in [
            ("apps", "Deployment"),
            ("p.test.io", "Gadget"),
            ("monitoring.coreos.com", "ServiceMonitor"),
            ("", "LimitRange"),
        ] {
            assert!(may_create(group, kind, &own, &allowed), "{group}/{kind}");
        }
        for (group, kind) in [
            ("", "Pod"),
            ("", "ReplicationController"),
            ("", "PodTemplate"),
            ("decoy.test.io", "Deployment"),
            ("other.test.io", "Gadget"),
            ("cert-manager.io", "ClusterIssuer"),
            ("apps", "LimitRange"),
        ] {
            assert!(!may_create(group, kind, &own, &allowed), "{group}/{kind}");
        }
    }
}
