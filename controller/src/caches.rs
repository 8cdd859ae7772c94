//! What the caches keep of each object: the fields the controllers read. On a real API server
//! most of an object's size is who manages which field (`managedFields`) and what other tools
//! wrote on it (`kubectl.kubernetes.io/last-applied-configuration`, a whole copy); each cached
//! object of a kind is held for as long as it lives, so what no controller reads is dropped as
//! the watch delivers it.

use butler_core::api::IPAllocation;
use kube::Resource;

/// The annotation `kubectl apply` writes: a whole copy of the object as last applied.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// Butler's own labels and annotations: the only ones the controllers read on Butler's kinds.
const BUTLER: &str = "butler.butlerlabs.dev/";

/// The API group of Butler's kinds.
const BUTLER_GROUP: &str = "butler.butlerlabs.dev";

/// Drops from any cached object what no controller reads: the managed fields and the copy
/// `kubectl apply` keeps; of Butler's own kinds (Teams, TenantClusters, ProviderConfigs,
/// NetworkPools), every label and annotation but Butler's. No controller reads another on them,
/// and a team may write a megabyte of labels on every object it makes, which every replica
/// would hold for as long as the object lives.
pub fn trim<K: Resource<DynamicType = ()>>(object: &mut K) {
    let butler = K::group(&()) == BUTLER_GROUP;
    let meta = object.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.remove(LAST_APPLIED);
    }
    if butler {
        for map in [meta.labels.as_mut(), meta.annotations.as_mut()].into_iter().flatten() {
            map.retain(|key, _| key.starts_with(BUTLER));
        }
    }
}

/// Trims an IPAllocation further (there are thousands): of its labels and annotations only
/// Butler's stay (the team, tenant, pool and role labels; the idle mark of elastic growth),
/// and no owner reference (nothing reads them). Of one that holds a block, the status keeps
/// its phase, the block, its times and generation: its conditions, address list, CIDR and
/// writer are read only while it waits (to be written again), and it never waits again.
pub fn trim_allocation(allocation: &mut IPAllocation) {
    trim(allocation);
    allocation.metadata.owner_references = None;
    if let Some(status) = allocation.status.as_mut()
        && status.start_address.is_some()
        && status.end_address.is_some()
    {
        status.conditions = Vec::new();
        status.addresses = None;
        status.cidr = None;
        status.allocated_by = None;
    }
}

/// An IPAllocation as the caches keep it.
pub fn kept_allocation(mut allocation: IPAllocation) -> IPAllocation {
    trim_allocation(&mut allocation);
    allocation
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn butlers_kinds_keep_butlers_labels_and_annotations_alone() {
        let labels =
            json!({"butler.butlerlabs.dev/team": "a", "app.kubernetes.io/name": "x", "padding-1": "y"});
        let mut cluster: butler_core::api::TenantCluster = serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": "c", "namespace": "team-a", "labels": labels,
                "annotations": {"note": "a megabyte of it", "butler.butlerlabs.dev/x": "y"}},
            "spec": {},
        }))
        .unwrap();
        trim(&mut cluster);
        assert_eq!(
            cluster.metadata.labels.as_ref().unwrap().keys().collect::<Vec<_>>(),
            ["butler.butlerlabs.dev/team"]
        );
        assert_eq!(
            cluster.metadata.annotations.as_ref().unwrap().keys().collect::<Vec<_>>(),
            ["butler.butlerlabs.dev/x"]
        );
        // Kubernetes' kinds keep theirs (a Namespace's labels are read).
        let mut namespace: k8s_openapi::api::core::v1::Namespace =
            serde_json::from_value(json!({"metadata": {"name": "n", "labels": labels}})).unwrap();
        trim(&mut namespace);
        assert_eq!(namespace.metadata.labels.unwrap().len(), 3);
    }

    #[test]
    fn a_waiting_allocation_keeps_its_conditions() {
        let waiting: IPAllocation = serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": "a", "namespace": "ns"},
            "spec": {"poolRef": {"name": "p"}, "tenantClusterRef": {"name": "t", "namespace": "x"}, "type": "nodes"},
            "status": {"phase": "Pending", "conditions": [{"type": "Ready", "status": "False", "reason": "PoolExhausted", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .unwrap();
        assert_eq!(kept_allocation(waiting.clone()).status, waiting.status);
    }

    #[test]
    fn an_allocation_keeps_what_the_controllers_read() {
        let a: IPAllocation = serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": "a", "namespace": "ns", "uid": "u", "resourceVersion": "7", "finalizers": ["f"],
                "labels": {"butler.butlerlabs.dev/team": "t", "app.kubernetes.io/part-of": "x"},
                "annotations": {"butler.butlerlabs.dev/idle-since": "2026-01-01T00:00:00Z", LAST_APPLIED: "{...}", "note": "n"},
                "managedFields": [{"manager": "kubectl", "operation": "Apply"}]},
            "spec": {"poolRef": {"name": "p"}, "tenantClusterRef": {"name": "t", "namespace": "x"}, "type": "nodes"},
            "status": {"phase": "Allocated", "startAddress": "10.0.0.1", "endAddress": "10.0.0.1", "cidr": "10.0.0.1/32",
                "addresses": ["10.0.0.1"], "allocatedBy": "butler-controller (a)", "allocatedAt": "2026-01-01T00:00:00Z",
                "conditions": [{"type": "Ready", "status": "True", "reason": "Allocated", "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}]},
        }))
        .unwrap();
        let kept = kept_allocation(a.clone());
        assert_eq!(kept.metadata.managed_fields, None);
        assert_eq!(
            kept.metadata.labels.as_ref().unwrap().keys().collect::<Vec<_>>(),
            ["butler.butlerlabs.dev/team"]
        );
        let annotations = kept.metadata.annotations.as_ref().unwrap();
        assert_eq!(annotations.keys().collect::<Vec<_>>(), ["butler.butlerlabs.dev/idle-since"]);
        assert_eq!(kept.spec, a.spec);
        let (status, was) = (kept.status.as_ref().unwrap(), a.status.as_ref().unwrap());
        assert_eq!(
            (&status.phase, &status.start_address, &status.end_address, &status.allocated_at),
            (&was.phase, &was.start_address, &was.end_address, &was.allocated_at)
        );
        assert!(status.conditions.is_empty() && status.addresses.is_none() && status.cidr.is_none());
        assert_eq!(
            (kept.metadata.uid, kept.metadata.resource_version, kept.metadata.finalizers),
            (a.metadata.uid, a.metadata.resource_version, a.metadata.finalizers)
        );
    }
}
