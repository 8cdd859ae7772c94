//! `butler-controller`: Butler's core controllers.

use std::process::ExitCode;
use std::sync::Arc;

use butler_controller::{Options, start};
use butler_core::api::labels::FIELD_MANAGER;
use butler_runtime::metrics::Metrics;
use butler_runtime::process::Started;
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "butler-controller", version, about = "Butler's core controllers: Team and ProviderConfig")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the controllers against the cluster that KUBECONFIG (or the pod's service account)
    /// points at.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    process: butler_runtime::process::ProcessArgs,
    /// Reconciles of one kind that may run at once; 0 for no limit.
    #[arg(long, alias = "max-concurrent-reconciles", env = "BUTLER_CONCURRENCY", default_value_t = 4)]
    concurrency: u16,
}

fn run(args: RunArgs) -> ExitCode {
    let settings = match args.process.settings(FIELD_MANAGER) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    butler_runtime::process::init_logging(settings.json_logs, settings.verbosity);
    let metrics = Arc::new(Metrics::new("butler_controller", |_| {}));
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let process = butler_runtime::process::run(settings, metrics.clone(), move |leading| {
        let options = Options { instance: leading.instance, concurrency: args.concurrency };
        let controllers = start(leading.client, metrics, options, leading.shutdown);
        Started { run: controllers.run, ready: controllers.ready }
    });
    match runtime.block_on(process) {
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
    match Cli::parse().command {
        Command::Run(args) => run(args),
    }
}
