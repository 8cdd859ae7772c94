//! ProviderConfig: credentials, infrastructure settings, network and limits of one infrastructure
//! provider.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::platforms::{AwsConfig, AzureConfig, GcpConfig, HarvesterConfig, NutanixConfig, ProxmoxConfig};
use super::refs::{LocalObjectReference, SecretReference};

/// How Butler reaches and uses one infrastructure provider (Harvester, Nutanix, Proxmox, Azure,
/// AWS or GCP): the credentials Secret, the provider's own settings, which teams may use it, how
/// tenant clusters get their IP addresses, and how much each team may consume.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "butler.butlerlabs.dev",
    version = "v1alpha1",
    kind = "ProviderConfig",
    plural = "providerconfigs",
    namespaced,
    status = "ProviderConfigStatus",
    category = "butler",
    doc = "ProviderConfig holds the credentials, provider settings, network configuration and limits that Butler needs to provision tenant clusters on one infrastructure provider.",
    printcolumn(name = "Provider", type_ = "string", json_path = ".spec.provider"),
    printcolumn(name = "Scope", type_ = "string", json_path = ".spec.scope.type"),
    printcolumn(name = "Ready", type_ = "boolean", json_path = ".status.ready"),
    printcolumn(name = "Validated", type_ = "boolean", json_path = ".status.validated"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigSpec {
    /// The infrastructure provider. Only the settings section of the same name is used.
    pub provider: Platform,
    /// The Secret with the provider's credentials. The keys it must hold depend on the provider:
    /// harvester `kubeconfig`; nutanix `username`, `password`; proxmox `username` and `password`
    /// or `token`; azure `tenantID`, `clientID`, `clientSecret`, `subscriptionID`; aws
    /// `accessKeyID`, `secretAccessKey`; gcp `serviceAccountKey`.
    pub credentials_ref: SecretReference,
    /// Harvester settings; used when provider is harvester.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harvester: Option<HarvesterConfig>,
    /// Nutanix settings; used when provider is nutanix.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nutanix: Option<NutanixConfig>,
    /// Proxmox VE settings; used when provider is proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox: Option<ProxmoxConfig>,
    /// Azure settings; used when provider is azure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub azure: Option<AzureConfig>,
    /// AWS settings; used when provider is aws.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aws: Option<AwsConfig>,
    /// GCP settings; used when provider is gcp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcp: Option<GcpConfig>,
    /// Which teams may use this ProviderConfig. When empty, every team may (platform scope).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<ProviderScope>,
    /// How tenant clusters on this provider get node and load-balancer addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkConfig>,
    /// Limits on what one team may provision with this ProviderConfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<ProviderLimits>,
}

/// The infrastructure platforms Butler supports (`spec.provider`); each is also the name of one
/// of Butler's infrastructure providers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Platform {
    Harvester,
    Nutanix,
    Proxmox,
    Azure,
    Aws,
    Gcp,
}

impl Platform {
    /// Every platform, in the order of the documents.
    pub const ALL: [Platform; 6] = [
        Platform::Harvester,
        Platform::Nutanix,
        Platform::Proxmox,
        Platform::Azure,
        Platform::Aws,
        Platform::Gcp,
    ];

    /// The name as written in `spec.provider`, which is also the provider's name in Butler's
    /// provider repository.
    pub fn as_str(self) -> &'static str {
        match self {
            Platform::Harvester => "harvester",
            Platform::Nutanix => "nutanix",
            Platform::Proxmox => "proxmox",
            Platform::Azure => "azure",
            Platform::Aws => "aws",
            Platform::Gcp => "gcp",
        }
    }

    /// True for the providers that run in the operator's own data centre and need Butler's IPAM.
    pub fn is_on_premises(self) -> bool {
        matches!(self, Platform::Harvester | Platform::Nutanix | Platform::Proxmox)
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which teams may use a ProviderConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.type) || self.type != 'team' || (has(self.teamRef) && self.teamRef.name != '')",
    "message": "scope.teamRef.name is required when scope.type is team"
}]))]
pub struct ProviderScope {
    /// `platform`: every team may use it; `team`: only the team in teamRef.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "platform"))]
    pub type_: Option<ScopeType>,
    /// The only team that may use this ProviderConfig; required when type is team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub team_ref: Option<LocalObjectReference>,
}

// Scope of a ProviderConfig.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScopeType {
    #[default]
    Platform,
    Team,
}

/// Network and IPAM settings for tenant clusters on this provider.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.mode) || self.mode != 'ipam' || (has(self.poolRefs) && size(self.poolRefs) > 0)",
    "message": "network.poolRefs needs at least one NetworkPool when network.mode is ipam"
}]))]
pub struct NetworkConfig {
    /// `cloud`: the provider's own networking assigns addresses (AWS, Azure, GCP); `ipam`: Butler
    /// allocates them from NetworkPools (required for Harvester, Nutanix and Proxmox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "cloud"))]
    pub mode: Option<NetworkMode>,
    /// NetworkPools to allocate from, lowest priority value first; required in ipam mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 32))]
    pub pool_refs: Option<Vec<PoolRef>>,
    /// Subnet of the node addresses, in CIDR form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    /// Default gateway of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// DNS servers of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub dns_servers: Option<Vec<String>>,
    /// How many load-balancer addresses each tenant cluster gets, and whether that grows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_balancer: Option<LoadBalancerConfig>,
    /// Caps on the addresses one tenant cluster may hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_per_tenant: Option<QuotaPerTenant>,
}

// Network mode of a ProviderConfig.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkMode {
    Ipam,
    #[default]
    Cloud,
}

/// A NetworkPool to allocate from, with its place in the order.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PoolRef {
    /// Name of the NetworkPool.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Order of use: the pool with the lowest value is tried first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = 0))]
    pub priority: Option<i32>,
}

/// Load-balancer address allocation for tenant clusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LoadBalancerConfig {
    /// Load-balancer addresses per tenant cluster in static mode, and the ceiling in elastic mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 8))]
    pub default_pool_size: Option<i32>,
    /// `static`: a fixed block at creation; `elastic`: start small and grow on demand.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "static"))]
    pub allocation_mode: Option<AllocationMode>,
    /// Addresses a tenant cluster starts with in elastic mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 2))]
    pub initial_pool_size: Option<i32>,
    /// Addresses added each time an elastic pool grows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 2))]
    pub growth_increment: Option<i32>,
}

// Load-balancer allocation mode.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AllocationMode {
    #[default]
    Static,
    Elastic,
}

/// Per-tenant-cluster caps on addresses. An unset cap means no cap.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaPerTenant {
    /// Most node addresses one tenant cluster may hold.
    #[serde(rename = "maxNodeIPs", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_node_ips: Option<i32>,
    /// Most load-balancer addresses one tenant cluster may hold.
    #[serde(rename = "maxLoadBalancerIPs", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_load_balancer_ips: Option<i32>,
}

/// Limits on one team's use of a ProviderConfig. An unset limit means no limit.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderLimits {
    /// Most tenant clusters one team may have on this provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_clusters_per_team: Option<i32>,
    /// Most worker nodes, summed over its clusters, one team may have on this provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_nodes_per_team: Option<i32>,
}

/// Observed state of a ProviderConfig.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderConfigStatus {
    /// Standard conditions, among them `Ready` and `Validated`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[schemars(length(max = 16))]
    pub conditions: Vec<Condition>,
    /// The generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Whether the credentials and settings were checked and found good.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validated: Option<bool>,
    /// When the last successful validation happened.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_validation_time: Option<Time>,
    /// Version reported by the provider (for example the Harvester or Nutanix AOS version).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_version: Option<String>,
    /// Whether the provider answered the last health probe and can take new machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// When the last health probe ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_probe_time: Option<Time>,
    /// Estimated room for more tenant clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<ProviderCapacity>,
}

/// Estimated capacity of a ProviderConfig's address pools.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCapacity {
    /// Addresses still free across the configured NetworkPools.
    #[serde(rename = "availableIPs", default, skip_serializing_if = "Option::is_none")]
    pub available_ips: Option<i64>,
    /// How many more tenant clusters fit: available addresses divided by the addresses one tenant
    /// needs (node addresses plus load-balancer addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimated_tenants: Option<i32>,
}
