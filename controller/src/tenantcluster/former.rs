//! Blocks of a ProviderConfig a cluster no longer names (re-pointed at another config, or at one
//! in cloud mode). They count against the Team's `maxIPAddresses` for as long as they are held
//! (see [`crate::ipam::held`]), and go back to their pools as a deleted cluster's do: a
//! load-balancer block once the tenant's MetalLB no longer lists it (the tenant is asked to drop
//! it), a block not served yet at once. Node blocks stay the cluster's until it is deleted: its
//! machines may still carry those addresses, and nothing on the tenant says when they stop.

use butler_core::api::labels::{LABEL_TEAM, LABEL_TENANT};
use butler_core::api::{AllocationType, IPAllocation, NetworkMode, ProviderConfig, TenantCluster};
use butler_runtime::conditions::Wanted;
use kube::ResourceExt;

use super::plan::{serves, tenant_label};
use super::release::Tenant;

/// The condition a cluster carries while it holds blocks of a config it no longer names.
pub const FORMER_ADDRESSES: &str = "FormerAddressesReleased";

/// The allocations this controller made for `cluster` that its ProviderConfig no longer covers:
/// every one when the config is in cloud mode, those of another namespace than the config's in
/// IPAM mode. None while the config is not known (missing from the cache, or another team's):
/// nothing is given back on a guess.
pub fn former<'a>(
    cluster: &TenantCluster,
    config: Option<&ProviderConfig>,
    allocations: &[&'a IPAllocation],
) -> Vec<&'a IPAllocation> {
    let Some(config) = config else { return Vec::new() };
    let ipam = config.spec.network.as_ref().and_then(|n| n.mode) == Some(NetworkMode::Ipam);
    let namespace = config.namespace();
    allocations
        .iter()
        .copied()
        .filter(|a| {
            serves(a, cluster)
                && a.labels().get(LABEL_TEAM) == cluster.namespace().as_ref()
                && a.labels().get(LABEL_TENANT) == Some(&tenant_label(cluster))
                && a.metadata.deletion_timestamp.is_none()
                && (!ipam || a.namespace() != namespace)
        })
        .collect()
}

/// What to do with the former blocks.
#[derive(Debug, PartialEq)]
pub struct Step {
    /// Allocations to delete now, (namespace, name).
    pub delete: Vec<(String, String)>,
    /// The condition to report.
    pub condition: Wanted,
    /// Whether the tenant's word on `ranges` is wanted (to ask for it, when not given yet).
    pub ask: bool,
    /// When to ask again, while blocks are held: soon after the cluster was re-pointed
    /// (someone is likely fixing what stops it), then less often, as a deletion does.
    pub again: Option<std::time::Duration>,
}

/// Whether an allocation holds a block.
fn holds(a: &IPAllocation) -> bool {
    crate::ipam::networkpool::serve::holds_block(a)
}

fn key(a: &IPAllocation) -> (String, String) {
    (a.namespace().unwrap_or_default(), a.name_any())
}

/// Decides, from the tenant's answer on the load-balancer blocks' `ranges` (`None`: not asked)
/// and how long the blocks have been held since the cluster stopped naming their config.
pub fn step(
    former: &[&IPAllocation],
    ranges: &[String],
    tenant: Option<Tenant>,
    held_for: std::time::Duration,
) -> Step {
    let mut delete: Vec<(String, String)> = former.iter().filter(|a| !holds(a)).map(|a| key(a)).collect();
    let nodes: Vec<String> = former
        .iter()
        .filter(|a| holds(a) && a.spec.type_ == AllocationType::Nodes)
        .map(|a| format!("{}/{}", a.namespace().unwrap_or_default(), a.name_any()))
        .collect();
    let lb: Vec<&IPAllocation> =
        former.iter().copied().filter(|a| holds(a) && a.spec.type_ == AllocationType::Loadbalancer).collect();
    let kept_nodes = match nodes.is_empty() {
        true => String::new(),
        false => format!(
            "; the node addresses of IPAllocation {} stay the cluster's until it is deleted, since its machines may still carry them",
            nodes.join(", ")
        ),
    };
    let given_back =
        || format!("the blocks of ProviderConfigs the cluster no longer names are given back{kept_nodes}");
    let holding = |why: String| {
        format!(
            "the blocks of ProviderConfigs the cluster no longer names go back to their pools once the tenant no longer announces them, and count against the Team's maxIPAddresses until then: {why}{kept_nodes}"
        )
    };
    let listed = ranges.join(", ");
    let (reason, message, ask) = match (lb.is_empty(), tenant) {
        (false, None) => (
            "WaitingForTurn",
            holding(format!("{listed} are to be dropped from the tenant's MetalLB pool first")),
            true,
        ),
        (false, Some(Tenant::Refused(why))) => (
            "TenantRefusedRelease",
            holding(format!(
                "the tenant refused to drop {listed} from its MetalLB pool ({why}); let the controller's tenant account change it"
            )),
            false,
        ),
        (false, Some(Tenant::Silent(why))) => (
            "WaitingForTenant",
            holding(format!("waiting for the tenant to drop {listed} from its MetalLB pool: {why}")),
            false,
        ),
        (true, _) | (false, Some(Tenant::Clear)) => {
            delete.extend(lb.iter().map(|a| key(a)));
            (if nodes.is_empty() { "Released" } else { "NodeAddressesKept" }, given_back(), false)
        }
    };
    let status = reason == "Released";
    let again = (!status && !ask)
        .then(|| (held_for / 4).clamp(std::time::Duration::from_secs(5), std::time::Duration::from_secs(60)));
    Step { delete, condition: Wanted::new(FORMER_ADDRESSES, status, reason, message), ask, again }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    const ZERO: Duration = Duration::ZERO;
    const MINUTE: Duration = Duration::from_secs(60);

    fn cluster() -> TenantCluster {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": "web", "namespace": "team-a"},
            "spec": {"providerConfigRef": {"name": "now", "namespace": "infra-b"}},
        }))
        .unwrap()
    }

    fn config(namespace: &str, mode: &str) -> ProviderConfig {
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
            "metadata": {"name": "now", "namespace": namespace},
            "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "network": {"mode": mode}},
        }))
        .unwrap()
    }

    fn allocation(
        namespace: &str,
        name: &str,
        kind: &str,
        block: Option<&str>,
        tenant: &str,
    ) -> IPAllocation {
        let status = block.map_or(json!({"phase": "Pending"}), |b| {
            let (s, e) = b.split_once('-').unwrap();
            json!({"phase": "Allocated", "startAddress": s, "endAddress": e, "allocatedCount": 2})
        });
        serde_json::from_value(json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
            "metadata": {"name": name, "namespace": namespace,
                "labels": {"butler.butlerlabs.dev/team": "team-a", "butler.butlerlabs.dev/tenant": tenant}},
            "spec": {"poolRef": {"name": "p"}, "tenantClusterRef": {"name": "web", "namespace": "team-a"},
                "type": kind, "count": 2},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn only_the_clusters_own_blocks_of_configs_it_no_longer_names_are_former() {
        let old = allocation("infra-a", "team-a.web-lb", "loadbalancer", Some("10.0.0.0-10.0.0.1"), "web");
        let now = allocation("infra-b", "team-a.web-lb", "loadbalancer", Some("10.1.0.0-10.1.0.1"), "web");
        let forged = allocation("infra-a", "x", "loadbalancer", Some("10.0.0.4-10.0.0.5"), "other");
        let all = [&old, &now, &forged];
        let names = |v: Vec<&IPAllocation>| v.iter().map(|a| key(a)).collect::<Vec<_>>();
        assert_eq!(
            names(former(&cluster(), Some(&config("infra-b", "ipam")), &all)),
            [("infra-a".to_string(), "team-a.web-lb".to_string())]
        );
        assert_eq!(
            former(&cluster(), Some(&config("infra-b", "cloud")), &all).len(),
            2,
            "cloud: all its own"
        );
        assert!(former(&cluster(), None, &all).is_empty(), "an unknown config gives nothing back");
    }

    #[test]
    fn load_balancer_blocks_go_once_the_tenant_dropped_them_and_node_blocks_stay() {
        let lb = allocation("infra-a", "team-a.web-lb", "loadbalancer", Some("10.0.0.0-10.0.0.1"), "web");
        let waiting = allocation("infra-a", "team-a.web-lb-1", "loadbalancer", None, "web");
        let nodes = allocation("infra-a", "team-a.web-nodes", "nodes", Some("10.0.0.8-10.0.0.9"), "web");
        let ranges = ["10.0.0.0-10.0.0.1".to_string()];
        let first = step(&[&lb, &waiting], &ranges, None, ZERO);
        assert!(first.ask && !first.condition.status);
        assert_eq!(
            first.delete,
            [("infra-a".to_string(), "team-a.web-lb-1".to_string())],
            "unserved: at once"
        );
        let refused =
            step(&[&lb], &ranges, Some(Tenant::Refused("it answered Forbidden (HTTP 403)".into())), MINUTE);
        assert_eq!((refused.condition.reason.as_str(), refused.delete.len()), ("TenantRefusedRelease", 0));
        assert_eq!(refused.again, Some(Duration::from_secs(15)), "a quarter of the time held");
        assert!(refused.condition.message.contains("count against the Team's maxIPAddresses until then"));
        let silent = step(&[&lb], &ranges, Some(Tenant::Silent("no answer".into())), 8 * MINUTE);
        assert_eq!((silent.condition.reason.as_str(), silent.delete.len()), ("WaitingForTenant", 0));
        assert_eq!(silent.again, Some(MINUTE), "at most a minute");
        let clear = step(&[&lb, &nodes], &ranges, Some(Tenant::Clear), ZERO);
        assert_eq!(clear.delete, [("infra-a".to_string(), "team-a.web-lb".to_string())]);
        assert_eq!(clear.condition.reason, "NodeAddressesKept");
        assert!(
            clear
                .condition
                .message
                .contains("infra-a/team-a.web-nodes stay the cluster's until it is deleted")
        );
        let done = step(&[&lb], &ranges, Some(Tenant::Clear), ZERO);
        assert!(done.condition.status && done.delete.len() == 1);
    }
}
