//! IPAllocation: a request for, and then the record of, a contiguous block of addresses from a
//! NetworkPool.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::refs::{LocalObjectReference, NamespacedObjectReference};

/// A contiguous block of addresses for one tenant cluster, either best fit of `count` addresses
/// or exactly `pinnedRange`. Created by the TenantCluster controller; fulfilled only by the
/// NetworkPool controller.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "butler.butlerlabs.dev",
    version = "v1alpha1",
    kind = "IPAllocation",
    plural = "ipallocations",
    shortname = "ipa",
    namespaced,
    status = "IPAllocationStatus",
    category = "butler",
    doc = "IPAllocation requests a contiguous block of addresses from a NetworkPool for one tenant cluster, and records the block once the NetworkPool controller has assigned it.",
    printcolumn(name = "Pool", type_ = "string", json_path = ".spec.poolRef.name"),
    printcolumn(name = "Type", type_ = "string", json_path = ".spec.type"),
    printcolumn(name = "Tenant", type_ = "string", json_path = ".spec.tenantClusterRef.name"),
    printcolumn(name = "Count", type_ = "integer", json_path = ".status.allocatedCount"),
    printcolumn(name = "CIDR", type_ = "string", json_path = ".status.cidr"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!(has(self.count) && has(self.pinnedRange))",
    "message": "set either count or pinnedRange, not both"
}, {
    "rule": "self == oldSelf",
    "message": "spec is immutable: a served block belongs to its pool and cluster; delete the IPAllocation and create another"
}]))]
pub struct IPAllocationSpec {
    /// The NetworkPool (in this namespace) to allocate from.
    pub pool_ref: LocalObjectReference,
    /// The TenantCluster this allocation serves.
    pub tenant_cluster_ref: NamespacedObjectReference,
    /// What the addresses are for.
    #[serde(rename = "type")]
    pub type_: AllocationType,
    /// How many addresses. When empty, the pool's per-tenant default for this type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub count: Option<i32>,
    /// Ask for exactly this range instead of a best-fit block (for stable addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned_range: Option<PinnedRange>,
}

/// What an allocation's addresses are used for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AllocationType {
    /// Addresses of the tenant cluster's nodes.
    Nodes,
    /// Addresses of the tenant cluster's LoadBalancer Services (served by MetalLB).
    Loadbalancer,
}

impl AllocationType {
    /// The value as written in `spec.type` and in the allocation-type label.
    pub fn as_str(self) -> &'static str {
        match self {
            AllocationType::Nodes => "nodes",
            AllocationType::Loadbalancer => "loadbalancer",
        }
    }
}

/// An exact range of addresses, both ends included.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PinnedRange {
    /// First address of the range.
    #[schemars(length(min = 1))]
    pub start_address: String,
    /// Last address of the range.
    #[schemars(length(min = 1))]
    pub end_address: String,
}

/// Observed state of an IPAllocation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPAllocationStatus {
    /// Where the allocation is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<IPAllocationPhase>,
    /// The allocated block: CIDR form when it is an aligned power of two, else `start-end`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// First allocated address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_address: Option<String>,
    /// Last allocated address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_address: Option<String>,
    /// Every allocated address; omitted for blocks of more than 4,096 addresses (`cidr` is the
    /// record).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub addresses: Option<Vec<String>>,
    /// Number of allocated addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_count: Option<i64>,
    /// When the block was assigned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_at: Option<Time>,
    /// The controller that assigned the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocated_by: Option<String>,
    /// When the block was released (kept for the audit trail).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub released_at: Option<Time>,
    /// The generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Standard conditions, among them `Ready`, whose message says why an allocation failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[schemars(length(max = 16))]
    pub conditions: Vec<Condition>,
}

// Life-cycle phase of an IPAllocation.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum IPAllocationPhase {
    /// Waiting for the NetworkPool controller.
    Pending,
    /// A block is assigned.
    Allocated,
    /// No block could be assigned (pool exhausted, fragmented, or a pinned range conflicts);
    /// retried.
    Failed,
    /// Being deleted; the block returns to the pool.
    Released,
}
