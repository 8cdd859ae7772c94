//! Allocate-then-release on pools of every size, against a byte-per-address baseline that
//! rebuilds its bitmap for every request (the reference design), and the memory per allocation.
//!
//! Each pool holds N allocations of one address, each followed by a one-address hole: the worst
//! case for an interval allocator (2N+1 intervals). The measured step allocates 8 addresses (best
//! fit finds the tail block) and releases them. A /16 has room for at most 32,760 such
//! allocations, so its largest row holds that many instead of 100,000.
//!
//! After criterion's own report, a summary table is printed with the goals: at most 5 µs per
//! allocate-and-release at 100,000 allocations, at least 200 times faster than the baseline on
//! the /12, and at most 100 bytes per allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::time::Duration;

use butler_core::ipam::{Pool, PoolSpec};
use criterion::{BenchmarkId, Criterion};

/// Counts the bytes currently allocated, to measure a pool's memory.
struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const POOLS: [(&str, &str); 4] =
    [("v4/16", "10.0.0.0/16"), ("v4/12", "10.0.0.0/12"), ("v4/8", "10.0.0.0/8"), ("v6/64", "2001:db8::/64")];
const SIZES: [usize; 3] = [0, 1_000, 100_000];
/// Allocations with a hole after each that a pool of `total` addresses can hold, leaving room for
/// the measured request.
fn held(total: u128, wanted: usize) -> usize {
    wanted.min(((total - 16) / 2) as usize)
}

/// A pool over `cidr` holding `n` one-address allocations, each followed by a one-address hole.
fn fragmented_pool(cidr: &str, n: usize) -> Pool {
    let mut pool = Pool::new(PoolSpec::new(cidr.parse().unwrap())).unwrap();
    let singles: Vec<_> = (0..2 * n).map(|_| pool.allocate(1).unwrap()).collect();
    for hole in singles.iter().skip(1).step_by(2) {
        pool.release(hole.start(), hole.end()).unwrap();
    }
    pool
}

/// The reference design: a byte per allocatable address, rebuilt for every request from the
/// pool state, then scanned for free blocks and searched for the best fit.
struct BitmapBaseline {
    start: u32,
    end: u32,
    reserved: Vec<(u32, u32)>,
    existing: Vec<(u32, u32)>,
}

impl BitmapBaseline {
    fn allocate(&mut self, count: u32) -> Option<(u32, u32)> {
        let len = (self.end - self.start + 1) as usize;
        let mut used = vec![false; len];
        for (s, e) in self.reserved.iter().chain(&self.existing) {
            for addr in (*s).max(self.start)..=(*e).min(self.end) {
                used[(addr - self.start) as usize] = true;
            }
        }
        let mut blocks = Vec::new();
        let mut run: Option<usize> = None;
        for (i, taken) in used.iter().enumerate() {
            match (taken, run) {
                (false, None) => run = Some(i),
                (true, Some(s)) => {
                    blocks.push((s, i - 1));
                    run = None;
                }
                _ => {}
            }
        }
        if let Some(s) = run {
            blocks.push((s, len - 1));
        }
        let (s, _) = blocks
            .into_iter()
            .filter(|(s, e)| e - s + 1 >= count as usize)
            .min_by_key(|(s, e)| (e - s, *s))?;
        let found = (self.start + s as u32, self.start + s as u32 + count - 1);
        self.existing.push(found);
        Some(found)
    }

    fn release(&mut self, range: (u32, u32)) {
        let i = self.existing.iter().rposition(|r| *r == range).unwrap();
        self.existing.swap_remove(i);
    }

    fn from_pool(cidr: &str, pool: &Pool) -> BitmapBaseline {
        let net: ipnet::Ipv4Net = cidr.parse().unwrap();
        let v4 = |a: IpAddr| match a {
            IpAddr::V4(a) => u32::from(a),
            IpAddr::V6(_) => unreachable!(),
        };
        BitmapBaseline {
            start: u32::from(net.network()),
            end: u32::from(net.broadcast()),
            reserved: Vec::new(),
            existing: pool.allocations().iter().map(|a| (v4(a.start()), v4(a.end()))).collect(),
        }
    }
}

fn benches(c: &mut Criterion) {
    let mut group = c.benchmark_group("allocate_release");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3));
    for (name, cidr) in POOLS {
        for wanted in SIZES {
            let total = Pool::new(PoolSpec::new(cidr.parse().unwrap())).unwrap().stats().total;
            let mut pool = fragmented_pool(cidr, held(total, wanted));
            group.bench_function(BenchmarkId::new(name, wanted), |b| {
                b.iter(|| {
                    let a = pool.allocate(black_box(8)).unwrap();
                    pool.release(a.start(), a.end()).unwrap();
                })
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("baseline_allocate_release");
    group.warm_up_time(Duration::from_secs(1)).measurement_time(Duration::from_secs(3)).sample_size(10);
    for (name, cidr) in &POOLS[..2] {
        for wanted in SIZES {
            let total = Pool::new(PoolSpec::new(cidr.parse().unwrap())).unwrap().stats().total;
            let mut baseline = BitmapBaseline::from_pool(cidr, &fragmented_pool(cidr, held(total, wanted)));
            group.bench_function(BenchmarkId::new(*name, wanted), |b| {
                b.iter(|| {
                    let a = baseline.allocate(black_box(8)).unwrap();
                    baseline.release(a);
                })
            });
        }
    }
    group.finish();
}

/// Mean time of a finished benchmark, from criterion's estimates, in nanoseconds.
fn mean_ns(group: &str, name: &str, size: usize) -> Option<f64> {
    let home = std::env::var_os("CRITERION_HOME").map(PathBuf::from).unwrap_or_else(|| {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
        target.join("criterion")
    });
    let path =
        home.join(group).join(name.replace('/', "_")).join(size.to_string()).join("new/estimates.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64()
}

/// Bytes a pool of `n` allocations (each followed by a hole) holds, per allocation.
fn bytes_per_allocation(cidr: &str, n: usize) -> f64 {
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let pool = fragmented_pool(cidr, n);
    let bytes = LIVE_BYTES.load(Ordering::Relaxed) - before;
    drop(pool);
    bytes as f64 / n as f64
}

fn summary() {
    println!(
        "\nIPAM allocator: one allocate(8) + release, pools holding N allocations each followed by a hole"
    );
    println!(
        "| pool | N held | ours | baseline (bitmap rebuilt per request) | speed-up | bytes per allocation |"
    );
    println!("| --- | --- | --- | --- | --- | --- |");
    let mut goals_met = true;
    for (name, cidr) in POOLS {
        let total = Pool::new(PoolSpec::new(cidr.parse().unwrap())).unwrap().stats().total;
        for wanted in SIZES {
            let n = held(total, wanted);
            let ours = mean_ns("allocate_release", name, wanted);
            let base = mean_ns("baseline_allocate_release", name, wanted);
            let memory = if n > 0 { format!("{:.0}", bytes_per_allocation(cidr, n)) } else { "-".into() };
            let show = |ns: Option<f64>| match ns {
                Some(ns) if ns >= 1_000_000.0 => format!("{:.2} ms", ns / 1e6),
                Some(ns) if ns >= 1_000.0 => format!("{:.2} µs", ns / 1e3),
                Some(ns) => format!("{ns:.0} ns"),
                None => "-".into(),
            };
            let ratio = match (ours, base) {
                (Some(o), Some(b)) => format!("{:.0}x", b / o),
                _ => "-".into(),
            };
            println!("| {name} | {n} | {} | {} | {ratio} | {memory} |", show(ours), show(base));
            if wanted == 100_000 && ours.is_some_and(|o| o > 5_000.0) {
                goals_met = false;
            }
            if name == "v4/12" && wanted > 0 && matches!((ours, base), (Some(o), Some(b)) if b / o < 200.0) {
                goals_met = false;
            }
            if n > 0 && bytes_per_allocation(cidr, n) > 100.0 {
                goals_met = false;
            }
        }
    }
    println!(
        "goals (<= 5 µs at 100,000 allocations, >= 200x the baseline on the /12, <= 100 bytes per allocation): {}",
        if goals_met { "met" } else { "NOT met" }
    );
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args();
    benches(&mut criterion);
    criterion.final_summary();
    summary();
}
