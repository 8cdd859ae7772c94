//! The settings section of each infrastructure platform in a ProviderConfig (`spec.harvester`,
//! `spec.nutanix`, ...): only the section named by `spec.provider` is used.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
    #[schemars(length(min = 1, max = 256))]
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
    #[schemars(length(max = 64))]
    pub subnet_ids: Option<Vec<String>>,
    /// Security groups attached to the VMs.
    #[serde(rename = "securityGroupIDs", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
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
    #[schemars(length(max = 64))]
    pub tags: Option<Vec<String>>,
}
