//! `butler-controller`: Butler's core controllers.

use std::process::ExitCode;
use std::sync::Arc;

use butler_controller::context::Scope;
use butler_controller::secrets::SecretReader;
use butler_controller::team::rbac::TeamClusterRoles;
use butler_controller::webhooks::registration::Endpoint;
use butler_controller::webhooks::serving::ServingOptions;
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
    /// The port of the admission webhooks (HTTPS, every interface).
    #[arg(long, env = "BUTLER_WEBHOOK_PORT", default_value_t = 9443)]
    webhook_port: u16,
    /// Serve the certificate of this folder (`tls.crt`, `tls.key`, and `ca.crt` for the CA
    /// bundle; cert-manager's layout), reloaded when it changes. Without it the controller
    /// keeps its own CA and serving certificate in the Secret `--webhook-secret`.
    #[arg(long, env = "BUTLER_WEBHOOK_CERT_DIR", value_name = "DIR")]
    webhook_cert_dir: Option<std::path::PathBuf>,
    /// Register the webhooks with this URL (`https://127.0.0.1:9443`) instead of the Service:
    /// for a controller that runs outside the cluster.
    #[arg(long, env = "BUTLER_WEBHOOK_URL", value_name = "URL")]
    webhook_url: Option<String>,
    /// The Service in front of the controller's pods, in the controller's namespace.
    #[arg(long, env = "BUTLER_WEBHOOK_SERVICE", default_value = "butler-webhook-service")]
    webhook_service: String,
    /// The Secret of the controller's own webhook certificates, in its namespace.
    #[arg(long, env = "BUTLER_WEBHOOK_SECRET", default_value = "butler-webhook-certs")]
    webhook_secret: String,
    /// A local network (CIDR; repeat for more) that the probe of a ProviderConfig in a team's
    /// namespace may reach: a team chooses that endpoint, so without this it reaches no
    /// loopback, private, link-local or shared address. ProviderConfigs outside the teams'
    /// namespaces are the platform's and probed wherever they point.
    #[arg(
        long = "allow-probe-network",
        env = "BUTLER_ALLOW_PROBE_NETWORK",
        value_delimiter = ',',
        value_name = "CIDR"
    )]
    allow_probe_network: Vec<ipnet::IpNet>,
    /// The controller's namespace (default: the pod's, POD_NAMESPACE, else butler-system).
    #[arg(long, env = "BUTLER_NAMESPACE")]
    namespace: Option<String>,
    /// Act on the objects of this namespace only (repeat for more; a Team counts as in its
    /// `team-{name}` namespace). Default: every namespace. For one controller per environment
    /// on a shared management cluster: each leaves the others' namespaces alone.
    #[arg(long = "watch-namespace", value_name = "NAMESPACE")]
    watch_namespaces: Vec<String>,
    /// Act only in the namespaces whose labels this selector picks (`env=prod`, as kubectl
    /// writes one), and for the Teams it picks by their own labels (with their `team-{name}`
    /// namespace). A namespace or Team that gains or loses the labels is taken up or left at once.
    #[arg(long = "watch-namespace-selector", value_name = "SELECTOR", conflicts_with = "watch_namespaces")]
    watch_namespace_selector: Option<String>,
    /// The ClusterRoles a team's viewers, operators and admins are bound to in its namespace,
    /// `{role}` standing for viewer, operator or admin. The core components ship
    /// `butler-team-{role}`; the controller may bind these names and no other role (the
    /// ClusterRole's `bind` rule names them).
    #[arg(long, env = "BUTLER_TEAM_CLUSTER_ROLES", default_value = TeamClusterRoles::DEFAULT, value_parser = TeamClusterRoles::new)]
    team_cluster_roles: TeamClusterRoles,
    /// How many TenantClusters, and how many ProviderConfigs, a team namespace may hold: the
    /// ResourceQuota `butler-team-objects` the Team controller keeps there, which no team member
    /// may change (each object is held in every replica's memory).
    #[arg(long, env = "BUTLER_TEAM_OBJECT_QUOTA", default_value_t = butler_controller::team::quota::DEFAULT_OBJECTS, value_parser = clap::value_parser!(u32).range(1..))]
    team_object_quota: u32,
    /// The controller's ServiceAccount (in its namespace), which the Team controller lets read
    /// the Secrets of each team namespace (the components set it from the pod).
    #[arg(long, env = "BUTLER_SERVICE_ACCOUNT", default_value = "butler-controller")]
    service_account: String,
    /// The ClusterRole that grants reading Secrets, which the Team controller binds to
    /// `--service-account` in each team namespace (the components ship it and let the controller
    /// bind it by name). The controller reads Secrets nowhere else but its own namespace and
    /// where a platform binds it.
    #[arg(long, env = "BUTLER_SECRETS_CLUSTER_ROLE", default_value = SecretReader::DEFAULT_ROLE)]
    secrets_cluster_role: String,
}

/// The controller's namespace: the flag's, else the pod's.
fn namespace(args: &RunArgs) -> String {
    args.namespace
        .clone()
        .or_else(|| std::env::var("POD_NAMESPACE").ok())
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "butler-system".into())
}

/// The webhook serving options of the flags.
fn serving(args: &RunArgs) -> Result<ServingOptions, String> {
    let namespace = namespace(args);
    let endpoint = match &args.webhook_url {
        Some(url) if url.starts_with("https://") => Endpoint::Url(url.clone()),
        Some(url) => {
            return Err(format!(
                "--webhook-url {url:?} must start with https://: the API server calls webhooks over HTTPS only"
            ));
        }
        None => Endpoint::Service { namespace: namespace.clone(), name: args.webhook_service.clone() },
    };
    Ok(ServingOptions {
        address: std::net::SocketAddr::from(([0, 0, 0, 0], args.webhook_port)),
        cert_dir: args.webhook_cert_dir.clone(),
        endpoint,
        namespace,
        secret: args.webhook_secret.clone(),
        owner: Some(FIELD_MANAGER.to_string()),
        recheck: ServingOptions::default_recheck(args.webhook_cert_dir.as_deref()),
    })
}

fn run(args: RunArgs) -> ExitCode {
    let (settings, serving) =
        match args.process.settings(FIELD_MANAGER).and_then(|s| Ok((s, serving(&args)?))) {
            Ok(s) => s,
            Err(message) => {
                eprintln!("error: {message}");
                return ExitCode::from(2);
            }
        };
    let metrics = Arc::new(Metrics::new("butler_controller", |_| {}));
    // The webhooks answer on every replica; a server that cannot start stops the process.
    let webhooks = move |client: kube::Client, shutdown: butler_runtime::shutdown::Shutdown| {
        let started =
            async move { butler_controller::webhooks::serving::start(client, serving, shutdown).await };
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        let run = async move {
            match started.await {
                Ok(serving) => {
                    tokio::spawn(async move {
                        serving.ready.await;
                        let _ = ready_tx.send(());
                    });
                    serving.run.await;
                }
                Err(e) => {
                    tracing::error!("the admission webhooks cannot be served: {e}");
                    std::process::exit(1);
                }
            }
        };
        Started {
            run: Box::pin(run),
            ready: Box::pin(async move {
                let _ = ready_rx.await;
            }),
        }
    };
    let scope = match (args.watch_namespaces.clone(), args.watch_namespace_selector.clone()) {
        (_, Some(selector)) => Scope::selected(&selector),
        (list, None) if list.is_empty() => Scope::default(),
        (list, None) => Scope::only(move |ns| list.iter().any(|n| n == ns)),
    };
    let secret_reader = SecretReader {
        cluster_role: args.secrets_cluster_role.clone(),
        namespace: namespace(&args),
        service_account: args.service_account.clone(),
    };
    butler_runtime::process::execute(settings, metrics.clone(), webhooks, move |leading| {
        let options = Options {
            instance: leading.instance,
            concurrency: args.concurrency,
            clock: Default::default(),
            scope,
            team_roles: args.team_cluster_roles.clone(),
            team_quota: butler_controller::team::quota::TeamQuota { objects: args.team_object_quota },
            secret_reader,
            probe_networks: args.allow_probe_network.clone(),
            tenant_deadline: butler_controller::tenantcluster::tenant::CALL_DEADLINE,
        };
        let controllers = start(leading.client, metrics, options, leading.shutdown);
        Started { run: controllers.run, ready: controllers.ready }
    })
}

fn main() -> ExitCode {
    // Only ring is compiled in; installing it explicitly keeps rustls from guessing.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // Two arenas hold what a controller of two workers needs.
    butler_runtime::process::limit_allocator(2);
    match Cli::parse().command {
        Command::Run(args) => run(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_namespaces_repeat() {
        let cli =
            Cli::parse_from(["butler-controller", "run", "--watch-namespace", "a", "--watch-namespace", "b"]);
        let Command::Run(args) = cli.command;
        assert_eq!(args.watch_namespaces, ["a", "b"]);
        assert_eq!(args.team_cluster_roles, TeamClusterRoles::default());
    }

    #[test]
    fn team_cluster_roles_must_name_the_role() {
        let cli = Cli::try_parse_from(["butler-controller", "run", "--team-cluster-roles", "acme-team"]);
        let error = cli.err().unwrap().to_string();
        assert!(error.contains("must hold {role}"), "{error}");
    }
}
