//! Cluster-wide turns for scenarios on a real cluster: a Lease in `default` per lock, held by
//! one run at a time, with an expiry so that a run that crashed frees it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams, Preconditions};
use serde_json::json;

/// Where the locks' Leases live: every cluster has it.
const NAMESPACE: &str = "default";
/// How long a turn may last without its holder letting go.
const EXPIRY: Duration = Duration::from_secs(600);
/// How long a scenario waits for its turn before it gives up.
const PATIENCE: Duration = Duration::from_secs(1800);

pub fn lease_name(lock: &str) -> String {
    format!("butler-e2e-{lock}")
}

fn lease(name: &str, holder: &str, resource_version: Option<String>) -> Lease {
    let now = Timestamp::now().strftime("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
    let mut lease: Lease = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": EXPIRY.as_secs(),
            "acquireTime": now, "renewTime": now},
    }))
    .expect("a Lease");
    lease.metadata.resource_version = resource_version;
    lease
}

/// Whether a Lease is free for `holder`: nobody holds it, `holder` does, or the turn expired.
fn free_for(lease: &Lease, holder: &str) -> bool {
    let Some(spec) = &lease.spec else { return true };
    let held_by = spec.holder_identity.as_deref().unwrap_or_default();
    let duration = spec.lease_duration_seconds.unwrap_or_default();
    let expired = spec
        .renew_time
        .as_ref()
        .is_none_or(|t| t.0.as_second() + i64::from(duration) < Timestamp::now().as_second());
    held_by.is_empty() || held_by == holder || expired
}

/// Waits for the turn of `holder` at `lock`, then holds it.
pub async fn acquire(client: &Client, lock: &str, holder: &str) {
    let api: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let name = lease_name(lock);
    let started = std::time::Instant::now();
    loop {
        let taken = match api.get_opt(&name).await {
            Ok(None) => api.create(&PostParams::default(), &lease(&name, holder, None)).await.is_ok(),
            Ok(Some(current)) if free_for(&current, holder) => {
                let version = current.metadata.resource_version.clone();
                api.replace(&name, &PostParams::default(), &lease(&name, holder, version)).await.is_ok()
            }
            Ok(Some(_)) => false,
            Err(e) => panic!("the lock {lock} (Lease {NAMESPACE}/{name}): {e}"),
        };
        if taken {
            return;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "the lock {lock} (Lease {NAMESPACE}/{name}) was not free within {PATIENCE:?}; if no run holds it, delete the Lease"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Lets go of `lock` if `holder` holds it (a turn that expired and went to another stays).
pub async fn release(client: &Client, lock: &str, holder: &str) {
    let api: Api<Lease> = Api::namespaced(client.clone(), NAMESPACE);
    let name = lease_name(lock);
    let Ok(Some(current)) = api.get_opt(&name).await else { return };
    if current.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) != Some(holder) {
        return;
    }
    let preconditions = Preconditions {
        uid: current.metadata.uid.clone(),
        resource_version: current.metadata.resource_version.clone(),
    };
    let _ =
        api.delete(&name, &DeleteParams { preconditions: Some(preconditions), ..Default::default() }).await;
}
