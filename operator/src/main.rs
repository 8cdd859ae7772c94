//! `butler-operator`: the provider lifecycle operator.

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

fn main() -> ExitCode {
    // Only ring is compiled in; installing it explicitly keeps rustls from guessing.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
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
