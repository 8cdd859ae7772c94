//! Graceful shutdown: one signal that every task of a controller waits on.

use std::future::Future;

use futures::FutureExt;
use futures::future::{BoxFuture, Shared};

/// A shutdown signal every task can wait on.
pub type Shutdown = Shared<BoxFuture<'static, ()>>;

/// A shutdown signal from a future.
pub fn shutdown_on(signal: impl Future<Output = ()> + Send + 'static) -> Shutdown {
    signal.boxed().shared()
}

/// A shutdown signal and the switch that gives it (send `true`).
pub fn shutdown_switch() -> (tokio::sync::watch::Sender<bool>, Shutdown) {
    let (switch, mut stopped) = tokio::sync::watch::channel(false);
    let shutdown = shutdown_on(async move {
        let _ = stopped.wait_for(|s| *s).await;
    });
    (switch, shutdown)
}

/// Resolves when the process is asked to stop: SIGTERM (what Kubernetes sends) or Ctrl-C.
pub async fn termination() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the process");
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn every_waiter_hears_the_switch() {
        let (switch, shutdown) = shutdown_switch();
        let waiters: Vec<_> = (0..3).map(|_| tokio::spawn(shutdown.clone())).collect();
        switch.send(true).unwrap();
        for waiter in waiters {
            tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.unwrap().unwrap();
        }
    }
}
