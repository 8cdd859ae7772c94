//! The memory one TenantCluster review takes to decode: a team's ~1.9 MiB create with 150,000
//! addons `{name: a}` (under the API server's 2 MiB body limit; mutating webhooks see it before
//! the CRD's `maxItems` refuses it). Prints the heap's peak while the webhook decodes it straight
//! into the typed object, and while it decoded it as earlier versions did (a JSON tree, then the
//! typed object), then criterion's time for the first.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use butler_core::api::TenantCluster;
use criterion::{Criterion, criterion_group, criterion_main};
use kube::api::DynamicObject;
use kube::core::admission::AdmissionReview;

/// The system allocator, counting the bytes held and their peak.
struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let held = HELD.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
        PEAK.fetch_max(held, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// The heap's peak above what was held before, while `work` runs.
fn peak_of<T>(work: impl FnOnce() -> T) -> usize {
    let before = HELD.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let kept = work();
    let peak = PEAK.load(Ordering::Relaxed) - before;
    drop(kept);
    peak
}

fn review() -> Vec<u8> {
    let addons = vec![serde_json::json!({"name": "a"}); 150_000];
    let body = serde_json::json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
        "request": {
            "uid": "u", "operation": "CREATE", "name": "big", "namespace": "team-a",
            "kind": {"group": "butler.butlerlabs.dev", "version": "v1alpha1", "kind": "TenantCluster"},
            "resource": {"group": "butler.butlerlabs.dev", "version": "v1alpha1", "resource": "tenantclusters"},
            "userInfo": {"username": "member@example.com"},
            "object": {"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
                "metadata": {"name": "big", "namespace": "team-a"},
                "spec": {"providerConfigRef": {"name": "pc"}, "addons": addons}},
        }
    });
    serde_json::to_vec(&body).unwrap()
}

fn memory(c: &mut Criterion) {
    let body = review();
    let mib = |bytes: usize| bytes as f64 / (1024.0 * 1024.0);
    let typed = peak_of(|| butler_runtime::webhook::decode::<TenantCluster>(&body).unwrap().unwrap());
    let tree = peak_of(|| {
        let review: AdmissionReview<DynamicObject> = serde_json::from_slice(&body).unwrap();
        let object = review.request.unwrap().object.unwrap();
        let json = serde_json::to_value(&object).unwrap();
        let cluster: TenantCluster = serde_json::from_value(json).unwrap();
        (object, cluster)
    });
    println!(
        "one {:.1} MiB TenantCluster review of 150,000 addons: heap peak {:.1} MiB decoded into its kind (was {:.1} MiB through a JSON tree)",
        mib(body.len()),
        mib(typed),
        mib(tree)
    );
    c.bench_function("decode a 1.9 MiB TenantCluster review", |b| {
        b.iter(|| {
            butler_runtime::webhook::decode::<TenantCluster>(std::hint::black_box(&body)).unwrap().unwrap()
        })
    });
}

criterion_group!(benches, memory);
criterion_main!(benches);
