use super::*;
use serde_json::{Value, json};

fn team(spec: &str) -> Team {
    serde_saphyr::from_str(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: a}}\nspec:\n  access: {{}}\n{spec}"
    ))
    .unwrap()
}

fn cluster(name: &str, spec: &str) -> TenantCluster {
    serde_saphyr::from_str(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: team-a}}\nspec:\n  kubernetesVersion: 1.30.4\n  providerConfigRef: {{name: pc, namespace: butler-system}}\n{spec}"
    ))
    .unwrap()
}

fn config(spec: &str) -> ProviderConfig {
    serde_saphyr::from_str(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc, namespace: butler-system}}\nspec:\n  provider: harvester\n  credentialsRef: {{name: c}}\n{spec}"
    ))
    .unwrap()
}

#[test]
fn a_provider_config_of_another_teams_namespace_is_refused_before_it_is_known() {
    let theirs = serde_saphyr::from_str::<TenantCluster>("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {name: c, namespace: team-a}\nspec:\n  providerConfigRef: {name: pc, namespace: team-b}\n").unwrap();
    let ctx = Context { config: None, ..Default::default() };
    let refused = validate(&theirs, &ctx).unwrap_err();
    assert!(
        refused.contains("the ProviderConfig team-b/pc is in the namespace of the team \"b\""),
        "{refused}"
    );
    // Re-pointed there on an update too.
    let before = cluster("c", "");
    assert!(validate_update(&before, &theirs, &ctx).is_err());
    // The platform's, and the team's own, pass while unknown.
    assert_eq!(validate(&cluster("c", ""), &ctx), Ok(()));
    let own = serde_saphyr::from_str::<TenantCluster>("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {name: c, namespace: team-a}\nspec:\n  providerConfigRef: {name: pc}\n").unwrap();
    assert_eq!(validate(&own, &ctx), Ok(()));
}

#[test]
fn versions_match_patterns() {
    assert!(version_allowed("1.30.4", "1.30.x"));
    assert!(version_allowed("v1.30.4", "1.30.x"));
    assert!(version_allowed("1.30.4+rke2r1", "1.30.4"));
    assert!(!version_allowed("1.31.0", "1.30.x"));
    assert!(!version_allowed("1.3", "1.30.x"));
}

#[test]
fn limits_name_the_use_the_request_and_the_limit() {
    let t = team(
        "  resourceLimits: {maxClusters: 2, maxNodesPerCluster: 5, maxTotalNodes: 8, maxCPUCores: '20', maxMemory: 64Gi}\n",
    );
    let existing = cluster("one", "  workers: {replicas: 4, machineTemplate: {cpu: '4', memory: 8Gi}}\n");
    let ctx = Context { team: Some(&t), config: None, others: vec![&existing], ..Default::default() };
    let cases: &[(&str, Result<(), &str>)] = &[
        ("  workers: {replicas: 2, machineTemplate: {cpu: '1', memory: 4Gi}}\n", Ok(())),
        (
            "  workers: {replicas: 6}\n",
            Err(
                "TenantCluster team-a/new would exceed the Team's maxNodesPerCluster: 0 in use, 6 requested, limit 5; lower the request, remove a cluster, or raise the limit",
            ),
        ),
        (
            "  workers: {replicas: 5}\n",
            Err(
                "TenantCluster team-a/new would exceed the Team's maxTotalNodes: 4 in use, 5 requested, limit 8; lower the request, remove a cluster, or raise the limit",
            ),
        ),
        (
            "  workers: {replicas: 1, machineTemplate: {cpu: '5'}}\n",
            Err(
                "TenantCluster team-a/new would exceed the Team's maxCPUCores: 16 in use, 5 requested, limit 20; lower the request, remove a cluster, or raise the limit",
            ),
        ),
        (
            "  workers: {replicas: 2, machineTemplate: {memory: 20Gi}}\n",
            Err(
                "TenantCluster team-a/new would exceed the Team's maxMemory: 32Gi in use, 40Gi requested, limit 64Gi; lower the request, remove a cluster, or raise the limit",
            ),
        ),
    ];
    for (spec, expected) in cases {
        let got = validate(&cluster("new", spec), &ctx);
        assert_eq!(got.as_ref().map_err(String::as_str), expected.as_ref().map_err(|e| *e), "{spec}");
    }
    let two = cluster("two", "  workers: {replicas: 1}\n");
    let full = Context { team: Some(&t), config: None, others: vec![&existing, &two], ..Default::default() };
    assert!(
        validate(&cluster("three", "  workers: {replicas: 1}\n"), &full)
            .unwrap_err()
            .contains("maxClusters: 2 in use, 1 requested, limit 2")
    );
    let no_team = Context { team: None, config: None, others: vec![], ..Default::default() };
    assert_eq!(validate(&cluster("x", "  workers: {replicas: 99}\n"), &no_team), Ok(()));
}

#[test]
fn a_team_takes_no_more_of_the_shared_pools_than_its_address_limit() {
    let t = team("  resourceLimits: {maxIPAddresses: 16}\n");
    let pc = config(
        "  harvester: {networkName: a/b}\n  network: {mode: ipam, poolRefs: [{name: lab}], loadBalancer: {defaultPoolSize: 4}}\n",
    );
    let with =
        |used: i64| Context { team: Some(&t), config: Some(&pc), others: vec![], addresses: used, held: 0 };
    let big = cluster("big", "  networking: {lbPoolSize: 12, nodeIPs: 3}\n");
    assert_eq!(
        validate(&big, &with(4)).unwrap_err(),
        "TenantCluster team-a/big would exceed the Team's maxIPAddresses: 4 in use, 15 requested, limit 16; lower the request, remove a cluster, or raise the limit"
    );
    assert_eq!(validate(&big, &with(1)), Ok(()));
    assert_eq!(validate(&cluster("small", ""), &with(12)), Ok(()), "the config's default of 4");
    // Growing is checked; shrinking is not.
    let grown = cluster("big", "  networking: {lbPoolSize: 13, nodeIPs: 3}\n");
    assert!(validate_update(&big, &grown, &with(1)).unwrap_err().contains("maxIPAddresses"));
    assert_eq!(validate_update(&grown, &big, &with(16)), Ok(()));
    // Cloud mode takes no pool addresses.
    let cloud = config("  harvester: {networkName: a/b}\n  network: {mode: cloud}\n");
    let ctx = Context { team: Some(&t), config: Some(&cloud), others: vec![], addresses: 16, held: 0 };
    assert_eq!(validate(&big, &ctx), Ok(()));
    // Re-pointed at a cloud-mode config, a cluster still counts the blocks it holds until they
    // are given back: it cannot free the team's room while it keeps them.
    let mut moved = big.clone();
    moved.spec.provider_config_ref.as_mut().unwrap().name = "cloud".into();
    let holding =
        |held: i64| Context { team: Some(&t), config: Some(&cloud), others: vec![], addresses: 4, held };
    assert_eq!(
        validate_update(&big, &moved, &holding(15)).unwrap_err(),
        "TenantCluster team-a/big would exceed the Team's maxIPAddresses: 4 in use, 15 requested, limit 16; lower the request, remove a cluster, or raise the limit"
    );
    assert_eq!(validate_update(&big, &moved, &holding(12)), Ok(()));
}

#[test]
fn re_pointing_counts_against_the_new_config_and_an_unknown_config_is_no_way_past_the_providers() {
    let t = team("  resourceLimits:\n    allowedProviders: [harvester]\n");
    let full = config("  harvester: {networkName: a/b}\n  limits: {maxClustersPerTeam: 1}\n");
    let there = cluster("there", "");
    let moved = cluster("moved", "  workers: {replicas: 1}\n");
    let mut before = moved.clone();
    before.spec.provider_config_ref.as_mut().unwrap().name = "other".into();
    let ctx = Context { team: Some(&t), config: Some(&full), others: vec![&there], ..Default::default() };
    assert!(
        validate_update(&before, &moved, &ctx)
            .unwrap_err()
            .contains("maxClustersPerTeam: 1 in use, 1 requested"),
        "re-pointed at a full ProviderConfig"
    );
    let unknown = Context { team: Some(&t), config: None, others: vec![], ..Default::default() };
    let refused = validate(&cluster("c", ""), &unknown).unwrap_err();
    assert!(
        refused.contains("the team allows the providers harvester only, and the ProviderConfig butler-system/pc of spec.providerConfigRef does not exist (yet)"),
        "{refused}"
    );
    let open = team("");
    let ctx = Context { team: Some(&open), config: None, others: vec![], ..Default::default() };
    assert_eq!(validate(&cluster("c", ""), &ctx), Ok(()), "no provider restriction: nothing to check");
}

#[test]
fn feature_restrictions_and_provider_limits() {
    let t = team(
        "  resourceLimits:\n    allowedKubernetesVersions: ['1.29.x']\n    allowedProviders: [nutanix]\n    allowedAddons: [cilium, longhorn]\n    deniedAddons: [longhorn]\n",
    );
    let pc =
        config("  harvester: {networkName: a/b}\n  limits: {maxClustersPerTeam: 1, maxNodesPerTeam: 4}\n");
    let ctx = Context { team: Some(&t), config: Some(&pc), others: vec![], ..Default::default() };
    assert!(
        validate(&cluster("c", ""), &ctx)
            .unwrap_err()
            .contains("Kubernetes \"1.30.4\" is not allowed in this team; allowed: 1.29.x")
    );
    let t = team("  resourceLimits:\n    allowedProviders: [nutanix]\n");
    let ctx = Context { team: Some(&t), config: Some(&pc), others: vec![], ..Default::default() };
    assert!(
        validate(&cluster("c", ""), &ctx)
            .unwrap_err()
            .contains("the provider harvester is not allowed in this team; allowed: nutanix")
    );
    let t = team("  resourceLimits:\n    allowedAddons: [cilium, longhorn]\n    deniedAddons: [longhorn]\n");
    let ctx = Context { team: Some(&t), config: Some(&pc), others: vec![], ..Default::default() };
    assert!(
        validate(&cluster("c", "  addons: [{name: LongHorn}]\n"), &ctx).unwrap_err().contains("denied"),
        "names compare without case"
    );
    assert_eq!(validate(&cluster("c", "  addons: [{name: Cilium}]\n"), &ctx), Ok(()));
    assert!(
        validate(&cluster("c", "  addons: [{name: longhorn}]\n"), &ctx)
            .unwrap_err()
            .contains("the addon longhorn is denied"),
        "denied wins over allowed"
    );
    assert!(
        validate(&cluster("c", "  addons: [{name: istio}]\n"), &ctx)
            .unwrap_err()
            .contains("the addon istio is not allowed in this team; allowed: cilium, longhorn")
    );
    let on_pc = cluster("one", "  workers: {replicas: 2}\n");
    let elsewhere = serde_saphyr::from_str::<TenantCluster>("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {name: other, namespace: team-a}\nspec:\n  providerConfigRef: {name: another}\n  workers: {replicas: 9}\n").unwrap();
    let plain = team("");
    let ctx = Context {
        team: Some(&plain),
        config: Some(&pc),
        others: vec![&on_pc, &elsewhere],
        ..Default::default()
    };
    assert!(
        validate(&cluster("c", "  workers: {replicas: 1}\n"), &ctx)
            .unwrap_err()
            .contains("the ProviderConfig pc's maxClustersPerTeam: 1 in use, 1 requested, limit 1")
    );
    assert!(uses(&on_pc, &pc) && !uses(&elsewhere, &pc));
}

#[test]
fn an_update_is_checked_only_for_what_it_raises_or_changes() {
    // The limits were lowered under the team's clusters: 8 nodes in use, 4 allowed now.
    let t = team("  resourceLimits: {maxTotalNodes: 4, allowedKubernetesVersions: ['1.30.x']}\n");
    let other = cluster("other", "  workers: {replicas: 4}\n");
    let ctx = Context { team: Some(&t), config: None, others: vec![&other], ..Default::default() };
    let old = cluster("web", "  workers: {replicas: 4}\n");
    assert_eq!(validate_update(&old, &old, &ctx), Ok(()), "an unchanged spec");
    let smaller = cluster("web", "  workers: {replicas: 2}\n");
    assert_eq!(validate_update(&old, &smaller, &ctx), Ok(()), "scaling down is always allowed");
    let larger = cluster("web", "  workers: {replicas: 5}\n");
    let refused = validate_update(&old, &larger, &ctx).unwrap_err();
    assert!(refused.contains("maxTotalNodes: 4 in use, 5 requested, limit 4"), "{refused}");
    let was = cluster("web", "  workers: {replicas: 4, machineTemplate: {cpu: '4'}}\n");
    let bigger_machines = cluster("web", "  workers: {replicas: 4, machineTemplate: {cpu: '8'}}\n");
    assert!(validate_update(&was, &bigger_machines, &ctx).is_err(), "larger machines raise usage");
    // A version the team may no longer use stays, until it is changed.
    let mut old_version = cluster("web", "  workers: {replicas: 4}\n");
    old_version.spec.kubernetes_version = Some("1.29.1".into());
    let mut down = old_version.clone();
    down.spec.workers.as_mut().unwrap().replicas = Some(1);
    assert_eq!(validate_update(&old_version, &down, &ctx), Ok(()));
    let mut moved = old_version.clone();
    moved.spec.kubernetes_version = Some("1.29.2".into());
    let refused = validate_update(&old_version, &moved, &ctx).unwrap_err();
    assert!(refused.contains("is not allowed in this team"), "{refused}");
}

#[test]
fn sizes_must_be_positive_quantities() {
    let t = team("  resourceLimits: {maxCPUCores: '8'}\n");
    let ctx = Context { team: Some(&t), config: None, others: vec![], ..Default::default() };
    for (spec, field) in [
        ("  workers: {replicas: 1, machineTemplate: {cpu: lots}}\n", "cpu \"lots\""),
        ("  workers: {replicas: 1, machineTemplate: {cpu: '-4'}}\n", "cpu \"-4\""),
        ("  workers: {replicas: 1, machineTemplate: {memory: '0'}}\n", "memory \"0\""),
        ("  workers: {replicas: 1, machineTemplate: {diskSize: 10XB}}\n", "diskSize \"10XB\""),
    ] {
        let refused = validate(&cluster("c", spec), &ctx).unwrap_err();
        assert!(
            refused.starts_with(&format!(
                "TenantCluster team-a/c: spec.workers.machineTemplate.{field} is not a positive quantity"
            )),
            "{refused}"
        );
    }
    let refused = validate(&cluster("c", "  workers: {replicas: -3}\n"), &ctx).unwrap_err();
    assert!(refused.contains("spec.workers.replicas -3 is negative"), "{refused}");
    assert_eq!(
        validate(
            &cluster("c", "  workers: {replicas: 1, machineTemplate: {cpu: 500m, memory: 2Gi}}\n"),
            &ctx
        ),
        Ok(())
    );
}

#[test]
fn defaults_fill_only_what_is_empty() {
    let t = team(
        "  providerConfigRef: {name: team-pc}\n  resourceLimits: {defaultNodeCount: 2, defaultCPUPerNode: '2'}\n  clusterDefaults: {kubernetesVersion: 1.30.4, workerMemoryGi: 16, workerDiskGi: 100, defaultAddons: [cilium]}\n",
    );
    let bare: TenantCluster = serde_saphyr::from_str("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {name: c, namespace: team-a}\nspec: {}\n").unwrap();
    let mut object = serde_json::to_value(&bare).unwrap();
    let patch: json_patch::Patch = serde_json::from_value(Value::Array(defaults(&bare, &t))).unwrap();
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(
        object["spec"],
        json!({"providerConfigRef": {"name": "team-pc"}, "kubernetesVersion": "1.30.4",
               "workers": {"replicas": 2, "machineTemplate": {"cpu": "2", "memory": "16Gi", "diskSize": "100Gi"}},
               "addons": [{"name": "cilium"}]})
    );
    let full = cluster(
        "c",
        "  workers: {replicas: 5, machineTemplate: {cpu: '8', memory: 1Gi, diskSize: 1Gi}}\n  addons: [{name: x}]\n",
    );
    assert_eq!(defaults(&full, &t), Vec::<Value>::new());
}
