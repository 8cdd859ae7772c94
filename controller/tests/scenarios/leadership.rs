//! Two replicas of the controller under the core components' own RBAC, as a real install runs
//! them: one takes the Lease and reconciles, the other waits; when the leader is killed (no
//! graceful release of the Lease), the other takes over within the lease time.

use std::sync::Arc;
use std::time::{Duration, Instant};

use butler_core::api::ProviderConfig;
use butler_runtime::metrics::Metrics;
use butler_runtime::process::{Settings, Started, run_with};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;
use tokio::sync::watch;

use crate::shipped::{ACCOUNT, install};
use crate::support::{Scenario, create, wait_for};

const LEASE_SECONDS: u64 = 3;

/// A replica in a runtime of its own, so that killing it stops every task it has at once,
/// the Lease's renewal included, as a killed process would.
struct Replica {
    runtime: Option<tokio::runtime::Runtime>,
    leading: watch::Receiver<bool>,
}

impl Replica {
    fn start(s: &Scenario, identity: &str, ns: &str, config: kube::Config) -> Replica {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a runtime for the replica");
        let (leads, leading) = watch::channel(false);
        let settings = Settings {
            name: "butler-controller".into(),
            metrics_address: None,
            metrics_secure: false,
            metrics_cert_dir: None,
            health_address: "127.0.0.1:0".parse().expect("an address"),
            leader_elect: true,
            leader_election_namespace: Some(ns.into()),
            lease_duration: LEASE_SECONDS,
            json_logs: false,
            verbosity: None,
            identity: Some(identity.into()),
        };
        let options = s.options(identity);
        runtime.spawn(async move {
            let client = kube::Client::try_from(config).expect("a client for the account");
            let metrics = Arc::new(Metrics::new("butler_controller", |_| {}));
            let start = {
                let metrics = metrics.clone();
                move |leading: butler_runtime::process::Leading| {
                    let _ = leads.send(true);
                    let controllers =
                        butler_controller::start(leading.client, metrics, options, leading.shutdown);
                    Started { run: controllers.run, ready: controllers.ready }
                }
            };
            let outcome =
                run_with(client, std::future::pending(), settings, metrics, |_, _| Started::nothing(), start)
                    .await;
            eprintln!("the replica stopped: {outcome:?}");
        });
        Replica { runtime: Some(runtime), leading }
    }

    fn leads(&self) -> bool {
        *self.leading.borrow()
    }

    /// Stops every task of the replica where it is.
    fn kill(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases.get_opt("butler-controller").await.ok()??.spec?.holder_identity
}

/// A ProviderConfig reconciled by whoever leads: its finalizer and status are written.
async fn reconciled(s: &Scenario, ns: &str, name: &str) {
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), ns);
    create(
        &configs,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: missing}}\n  aws: {{region: eu-west-1}}\n"),
    )
    .await;
    wait_for(&configs, name, "reconciled by the leader", |c| {
        c.and_then(|c| c.status.as_ref()).is_some_and(|st| st.observed_generation.is_some())
    })
    .await;
}

#[tokio::test]
async fn one_replica_leads_under_the_shipped_rbac_and_the_other_takes_over_when_it_is_killed() {
    let mut s = Scenario::start().await;
    s.kill_controllers();
    let ns = s.namespace("lead").await;
    install(&s.cluster, &ns).await;
    let config_a = s.cluster.service_account_config("butler-controller-a", &ns, ACCOUNT).await;
    let mut first = Replica::start(&s, "replica-a", &ns, config_a);
    let leases: Api<Lease> = Api::namespaced(s.client.clone(), &ns);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !first.leads() {
        assert!(Instant::now() < deadline, "replica-a never led; the Lease: {:?}", holder(&leases).await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let config_b = s.cluster.service_account_config("butler-controller-b", &ns, ACCOUNT).await;
    let second = Replica::start(&s, "replica-b", &ns, config_b);
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-a"));
    reconciled(&s, &ns, "first").await;
    tokio::time::sleep(Duration::from_secs(LEASE_SECONDS)).await;
    assert!(!second.leads(), "a standby waits while the leader renews its lease");

    first.kill();
    let killed = Instant::now();
    // The lease runs out, then the standby's next try takes it.
    let limit = Duration::from_secs(LEASE_SECONDS * 2 + 2);
    while !second.leads() {
        assert!(killed.elapsed() < limit, "replica-b did not take over within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("replica-b took over {:?} after replica-a was killed", killed.elapsed());
    assert_eq!(holder(&leases).await.as_deref(), Some("replica-b"));
    reconciled(&s, &ns, "second").await;
}
