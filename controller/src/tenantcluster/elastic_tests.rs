use super::*;
use serde_json::{Value, json};

const NOW: &str = "2026-11-23T12:00:00Z";

fn now() -> Timestamp {
    NOW.parse().unwrap()
}

fn ago(seconds: i64) -> Timestamp {
    now() - jiff::SignedDuration::from_secs(seconds)
}

fn cluster() -> TenantCluster {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "prod", "namespace": "team-a"},
        "spec": {"providerConfigRef": {"name": "pc", "namespace": "butler-system"}},
    }))
    .unwrap()
}

fn config(lb: Value, quota: Value) -> ProviderConfig {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "pc", "namespace": "butler-system"},
        "spec": {"provider": "nutanix", "credentialsRef": {"name": "c"},
            "nutanix": {"endpoint": "e", "clusterUUID": "c", "subnetUUID": "s"},
            "network": {"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": lb, "quotaPerTenant": quota}},
    }))
    .unwrap()
}

fn pool() -> NetworkPool {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": "lab", "namespace": "butler-system"},
        "spec": {"cidr": "10.0.0.0/24"}, "status": {"availableIPs": 100},
    }))
    .unwrap()
}

/// An allocation of team-a/prod: `block` Some((start, end, count)) when Allocated.
fn alloc(name: &str, labels: Value, block: Option<(&str, &str, i64)>, annotations: Value) -> IPAllocation {
    let status = match block {
        Some((s, e, n)) => {
            json!({"phase": "Allocated", "startAddress": s, "endAddress": e, "allocatedCount": n})
        }
        None => json!({"phase": "Pending"}),
    };
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
        "metadata": {"name": name, "namespace": "butler-system", "labels": labels, "annotations": annotations},
        "spec": {"poolRef": {"name": "lab"}, "tenantClusterRef": {"name": "prod", "namespace": "team-a"}, "type": "loadbalancer",
                 "count": block.map_or(1, |b| b.2)},
        "status": status,
    }))
    .unwrap()
}

fn service(name: &str, age: i64, ip: Option<&str>) -> Service {
    Service {
        name: name.into(),
        created: ago(age),
        addresses: ip.map(|i| vec![i.parse().unwrap()]).unwrap_or_default(),
    }
}

fn run(config: &ProviderConfig, allocations: &[IPAllocation], services: &[Service], full: bool) -> Decision {
    run_in_team(config, allocations, services, full, None)
}

fn run_in_team(
    config: &ProviderConfig,
    allocations: &[IPAllocation],
    services: &[Service],
    full: bool,
    team: Option<TeamLimit>,
) -> Decision {
    let p = pool();
    let lookup = |n: &str| (n == "lab").then_some(&p);
    let refs: Vec<&IPAllocation> = allocations.iter().collect();
    decide(&cluster(), config, &lookup, &refs, &Tenant { services, metallb_full: full }, team, now())
}

#[test]
fn growth_stops_at_the_teams_address_limit() {
    let pc =
        config(json!({"allocationMode": "elastic", "initialPoolSize": 2, "growthIncrement": 2}), json!({}));
    let services =
        [service("a", 45, None), service("b", 45, None), service("c", 45, None), service("d", 45, None)];
    // The team takes 12 of its 14 (this cluster's 2 among them): room for one block of 2; the
    // second is refused.
    let team = Some(TeamLimit { max: 14, used: 12 });
    let decision = run_in_team(&pc, &[initial()], &services, false, team);
    assert_eq!(decision.create.len(), 1);
    assert!(decision.shortfall.as_deref().unwrap().contains("Team's maxIPAddresses (14)"), "{decision:?}");
    let full = Some(TeamLimit { max: 14, used: 14 });
    let decision = run_in_team(&pc, &[initial()], &services, false, full);
    assert!(decision.create.is_empty() && decision.shortfall.is_some());
    assert_eq!(run_in_team(&pc, &[initial()], &services, false, None).create.len(), 2);
}

fn initial() -> IPAllocation {
    alloc(
        "team-a.prod-lb",
        json!({"butler.butlerlabs.dev/allocation-role": "initial"}),
        Some(("10.0.0.0", "10.0.0.1", 2)),
        json!({}),
    )
}

#[test]
fn three_waiting_services_with_one_block_in_flight_grow_by_two_in_one_batch() {
    let pc =
        config(json!({"allocationMode": "elastic", "initialPoolSize": 2, "growthIncrement": 1}), json!({}));
    let in_flight = alloc(
        "team-a.prod-lb-1",
        json!({"butler.butlerlabs.dev/allocation-role": "growth"}),
        None,
        json!({}),
    );
    let services = [
        service("ingress", 600, Some("10.0.0.0")),
        service("web", 600, Some("10.0.0.1")),
        service("a", 45, None),
        service("b", 40, None),
        service("c", 31, None),
    ];
    let decision = run(&pc, &[initial(), in_flight], &services, false);
    let names: Vec<String> = decision.create.iter().map(|a| a.name_any()).collect();
    assert_eq!(names, ["team-a.prod-lb-2", "team-a.prod-lb-3"]);
    let grown = &decision.create[0];
    assert_eq!(grown.labels()[LABEL_ALLOCATION_ROLE], "growth");
    assert_eq!(grown.spec.count, Some(1));
    assert!(decision.shortfall.is_none());
}

#[test]
fn young_services_wait_thirty_seconds_unless_metallb_is_out_of_addresses() {
    let pc = config(json!({"allocationMode": "elastic", "growthIncrement": 2}), json!({}));
    let services = [service("new", 10, None)];
    let decision = run(&pc, &[initial()], &services, false);
    assert!(decision.create.is_empty());
    assert_eq!(decision.wake, Some(Duration::from_secs(20)));
    let decision = run(&pc, &[initial()], &services, true);
    assert_eq!(decision.create.len(), 1);
    assert_eq!(decision.create[0].spec.count, Some(2));
}

#[test]
fn growth_stops_at_the_quota_and_says_so() {
    let pc =
        config(json!({"allocationMode": "elastic", "growthIncrement": 1}), json!({"maxLoadBalancerIPs": 3}));
    let services = [service("a", 60, None), service("b", 60, None), service("c", 60, None)];
    let decision = run(&pc, &[initial()], &services, false);
    assert_eq!(decision.create.len(), 1, "2 + 1 fits 3, 2 + 2 does not");
    assert!(decision.shortfall.unwrap().contains("exceed quotaPerTenant.maxLoadBalancerIPs (3)"));
}

#[test]
fn growth_stops_at_the_default_pool_size_when_there_is_no_lower_quota() {
    let pc =
        config(json!({"allocationMode": "elastic", "growthIncrement": 2, "defaultPoolSize": 4}), json!({}));
    let services: Vec<_> = (0..6).map(|i| service(&format!("s{i}"), 60, None)).collect();
    let decision = run(&pc, &[initial()], &services, false);
    assert_eq!(decision.create.len(), 1, "2 + 2 fits 4, 2 + 4 does not");
    assert!(decision.shortfall.unwrap().contains("exceed loadBalancer.defaultPoolSize (4)"));
    // Unset, it is spec/000's 8.
    let pc = config(json!({"allocationMode": "elastic", "growthIncrement": 2}), json!({}));
    let services: Vec<_> = (0..20).map(|i| service(&format!("s{i}"), 60, None)).collect();
    let decision = run(&pc, &[initial()], &services, false);
    assert_eq!(decision.create.len(), 3, "2 + 6 = 8");
    assert!(decision.shortfall.unwrap().contains("exceed loadBalancer.defaultPoolSize (8)"));
}

#[test]
fn static_mode_never_grows() {
    let pc = config(json!({"allocationMode": "static"}), json!({}));
    let decision = run(&pc, &[initial()], &[service("a", 600, None)], false);
    assert!(decision.create.is_empty() && decision.release.is_empty() && decision.marks.is_empty());
}

#[test]
fn an_unused_growth_block_is_released_after_ten_idle_minutes_and_not_before() {
    let pc = config(json!({"allocationMode": "elastic", "growthIncrement": 1}), json!({}));
    let growth = |annotations: Value| {
        alloc(
            "team-a.prod-lb-1",
            json!({"butler.butlerlabs.dev/allocation-role": "growth"}),
            Some(("10.0.0.8", "10.0.0.8", 1)),
            annotations,
        )
    };
    // First seen unused: marked now.
    let decision = run(&pc, &[initial(), growth(json!({}))], &[], false);
    assert_eq!(decision.marks, [("team-a.prod-lb-1".to_string(), Some(now()))]);
    assert_eq!(decision.wake, Some(IDLE_FOR));
    // Nine minutes: kept, looked at again in a minute.
    let nine = growth(json!({IDLE_SINCE: ago(540).to_string()}));
    let decision = run(&pc, &[initial(), nine], &[], false);
    assert!(decision.release.is_empty());
    assert_eq!(decision.wake, Some(Duration::from_secs(60)));
    // Ten: released. The initial block, unused too, never is.
    let ten = growth(json!({IDLE_SINCE: ago(600).to_string()}));
    let decision = run(&pc, &[initial(), ten.clone()], &[], false);
    assert_eq!(decision.release, ["team-a.prod-lb-1"]);
    // Used again meanwhile: the mark goes, nothing is released.
    let decision = run(&pc, &[initial(), ten], &[service("back", 5, Some("10.0.0.8"))], false);
    assert!(decision.release.is_empty());
    assert_eq!(decision.marks, [("team-a.prod-lb-1".to_string(), None)]);
}

#[test]
fn a_cluster_of_an_earlier_version_grows_past_its_numbers_under_todays_names() {
    let pc =
        config(json!({"allocationMode": "elastic", "initialPoolSize": 2, "growthIncrement": 1}), json!({}));
    let legacy = |name: &str, block| alloc(name, json!({}), block, json!({}));
    let held = [
        legacy("team-a-prod-lb", Some(("10.0.0.0", "10.0.0.1", 2))),
        legacy("team-a-prod-lb-1", Some(("10.0.0.2", "10.0.0.2", 1))),
    ];
    let services = [
        service("a", 600, Some("10.0.0.0")),
        service("b", 600, Some("10.0.0.1")),
        service("c", 600, Some("10.0.0.2")),
        service("d", 40, None),
    ];
    let decision = run(&pc, &held, &services, false);
    let names: Vec<String> = decision.create.iter().map(|a| a.name_any()).collect();
    assert_eq!(names, ["team-a.prod-lb-2"]);
}

#[test]
fn pinned_and_initial_blocks_are_never_shrunk_and_roles_are_inferred_from_names() {
    let c = cluster();
    let unlabelled = |name: &str| alloc(name, json!({}), Some(("10.0.0.8", "10.0.0.8", 1)), json!({}));
    assert_eq!(role(&unlabelled("team-a.prod-lb"), &c), "initial");
    assert_eq!(role(&unlabelled("team-a.prod-lb-4"), &c), "growth");
    assert_eq!(role(&unlabelled("team-a.prod-lb-x"), &c), "initial");
    assert_eq!(role(&unlabelled("something-else"), &c), "initial");
    // Names of earlier versions, `{ns}-{name}-lb[-N]`.
    assert_eq!(role(&unlabelled("team-a-prod-lb"), &c), "initial");
    assert_eq!(role(&unlabelled("team-a-prod-lb-4"), &c), "growth");
    assert_eq!(role(&unlabelled("team-a-prod-lb-+4"), &c), "initial");
    let mut pinned = unlabelled("team-a.prod-lb-5");
    pinned.spec.pinned_range = Some(butler_core::api::PinnedRange {
        start_address: "10.0.0.8".into(),
        end_address: "10.0.0.8".into(),
    });
    assert_eq!(role(&pinned, &c), "initial");
    let pc = config(json!({"allocationMode": "elastic"}), json!({}));
    let mut idle = pinned.clone();
    idle.annotations_mut().insert(IDLE_SINCE.into(), ago(3600).to_string());
    assert!(run(&pc, &[initial(), idle], &[], false).release.is_empty());
}

#[test]
fn the_metallb_pool_lists_allocated_blocks_in_address_order() {
    let mut deleting = alloc("team-a.prod-lb-2", json!({}), Some(("10.0.0.20", "10.0.0.20", 1)), json!({}));
    deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now()));
    let all = [
        alloc("team-a.prod-lb-1", json!({}), Some(("10.0.0.8", "10.0.0.9", 2)), json!({})),
        initial(),
        deleting,
        alloc("team-a.prod-lb-3", json!({}), None, json!({})),
    ];
    let refs: Vec<&IPAllocation> = all.iter().collect();
    assert_eq!(metallb_addresses(&refs), ["10.0.0.0-10.0.0.1", "10.0.0.8-10.0.0.9"]);
}
