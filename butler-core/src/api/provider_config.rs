//! ProviderConfig: credentials, infrastructure settings, network and limits of one infrastructure
//! provider.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    pub provider: ProviderType,
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

/// The infrastructure providers Butler supports.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ProviderType {
    Harvester,
    Nutanix,
    Proxmox,
    Azure,
    Aws,
    Gcp,
}

impl ProviderType {
    /// Every provider type, in the order of the documents.
    pub const ALL: [ProviderType; 6] = [
        ProviderType::Harvester,
        ProviderType::Nutanix,
        ProviderType::Proxmox,
        ProviderType::Azure,
        ProviderType::Aws,
        ProviderType::Gcp,
    ];

    /// The name as written in `spec.provider`, which is also the provider's name in Butler's
    /// provider repository.
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderType::Harvester => "harvester",
            ProviderType::Nutanix => "nutanix",
            ProviderType::Proxmox => "proxmox",
            ProviderType::Azure => "azure",
            ProviderType::Aws => "aws",
            ProviderType::Gcp => "gcp",
        }
    }

    /// True for the providers that run in the operator's own data centre and need Butler's IPAM.
    pub fn is_on_premises(self) -> bool {
        matches!(self, ProviderType::Harvester | ProviderType::Nutanix | ProviderType::Proxmox)
    }
}

impl std::fmt::Display for ProviderType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Settings of a Harvester HCI cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HarvesterConfig {
    /// URL of the Harvester API. When empty, the server of the credentials kubeconfig.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// Harvester namespace in which the virtual machines are created.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "default"))]
    pub namespace: Option<String>,
    /// The VM network, as `namespace/name` (for example `default/vlan40-workloads`).
    #[schemars(pattern(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"))]
    pub network_name: String,
    /// The VM image to boot from (for example `default/talos-1.9.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_name: Option<String>,
    /// StorageClass of the VM volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

/// Settings of a Nutanix AHV cluster, reached through Prism Central.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NutanixConfig {
    /// Prism Central URL; must start with `https://`.
    #[schemars(pattern(r"^https://"))]
    pub endpoint: String,
    /// Prism Central API port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535), extend("default" = 9440))]
    pub port: Option<i32>,
    /// Skip verification of Prism Central's TLS certificate. Only for test installations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub insecure: Option<bool>,
    /// UUID of the AHV cluster on which VMs are created.
    #[serde(rename = "clusterUUID")]
    #[schemars(length(min = 1))]
    pub cluster_uuid: String,
    /// UUID of the subnet the VMs' network interfaces attach to.
    #[serde(rename = "subnetUUID")]
    #[schemars(length(min = 1))]
    pub subnet_uuid: String,
    /// UUID of the VM image to boot from.
    #[serde(rename = "imageUUID", default, skip_serializing_if = "Option::is_none")]
    pub image_uuid: Option<String>,
    /// UUID of the storage container for VM disks.
    #[serde(rename = "storageContainerUUID", default, skip_serializing_if = "Option::is_none")]
    pub storage_container_uuid: Option<String>,
}

/// Settings of a Proxmox VE cluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxConfig {
    /// Proxmox API URL; must start with `https://`.
    #[schemars(pattern(r"^https://"))]
    pub endpoint: String,
    /// Skip verification of the Proxmox API's TLS certificate. Only for test installations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub insecure: Option<bool>,
    /// Proxmox nodes on which VMs may be placed; at least one.
    #[schemars(length(min = 1))]
    pub nodes: Vec<String>,
    /// Storage identifier for VM disks (for example `local-lvm`).
    #[schemars(length(min = 1))]
    pub storage: String,
    /// ID of the VM template that new VMs are cloned from.
    #[serde(rename = "templateID", default, skip_serializing_if = "Option::is_none")]
    pub template_id: Option<i32>,
    /// The range of VM IDs Butler may use for new VMs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid_range: Option<VmidRange>,
}

/// A range of Proxmox VM IDs; Proxmox reserves the IDs below 100.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.start) || !has(self.end) || self.start <= self.end",
    "message": "vmidRange.start must not be greater than vmidRange.end"
}]))]
pub struct VmidRange {
    /// First VM ID of the range; at least 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100))]
    pub start: Option<i32>,
    /// Last VM ID of the range; at least 100.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100))]
    pub end: Option<i32>,
}

/// Settings of a Microsoft Azure subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureConfig {
    /// Azure subscription ID.
    #[serde(rename = "subscriptionID")]
    #[schemars(length(min = 1))]
    pub subscription_id: String,
    /// Resource group in which resources are created.
    #[schemars(length(min = 1))]
    pub resource_group: String,
    /// Azure region (for example `eastus`, `westeurope`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub location: Option<String>,
    /// Name of the virtual network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vnet_name: Option<String>,
    /// Name of the subnet inside the virtual network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet_name: Option<String>,
    /// Default VM size (for example `Standard_D4s_v3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_size: Option<String>,
    /// The VM image: a URN (`publisher:offer:sku:version`), a managed image resource ID, or a
    /// shared gallery image version ID.
    #[serde(rename = "imageURN", default, skip_serializing_if = "Option::is_none")]
    pub image_urn: Option<String>,
}

/// Settings of an Amazon Web Services account.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AwsConfig {
    /// AWS region (for example `us-east-1`).
    #[schemars(length(min = 1))]
    pub region: String,
    /// VPC ID. When empty, the region's default VPC.
    #[serde(rename = "vpcID", default, skip_serializing_if = "Option::is_none")]
    pub vpc_id: Option<String>,
    /// Subnets in which VMs are placed.
    #[serde(rename = "subnetIDs", default, skip_serializing_if = "Option::is_none")]
    pub subnet_ids: Option<Vec<String>>,
    /// Security groups attached to the VMs.
    #[serde(rename = "securityGroupIDs", default, skip_serializing_if = "Option::is_none")]
    pub security_group_ids: Option<Vec<String>>,
}

/// Settings of a Google Cloud project.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GcpConfig {
    /// GCP project ID.
    #[serde(rename = "projectID")]
    #[schemars(length(min = 1))]
    pub project_id: String,
    /// GCP region (for example `us-central1`).
    #[schemars(length(min = 1))]
    pub region: String,
    /// Compute zone. When empty, `{region}-a`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// VPC network name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// Subnetwork name inside the VPC network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    /// Default machine type (for example `n2-standard-4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_type: Option<String>,
    /// Project that holds the source image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_project: Option<String>,
    /// Image family (for example `talos-v1-12`); ignored when image is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_family: Option<String>,
    /// A specific image name; takes precedence over imageFamily.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// Service account e-mail the VM instances run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// Network tags put on the VM instances, for firewall rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
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
    pub pool_refs: Option<Vec<PoolRef>>,
    /// Subnet of the node addresses, in CIDR form.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnet: Option<String>,
    /// Default gateway of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// DNS servers of the nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
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
