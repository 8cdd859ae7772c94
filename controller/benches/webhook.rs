//! The TenantCluster admission decision with 1,000 TenantClusters in the team (the goal: under
//! 1 ms at p99). Prints the p50 and p99 of 10,000 decisions, then criterion's mean.

use std::time::{Duration, Instant};

use butler_controller::webhooks::tenantcluster::{Context, validate};
use butler_core::api::{ProviderConfig, Team, TenantCluster};
use criterion::{Criterion, criterion_group, criterion_main};

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_saphyr::from_str(text).expect("fixture parses")
}

fn fixtures() -> (Team, ProviderConfig, Vec<TenantCluster>, TenantCluster) {
    let team: Team = yaml(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {name: big}\nspec:\n  access: {}\n  resourceLimits: {maxClusters: 2000, maxNodesPerCluster: 50, maxTotalNodes: 100000, maxCPUCores: '100000', maxMemory: 400Ti, maxStorage: 2Pi, allowedKubernetesVersions: ['1.30.x', '1.31.x'], allowedProviders: [harvester], deniedAddons: [gpu-operator]}\n",
    );
    let config: ProviderConfig = yaml(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {name: pc, namespace: butler-system}\nspec:\n  provider: harvester\n  credentialsRef: {name: c}\n  harvester: {networkName: a/b}\n  limits: {maxClustersPerTeam: 2000, maxNodesPerTeam: 100000}\n",
    );
    let cluster = |i: usize| -> TenantCluster {
        yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: c{i}, namespace: team-big}}\nspec:\n  kubernetesVersion: 1.30.4\n  providerConfigRef: {{name: pc, namespace: butler-system}}\n  workers: {{replicas: 3, machineTemplate: {{cpu: '4', memory: 16Gi, diskSize: 100Gi}}}}\n  addons: [{{name: cilium}}]\n"
        ))
    };
    let others: Vec<TenantCluster> = (0..1000).map(cluster).collect();
    (team, config, others, cluster(1000))
}

fn decision(c: &mut Criterion) {
    let (team, config, others, new) = fixtures();
    let ctx = Context {
        team: Some(&team),
        config: Some(&config),
        others: others.iter().collect(),
        addresses: 0,
        held: 0,
    };
    assert_eq!(validate(&new, &ctx), Ok(()), "the fixture is admitted");

    let mut times: Vec<Duration> = (0..10_000)
        .map(|_| {
            let started = Instant::now();
            std::hint::black_box(validate(std::hint::black_box(&new), &ctx)).ok();
            started.elapsed()
        })
        .collect();
    times.sort();
    println!(
        "TenantCluster admission with 1,000 clusters in the team: p50 {:?}, p99 {:?} (goal: p99 under 1 ms)",
        times[times.len() / 2],
        times[times.len() * 99 / 100]
    );
    c.bench_function("tenantcluster admission, 1,000 clusters in the team", |b| {
        b.iter(|| validate(std::hint::black_box(&new), &ctx))
    });
}

criterion_group!(benches, decision);
criterion_main!(benches);
