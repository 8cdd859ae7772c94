//! Team: Butler's multi-tenancy unit, cluster-scoped, owning the namespace `team-{name}`.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::refs::LocalObjectReference;

/// A group of users and identity-provider groups that share tenant clusters, quotas and cluster
/// defaults. Butler gives every Team the namespace `team-{name}` and RBAC for its members.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "butler.butlerlabs.dev",
    version = "v1alpha1",
    kind = "Team",
    plural = "teams",
    shortname = "tm",
    status = "TeamStatus",
    category = "butler",
    doc = "Team is Butler's multi-tenancy boundary: members and their roles, resource limits, and defaults for the tenant clusters created in the team namespace team-{name}.",
    printcolumn(name = "Display Name", type_ = "string", json_path = ".spec.displayName"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Namespace", type_ = "string", json_path = ".status.namespace"),
    printcolumn(name = "Clusters", type_ = "integer", json_path = ".status.clusterCount"),
    printcolumn(name = "Quota", type_ = "string", json_path = ".status.quotaStatus"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct TeamSpec {
    /// Human-readable name shown in consoles and listings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What the team is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Who belongs to the team and with which role.
    pub access: TeamAccess,
    /// Limits on what the team may consume. An unset limit means no limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_limits: Option<TeamResourceLimits>,
    /// The ProviderConfig in the team namespace that new clusters use when they name none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_config_ref: Option<LocalObjectReference>,
    /// Values given to new TenantClusters for the fields they leave empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_defaults: Option<ClusterDefaults>,
}

/// Team membership.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TeamAccess {
    /// Members named one by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 2048))]
    pub users: Option<Vec<TeamUser>>,
    /// Identity-provider groups whose members belong to the team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 512))]
    pub groups: Option<Vec<TeamGroup>>,
}

/// One member of a team.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct TeamUser {
    /// The user's e-mail address, as the identity provider reports it.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The member's role: `viewer` (read-only), `operator` (clusters and addons) or `admin`
    /// (everything, membership included). A user matched more than once gets the strongest role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "viewer"))]
    pub role: Option<TeamRole>,
}

/// An identity-provider group whose members belong to a team.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamGroup {
    /// Group name after normalisation: `engineers@company.com` and
    /// `CN=Engineers,OU=Groups,DC=company` both match `engineers`.
    #[schemars(length(min = 1))]
    pub name: String,
    /// The role every member of the group gets: `viewer`, `operator` or `admin`. A user matched
    /// more than once gets the strongest role.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "viewer"))]
    pub role: Option<TeamRole>,
    /// Only match the group when it comes from this IdentityProvider; when empty, from any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity_provider: Option<String>,
}

// A member's role. When a user is matched more than once, the strongest role wins:
// admin, then operator, then viewer.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum TeamRole {
    /// Read-only access to the team's clusters, addons and settings.
    #[default]
    Viewer,
    /// Create, change and delete clusters and addons; no membership changes.
    Operator,
    /// Everything, including membership and team settings.
    Admin,
}

/// Limits on a team's consumption, and per-cluster defaults.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamResourceLimits {
    /// Most TenantClusters the team may have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_clusters: Option<i32>,
    /// Most worker nodes in any one cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_nodes_per_cluster: Option<i32>,
    /// Most worker nodes summed over all the team's clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_total_nodes: Option<i32>,
    /// Most CPU cores summed over all the team's worker nodes.
    #[serde(rename = "maxCPUCores", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub max_cpu_cores: Option<Quantity>,
    /// Most memory summed over all the team's worker nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub max_memory: Option<Quantity>,
    /// Most disk summed over all the team's worker nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub max_storage: Option<Quantity>,
    /// Most addresses from NetworkPools (load-balancer and node addresses) summed over the
    /// team's clusters: what one team may take of pools that teams share. A cluster counts the
    /// blocks its IPAllocations hold (elastic growth and blocks of a ProviderConfig it no
    /// longer names included), or what its ProviderConfig gives it, whichever is more.
    #[serde(rename = "maxIPAddresses", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_ip_addresses: Option<i32>,
    /// Worker nodes of a new cluster that does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 3))]
    pub default_node_count: Option<i32>,
    /// CPU per worker node of a new cluster that does not say.
    #[serde(rename = "defaultCPUPerNode", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub default_cpu_per_node: Option<Quantity>,
    /// Memory per worker node of a new cluster that does not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub default_memory_per_node: Option<Quantity>,
    /// Kubernetes versions the team may use (for example `1.30.x`); empty allows every version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub allowed_kubernetes_versions: Option<Vec<String>>,
    /// Infrastructure providers the team may use (for example `harvester`); empty allows all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16))]
    pub allowed_providers: Option<Vec<String>>,
    /// Addons the team may install; empty allows all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub allowed_addons: Option<Vec<String>>,
    /// Addons the team may not install; wins over allowedAddons.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 256))]
    pub denied_addons: Option<Vec<String>>,
}

/// Defaults for the fields a new TenantCluster leaves empty.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDefaults {
    /// Kubernetes version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_version: Option<String>,
    /// Number of worker nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub worker_count: Option<i32>,
    /// CPU per worker node.
    #[serde(rename = "workerCPU", default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("pattern" = super::NON_NEGATIVE_QUANTITY, "minimum" = 0))]
    pub worker_cpu: Option<Quantity>,
    /// Memory per worker node, in GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub worker_memory_gi: Option<i32>,
    /// Disk per worker node, in GiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub worker_disk_gi: Option<i32>,
    /// Addons installed on every new cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub default_addons: Option<Vec<String>>,
}

/// Observed state of a Team.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamStatus {
    /// Standard conditions: `NamespaceReady`, `RBACReady`, `QuotaExceeded` and `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[schemars(length(max = 16))]
    pub conditions: Vec<Condition>,
    /// Where the team is in its life.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<TeamPhase>,
    /// The team's namespace, `team-{name}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The generation of the spec that this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// TenantClusters in the team namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_count: Option<i32>,
    /// Members: users plus the resolved members of groups.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_count: Option<i32>,
    /// What the team's clusters consume now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_usage: Option<TeamResourceUsage>,
    /// The worst state over all limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_status: Option<QuotaStatus>,
    /// Which limit is close or breached, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota_message: Option<String>,
}

// Life-cycle phase of a Team.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TeamPhase {
    /// Created; namespace and RBAC are being set up.
    Pending,
    /// Fully set up.
    Ready,
    /// Being deleted; its clusters, RBAC and namespace are being removed.
    Terminating,
    /// Reconciliation failed; the conditions say why.
    Failed,
}

// State of a team's usage against its limits.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub enum QuotaStatus {
    /// Every usage is within its limit.
    #[serde(rename = "OK")]
    Ok,
    /// Some usage is above 80% of its limit.
    Warning,
    /// Some usage is above its limit.
    Exceeded,
}

/// Consumption of a team, summed over its TenantClusters.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TeamResourceUsage {
    /// Active TenantClusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters: Option<i32>,
    /// Worker nodes over all clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_nodes: Option<i32>,
    /// CPU over all worker nodes (CPU per node times replicas, summed).
    #[serde(rename = "totalCPU", default, skip_serializing_if = "Option::is_none")]
    pub total_cpu: Option<Quantity>,
    /// Memory over all worker nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_memory: Option<Quantity>,
    /// Disk over all worker nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_storage: Option<Quantity>,
    /// Clusters as a percentage of maxClusters; set only when that limit is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_utilization: Option<i32>,
    /// Worker nodes as a percentage of maxTotalNodes; set only when that limit is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_utilization: Option<i32>,
    /// CPU as a percentage of maxCPUCores; set only when that limit is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_utilization: Option<i32>,
    /// Memory as a percentage of maxMemory; set only when that limit is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_utilization: Option<i32>,
}
