//! Why a process stops with an error.

use std::net::SocketAddr;

/// Why the process stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("no cluster to talk to: {0}. Run in a pod, or set KUBECONFIG")]
    NoCluster(#[source] kube::Error),
    #[error("cannot serve {what} on {address}: {source}")]
    Listen { what: &'static str, address: SocketAddr, source: std::io::Error },
    #[error("leader election on the Lease {namespace}/{name}: {message}")]
    LeaderElection { namespace: String, name: String, message: String },
    #[error("lost the leader lease; stopping so that another replica takes over")]
    LostLeadership,
    #[error("the metrics server's certificate: {0}")]
    MetricsCertificate(String),
}
