//! NetworkPool: a block of addresses that tenant clusters are given node and load-balancer
//! addresses from.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A block of IPv4 or IPv6 addresses owned by Butler's IPAM. The NetworkPool controller is the
/// only writer of IPAllocation status: it serves pending allocations from this pool, oldest
/// first, best fit.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "butler.butlerlabs.dev",
    version = "v1alpha1",
    kind = "NetworkPool",
    plural = "networkpools",
    shortname = "np",
    namespaced,
    status = "NetworkPoolStatus",
    category = "butler",
    doc = "NetworkPool is a block of addresses from which Butler allocates node and load-balancer addresses to tenant clusters.",
    printcolumn(name = "CIDR", type_ = "string", json_path = ".spec.cidr"),
    printcolumn(name = "Total", type_ = "integer", json_path = ".status.totalIPs"),
    printcolumn(name = "Available", type_ = "integer", json_path = ".status.availableIPs"),
    printcolumn(name = "Allocations", type_ = "integer", json_path = ".status.allocationCount"),
    printcolumn(
        name = "Fragmentation",
        type_ = "integer",
        json_path = ".status.fragmentationPercent",
        priority = 1
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPoolSpec {
    /// The whole address block this pool owns, in CIDR form (for example `10.40.0.0/21` or
    /// `2001:db8::/64`).
    #[schemars(length(min = 1))]
    pub cidr: String,
    /// Ranges inside the block that are never given to tenants (gateways, management nodes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub reserved: Option<Vec<ReservedRange>>,
    /// Restricts tenant allocations to a sub-range of the block, and sets per-tenant defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant_allocation: Option<TenantAllocation>,
    /// Lets this pool's CIDR overlap other pools' that allow it too (pools that split one block
    /// by `tenantAllocation`, say). Pools whose CIDRs overlap hand out the same addresses, so
    /// without this on both an overlapping pool is refused, and the newer of two serves nothing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_overlap: Option<bool>,
}

/// A range excluded from allocation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ReservedRange {
    /// The reserved range, in CIDR form; it must lie inside the pool's CIDR.
    #[schemars(length(min = 1))]
    pub cidr: String,
    /// Why the range is reserved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The allocatable sub-range of a pool and its per-tenant defaults.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TenantAllocation {
    /// First address that may be allocated. When empty, the first address of the CIDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
    /// Last address that may be allocated. When empty, the last address of the CIDR.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    /// Address counts used when an IPAllocation does not set spec.count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub defaults: Option<TenantAllocationDefaults>,
}

/// Per-tenant default address counts.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TenantAllocationDefaults {
    /// Node addresses per tenant cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 5))]
    pub nodes_per_tenant: Option<i32>,
    /// Load-balancer addresses per tenant cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1), extend("default" = 8))]
    pub lb_pool_per_tenant: Option<i32>,
}

/// Observed state of a NetworkPool. Address counts are 64-bit so that large IPv6 pools fit; a
/// count beyond 2^63-1 is reported as 2^63-1.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkPoolStatus {
    /// Allocatable addresses: the allocatable range minus the reserved addresses inside it.
    #[serde(rename = "totalIPs", default, skip_serializing_if = "Option::is_none")]
    pub total_ips: Option<i64>,
    /// Addresses held by active IPAllocations.
    #[serde(rename = "allocatedIPs", default, skip_serializing_if = "Option::is_none")]
    pub allocated_ips: Option<i64>,
    /// Addresses still free: totalIPs minus allocatedIPs.
    #[serde(rename = "availableIPs", default, skip_serializing_if = "Option::is_none")]
    pub available_ips: Option<i64>,
    /// Active IPAllocations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocation_count: Option<i32>,
    /// How scattered the free space is: 0 when it is one block, towards 100 when it is many small
    /// ones (100 minus the largest free block as a percentage of all free addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub fragmentation_percent: Option<i32>,
    /// Size of the largest run of free addresses: the largest allocation that can succeed now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub largest_free_block: Option<i64>,
    /// The generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Standard conditions: `Ready`, and the capacity tiers `CapacityWarning` (70% used),
    /// `CapacityCritical` (85%) and `CapacityExhausted` (95%).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[schemars(length(max = 16))]
    pub conditions: Vec<Condition>,
    /// The allocator's journal: blocks being written to IPAllocations. Each stays taken until its
    /// write has landed or can no longer land, so that no other replica or restart hands it out
    /// again. Written by the NetworkPool controller only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub in_flight: Vec<InFlightAllocation>,
    /// When each capacity tier (`CapacityWarning`, `CapacityCritical`, `CapacityExhausted`) last
    /// had an event, so that a restart does not repeat one within 10 minutes.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity_events: BTreeMap<String, Time>,
}

/// A block the NetworkPool controller is writing to an IPAllocation.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InFlightAllocation {
    /// Name of the IPAllocation.
    pub name: String,
    /// UID of the IPAllocation.
    pub uid: String,
    /// The IPAllocation's resourceVersion that the write requires: once the object has another,
    /// the write has landed or never will.
    pub resource_version: String,
    /// First address of the block.
    pub start_address: String,
    /// Last address of the block.
    pub end_address: String,
}
