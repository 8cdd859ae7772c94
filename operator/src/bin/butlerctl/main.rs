//! `butlerctl`: Butler's command line. The commands and their flags are in [`flags`]; what
//! each command does with a cluster is in [`commands`] (the work itself in the library's `cli`).

mod commands;
mod flags;

use std::process::ExitCode;

use butler_operator::cli::{self, ClusterArgs, ProviderArgs, ProviderChoice, PublishArgs};
use clap::{Parser, Subcommand};

use commands::{airgap, apply, delete, describe, init, migrate, plan};
use flags::*;

#[derive(Parser)]
#[command(name = "butlerctl", version, about = "Butler's command line")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate YAML, as `clusterctl generate` does.
    Generate {
        #[command(subcommand)]
        what: Generate,
    },
    /// Install the operator when it is missing, then the providers, each with a config Secret of
    /// the variables its components use; running it twice changes nothing.
    Init(InitFlags),
    /// Show the providers of a cluster.
    Describe {
        #[command(subcommand)]
        what: Describe,
    },
    /// Plan (and apply) provider upgrades, as clusterctl upgrade does.
    Upgrade {
        #[command(subcommand)]
        what: Upgrade,
    },
    /// Delete providers in the safe order (the core provider last), waiting for each.
    Delete(DeleteFlags),
    /// Move a cluster from cluster-api-operator to this operator without restarting a provider:
    /// scale the old operator to 0, carry every provider object over, wait until each is Ready
    /// under this operator, then remove the old object. Safe to run again.
    Migrate(MigrateFlags),
    /// Carry providers into an air-gapped cluster: pack on the connected side, load on the other.
    Airgap {
        #[command(subcommand)]
        what: Airgap,
    },
    /// Push provider releases to an OCI registry, one artifact per provider (credentials from
    /// OCI_USERNAME and OCI_PASSWORD or OCI_ACCESS_TOKEN; OCI_INSECURE_REGISTRIES for plain HTTP).
    Publish(PublishFlags),
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let what = match Cli::parse().command {
        Command::Generate { what } => what,
        Command::Describe { what: Describe::Providers { namespace, output, cluster } } => {
            return finish(describe(namespace, &output, &cluster).await);
        }
        Command::Upgrade { what: Upgrade::Plan { target, namespace, diff, config, timeout, cluster } } => {
            return finish(plan(target, namespace, diff, config, timeout, &cluster).await);
        }
        Command::Upgrade { what: Upgrade::Apply(f) } => {
            return finish(apply(f).await);
        }
        Command::Upgrade { what: Upgrade::Rollback { name, namespace, cluster } } => {
            let rolled = async {
                let client = cluster.client().await?;
                let stdout = cli::upgrades::rollback(&client, &namespace, &name)
                    .await
                    .map_err(cli::GenerateError::Cluster)?;
                Ok(cli::Output { stdout, stderr: Vec::new() })
            };
            return finish(rolled.await);
        }
        Command::Upgrade { what: Upgrade::Approve { name, namespace, cluster } } => {
            let approved = async {
                let client = cluster.client().await?;
                let stdout = cli::upgrades::approve(&client, &namespace, &name)
                    .await
                    .map_err(cli::GenerateError::Cluster)?;
                Ok(cli::Output { stdout, stderr: Vec::new() })
            };
            return finish(approved.await);
        }
        Command::Delete(f) => {
            return finish(delete(f).await);
        }
        Command::Migrate(f) => {
            return finish(migrate(f).await);
        }
        Command::Airgap { what } => {
            return finish(airgap(what).await);
        }
        Command::Init(f) => {
            return finish(init(f).await);
        }
        Command::Publish(f) => {
            let args = PublishArgs {
                reference: f.reference,
                provider: f.provider,
                all: f.all,
                from: f.from,
                config: f.config,
            };
            return finish(cli::publish(&args).await);
        }
    };
    let result = match what {
        Generate::Provider(flags) => {
            let w = flags.which;
            let args = ProviderArgs {
                which: ProviderChoice {
                    core: w.core,
                    infrastructure: w.infrastructure,
                    bootstrap: w.bootstrap,
                    control_plane: w.control_plane,
                    addon: w.addon,
                    ipam: w.ipam,
                    runtime_extension: w.runtime_extension,
                },
                target_namespace: flags.target_namespace,
                list_variables: flags.list_variables,
                config: flags.config,
            };
            cli::generate_provider(&args).await
        }
        Generate::Cluster(f) => {
            let args = ClusterArgs {
                name: f.name,
                infrastructure: f.infrastructure,
                flavor: f.flavor,
                from: f.from,
                target_namespace: f.target_namespace,
                kubernetes_version: f.kubernetes_version,
                control_plane_machine_count: f.control_plane_machine_count,
                worker_machine_count: f.worker_machine_count,
                list_variables: f.list_variables,
                config: f.config,
            };
            cli::generate_cluster(&args).await
        }
    };
    finish(result)
}

fn finish(result: Result<cli::Output, cli::GenerateError>) -> ExitCode {
    match result {
        Ok(output) => {
            for warning in &output.stderr {
                eprintln!("Warning: {warning}");
            }
            print!("{}", output.stdout);
            ExitCode::SUCCESS
        }
        Err(error @ cli::GenerateError::CommandLine(_)) => {
            eprintln!("Error: {error}");
            ExitCode::from(2)
        }
        Err(error) => {
            eprintln!("Error: {error}");
            ExitCode::FAILURE
        }
    }
}
