use super::*;
use serde_json::{Value, json};

fn cluster(networking: Value) -> TenantCluster {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
        "metadata": {"name": "prod", "namespace": "team-platform"},
        "spec": {"providerConfigRef": {"name": "pc", "namespace": "butler-system"}, "networking": networking},
    }))
    .unwrap()
}

fn config(network: Value) -> ProviderConfig {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "pc", "namespace": "butler-system"},
        "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"}, "network": network},
    }))
    .unwrap()
}

fn pool(name: &str, available: i64) -> NetworkPool {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": name, "namespace": "butler-system"},
        "spec": {"cidr": "10.0.0.0/24"}, "status": {"availableIPs": available},
    }))
    .unwrap()
}

fn allocation(name: &str, pool: &str, status: Value) -> IPAllocation {
    serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
        "metadata": {"name": name, "namespace": "butler-system", "labels": {"butler.butlerlabs.dev/tenant": "prod"}},
        "spec": {"poolRef": {"name": pool}, "tenantClusterRef": {"name": "prod", "namespace": "team-platform"}, "type": "loadbalancer", "count": 8},
        "status": status,
    }))
    .unwrap()
}

fn run(
    c: &TenantCluster,
    pc: Option<&ProviderConfig>,
    pools: &[NetworkPool],
    allocations: &[IPAllocation],
) -> Plan {
    let lookup = |name: &str| pools.iter().find(|p| p.name_any() == name);
    let namespace = c.namespace().unwrap_or_default();
    plan(&Observed {
        cluster: c,
        config: pc,
        pool: &lookup,
        allocations: allocations.iter().collect(),
        team: crate::team::plan::team_of_namespace(&namespace),
    })
}

const TWO_POOLS: &str =
    r#"{"mode": "ipam", "poolRefs": [{"name": "second", "priority": 10}, {"name": "first", "priority": 0}]}"#;

/// Allocates nothing, and says IPAM is ready for the cluster for `reason`.
fn nothing(plan: Plan, reason: &str) -> bool {
    !plan.ipam
        && plan.create.is_empty()
        && plan.delete.is_empty()
        && plan.condition.is_some_and(|c| c.status && c.reason == reason)
        && plan.addresses.is_empty()
}

#[test]
fn cloud_mode_and_no_reference_allocate_nothing_and_say_so() {
    let pc = config(json!({"mode": "cloud"}));
    assert!(nothing(run(&cluster(json!({})), Some(&pc), &[], &[]), "CloudLoadBalancers"));
    let default = run(&cluster(json!({})), Some(&config(json!({}))), &[], &[]);
    assert!(nothing(default, "CloudLoadBalancers"), "cloud is the default");
    let mut unreferenced = cluster(json!({}));
    unreferenced.spec.provider_config_ref = None;
    assert!(nothing(run(&unreferenced, None, &[], &[]), "NoProviderConfig"));
    let missing = run(&cluster(json!({})), None, &[], &[]);
    assert_eq!(missing.condition.unwrap().reason, "ProviderConfigNotFound");
    assert!(!missing.ipam);
}

#[test]
fn the_size_follows_the_precedence_and_the_quota() {
    let cases = [
        (json!({}), json!({"mode": "ipam"}), 8),
        (json!({}), json!({"mode": "ipam", "loadBalancer": {"defaultPoolSize": 4}}), 4),
        (json!({"lbPoolSize": 16}), json!({"mode": "ipam", "loadBalancer": {"defaultPoolSize": 4}}), 16),
        (
            json!({"lbPoolSize": 16}),
            json!({"mode": "ipam", "quotaPerTenant": {"maxLoadBalancerIPs": 10}}),
            10,
        ),
        (
            json!({"lbPoolSize": 16}),
            json!({"mode": "ipam", "loadBalancer": {"allocationMode": "elastic"}}),
            2,
        ),
        (
            json!({}),
            json!({"mode": "ipam", "loadBalancer": {"allocationMode": "elastic", "initialPoolSize": 3}}),
            3,
        ),
    ];
    for (networking, network, size) in cases {
        assert_eq!(
            initial_size(&cluster(networking.clone()), &config(network.clone())),
            size,
            "{networking} {network}"
        );
    }
}

#[test]
fn the_first_pool_by_priority_with_room_gets_the_request() {
    let pc = config(serde_json::from_str(TWO_POOLS).unwrap());
    let planned = run(&cluster(json!({})), Some(&pc), &[pool("first", 20), pool("second", 100)], &[]);
    let created = planned.create[0].clone();
    assert_eq!(created.name_any(), "team-platform.prod-lb");
    assert_eq!(created.namespace().as_deref(), Some("butler-system"));
    assert_eq!(created.spec.pool_ref.name, "first");
    assert_eq!(created.spec.count, Some(8));
    let labels = created.labels();
    assert_eq!(labels[LABEL_TEAM], "team-platform");
    assert_eq!(labels[LABEL_TENANT], "prod");
    assert_eq!(labels[LABEL_NETWORK_POOL], "first");
    assert_eq!(labels[LABEL_ALLOCATION_TYPE], "loadbalancer");
    assert_eq!(labels[LABEL_ALLOCATION_ROLE], "initial");
    assert!(planned.ipam);
    // The first is too full: the second.
    let planned = run(&cluster(json!({})), Some(&pc), &[pool("first", 7), pool("second", 100)], &[]);
    assert_eq!(planned.create[0].spec.pool_ref.name, "second");
    // Neither: a condition with the figures.
    let planned = run(&cluster(json!({})), Some(&pc), &[pool("first", 7)], &[]);
    assert!(planned.create.is_empty());
    let condition = planned.condition.unwrap();
    assert_eq!(condition.reason, "NoPoolCapacity");
    assert_eq!(
        condition.message,
        "no NetworkPool of ProviderConfig butler-system/pc has 8 free addresses for load balancers (first, second missing); ask the platform for capacity",
        "a shared pool's figures are other teams' too"
    );
    // The team's own ProviderConfig and pools: the figures.
    let mut own = pc.clone();
    own.metadata.namespace = Some("team-platform".into());
    let mut mine = cluster(json!({}));
    mine.spec.provider_config_ref.as_mut().unwrap().namespace = None;
    let planned = run(&mine, Some(&own), &[pool("first", 7)], &[]);
    assert_eq!(
        planned.condition.unwrap().message,
        "no NetworkPool of ProviderConfig team-platform/pc has 8 free addresses for load balancers (first 7 free, second missing); add capacity or a pool"
    );
}

#[test]
fn an_allocated_block_is_reported_and_a_failed_one_moves_to_the_next_pool() {
    let pc = config(serde_json::from_str(TWO_POOLS).unwrap());
    let allocated = allocation(
        "team-platform.prod-lb",
        "first",
        json!({"phase": "Allocated", "startAddress": "10.0.0.8", "endAddress": "10.0.0.15",
               "conditions": [{"type": "Ready", "status": "True", "reason": "Allocated", "message": "10.0.0.8/29 (8 addresses) from NetworkPool butler-system/first", "lastTransitionTime": "2026-11-23T10:00:00Z"}]}),
    );
    let planned = run(&cluster(json!({})), Some(&pc), &[pool("first", 0)], std::slice::from_ref(&allocated));
    assert_eq!(planned.addresses, ["10.0.0.8-10.0.0.15"]);
    assert_eq!(planned.lb_allocation_ref.unwrap().name, "team-platform.prod-lb");
    let condition = planned.condition.unwrap();
    assert!(condition.status);
    assert_eq!(
        condition.message,
        "load balancers: 10.0.0.8/29 (8 addresses) from NetworkPool butler-system/first"
    );
    assert!(planned.create.is_empty());

    let failed = allocation("team-platform.prod-lb", "first", json!({"phase": "Failed"}));
    let planned = run(
        &cluster(json!({})),
        Some(&pc),
        &[pool("first", 8), pool("second", 100)],
        std::slice::from_ref(&failed),
    );
    assert_eq!(planned.delete, [("butler-system".to_string(), "team-platform.prod-lb".to_string())]);
    // No later pool with room: it stays, and says why.
    let planned = run(&cluster(json!({})), Some(&pc), &[pool("first", 8), pool("second", 2)], &[failed]);
    assert!(planned.delete.is_empty());
    assert_eq!(planned.condition.unwrap().reason, "AllocationFailed");
}

#[test]
fn cleanup_takes_each_allocation_of_the_cluster_once_and_nothing_else() {
    let c = cluster(json!({}));
    let initial = allocation("team-platform.prod-lb", "first", json!({}));
    let growth = allocation("team-platform.prod-lb-1", "first", json!({}));
    let mut foreign = allocation("someone-else", "first", json!({}));
    foreign.spec.tenant_cluster_ref.name = "other".into();
    let victims = cleanup(&c, &[&initial, &growth, &foreign], &[&initial]);
    assert_eq!(
        victims,
        [
            ("butler-system".to_string(), "team-platform.prod-lb".to_string()),
            ("butler-system".to_string(), "team-platform.prod-lb-1".to_string())
        ]
    );
}

#[test]
fn node_addresses_are_asked_when_the_cluster_wants_them_within_the_quota() {
    let pc =
        config(json!({"mode": "ipam", "poolRefs": [{"name": "first"}], "quotaPerTenant": {"maxNodeIPs": 5}}));
    let planned = run(&cluster(json!({"nodeIPs": 9})), Some(&pc), &[pool("first", 100)], &[]);
    let made: Vec<(String, String, Option<i32>)> = planned
        .create
        .iter()
        .map(|a| (a.name_any(), a.labels()[LABEL_ALLOCATION_TYPE].clone(), a.spec.count))
        .collect();
    assert_eq!(
        made,
        [
            ("team-platform.prod-lb".to_string(), "loadbalancer".to_string(), Some(8)),
            ("team-platform.prod-nodes".to_string(), "nodes".to_string(), Some(5))
        ]
    );
    // Ready only when both blocks are.
    let lb = allocation(
        "team-platform.prod-lb",
        "first",
        json!({"phase": "Allocated", "startAddress": "10.0.0.0", "endAddress": "10.0.0.7"}),
    );
    let mut nodes = allocation("team-platform.prod-nodes", "first", json!({"phase": "Pending"}));
    nodes.spec.type_ = AllocationType::Nodes;
    let planned =
        run(&cluster(json!({"nodeIPs": 9})), Some(&pc), &[pool("first", 100)], &[lb.clone(), nodes.clone()]);
    let condition = planned.condition.unwrap();
    assert!(!condition.status);
    assert!(condition.message.contains("team-platform.prod-nodes"), "{}", condition.message);
    assert_eq!(planned.ip_allocation_ref.unwrap().name, "team-platform.prod-nodes");
    nodes.status = lb.status.clone();
    let planned = run(&cluster(json!({"nodeIPs": 9})), Some(&pc), &[pool("first", 100)], &[lb, nodes]);
    assert!(planned.condition.unwrap().status);
    assert_eq!(planned.addresses, ["10.0.0.0-10.0.0.7"], "node blocks are not load-balancer addresses");
}

#[test]
fn a_long_cluster_name_gets_a_tenant_label_that_fits_and_stays_distinct() {
    let named = |name: &str| -> TenantCluster {
        serde_json::from_value(
            json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": name, "namespace": "team-a"}, "spec": {}}),
        )
        .unwrap()
    };
    assert_eq!(tenant_label(&named("web")), "web");
    let long = "a".repeat(80);
    let other = format!("{}b", "a".repeat(79));
    let (one, two) = (tenant_label(&named(&long)), tenant_label(&named(&other)));
    assert!(one.len() <= 63 && two.len() <= 63, "{one} {two}");
    assert_ne!(one, two);
    assert!(one.starts_with(&"a".repeat(54)), "{one}");
}

#[test]
fn allocation_names_never_meet_across_clusters_and_fit_a_name() {
    let named = |ns: &str, name: &str| -> TenantCluster {
        serde_json::from_value(
            json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": name, "namespace": ns}, "spec": {}}),
        )
        .unwrap()
    };
    // Joined with '-', both were `a-b-c-lb`.
    assert_eq!(initial_name(&named("a-b", "c")), "a-b.c-lb");
    assert_eq!(initial_name(&named("a", "b-c")), "a.b-c-lb");
    assert_eq!(nodes_name(&named("a", "b-c")), "a.b-c-nodes");
    let long = "x".repeat(253);
    let other = format!("{}y", "x".repeat(252));
    let (one, two) = (named(&"n".repeat(63), &long), named(&"n".repeat(63), &other));
    let growth = format!("{}-{}", initial_name(&one), u32::MAX);
    assert!(growth.len() <= 253, "{} characters", growth.len());
    assert_ne!(initial_name(&one), initial_name(&two));
    assert!(initial_name(&one).starts_with(&format!("{}.xxx", "n".repeat(63))));
}

#[test]
fn a_block_an_earlier_version_named_stays_the_clusters() {
    let pc = config(serde_json::from_str(TWO_POOLS).unwrap());
    let earlier = allocation(
        "team-platform-prod-lb",
        "first",
        json!({"phase": "Allocated", "startAddress": "10.0.0.8", "endAddress": "10.0.0.15"}),
    );
    let planned = run(&cluster(json!({})), Some(&pc), &[pool("first", 100)], std::slice::from_ref(&earlier));
    assert!(planned.create.is_empty(), "{:?}", planned.create);
    assert_eq!(planned.lb_allocation_ref.unwrap().name, "team-platform-prod-lb");
    assert_eq!(planned.addresses, ["10.0.0.8-10.0.0.15"]);
    // Another cluster's block of that name is not this one's: it gets today's name.
    let mut theirs = earlier.clone();
    theirs.spec.tenant_cluster_ref.name = "prod-other".into();
    let planned = run(&cluster(json!({})), Some(&pc), &[pool("first", 100)], &[theirs]);
    assert_eq!(planned.create[0].name_any(), "team-platform.prod-lb");
}

#[test]
fn a_missing_provider_config_is_reported_for_the_spec_it_was_seen_with() {
    let mut c = cluster(json!({}));
    c.metadata.generation = Some(2);
    assert!(!reported_missing(&c), "nothing said yet");
    let said = |generation: i64| {
        json!({"conditions": [{"type": "IPAMReady", "status": "False", "reason": "ProviderConfigNotFound",
            "message": "m", "lastTransitionTime": "2026-11-26T00:00:00Z", "observedGeneration": generation}]})
    };
    c.status = Some(serde_json::from_value(said(2)).unwrap());
    assert!(reported_missing(&c));
    c.status = Some(serde_json::from_value(said(1)).unwrap());
    assert!(!reported_missing(&c), "said of an earlier spec (another reference, perhaps)");
}
