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

/// Plays the Deployment controller where no kubelet runs: every Deployment of `namespace`
/// that matches `selector` reports its current generation Available, with all replicas ready.
pub async fn mark_deployments_available(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<usize, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployments = api.list(&ListParams::default().labels(selector)).await?.items;
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
