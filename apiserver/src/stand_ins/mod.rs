//! Stand-ins for what a real cluster runs and the in-memory server does not: the cert-manager
//! CRDs that providers' components use, the Deployment controller's Available condition, and
//! MetalLB on a tenant cluster ([`metallb`]).

pub mod metallb;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

/// The two cert-manager kinds providers' components use (Issuer and Certificate) as bare CRDs
/// that accept any content.
pub fn cert_manager_crds() -> Vec<CustomResourceDefinition> {
    include_str!("cert-manager-crds.yaml")
        .split("\n---\n")
        .map(|doc| serde_saphyr::from_str(doc).expect("the stand-in CRDs parse"))
        .collect()
}

/// The labels of the one node the stand-ins play: what every Linux node carries.
pub const NODE_LABELS: [(&str, &str); 3] =
    [("kubernetes.io/os", "linux"), ("kubernetes.io/arch", "amd64"), ("kubernetes.io/hostname", "stand-in")];

/// Whether the stand-in node could run the pods of a Deployment: each label its
/// `nodeSelector` asks for is one the node carries. A pod no node can take stays Pending on a
/// real cluster too, which is how a scenario makes a release that never becomes Available.
pub fn schedulable(deployment: &Deployment) -> bool {
    let selector = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.node_selector.clone())
        .unwrap_or_default();
    selector.iter().all(|(key, value)| NODE_LABELS.iter().any(|(k, v)| k == key && v == value))
}

/// Plays the Deployment controller and a kubelet where none runs: every Deployment of
/// `namespace` that matches `selector` and whose pods the stand-in node could run
/// ([`schedulable`]) reports its current generation Available, with all replicas ready.
pub async fn mark_deployments_available(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<usize, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployments = api.list(&ListParams::default().labels(selector)).await?.items;
    let deployments: Vec<&Deployment> = deployments.iter().filter(|d| schedulable(d)).collect();
    for d in &deployments {
        let replicas = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = json!({"status": {
            "observedGeneration": d.metadata.generation,
            "replicas": replicas, "readyReplicas": replicas, "availableReplicas": replicas, "updatedReplicas": replicas,
            "conditions": [{"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
                            "message": "marked Available where no kubelet runs"}],
        }});
        api.patch_status(&d.name_any(), &PatchParams::default(), &Patch::Merge(status)).await?;
    }
    Ok(deployments.len())
}
