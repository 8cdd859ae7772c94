//! A ProviderConfig's conditions and status, decided from what was observed without I/O: the
//! credentials, the probe of the platform, the pools of IPAM mode and their capacity.

use butler_core::api::{
    NetworkMode, NetworkPool, Platform, ProviderCapacity, ProviderConfig, ProviderConfigStatus, TenantCluster,
};
use butler_runtime::conditions::{READY, Wanted};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use super::probe::Probed;

/// Condition types of a ProviderConfig, in the order the status lists them.
pub const VALIDATED: &str = "Validated";
pub const REACHABLE: &str = "Reachable";
pub const POOLS_AVAILABLE: &str = "PoolsAvailable";
pub const ORDER: &[&str] = &[VALIDATED, REACHABLE, POOLS_AVAILABLE, READY];

/// The longest a credentials Secret goes unread: the controller reads Secrets by name and may
/// not watch them, so a rotated Secret is seen within this (or at the next probe).
pub const CREDENTIALS_RECHECK: std::time::Duration = std::time::Duration::from_secs(300);
/// The soonest a refused credentials Secret is read again.
const CREDENTIALS_RETRY: std::time::Duration = std::time::Duration::from_secs(5);

/// How soon to read the credentials Secret again: valid ones every [`CREDENTIALS_RECHECK`];
/// missing or refused ones soon after they were refused (someone is likely fixing them), then
/// less often the longer they stay so (a quarter of the time they have been failing, up to
/// [`CREDENTIALS_RECHECK`]), so that many broken ProviderConfigs cost few reads.
pub fn recheck_credentials_after(
    valid: bool,
    failing_since: Option<jiff::Timestamp>,
    now: jiff::Timestamp,
) -> std::time::Duration {
    if valid {
        return CREDENTIALS_RECHECK;
    }
    let failing = failing_since.map_or(std::time::Duration::ZERO, |t| now.duration_since(t).unsigned_abs());
    (failing / 4).clamp(CREDENTIALS_RETRY, CREDENTIALS_RECHECK)
}

/// Addresses a tenant takes when neither the ProviderConfig nor the pool says (the pool's
/// schema defaults).
const NODES_PER_TENANT: i32 = 5;
const LB_PER_TENANT: i32 = 8;

/// spec/000 "Team Scope": a ProviderConfig scoped to a team may be used by that team's
/// clusters only (`team`: the team of the cluster's namespace, if it is a team's). One in a
/// team's namespace is that team's alone, whatever its scope says: the team's admin writes
/// its scope. A platform-scoped one (or one without a scope) outside every team's namespace
/// may be used by any.
pub fn scope_allows(config: &ProviderConfig, team: Option<&str>) -> Result<(), String> {
    let namespace = config.namespace().unwrap_or_default();
    let name = config.name_any();
    if let Some(scope) =
        config.spec.scope.as_ref().filter(|s| s.type_ == Some(butler_core::api::ScopeType::Team))
    {
        let owner = scope.team_ref.as_ref().map(|r| r.name.as_str()).unwrap_or_default();
        if owner.is_empty() || team != Some(owner) {
            return Err(format!(
                "the ProviderConfig {namespace}/{name} is scoped to the team {owner:?}, and only that team's clusters may use it; point spec.providerConfigRef at a platform ProviderConfig or one of your team's"
            ));
        }
    }
    match crate::team::plan::team_of_namespace(&namespace) {
        Some(owner) if team != Some(owner) => Err(format!(
            "the ProviderConfig {namespace}/{name} is in the namespace of the team {owner:?}, and only that team's clusters may use it, whatever its scope says; point spec.providerConfigRef at a platform ProviderConfig (outside every team's namespace) or one of your team's"
        )),
        _ => Ok(()),
    }
}

/// What the plan reads.
pub struct Observed<'a> {
    pub config: &'a ProviderConfig,
    /// The credentials check: `Ok` or why not.
    pub credentials: Result<(), String>,
    /// The last probe of the platform, for on-premises platforms that were probed.
    pub probe: Option<&'a Probed>,
    /// The pools of `poolRefs`, in order, each with the NetworkPool when it exists.
    pub pools: Vec<(String, Option<&'a NetworkPool>)>,
}

/// What the status should say.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    pub conditions: Vec<Wanted>,
    pub validated: bool,
    pub ready: bool,
    pub capacity: Option<ProviderCapacity>,
    pub provider_version: Option<String>,
}

/// Whether IPAM mode is on.
pub fn ipam(config: &ProviderConfig) -> bool {
    config.spec.network.as_ref().and_then(|n| n.mode) == Some(NetworkMode::Ipam)
}

/// The capacity of the pools: their available addresses, and how many more tenants fit, each
/// taking the ProviderConfig's own sizes (`quotaPerTenant.maxNodeIPs`,
/// `loadBalancer.defaultPoolSize`), else the first pool's defaults, else 5 and 8.
pub fn capacity(config: &ProviderConfig, pools: &[&NetworkPool]) -> ProviderCapacity {
    let available: i64 =
        pools.iter().filter_map(|p| p.status.as_ref()?.available_ips).map(|n| n.max(0)).sum();
    let network = config.spec.network.as_ref();
    let pool_defaults =
        pools.first().and_then(|p| p.spec.tenant_allocation.as_ref()?.defaults.clone()).unwrap_or_default();
    let nodes = network
        .and_then(|n| n.quota_per_tenant.as_ref()?.max_node_ips)
        .or(pool_defaults.nodes_per_tenant)
        .unwrap_or(NODES_PER_TENANT);
    let lb = network
        .and_then(|n| n.load_balancer.as_ref()?.default_pool_size)
        .or(pool_defaults.lb_pool_per_tenant)
        .unwrap_or(LB_PER_TENANT);
    let per_tenant = i64::from(nodes.max(0)) + i64::from(lb.max(0));
    let tenants = if per_tenant > 0 { available / per_tenant } else { 0 };
    ProviderCapacity {
        available_ips: Some(available),
        estimated_tenants: Some(i32::try_from(tenants).unwrap_or(i32::MAX)),
    }
}

fn on_premises(platform: Platform) -> bool {
    platform.is_on_premises()
}

/// Plans the status of a ProviderConfig that is not being deleted.
pub fn plan(observed: &Observed<'_>) -> Plan {
    let config = observed.config;
    let platform = config.spec.provider;
    let mut plan = Plan::default();
    let mut not_ready: Option<(&'static str, String)> = None;

    match &observed.credentials {
        Ok(()) => {
            plan.validated = true;
            plan.conditions.push(Wanted::new(
                VALIDATED,
                true,
                "CredentialsValid",
                format!("the credentials Secret holds what {platform} needs"),
            ));
        }
        Err(why) => {
            plan.conditions.push(Wanted::new(VALIDATED, false, "CredentialsInvalid", why.clone()));
            not_ready = Some(("CredentialsInvalid", why.clone()));
        }
    }

    if on_premises(platform) {
        match (plan.validated, observed.probe) {
            (false, _) => plan.conditions.push(Wanted::new(
                REACHABLE,
                false,
                "NotValidated",
                "the platform is probed once the credentials are valid",
            )),
            (true, Some(Probed::Reachable { version })) => {
                plan.provider_version = version.clone();
                plan.conditions.push(Wanted::new(
                    REACHABLE,
                    true,
                    "Reachable",
                    format!("{platform} answers"),
                ));
            }
            (true, Some(Probed::Unreachable(why))) => {
                let message = format!(
                    "{platform} does not answer: {why}; check the endpoint, the network and the certificate"
                );
                plan.conditions.push(Wanted::new(REACHABLE, false, "Unreachable", message.clone()));
                not_ready = not_ready.or(Some(("Unreachable", message)));
            }
            (true, None) => {
                plan.conditions.push(Wanted::new(
                    REACHABLE,
                    false,
                    "Probing",
                    "the platform has not been probed yet",
                ));
                not_ready = not_ready.or(Some(("Probing", "the platform has not been probed yet".into())));
            }
        }
    }

    if ipam(config) {
        let missing: Vec<&str> =
            observed.pools.iter().filter(|(_, p)| p.is_none()).map(|(n, _)| n.as_str()).collect();
        let found: Vec<&NetworkPool> = observed.pools.iter().filter_map(|(_, p)| *p).collect();
        plan.capacity = Some(capacity(config, &found));
        if observed.pools.is_empty() {
            let message =
                "network.mode is ipam but network.poolRefs names no NetworkPool; add one".to_string();
            plan.conditions.push(Wanted::new(POOLS_AVAILABLE, false, "NoPools", message.clone()));
            not_ready = not_ready.or(Some(("NoPools", message)));
        } else if missing.is_empty() {
            plan.conditions.push(Wanted::new(
                POOLS_AVAILABLE,
                true,
                "PoolsFound",
                "every NetworkPool of poolRefs exists",
            ));
        } else {
            let message = format!(
                "no NetworkPool {} in {}; create it or remove it from network.poolRefs",
                missing.join(", "),
                config.namespace().unwrap_or_default()
            );
            plan.conditions.push(Wanted::new(POOLS_AVAILABLE, false, "PoolNotFound", message.clone()));
            not_ready = not_ready.or(Some(("PoolNotFound", message)));
        }
    }

    match not_ready {
        None => {
            plan.ready = true;
            let message = if on_premises(platform) { "validated and reachable" } else { "validated" };
            plan.conditions.push(Wanted::new(READY, true, "Ready", message));
        }
        Some((reason, message)) => plan.conditions.push(Wanted::new(READY, false, reason, message)),
    }
    plan
}

/// The status a plan gives, keeping the times that did not move.
pub fn status(
    plan: &Plan,
    existing: &ProviderConfigStatus,
    conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
    generation: Option<i64>,
    last_validation: Option<Time>,
    last_probe: Option<Time>,
) -> ProviderConfigStatus {
    ProviderConfigStatus {
        conditions,
        observed_generation: generation,
        validated: Some(plan.validated),
        last_validation_time: last_validation.or_else(|| existing.last_validation_time.clone()),
        provider_version: plan.provider_version.clone().or_else(|| existing.provider_version.clone()),
        ready: Some(plan.ready),
        last_probe_time: last_probe.or_else(|| existing.last_probe_time.clone()),
        capacity: plan.capacity.clone(),
    }
}

/// The TenantClusters (as `namespace/name`) whose `providerConfigRef` names this
/// ProviderConfig; the reference's namespace defaults to the cluster's. A cluster of a team
/// that may not use it (re-pointed at it while being deleted, past the webhook) holds nothing:
/// it is served nothing, and never keeps the ProviderConfig from being deleted.
pub fn users<'a>(
    config: &ProviderConfig,
    clusters: impl IntoIterator<Item = &'a TenantCluster>,
) -> Vec<String> {
    let namespace = config.namespace().unwrap_or_default();
    let name = config.name_any();
    let mut users: Vec<String> = clusters
        .into_iter()
        .filter(|c| {
            let own = c.namespace().unwrap_or_default();
            c.spec.provider_config_ref.as_ref().is_some_and(|r| {
                r.name == name
                    && r.namespace.as_deref().filter(|n| !n.is_empty()).unwrap_or(&own) == namespace
            }) && scope_allows(config, crate::team::plan::team_of_namespace(&own)).is_ok()
        })
        .map(|c| format!("{}/{}", c.namespace().unwrap_or_default(), c.name_any()))
        .collect();
    users.sort();
    users
}

#[cfg(test)]
mod tests {
    #[test]
    fn refused_credentials_are_read_again_soon_then_less_often() {
        use std::time::Duration;
        let now = jiff::Timestamp::from_second(1_800_000_000).unwrap();
        let ago = |s: i64| Some(now.checked_sub(jiff::SignedDuration::from_secs(s)).unwrap());
        assert_eq!(recheck_credentials_after(true, None, now), CREDENTIALS_RECHECK);
        assert_eq!(recheck_credentials_after(false, None, now), Duration::from_secs(5));
        assert_eq!(recheck_credentials_after(false, ago(10), now), Duration::from_secs(5));
        assert_eq!(recheck_credentials_after(false, ago(120), now), Duration::from_secs(30));
        assert_eq!(recheck_credentials_after(false, ago(86_400), now), CREDENTIALS_RECHECK);
    }

    #[test]
    fn a_team_scoped_provider_config_serves_its_team_only() {
        let config = |scope: &str| -> ProviderConfig {
            serde_saphyr::from_str(&format!(
                "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: azure, namespace: team-a}}\nspec:\n  provider: azure\n  credentialsRef: {{name: c}}\n{scope}"
            ))
            .unwrap()
        };
        let team_a = config("  scope: {type: team, teamRef: {name: a}}\n");
        assert_eq!(scope_allows(&team_a, Some("a")), Ok(()));
        let refused = scope_allows(&team_a, Some("b")).unwrap_err();
        assert!(
            refused.starts_with("the ProviderConfig team-a/azure is scoped to the team \"a\""),
            "{refused}"
        );
        assert!(scope_allows(&team_a, None).is_err(), "a namespace of no team");
        for platform in ["", "  scope: {type: platform}\n"] {
            // In a team's namespace: that team's alone, whatever the scope says.
            let theirs = config(platform);
            assert_eq!(scope_allows(&theirs, Some("a")), Ok(()));
            let refused = scope_allows(&theirs, Some("b")).unwrap_err();
            assert!(
                refused.starts_with("the ProviderConfig team-a/azure is in the namespace of the team \"a\""),
                "{refused}"
            );
            assert!(scope_allows(&theirs, None).is_err());
            // In the platform's namespace: anyone's.
            let mut shared = config(platform);
            shared.metadata.namespace = Some("butler-system".into());
            assert_eq!(scope_allows(&shared, Some("b")), Ok(()));
            assert_eq!(scope_allows(&shared, None), Ok(()));
        }
        let mut elsewhere = config("  scope: {type: team, teamRef: {name: b}}\n");
        assert!(scope_allows(&elsewhere, Some("b")).is_err(), "a's namespace, scoped to b");
        elsewhere.metadata.namespace = Some("butler-system".into());
        assert_eq!(scope_allows(&elsewhere, Some("b")), Ok(()));
    }

    use super::*;

    fn config(yaml: &str) -> ProviderConfig {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc, namespace: butler-system}}\nspec:\n{yaml}"
        ))
        .unwrap()
    }

    fn pool(name: &str, available: i64, defaults: &str) -> NetworkPool {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: NetworkPool\nmetadata: {{name: {name}, namespace: butler-system}}\nspec:\n  cidr: 10.0.0.0/24\n{defaults}status: {{availableIPs: {available}}}\n"
        ))
        .unwrap()
    }

    fn condition<'a>(plan: &'a Plan, type_: &str) -> &'a Wanted {
        plan.conditions.iter().find(|c| c.type_ == type_).unwrap_or_else(|| panic!("no {type_}"))
    }

    #[test]
    fn a_cloud_platform_is_ready_when_validated() {
        let aws = config("  provider: aws\n  credentialsRef: {name: c}\n  aws: {region: eu-west-1}\n");
        let p = plan(&Observed { config: &aws, credentials: Ok(()), probe: None, pools: vec![] });
        assert!(p.ready && p.validated);
        assert!(!p.conditions.iter().any(|c| c.type_ == REACHABLE), "clouds are not probed");
        let bad = plan(&Observed {
            config: &aws,
            credentials: Err("the key x is missing".into()),
            probe: None,
            pools: vec![],
        });
        assert!(!bad.ready);
        assert_eq!(condition(&bad, READY).reason, "CredentialsInvalid");
        assert_eq!(condition(&bad, VALIDATED).message, "the key x is missing");
    }

    #[test]
    fn an_on_premises_platform_needs_to_answer_and_its_pools_to_exist() {
        let harvester = config(
            "  provider: harvester\n  credentialsRef: {name: c}\n  harvester: {networkName: a/b}\n  network:\n    mode: ipam\n    poolRefs: [{name: p1}, {name: p2}]\n    loadBalancer: {defaultPoolSize: 4}\n",
        );
        let reachable = Probed::Reachable { version: Some("v1.29.9".into()) };
        let p1 = pool("p1", 100, "  tenantAllocation: {defaults: {nodesPerTenant: 6}}\n");
        let p = plan(&Observed {
            config: &harvester,
            credentials: Ok(()),
            probe: Some(&reachable),
            pools: vec![("p1".into(), Some(&p1)), ("p2".into(), None)],
        });
        assert!(!p.ready);
        assert_eq!(
            condition(&p, POOLS_AVAILABLE).message,
            "no NetworkPool p2 in butler-system; create it or remove it from network.poolRefs"
        );
        assert_eq!(p.provider_version.as_deref(), Some("v1.29.9"));
        assert_eq!(
            p.capacity,
            Some(ProviderCapacity { available_ips: Some(100), estimated_tenants: Some(10) }),
            "100 / (6 + 4)"
        );

        let p2 = pool("p2", 30, "");
        let down = Probed::Unreachable("connection refused".into());
        let p = plan(&Observed {
            config: &harvester,
            credentials: Ok(()),
            probe: Some(&down),
            pools: vec![("p1".into(), Some(&p1)), ("p2".into(), Some(&p2))],
        });
        assert_eq!(condition(&p, READY).reason, "Unreachable");
        assert!(condition(&p, POOLS_AVAILABLE).status);
        assert_eq!(p.capacity.unwrap().available_ips, Some(130));
        let up = plan(&Observed {
            config: &harvester,
            credentials: Ok(()),
            probe: Some(&reachable),
            pools: vec![("p1".into(), Some(&p1)), ("p2".into(), Some(&p2))],
        });
        assert!(up.ready, "{:?}", up.conditions);
    }

    #[test]
    fn capacity_defaults_to_five_and_eight_and_users_default_their_namespace() {
        let nutanix = config(
            "  provider: nutanix\n  credentialsRef: {name: c}\n  network: {mode: ipam, poolRefs: [{name: p}]}\n",
        );
        let p = pool("p", 27, "");
        assert_eq!(capacity(&nutanix, &[&p]).estimated_tenants, Some(2), "27 / (5 + 8)");
        let cluster = |ns: &str, r: &str| -> TenantCluster {
            serde_saphyr::from_str(&format!(
                "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: c, namespace: {ns}}}\nspec:\n  providerConfigRef: {r}\n"
            ))
            .unwrap()
        };
        let clusters = [
            cluster("team-a", "{name: pc, namespace: butler-system}"),
            cluster("butler-system", "{name: pc}"),
            cluster("team-b", "{name: pc}"),
            cluster("team-c", "{name: other, namespace: butler-system}"),
        ];
        assert_eq!(users(&nutanix, &clusters), ["butler-system/c", "team-a/c"]);
        // A team's own ProviderConfig: another team's cluster that names it holds nothing.
        let mut theirs = nutanix.clone();
        theirs.metadata.namespace = Some("team-a".into());
        let clusters = [cluster("team-a", "{name: pc}"), cluster("team-b", "{name: pc, namespace: team-a}")];
        assert_eq!(users(&theirs, &clusters), ["team-a/c"]);
    }
}
