//! `butler-operator`: the provider lifecycle operator.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "butler-operator", version, about = "Butler provider operator")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the operator: reconcile the provider objects of the cluster that KUBECONFIG (or the
    /// pod's service account) points at.
    Run(RunArgs),
    /// Print every CustomResourceDefinition (the provider kinds, then Butler's API) as one YAML
    /// stream, ready for `kubectl apply -f -`.
    Crds {
        /// Instead of printing, write one file per CRD into this folder, named
        /// `{group}_{plural}.yaml`, and remove files of CRDs that no longer exist.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Write the release shapes of Butler's provider repository (GitHub assets, a clusterctl
    /// local repository, air-gap ConfigMaps) from the repository this build carries.
    Release {
        /// The version to release; it must be the version of this build.
        #[arg(long, value_name = "vX.Y.Z")]
        version: String,
        /// The folder to write into.
        #[arg(long, value_name = "DIR", default_value = "out/release")]
        out: PathBuf,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    /// Where Prometheus metrics are served (`/metrics`); `0` turns them off.
    #[arg(long, env = "BUTLER_METRICS_BIND_ADDRESS", default_value = "0.0.0.0:8080")]
    metrics_bind_address: String,
    /// Where `/healthz` and `/readyz` are served.
    #[arg(long, env = "BUTLER_HEALTH_PROBE_BIND_ADDRESS", default_value = "0.0.0.0:8081")]
    health_probe_bind_address: SocketAddr,
    /// Elect a leader among replicas on the Lease `butler-operator`; only the leader reconciles.
    #[arg(long, env = "BUTLER_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    leader_elect: bool,
    /// The namespace of the Lease; default: the pod's namespace (POD_NAMESPACE), else the
    /// kubeconfig's.
    #[arg(long, env = "BUTLER_LEADER_ELECTION_NAMESPACE")]
    leader_election_namespace: Option<String>,
    /// How long the leader's lease lasts without renewal, in seconds: how long a standby
    /// replica waits when the leader dies without letting go.
    #[arg(long, env = "BUTLER_LEADER_ELECTION_LEASE_DURATION", default_value_t = 15, value_parser = clap::value_parser!(u64).range(3..))]
    leader_election_lease_duration: u64,
    /// Log format: `text` or `json` (one JSON object a line). RUST_LOG sets the filter.
    #[arg(long, env = "BUTLER_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    log_format: String,
    /// Read repositories from the cache alone, never from the network.
    #[arg(long, env = "BUTLER_OFFLINE")]
    offline: bool,
    /// The repository cache folder (default `$BUTLER_CACHE_DIR`, else `~/.cache/butler`).
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
    /// A clusterctl config file: its `providers` say where providers without a fetchConfig come
    /// from (a mirror, for air-gapped clusters), its `images` override every provider's images,
    /// `overridesFolder` replaces fetched files, and other keys are variables (after each
    /// provider's config Secret). Read at every reconcile.
    #[arg(long, env = "BUTLER_CONFIG", value_name = "FILE")]
    config: Option<PathBuf>,
    /// Reconciles of one provider kind that may run at once; 0 for no limit.
    #[arg(long, env = "BUTLER_CONCURRENCY", default_value_t = 4)]
    concurrency: u16,
}

fn run(args: RunArgs) -> ExitCode {
    let metrics_address = match args.metrics_bind_address.as_str() {
        "0" => None,
        text => match text.parse::<SocketAddr>() {
            Ok(address) => Some(address),
            Err(_) => {
                eprintln!(
                    "error: --metrics-bind-address {text:?} is not host:port (for example 0.0.0.0:8080), nor 0 to turn metrics off"
                );
                return ExitCode::from(2);
            }
        },
    };
    butler_operator::runtime::init_logging(args.log_format == "json");
    let settings = butler_operator::runtime::Settings {
        metrics_address,
        health_address: args.health_probe_bind_address,
        leader_elect: args.leader_elect,
        leader_election_namespace: args.leader_election_namespace,
        lease_duration: args.leader_election_lease_duration,
        offline: args.offline,
        cache_dir: args.cache_dir,
        concurrency: args.concurrency,
        config: args.config,
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(butler_operator::runtime::run(settings)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    // Only ring is compiled in; installing it explicitly keeps rustls from guessing.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(args),
        Command::Crds { dir: None } => {
            print!("{}", butler_core::crds::render_all(&butler_operator::crds::all()));
            ExitCode::SUCCESS
        }
        Command::Release { version, out } => match butler_operator::release::write_release(&out, &version) {
            Ok(files) => {
                println!("wrote {} files into {}", files.len(), out.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::FAILURE
            }
        },
        Command::Crds { dir: Some(dir) } => match butler_operator::crds::write_dir(&dir) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: cannot write the CRD files into {}: {e}", dir.display());
                ExitCode::FAILURE
            }
        },
    }
}
