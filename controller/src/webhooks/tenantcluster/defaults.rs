//! What a TenantCluster leaves empty, filled from its Team (the mutating webhook).

use butler_core::api::{Team, TenantCluster};
use serde_json::{Value, json};

/// The JSON patch that fills what the cluster leaves empty from its Team: the ProviderConfig,
/// the Kubernetes version, the worker count and sizes, and the addons.
pub fn defaults(cluster: &TenantCluster, team: &Team) -> Vec<Value> {
    let mut patch = Vec::new();
    let defaults = team.spec.cluster_defaults.clone().unwrap_or_default();
    let limits = team.spec.resource_limits.clone().unwrap_or_default();
    let spec = &cluster.spec;
    if spec.provider_config_ref.is_none()
        && let Some(r) = &team.spec.provider_config_ref
    {
        patch.push(json!({"op": "add", "path": "/spec/providerConfigRef", "value": {"name": r.name}}));
    }
    if spec.kubernetes_version.as_deref().is_none_or(str::is_empty)
        && let Some(v) = &defaults.kubernetes_version
    {
        patch.push(json!({"op": "add", "path": "/spec/kubernetesVersion", "value": v}));
    }
    let replicas = defaults.worker_count.or(limits.default_node_count);
    let cpu = defaults.worker_cpu.clone().or(limits.default_cpu_per_node.clone()).map(|q| q.0);
    let memory = defaults
        .worker_memory_gi
        .map(|g| format!("{g}Gi"))
        .or(limits.default_memory_per_node.clone().map(|q| q.0));
    let disk = defaults.worker_disk_gi.map(|g| format!("{g}Gi"));
    let workers = spec.workers.clone().unwrap_or_default();
    let machine = workers.machine_template.clone().unwrap_or_default();
    let fills = [
        ("/spec/workers/replicas", workers.replicas.is_none(), replicas.map(|r| json!(r))),
        ("/spec/workers/machineTemplate/cpu", machine.cpu.is_none(), cpu.map(|c| json!(c))),
        ("/spec/workers/machineTemplate/memory", machine.memory.is_none(), memory.map(|m| json!(m))),
        ("/spec/workers/machineTemplate/diskSize", machine.disk_size.is_none(), disk.map(|d| json!(d))),
    ];
    let mut have_workers = spec.workers.is_some();
    let mut have_machine = workers.machine_template.is_some();
    for (path, empty, value) in fills {
        let Some(value) = value.filter(|_| empty) else { continue };
        if !have_workers {
            patch.push(json!({"op": "add", "path": "/spec/workers", "value": {}}));
            have_workers = true;
        }
        if path.contains("machineTemplate") && !have_machine {
            patch.push(json!({"op": "add", "path": "/spec/workers/machineTemplate", "value": {}}));
            have_machine = true;
        }
        patch.push(json!({"op": "add", "path": path, "value": value}));
    }
    if spec.addons.as_ref().is_none_or(|a| a.is_empty())
        && let Some(addons) = defaults.default_addons.filter(|a| !a.is_empty())
    {
        let value: Vec<Value> = addons.iter().map(|a| json!({"name": a})).collect();
        patch.push(json!({"op": "add", "path": "/spec/addons", "value": value}));
    }
    patch
}
