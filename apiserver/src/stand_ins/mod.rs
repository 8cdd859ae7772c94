//! Stand-ins for what a real cluster runs and the in-memory server does not: the cert-manager
//! CRDs that providers' components use, the Deployment controller's rollouts, and
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

/// The status the Deployment controller reports one step after `status` (the last one it
/// wrote), as kube-controller-manager's does with a kubelet on the stand-in node: a new
/// generation first surges one pod of the new template beside the old ones (Available stays
/// as it was while the old pods serve; Progressing says the new ReplicaSet is progressing); a
/// pod the node can run becomes ready at the next step, which completes the rollout; one it
/// cannot run stays Pending, and the rollout never completes. Times are the caller's `now`.
pub fn rollout_step(deployment: &Deployment, now: &str) -> serde_json::Value {
    let generation = deployment.metadata.generation.unwrap_or(1);
    let desired = deployment.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1).max(0);
    let last = deployment.status.clone().unwrap_or_default();
    let name = deployment.name_any();
    let seen = last.observed_generation.is_some_and(|o| o >= generation);
    let serving = last.available_replicas.unwrap_or(0).min(last.replicas.unwrap_or(0));
    let runs = schedulable(deployment) || desired == 0;
    // The new pods the default strategy adds beside the old ones (maxSurge 25%, rounded up).
    let surge = ((desired + 3) / 4).clamp(desired.min(1), desired);
    // (replicas, updated, ready and available, rollout complete)
    let (replicas, updated, ready, done) = match (runs, seen || serving == 0) {
        // The new pods run: the rollout completes.
        (true, true) => (desired, desired, desired, true),
        // First sight of a new template while old pods serve: new pods surge beside them.
        (_, false) => (serving + surge, surge, serving, false),
        // The new pods never start: the old ones keep serving, the new ones stay Pending.
        (false, true) if serving == 0 => (desired, desired, 0, false),
        (false, true) => (serving + surge, surge, serving, false),
    };
    let unavailable = (replicas - ready).max(0);
    let max_unavailable = desired / 4; // 25%, rounded down, as the default strategy says.
    let available = desired == 0 || ready >= desired - max_unavailable;
    let condition = |type_: &str, status: bool, reason: &str, message: String| {
        let kept = last.conditions.iter().flatten().find(|c| c.type_ == type_);
        let changed = kept.is_none_or(|c| (c.status == "True") != status);
        let transition = match (changed, kept) {
            (false, Some(c)) => serde_json::to_value(&c.last_transition_time).unwrap_or_default(),
            _ => json!(now),
        };
        json!({"type": type_, "status": if status { "True" } else { "False" }, "lastUpdateTime": now,
               "lastTransitionTime": transition, "reason": reason, "message": message})
    };
    let mut status = json!({
        "observedGeneration": generation,
        "replicas": replicas,
        "updatedReplicas": updated,
        "readyReplicas": ready,
        "availableReplicas": ready,
        "terminatingReplicas": 0,
        "conditions": [
            match available {
                true => condition("Available", true, "MinimumReplicasAvailable", "Deployment has minimum availability.".into()),
                false => condition("Available", false, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.".into()),
            },
            match done {
                true => condition("Progressing", true, "NewReplicaSetAvailable", format!("ReplicaSet \"{name}-{generation}\" has successfully progressed.")),
                false => condition("Progressing", true, "ReplicaSetUpdated", format!("ReplicaSet \"{name}-{generation}\" is progressing.")),
            },
        ],
    });
    if unavailable > 0 {
        status["unavailableReplicas"] = json!(unavailable);
    }
    status
}

/// Plays the Deployment controller and a kubelet where none runs: every Deployment of
/// `namespace` that matches `selector` moves one step of its rollout ([`rollout_step`]); a
/// Deployment whose pods the stand-in node can run ([`schedulable`]) completes its rollout in
/// two calls, one whose pods it cannot run never does. Returns how many Deployments have
/// completed their rollout.
pub async fn roll_out_deployments(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<usize, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let deployments = api.list(&ListParams::default().labels(selector)).await?.items;
    let now = k8s_openapi::jiff::Timestamp::now().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let mut complete = 0;
    for d in &deployments {
        let status = rollout_step(d, &now);
        let unchanged = d
            .status
            .as_ref()
            .and_then(|s| serde_json::to_value(s).ok())
            .is_some_and(|s| same_counts(&s, &status));
        if status["conditions"][1]["reason"] == "NewReplicaSetAvailable" && unchanged {
            complete += 1;
        }
        if !unchanged {
            api.patch_status(
                &d.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({"status": status})),
            )
            .await?;
        }
    }
    Ok(complete)
}

/// Two statuses that say the same but for their times.
fn same_counts(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    let strip = |v: &serde_json::Value| {
        let mut v = v.clone();
        for c in v.get_mut("conditions").and_then(|c| c.as_array_mut()).into_iter().flatten() {
            if let Some(c) = c.as_object_mut() {
                c.remove("lastUpdateTime");
                c.remove("lastTransitionTime");
            }
        }
        v
    };
    strip(a) == strip(b)
}
