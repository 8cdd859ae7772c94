//! A NetworkPool's status with 100,000 allocations: every held block loaded into the allocator
//! from the IPAllocations, waiting ones served (none here), figures and conditions planned, as
//! each reconcile of the pool does (the goal: under 50 ms).

use std::time::Instant;

use butler_controller::ipam::networkpool::{serve, spec, status};
use butler_core::api::{IPAllocation, NetworkPool};
use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

const ALLOCATIONS: u32 = 100_000;

fn fixtures() -> (NetworkPool, Vec<IPAllocation>) {
    let pool: NetworkPool = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
        "metadata": {"name": "big", "namespace": "butler-system", "generation": 1},
        "spec": {"cidr": "10.0.0.0/12", "reserved": [{"cidr": "10.0.0.0/24"}]},
    }))
    .unwrap();
    // Blocks of 1 to 4 addresses with a one-address hole after each: the most free blocks.
    let base = u32::from(std::net::Ipv4Addr::new(10, 0, 1, 0));
    let mut at = base;
    let allocations = (0..ALLOCATIONS)
        .map(|i| {
            let count = 1 + i % 4;
            let (start, end) = (std::net::Ipv4Addr::from(at), std::net::Ipv4Addr::from(at + count - 1));
            at += count + 1;
            serde_json::from_value(json!({
                "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "IPAllocation",
                "metadata": {"name": format!("a{i}"), "namespace": "butler-system", "uid": format!("u{i}"),
                    "resourceVersion": "1", "creationTimestamp": "2026-11-23T10:00:00Z"},
                "spec": {"poolRef": {"name": "big"}, "tenantClusterRef": {"name": format!("t{i}"), "namespace": "team-a"}, "type": "loadbalancer", "count": count},
                "status": {"phase": "Allocated", "startAddress": start.to_string(), "endAddress": end.to_string(),
                    "allocatedAt": "2026-11-23T10:00:01Z"},
            }))
            .unwrap()
        })
        .collect();
    (pool, allocations)
}

fn pool_status(pool: &NetworkPool, refs: &[&IPAllocation]) -> usize {
    let now = jiff::Timestamp::now();
    let served = serve::serve(pool, spec::allocator(pool).unwrap(), refs, now, "bench", usize::MAX);
    let stats = served.allocator.stats();
    let (status, _) =
        status::plan(pool, status::Shape::Valid { stats: &stats, problems: &served.problems }, now);
    status.conditions.len() + served.writes.len()
}

fn bench(c: &mut Criterion) {
    let (pool, allocations) = fixtures();
    let refs: Vec<&IPAllocation> = allocations.iter().collect();
    let started = Instant::now();
    let runs = 20;
    for _ in 0..runs {
        std::hint::black_box(pool_status(&pool, &refs));
    }
    let mean = started.elapsed() / runs;
    println!(
        "NetworkPool status with {ALLOCATIONS} allocations: {:.1} ms a reconcile (goal: under 50 ms: {})",
        mean.as_secs_f64() * 1000.0,
        if mean.as_millis() < 50 { "met" } else { "NOT met" }
    );
    c.bench_function("networkpool status, 100,000 allocations", |b| b.iter(|| pool_status(&pool, &refs)));
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = bench
}
criterion_main!(benches);
