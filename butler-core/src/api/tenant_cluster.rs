//! TenantCluster: a workload cluster of a team. Only the fields that the rest of Butler reads are
//! defined here (quota, IPAM and provider-deletion checks).

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::refs::NamespacedObjectReference;

/// A tenant (workload) cluster of a team, provisioned on the infrastructure that its
/// ProviderConfig describes. Its API is reached through the Secret `{name}-kubeconfig`, key
/// `value`, in the TenantCluster's namespace.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "butler.butlerlabs.dev",
    version = "v1alpha1",
    kind = "TenantCluster",
    plural = "tenantclusters",
    shortname = "tc",
    namespaced,
    status = "TenantClusterStatus",
    category = "butler",
    doc = "TenantCluster is a team's workload cluster, provisioned with the ProviderConfig it references.",
    printcolumn(name = "Provider Config", type_ = "string", json_path = ".spec.providerConfigRef.name"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.kubernetesVersion"),
    printcolumn(name = "Workers", type_ = "integer", json_path = ".spec.workers.replicas"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct TenantClusterSpec {
    /// The ProviderConfig to provision with. When empty, the team's default providerConfigRef.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_config_ref: Option<ProviderConfigReference>,
    /// Kubernetes version of the cluster (for example `1.30.4`). When empty, the team default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// The worker nodes. When empty, the team defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<Workers>,
    /// Network settings of this cluster that override the ProviderConfig's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub networking: Option<TenantNetworking>,
    /// Addons to install on the cluster. When empty, the team's default addons. At most 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub addons: Option<Vec<Addon>>,
}

/// A reference to a ProviderConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ProviderConfigReference {
    /// Name of the ProviderConfig.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the ProviderConfig. When empty, the TenantCluster's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// The worker nodes of a tenant cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Workers {
    /// Number of worker nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Size of each worker node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_template: Option<MachineTemplate>,
}

/// Size of one machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplate {
    /// CPU cores (for example `4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub cpu: Option<Quantity>,
    /// Memory (for example `16Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub memory: Option<Quantity>,
    /// Boot disk size (for example `100Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub disk_size: Option<Quantity>,
}

/// Network settings of one tenant cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantNetworking {
    /// Load-balancer addresses for this cluster; overrides the ProviderConfig's defaultPoolSize.
    /// At most 256 (a /24); the ProviderConfig's `quotaPerTenant` and the Team's
    /// `maxIPAddresses` may hold it lower.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub lb_pool_size: Option<i32>,
    /// Node addresses to allocate from the ProviderConfig's pools (IPAM mode), clamped to its
    /// `quotaPerTenant.maxNodeIPs`. When empty, the nodes get none from Butler. At most 256.
    #[serde(default, rename = "nodeIPs", skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 256))]
    pub node_ips: Option<i32>,
}

/// An addon to install on a tenant cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct Addon {
    /// Name of the addon (for example `cilium`): a DNS label (lowercase letters, digits and
    /// `-`, at most 63), so that a look-alike (`Cilium`, `cilium `) is no other addon.
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"))]
    pub name: String,
    /// Version of the addon. When empty, the platform default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

/// Observed state of a TenantCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantClusterStatus {
    /// Where the cluster is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<TenantClusterPhase>,
    /// Standard conditions, among them `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[schemars(length(max = 16))]
    pub conditions: Vec<Condition>,
    /// The generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The initial load-balancer IPAllocation of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lb_allocation_ref: Option<NamespacedObjectReference>,
    /// The node-address IPAllocation of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_allocation_ref: Option<NamespacedObjectReference>,
    /// Load-balancer address ranges the cluster holds, as given to MetalLB (`start-end`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub load_balancer_addresses: Option<Vec<String>>,
    /// The tenant API servers whose MetalLB was given the cluster's addresses (a digest of
    /// each one's URL and CA, recorded before the first write to it): a deleted cluster's
    /// addresses go back at once only on the word of these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 8))]
    pub tenant_servers: Vec<String>,
}

// Life-cycle phase of a TenantCluster.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TenantClusterPhase {
    /// Accepted; waiting for addresses and infrastructure.
    Pending,
    /// Machines are being created.
    Provisioning,
    /// The cluster is up.
    Ready,
    /// A change (scale, upgrade) is being applied.
    Updating,
    /// Being deleted.
    Deleting,
    /// Provisioning failed; the conditions say why.
    Failed,
}
