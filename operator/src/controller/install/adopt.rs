//! Taking over what clusterctl or cluster-api-operator installed. Both label every object of a
//! provider's components `clusterctl.cluster.x-k8s.io` and `cluster.x-k8s.io/provider:
//! {label}` (clusterctl's manifest label: `cluster-api`, `infrastructure-aws`, ...), as this
//! operator's rendering does; cluster-api-operator also makes its provider object an owner of
//! the namespaced ones. An object of the rendered set that exists under those labels is
//! applied over (a Deployment whose template is unchanged keeps its pods) once the owner
//! references of cluster-api-operator's provider object are dropped: that object is deleted
//! when its operator goes, and the garbage collector would take its dependents along.

use butler_repository::{CLUSTERCTL_LABEL, PROVIDER_LABEL};
use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, RemoveOperation, TestOperation};
use kube::api::ObjectMeta;
use serde_json::Value;

/// cluster-api-operator's API group.
pub const CAPI_OPERATOR_GROUP: &str = "operator.cluster.x-k8s.io";

/// What an existing object of the rendered set is to the provider about to make it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Installed {
    /// clusterctl or cluster-api-operator installed it for this provider: it is taken over
    /// once these owner references (index, UID) of cluster-api-operator's are dropped.
    ByClusterctl { stale_owners: Vec<(usize, String)> },
    /// Anything else: left alone.
    Elsewhere,
}

/// The clusterctl manifest label a rendered object carries.
pub fn manifest_label(wanted: &Value) -> Option<&str> {
    wanted["metadata"]["labels"][PROVIDER_LABEL].as_str()
}

/// Whether `existing` was installed by clusterctl or cluster-api-operator for the provider
/// labelled `label`. Owned by anything but cluster-api-operator's provider objects, it is not.
pub fn judge(existing: &ObjectMeta, label: &str) -> Installed {
    let labels = existing.labels.clone().unwrap_or_default();
    let labelled = labels.contains_key(CLUSTERCTL_LABEL)
        && labels.get(PROVIDER_LABEL).map(String::as_str) == Some(label);
    if !labelled {
        return Installed::Elsewhere;
    }
    let mut stale_owners = Vec::new();
    for (index, owner) in existing.owner_references.iter().flatten().enumerate() {
        let group = owner.api_version.split_once('/').map(|(g, _)| g).unwrap_or_default();
        if group != CAPI_OPERATOR_GROUP {
            return Installed::Elsewhere;
        }
        stale_owners.push((index, owner.uid.clone()));
    }
    Installed::ByClusterctl { stale_owners }
}

/// The JSON patch that drops the owner references `stale` names from the object `uid`, each
/// tested first: refused (422) if the object or its owners changed since they were read.
pub fn drop_owners(uid: &str, stale: &[(usize, String)]) -> Vec<PatchOperation> {
    let pointer = |p: String| PointerBuf::parse(&p).expect("a valid JSON pointer");
    let mut ops = vec![PatchOperation::Test(TestOperation {
        path: pointer("/metadata/uid".into()),
        value: Value::String(uid.into()),
    })];
    // Highest index first, so each removal leaves the indexes still to come in place.
    for (index, owner) in stale.iter().rev() {
        ops.push(PatchOperation::Test(TestOperation {
            path: pointer(format!("/metadata/ownerReferences/{index}/uid")),
            value: Value::String(owner.clone()),
        }));
        ops.push(PatchOperation::Remove(RemoveOperation {
            path: pointer(format!("/metadata/ownerReferences/{index}")),
        }));
    }
    ops
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use std::collections::BTreeMap;

    fn meta(labels: &[(&str, &str)], owners: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            labels: Some(
                labels.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
            ),
            owner_references: Some(
                owners
                    .iter()
                    .map(|(api_version, uid)| OwnerReference {
                        api_version: api_version.to_string(),
                        kind: "InfrastructureProvider".into(),
                        name: "aws".into(),
                        uid: uid.to_string(),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }
    }

    const LABELS: [(&str, &str); 2] = [(CLUSTERCTL_LABEL, ""), (PROVIDER_LABEL, "infrastructure-aws")];

    #[test]
    fn what_clusterctl_installed_for_the_provider_is_taken_over() {
        assert_eq!(
            judge(&meta(&LABELS, &[]), "infrastructure-aws"),
            Installed::ByClusterctl { stale_owners: vec![] }
        );
        let owned = meta(&LABELS, &[("operator.cluster.x-k8s.io/v1alpha2", "u1")]);
        assert_eq!(
            judge(&owned, "infrastructure-aws"),
            Installed::ByClusterctl { stale_owners: vec![(0, "u1".into())] }
        );
    }

    #[test]
    fn another_providers_objects_unlabelled_ones_and_ones_owned_elsewhere_are_not() {
        assert_eq!(judge(&meta(&LABELS, &[]), "infrastructure-gcp"), Installed::Elsewhere);
        assert_eq!(judge(&meta(&LABELS[1..], &[]), "infrastructure-aws"), Installed::Elsewhere);
        let foreign = meta(&LABELS, &[("operator.cluster.x-k8s.io/v1alpha2", "u1"), ("apps/v1", "u2")]);
        assert_eq!(judge(&foreign, "infrastructure-aws"), Installed::Elsewhere);
    }

    #[test]
    fn owners_are_dropped_highest_index_first_each_tested() {
        let ops = serde_json::to_value(drop_owners("me", &[(0, "a".into()), (2, "c".into())])).unwrap();
        assert_eq!(
            ops,
            serde_json::json!([
                {"op": "test", "path": "/metadata/uid", "value": "me"},
                {"op": "test", "path": "/metadata/ownerReferences/2/uid", "value": "c"},
                {"op": "remove", "path": "/metadata/ownerReferences/2"},
                {"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": "a"},
                {"op": "remove", "path": "/metadata/ownerReferences/0"},
            ])
        );
    }
}
