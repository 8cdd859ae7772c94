//! Finalizer names, label keys and field managers shared by Butler's controllers.

/// Finalizer on a Team: removes the team's clusters, RBAC and namespace before the Team goes.
pub const TEAM_FINALIZER: &str = "butler.butlerlabs.dev/team";
/// The finalizer earlier versions put on a ProviderConfig (deletion held while TenantClusters
/// referenced it); the controller now removes it, and admission refuses such a deletion.
pub const PROVIDER_CONFIG_FINALIZER: &str = "butler.butlerlabs.dev/providerconfig";
/// Finalizer on an IPAllocation: records the release before the addresses return to the pool.
pub const IP_ALLOCATION_FINALIZER: &str = "butler.butlerlabs.dev/ipallocation";
/// Finalizer on a NetworkPool: blocks deletion while allocations from it are still active.
pub const NETWORK_POOL_FINALIZER: &str = "butler.butlerlabs.dev/networkpool";

/// Finalizer on a TenantCluster in IPAM mode: its IPAllocations go before it does.
pub const TENANT_CLUSTER_FINALIZER: &str = "butler.butlerlabs.dev/tenantcluster";

/// Label on an IPAllocation: the team namespace of the tenant cluster (for example `team-platform`).
pub const LABEL_TEAM: &str = "butler.butlerlabs.dev/team";
/// Label on an IPAllocation: the name of the TenantCluster it serves.
pub const LABEL_TENANT: &str = "butler.butlerlabs.dev/tenant";
/// Label on an IPAllocation: the name of the NetworkPool it was taken from.
pub const LABEL_NETWORK_POOL: &str = "butler.butlerlabs.dev/network-pool";
/// Label on an IPAllocation: `nodes` or `loadbalancer`.
pub const LABEL_ALLOCATION_TYPE: &str = "butler.butlerlabs.dev/allocation-type";
/// Label on an IPAllocation: `initial` or `growth`; only `growth` allocations may be shrunk.
pub const LABEL_ALLOCATION_ROLE: &str = "butler.butlerlabs.dev/allocation-role";

/// Value of [`LABEL_ALLOCATION_ROLE`] for the first allocation of a tenant cluster.
pub const ALLOCATION_ROLE_INITIAL: &str = "initial";
/// Value of [`LABEL_ALLOCATION_ROLE`] for allocations added by elastic growth.
pub const ALLOCATION_ROLE_GROWTH: &str = "growth";

/// Field manager of the Butler core controllers.
pub const FIELD_MANAGER: &str = "butler-controller";
/// Field manager of the MetalLB pool sync on tenant clusters.
pub const FIELD_MANAGER_IPAM: &str = "butler-controller/ipam";
