//! The flags every controller binary shares, and the settings they make.

use std::net::SocketAddr;

/// The flags every controller binary shares (`run` subcommands). Each also takes the name a
/// Cluster API manager gives it (`--metrics-bind-addr`, `--health-addr`, `--leader-elect`
/// without a value, `--v`), so that the provider operator's `manager` settings work on it.
#[derive(clap::Args, Clone, Debug)]
pub struct ProcessArgs {
    /// Where Prometheus metrics are served (`/metrics`), as `host:port` or `:port`; `0` turns
    /// them off. Cluster API managers call it `--diagnostics-address` (and, before v1.9,
    /// `--metrics-bind-addr`).
    #[arg(
        long,
        alias = "metrics-bind-addr",
        alias = "diagnostics-address",
        env = "BUTLER_METRICS_BIND_ADDRESS",
        default_value = "0.0.0.0:8443"
    )]
    pub metrics_bind_address: String,
    /// Serve `/metrics` over HTTPS to bearer tokens the API server authenticates (TokenReview)
    /// and authorizes for `get` on `/metrics` (SubjectAccessReview), as controller-runtime's
    /// secure metrics do; `false` serves plain HTTP to whoever reaches the port.
    #[arg(long, env = "BUTLER_METRICS_SECURE", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub metrics_secure: bool,
    /// Cluster API managers' spelling of `--metrics-secure=false`.
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub insecure_diagnostics: bool,
    /// A folder holding `tls.crt` and `tls.key` for the metrics server (a mounted Secret; read
    /// again when they change); without it a certificate made at start.
    #[arg(long, env = "BUTLER_METRICS_CERT_DIR", value_name = "DIR")]
    pub metrics_cert_dir: Option<std::path::PathBuf>,
    /// Where `/healthz` and `/readyz` are served, as `host:port` or `:port`.
    #[arg(
        long,
        alias = "health-addr",
        env = "BUTLER_HEALTH_PROBE_BIND_ADDRESS",
        default_value = "0.0.0.0:8081"
    )]
    pub health_probe_bind_address: String,
    /// Elect a leader among replicas on a Lease named after the binary; only the leader
    /// reconciles.
    #[arg(long, env = "BUTLER_LEADER_ELECT", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// The namespace of the Lease; default: the pod's namespace (POD_NAMESPACE), else the
    /// kubeconfig's.
    #[arg(long, env = "BUTLER_LEADER_ELECTION_NAMESPACE")]
    pub leader_election_namespace: Option<String>,
    /// How long the leader's lease lasts without renewal, in seconds: how long a standby
    /// replica waits when the leader dies without letting go.
    #[arg(long, env = "BUTLER_LEADER_ELECTION_LEASE_DURATION", default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..))]
    pub leader_election_lease_duration: u64,
    /// Log format: `text` or `json` (one JSON object a line). RUST_LOG sets the filter.
    #[arg(long, env = "BUTLER_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// Log verbosity when RUST_LOG is not set: 0 to 2 info, 3 to 4 debug, 5 and more trace.
    #[arg(long = "v", value_name = "LEVEL")]
    pub verbosity: Option<u8>,
}

/// An address as Go managers write it: `host:port`, or `:port` for every interface.
pub fn parse_address(flag: &str, text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') { format!("0.0.0.0{text}") } else { text.to_string() };
    full.parse::<SocketAddr>().map_err(|_| {
        format!("{flag} {text:?} is not host:port (for example 0.0.0.0:8080, or :8080 for every interface)")
    })
}

impl ProcessArgs {
    /// The settings of a process named `name` (its Lease and field manager for the lease), or
    /// what is wrong with the flags.
    pub fn settings(&self, name: &str) -> Result<Settings, String> {
        let metrics_address = match self.metrics_bind_address.as_str() {
            "0" => None,
            text => Some(
                parse_address("--metrics-bind-address", text)
                    .map_err(|e| format!("{e}, nor 0 to turn metrics off"))?,
            ),
        };
        Ok(Settings {
            name: name.into(),
            metrics_address,
            metrics_secure: self.metrics_secure && !self.insecure_diagnostics,
            metrics_cert_dir: self.metrics_cert_dir.clone(),
            health_address: parse_address("--health-probe-bind-address", &self.health_probe_bind_address)?,
            leader_elect: self.leader_elect,
            leader_election_namespace: self.leader_election_namespace.clone(),
            lease_duration: self.leader_election_lease_duration,
            json_logs: self.log_format == "json",
            verbosity: self.verbosity,
            identity: None,
        })
    }
}

/// How the process runs.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The controller's name: the Lease's, and the start of its field manager.
    pub name: String,
    /// Where `/metrics` is served; `None` turns it off.
    pub metrics_address: Option<SocketAddr>,
    /// `/metrics` over HTTPS, to tokens the API server authorizes ([`crate::secure_metrics`]).
    pub metrics_secure: bool,
    /// The metrics server's `tls.crt` and `tls.key`; one made at start when `None`.
    pub metrics_cert_dir: Option<std::path::PathBuf>,
    /// Where `/healthz` and `/readyz` are served.
    pub health_address: SocketAddr,
    /// Elect a leader among replicas on a Lease.
    pub leader_elect: bool,
    /// The namespace of the Lease; the pod's namespace when empty.
    pub leader_election_namespace: Option<String>,
    /// How long a leader's lease lasts without renewal, in seconds (at least 3): how long a
    /// standby waits when the leader dies without letting go.
    pub lease_duration: u64,
    /// Log lines as JSON objects.
    pub json_logs: bool,
    /// The `--v` level, for the log filter when RUST_LOG is not set.
    pub verbosity: Option<u8>,
    /// This replica's name in the Lease and in events; `None`: the pod's name (POD_NAME), else
    /// the host's name and the process ID.
    pub identity: Option<String>,
}
