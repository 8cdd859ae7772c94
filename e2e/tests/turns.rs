//! Cluster-wide turns on a real cluster: a second scenario waits at a lock the first holds and
//! gets it when the first ends. An in-memory server on a runtime of its own plays the real
//! cluster.

use std::time::Duration;

use butler_e2e::Cluster;

mod common;

#[test]
fn a_second_scenario_waits_for_the_lock_the_first_holds() {
    let real = common::RealCluster::start();
    let kubeconfig = real.kubeconfig.clone();

    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        let first = Cluster::connect_to(&kubeconfig).await;
        first.exclusive("providers").await;
        let path = kubeconfig.clone();
        let second = tokio::spawn(async move {
            let second = Cluster::connect_to(&path).await;
            second.exclusive("providers").await;
            second
        });
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!second.is_finished(), "the second waits while the first holds the lock");
        drop(first);
        let second = tokio::time::timeout(Duration::from_secs(10), second)
            .await
            .expect("the second gets the lock once the first ends")
            .unwrap();
        // Taking it again is free for the holder.
        second.exclusive("providers").await;
        drop(second);
    });
    drop(real);
}
