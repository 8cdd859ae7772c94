//! The checks of a release of 10,000 objects (the most a components file may hold), before
//! anything is written: the release admission of the whole set (`admission::admit`) and the
//! inventory while it is applied and after (`while_applying`, `dropped_out`), against a
//! previous release of as many objects, half of them the same. Pure work, no API server.
//!
//! Measured: the time of each, at 1,000 and 10,000 objects; the summary line prints the ratio
//! (growth in n log n: about 13 for ten times the objects; quadratic: about 100).

use std::time::{Duration, Instant};

use butler_operator::controller::wanted::admission::admit;
use butler_operator::controller::wanted::policy::Policy;
use butler_runtime::inventory::{dropped_out, while_applying};
use butler_runtime::objects::ObjectRef;
use criterion::Criterion;
use serde_json::{Value, json};

const NAMESPACE: &str = "capi-system";

/// A release of `n` objects: ConfigMaps, Secrets, Services, ServiceAccounts and Roles with
/// their RoleBindings, as many of each; `offset` shifts the names (a release of another version).
fn release(n: usize, offset: usize) -> Vec<Value> {
    (0..n)
        .map(|i| {
            let name = format!("part-{}", i + offset);
            let meta = json!({"name": name, "namespace": NAMESPACE});
            match i % 6 {
                0 => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}),
                1 => json!({"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque"}),
                2 => json!({"apiVersion": "v1", "kind": "Service", "metadata": meta, "spec": {"ports": [{"port": 443}]}}),
                3 => json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta}),
                4 => json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
                            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
                _ => json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("part-{}", i + offset - 1)},
                            "subjects": [{"kind": "ServiceAccount", "name": format!("part-{}", i + offset - 2), "namespace": NAMESPACE}]}),
            }
        })
        .collect()
}

fn refs(objects: &[Value]) -> Vec<ObjectRef> {
    objects.iter().map(ObjectRef::of).collect()
}

/// The time of admission, and of the inventory's two sets, at `n` objects.
fn checks(n: usize) -> (Duration, Duration) {
    let objects = release(n, 0);
    let started = Instant::now();
    admit(&objects, NAMESPACE, &Policy::default(), None).expect("the release is admitted");
    let admitted = started.elapsed();
    let (previous, wanted) = (refs(&release(n, n / 2)), refs(&objects));
    let started = Instant::now();
    let during = while_applying(&previous, &wanted);
    let dropped = dropped_out(&previous, &wanted, &["CustomResourceDefinition", "Namespace"]);
    assert!(during.len() > n && !dropped.is_empty());
    (admitted, started.elapsed())
}

fn main() {
    let mut criterion = Criterion::default().configure_from_args().sample_size(10);
    for n in [1_000, 10_000] {
        criterion.bench_function(&format!("admission of {n} objects"), |b| {
            let objects = release(n, 0);
            b.iter(|| admit(&objects, NAMESPACE, &Policy::default(), None).unwrap())
        });
        criterion.bench_function(&format!("inventory of {n} objects"), |b| {
            let (previous, wanted) = (refs(&release(n, n / 2)), refs(&release(n, 0)));
            b.iter(|| (while_applying(&previous, &wanted), dropped_out(&previous, &wanted, &["Namespace"])))
        });
    }
    criterion.final_summary();
    let (small, large) = (checks(1_000), checks(10_000));
    let ratio = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64().max(1e-9);
    println!(
        "large release: admission {:.1} ms at 1,000, {:.1} ms at 10,000 (x{:.0}); inventory {:.2} ms, {:.2} ms (x{:.0}); n log n grows about x13, n² x100",
        small.0.as_secs_f64() * 1e3,
        large.0.as_secs_f64() * 1e3,
        ratio(small.0, large.0),
        small.1.as_secs_f64() * 1e3,
        large.1.as_secs_f64() * 1e3,
        ratio(small.1, large.1),
    );
}
