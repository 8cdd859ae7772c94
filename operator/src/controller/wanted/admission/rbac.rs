//! What a release's RBAC may grant, matched by API group and kind (a decoy `ClusterRole` of
//! another group is no role): a binding names a Role or ClusterRole of the same release, or a
//! ClusterRole the operator allows (`--allow-cluster-role`), for ServiceAccounts of the same
//! release only, never a User or Group; a role never aggregates into Kubernetes' own roles,
//! and an aggregated ClusterRole selects by labels of its own.

use super::{RBAC, Set, describe, text};
use crate::controller::wanted::policy::Policy;

/// Kubernetes' prefix of the labels that aggregate into its own roles (admin, edit, view).
const BUILT_IN_AGGREGATION: &str = "rbac.authorization.k8s.io/aggregate-to-";

pub fn check(set: &Set<'_>, policy: &Policy) -> Result<(), String> {
    for object in set.objects {
        let refuse = |rule: String| Err(format!("{} is refused: {rule}", describe(object)));
        let r = butler_runtime::objects::ObjectRef::of(object);
        if r.group() != RBAC {
            continue;
        }
        match r.kind.as_str() {
            kind @ ("RoleBinding" | "ClusterRoleBinding") => {
                let namespace = (kind == "RoleBinding").then(|| text(&object["metadata"]["namespace"]));
                let role = text(&object["roleRef"]["name"]);
                let in_rbac = matches!(text(&object["roleRef"]["apiGroup"]), RBAC | "");
                let own_role = in_rbac
                    && match text(&object["roleRef"]["kind"]) {
                        "ClusterRole" => {
                            set.defined(RBAC, "ClusterRole", None, role)
                                || policy.cluster_roles.iter().any(|r| r == role)
                        }
                        "Role" => namespace.is_some() && set.defined(RBAC, "Role", namespace, role),
                        _ => false,
                    };
                if !own_role {
                    return refuse(format!(
                        "it binds the {} {role:?}, which the provider's components do not define; a provider's bindings name its own roles (or a ClusterRole the operator allows with --allow-cluster-role)",
                        text(&object["roleRef"]["kind"])
                    ));
                }
                for subject in object["subjects"].as_array().into_iter().flatten() {
                    let name = text(&subject["name"]);
                    let subject_namespace =
                        subject["namespace"].as_str().filter(|n| !n.is_empty()).or(namespace);
                    let own = subject["kind"] == "ServiceAccount"
                        && text(&subject["apiGroup"]).is_empty()
                        && subject_namespace.is_some_and(|ns| set.accounts.contains(&(ns, name)));
                    if !own {
                        return refuse(format!(
                            "its subject {} {name:?} is not a ServiceAccount of the provider's components; a provider binds roles to its own ServiceAccounts only",
                            text(&subject["kind"])
                        ));
                    }
                }
            }
            "Role" | "ClusterRole" => {
                let labels = object["metadata"]["labels"].as_object();
                if let Some(label) =
                    labels.into_iter().flatten().map(|(k, _)| k).find(|k| k.starts_with(BUILT_IN_AGGREGATION))
                {
                    return refuse(format!(
                        "its label {label} would add its rules to Kubernetes' own roles; a provider's roles aggregate into its own roles only"
                    ));
                }
                for selector in
                    object["aggregationRule"]["clusterRoleSelectors"].as_array().into_iter().flatten()
                {
                    let keys: Vec<&str> = selector["matchLabels"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, _)| k.as_str())
                        .chain(
                            selector["matchExpressions"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|e| text(&e["key"])),
                        )
                        .collect();
                    if keys.is_empty() || keys.iter().any(|k| k.starts_with("rbac.authorization.k8s.io/")) {
                        return refuse(
                            "its aggregationRule selects every ClusterRole or Kubernetes' own roles; select by labels of the provider's own".into(),
                        );
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}
