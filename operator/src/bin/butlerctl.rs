//! `butlerctl`: Butler's command line.

use std::path::PathBuf;
use std::process::ExitCode;

use butler_operator::cli::{self, ClusterArgs, ProviderArgs, ProviderChoice, PublishArgs};
use clap::{Args, Parser, Subcommand};

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

#[derive(Subcommand)]
enum Describe {
    /// A tree of the providers: version, contract, paused, and every condition.
    Providers {
        /// Only this namespace; every namespace by default.
        #[arg(long, short = 'n', value_name = "NS")]
        namespace: Option<String>,
        /// json or yaml, for scripts; a tree by default.
        #[arg(long, short = 'o', value_name = "FORMAT", default_value = "")]
        output: String,
        #[command(flatten)]
        cluster: KubeFlags,
    },
}

#[derive(Subcommand)]
enum Upgrade {
    /// The versions each provider would move to, per contract, and the command that applies them.
    ///
    /// With a target (--contract, or the providers and versions), the operator plans that
    /// upgrade as a ProviderUpgrade waiting for approval, and its plan is shown: approve it, or
    /// run the same upgrade apply, to run it.
    Plan {
        #[command(flatten)]
        target: TargetFlags,
        /// Only the providers of this namespace (an operator limited to it); the whole cluster
        /// by default.
        #[arg(long, short = 'n', value_name = "NS")]
        namespace: Option<String>,
        /// Also show, per provider, the objects the step would add (+), change (~) and delete
        /// (-). Without a target only: a ProviderUpgrade's plan counts them always.
        #[arg(long)]
        diff: bool,
        /// The clusterctl config file (where providers without a fetchConfig come from, tokens).
        /// Without a target only: the operator plans a target with its own.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// How long the operator may take to plan a target, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 60)]
        timeout: u64,
        #[command(flatten)]
        cluster: KubeFlags,
    },
    /// Upgrade: every provider to the newest release of a contract, or the versions named, as a
    /// ProviderUpgrade the operator runs (pause all across contracts, the core, the others,
    /// unpause, Ready), followed here. Run again after an interruption, it follows the same one.
    Apply(ApplyFlags),
    /// Roll back a ProviderUpgrade: a new one, NAME-rollback, moves each provider back to its
    /// version before, in the contract's order.
    Rollback {
        /// The ProviderUpgrade to roll back.
        name: String,
        /// Its namespace.
        #[arg(long, short = 'n', value_name = "NS", default_value = "butler-system")]
        namespace: String,
        #[command(flatten)]
        cluster: KubeFlags,
    },
    /// Approve a ProviderUpgrade (sets spec.approved: true); the operator then runs its steps.
    Approve {
        /// The ProviderUpgrade's name.
        name: String,
        /// Its namespace.
        #[arg(long, short = 'n', value_name = "NS", default_value = "butler-system")]
        namespace: String,
        #[command(flatten)]
        cluster: KubeFlags,
    },
}

#[derive(Args)]
struct ApplyFlags {
    #[command(flatten)]
    target: TargetFlags,
    /// Only the providers of this namespace; the whole cluster by default.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// How long the upgrade may go without a step moving on, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    cluster: KubeFlags,
}

/// What an upgrade moves to.
#[derive(Args)]
struct TargetFlags {
    /// Every provider to its newest release of this contract (see upgrade plan).
    #[arg(long, value_name = "CONTRACT", conflicts_with_all = ["core", "infrastructure", "bootstrap", "control_plane", "addon", "ipam"])]
    contract: Option<String>,
    #[command(flatten)]
    providers: ProviderList,
}

impl TargetFlags {
    /// What is asked for, and the namespace the providers named are in (`namespace` when
    /// given); `None` when nothing is asked for.
    fn wanted(
        self,
        namespace: Option<String>,
    ) -> Result<Option<(cli::apply::Wanted, Option<String>)>, cli::GenerateError> {
        let usage = cli::GenerateError::CommandLine;
        if let Some(contract) = self.contract {
            return Ok(Some((cli::apply::Wanted::Contract(contract), namespace)));
        }
        let mut list = Vec::new();
        let mut named = Vec::new();
        for (type_, item) in self.providers.items() {
            let one = cli::provider_ref::parse(&item).map_err(usage)?;
            let version = one
                .version
                .clone()
                .ok_or_else(|| usage(format!("{item:?}: give NAME:VERSION, for example harvester:v0.2.0")))?;
            list.push((type_.label(&one.name), version));
            named.push(one);
        }
        if list.is_empty() {
            return Ok(None);
        }
        let namespace = cli::provider_ref::one_namespace(namespace, &named).map_err(usage)?;
        Ok(Some((cli::apply::Wanted::Versions(list), namespace)))
    }
}

#[derive(Args)]
struct DeleteFlags {
    /// Every provider.
    #[arg(long, conflicts_with_all = ["core", "infrastructure", "bootstrap", "control_plane", "addon", "ipam"])]
    all: bool,
    #[command(flatten)]
    providers: ProviderList,
    /// Delete the providers' CRDs too, and with them every object of them.
    #[arg(long)]
    include_crd: bool,
    /// Only the providers of this namespace; the whole cluster by default.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// How long each provider may take to go, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    cluster: KubeFlags,
}

#[derive(Args)]
struct MigrateFlags {
    /// Print what would be done, and what cannot be carried over; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Only the providers of this namespace; the whole cluster by default.
    #[arg(long, short = 'n', value_name = "NS")]
    namespace: Option<String>,
    /// cluster-api-operator's Deployment; the one labelled clusterctl.cluster.x-k8s.io/core=capi-operator by default.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    old_operator: Option<String>,
    /// Go on when some provider is of a kind this operator lacks (one a later
    /// cluster-api-operator adds): it stays with cluster-api-operator, which is scaled down.
    #[arg(long)]
    leave_unsupported: bool,
    /// Copy each config Secret of another namespace (as cluster-api-operator's chart and plugin
    /// make them) into its provider's namespace, under its name; the new provider objects read
    /// the copies. Without it such a provider stops the move.
    #[arg(long)]
    copy_secrets: bool,
    /// Convert cluster-api-operator's provider objects in these files (as kept in Git) into
    /// this operator's, printed on stdout with the files' other documents as they are, without
    /// a cluster; what changed and what is left behind goes to stderr (repeat for more files,
    /// `-` for stdin).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dry_run", "namespace", "old_operator"])]
    from_file: Vec<PathBuf>,
    /// How long each step may take, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    timeout: u64,
    #[command(flatten)]
    cluster: KubeFlags,
}

#[derive(Subcommand)]
enum Airgap {
    /// Fetch each provider's release once and write the ConfigMaps (and the operator's manifest)
    /// to a folder or a .tar.gz.
    Pack {
        #[command(flatten)]
        providers: ProviderList,
        /// The clusterctl config file.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Where to write: a folder, or a file ending in .tar.gz.
        #[arg(long, short = 'o', value_name = "DIR|FILE.tar.gz")]
        output: PathBuf,
    },
    /// Apply a bundle: the operator's manifest, then the ConfigMaps.
    Load {
        /// The folder or .tar.gz that airgap pack wrote.
        #[arg(long, short = 'f', value_name = "DIR|FILE.tar.gz")]
        file: PathBuf,
        /// Where the ConfigMaps go: the namespace of the providers that select them.
        #[arg(long, short = 'n', value_name = "NS", default_value = "butler-system")]
        namespace: String,
        /// Leave the operator out (installed some other way).
        #[arg(long)]
        skip_operator: bool,
        #[command(flatten)]
        cluster: KubeFlags,
    },
}

#[derive(Args)]
struct InitFlags {
    #[command(flatten)]
    providers: ProviderList,
    /// The namespace of the provider objects and their Secrets; a namespace init puts providers
    /// in is labelled operator.butlerlabs.dev/providers=true, so that the operator honours it.
    #[arg(long, short = 'n', value_name = "NS", default_value = "butler-system")]
    target_namespace: String,
    /// The clusterctl config file (providers, variables, image overrides).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Wait until every provider is Ready (or say why not).
    #[arg(long)]
    wait_providers: bool,
    /// How long to wait for each provider, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    wait_provider_timeout: u64,
    /// The operator's image, when the operator is installed (an air-gapped mirror).
    #[arg(long, value_name = "IMAGE")]
    operator_image: Option<String>,
    /// Also grant the operator what upstream providers ship beyond Butler's (cert-manager
    /// Issuers and Certificates, Secrets): the ClusterRole butler-operator-upstream.
    #[arg(long)]
    upstream_rbac: bool,
    /// Also grant the operator these rules (a YAML list of PolicyRules), in the same ClusterRole.
    #[arg(long, value_name = "FILE")]
    operator_rules: Option<PathBuf>,
    /// Print what would be applied (Secret values masked) and apply nothing.
    #[arg(long)]
    dry_run: bool,
    /// Write the whole set (the operator's manifest, the provider objects naming their config
    /// Secrets) to this file (`-` for stdout) for Flux or Argo CD, instead of applying it; no
    /// cluster is read. The Secrets' values stay out: which to create is said on stderr.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dry_run", "wait_providers"])]
    output: Option<PathBuf>,
    #[command(flatten)]
    cluster: KubeFlags,
}

/// Providers named on the command line, by type: NAME or NAME:VERSION, as each command wants
/// (also NAMESPACE/NAME:VERSION, and cluster-api-operator's NAME:NAMESPACE:VERSION,
/// NAME::VERSION and NAME:NAMESPACE).
#[derive(Args)]
struct ProviderList {
    /// The core provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    core: Option<String>,
    /// Infrastructure providers, NAME[:VERSION] (repeat, or separate with commas).
    #[arg(long, short = 'i', value_name = "NAME[:VERSION]", value_delimiter = ',')]
    infrastructure: Vec<String>,
    /// Bootstrap providers, NAME[:VERSION].
    #[arg(long, short = 'b', value_name = "NAME[:VERSION]", value_delimiter = ',')]
    bootstrap: Vec<String>,
    /// Control-plane providers, NAME[:VERSION].
    #[arg(long, short = 'c', value_name = "NAME[:VERSION]", value_delimiter = ',')]
    control_plane: Vec<String>,
    /// Addon providers, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    addon: Vec<String>,
    /// IPAM providers, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    ipam: Vec<String>,
    /// Runtime extension providers, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    runtime_extension: Vec<String>,
}

impl ProviderList {
    /// Each named provider with its type, the core provider first.
    fn items(self) -> Vec<(butler_repository::ProviderType, String)> {
        use butler_repository::ProviderType;
        let named = [
            (ProviderType::Core, self.core.into_iter().collect::<Vec<_>>()),
            (ProviderType::Infrastructure, self.infrastructure),
            (ProviderType::Bootstrap, self.bootstrap),
            (ProviderType::ControlPlane, self.control_plane),
            (ProviderType::Addon, self.addon),
            (ProviderType::Ipam, self.ipam),
            (ProviderType::RuntimeExtension, self.runtime_extension),
        ];
        named.into_iter().flat_map(|(t, items)| items.into_iter().map(move |i| (t, i))).collect()
    }
}

/// Which cluster, as kubectl's flags say it.
#[derive(Args)]
struct KubeFlags {
    /// The kubeconfig file; $KUBECONFIG, else ~/.kube/config, by default.
    #[arg(long, value_name = "FILE")]
    kubeconfig: Option<PathBuf>,
    /// The kubeconfig context; the current context by default.
    #[arg(long, value_name = "NAME")]
    context: Option<String>,
}

impl KubeFlags {
    async fn client(&self) -> Result<kube::Client, cli::GenerateError> {
        cli::cluster::client(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .map_err(cli::GenerateError::Cluster)
    }
}

#[derive(Args)]
struct PublishFlags {
    /// Where to: oci://REGISTRY/REPOSITORY:VERSION (with --all, the prefix of one repository per
    /// provider).
    #[arg(value_name = "oci://REGISTRY/REPOSITORY:VERSION")]
    reference: String,
    /// The provider label, for example infrastructure-harvester or butler.
    #[arg(long, value_name = "LABEL")]
    provider: Option<String>,
    /// Every provider of this build, each to REPOSITORY/LABEL:VERSION.
    #[arg(long)]
    all: bool,
    /// A folder with the release's files (metadata.yaml, components, templates); by default
    /// the files of this build.
    #[arg(long, value_name = "FOLDER")]
    from: Option<PathBuf>,
    /// The clusterctl config file (for OCI_* variables).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Subcommand)]
enum Generate {
    /// The YAML of a provider's components, ready for `kubectl apply`.
    Provider(ProviderFlags),
    /// The YAML of a workload cluster from a provider's template.
    Cluster(ClusterFlags),
}

#[derive(Args)]
#[group(required = true, multiple = false)]
struct Which {
    /// The core provider, NAME[:VERSION] (for example butler:v0.1.0).
    #[arg(long, value_name = "NAME[:VERSION]")]
    core: Option<String>,
    /// An infrastructure provider, NAME[:VERSION] (for example harvester).
    #[arg(long, short = 'i', value_name = "NAME[:VERSION]")]
    infrastructure: Option<String>,
    /// A bootstrap provider, NAME[:VERSION].
    #[arg(long, short = 'b', value_name = "NAME[:VERSION]")]
    bootstrap: Option<String>,
    /// A control-plane provider, NAME[:VERSION].
    #[arg(long, short = 'c', value_name = "NAME[:VERSION]")]
    control_plane: Option<String>,
    /// An addon provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    addon: Option<String>,
    /// An IPAM provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    ipam: Option<String>,
    /// A runtime extension provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    runtime_extension: Option<String>,
}

#[derive(Args)]
struct ProviderFlags {
    #[command(flatten)]
    which: Which,
    /// The namespace to install into; the components' own namespace when unset.
    #[arg(long, short = 'n', value_name = "NS")]
    target_namespace: Option<String>,
    /// List the variables the components use instead of generating them.
    #[arg(long)]
    list_variables: bool,
    /// The clusterctl config file; by default $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

#[derive(Args)]
struct ClusterFlags {
    /// The name of the workload cluster (CLUSTER_NAME).
    name: String,
    /// The infrastructure provider whose template to use, NAME[:VERSION].
    #[arg(long, short = 'i', value_name = "NAME[:VERSION]")]
    infrastructure: Option<String>,
    /// The template flavor: cluster-template-FLAVOR.yaml instead of cluster-template.yaml.
    #[arg(long, short = 'f')]
    flavor: Option<String>,
    /// A template file or https URL to use instead of a provider's.
    #[arg(long, value_name = "URL|FILE", conflicts_with_all = ["infrastructure", "flavor"])]
    from: Option<String>,
    /// The namespace of the cluster's objects (NAMESPACE); default `default`.
    #[arg(long, short = 'n', value_name = "NS")]
    target_namespace: Option<String>,
    /// The Kubernetes version (KUBERNETES_VERSION), for example v1.30.4.
    #[arg(long, value_name = "VERSION")]
    kubernetes_version: Option<String>,
    /// Control-plane machines (CONTROL_PLANE_MACHINE_COUNT).
    #[arg(long, default_value_t = 1, value_name = "N")]
    control_plane_machine_count: i64,
    /// Worker machines (WORKER_MACHINE_COUNT).
    #[arg(long, default_value_t = 0, value_name = "N")]
    worker_machine_count: i64,
    /// List the variables the template uses instead of generating it.
    #[arg(long)]
    list_variables: bool,
    /// The clusterctl config file; by default $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
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

async fn describe(
    namespace: Option<String>,
    output: &str,
    cluster: &KubeFlags,
) -> Result<cli::Output, cli::GenerateError> {
    let format: cli::describe::Format = output.parse().map_err(cli::GenerateError::CommandLine)?;
    let client = cluster.client().await?;
    let rows =
        cli::providers::list(&client, namespace.as_deref()).await.map_err(cli::GenerateError::Cluster)?;
    let color =
        std::io::IsTerminal::is_terminal(&std::io::stdout()) && std::env::var_os("NO_COLOR").is_none();
    // Provider objects that no operator honours: nothing serves them, and nobody writes their
    // status, so this is where it is said.
    let not_honoured = match cli::honoured::operators(&client).await {
        Some(operators) => cli::honoured::not_honoured(&operators, rows.iter().map(|r| r.namespace.as_str())),
        None => Vec::new(),
    };
    let stdout = cli::describe::render(&rows, format, jiff::Timestamp::now(), color, &not_honoured);
    let stderr = match format {
        cli::describe::Format::Tree => Vec::new(),
        _ => not_honoured.iter().map(|(_, why)| format!("warning: {why}")).collect(),
    };
    Ok(cli::Output { stdout, stderr })
}

async fn plan(
    target: TargetFlags,
    namespace: Option<String>,
    diff: bool,
    config: Option<PathBuf>,
    timeout: u64,
    cluster: &KubeFlags,
) -> Result<cli::Output, cli::GenerateError> {
    if let Some((wanted, namespace)) = target.wanted(namespace.clone())? {
        if diff || config.is_some() {
            return Err(cli::GenerateError::CommandLine(
                "--diff and --config belong to the overview: with a target the operator plans, with its own config, and counts the object changes always".into(),
            ));
        }
        let client = cluster.client().await?;
        let waits = cli::apply::Waits {
            timeout: std::time::Duration::from_secs(timeout),
            poll: std::time::Duration::from_millis(500),
        };
        let stdout = cli::follow::upgrade_plan(&client, namespace.as_deref(), &wanted, waits)
            .await
            .map_err(cli::GenerateError::Cluster)?;
        return Ok(cli::Output { stdout, stderr: Vec::new() });
    }
    let config = butler_repository::ClusterctlConfig::load(config.as_deref())?;
    let client = cluster.client().await?;
    eprintln!("Checking new release availability...\n");
    let plans = cli::plan::upgrade_plan(
        &client,
        namespace.as_deref(),
        &config,
        &butler_repository::RemoteOptions::from_env(),
        diff,
    )
    .await
    .map_err(cli::GenerateError::Cluster)?;
    Ok(cli::Output { stdout: cli::plan::render_plan(&plans), stderr: Vec::new() })
}

async fn apply(f: ApplyFlags) -> Result<cli::Output, cli::GenerateError> {
    let Some((wanted, namespace)) = f.target.wanted(f.namespace.clone())? else {
        return Err(cli::GenerateError::CommandLine(
            "give --contract CONTRACT, or the providers to upgrade (--core NAME:VERSION, --infrastructure NAME:VERSION, ...)".into(),
        ));
    };
    let client = f.cluster.client().await?;
    let waits = cli::apply::Waits {
        timeout: std::time::Duration::from_secs(f.timeout),
        poll: std::time::Duration::from_millis(500),
    };
    let stdout = cli::follow::upgrade_apply(&client, namespace.as_deref(), &wanted, waits, &|line| {
        eprintln!("{line}")
    })
    .await
    .map_err(cli::GenerateError::Cluster)?;
    Ok(cli::Output { stdout, stderr: Vec::new() })
}

async fn delete(f: DeleteFlags) -> Result<cli::Output, cli::GenerateError> {
    let usage = cli::GenerateError::CommandLine;
    let mut namespace = f.namespace.clone();
    let which = if f.all {
        cli::delete::Which::All
    } else {
        // Names; a version given by habit (harvester:v0.1.0) names the same provider.
        let mut labels = Vec::new();
        let mut named = Vec::new();
        for (type_, item) in f.providers.items() {
            let one = cli::provider_ref::parse(&item).map_err(usage)?;
            labels.push(type_.label(&one.name));
            named.push(one);
        }
        if labels.is_empty() {
            return Err(usage(
                "give --all, or the providers to delete (--core NAME, --infrastructure NAME, ...)".into(),
            ));
        }
        namespace = cli::provider_ref::one_namespace(f.namespace.clone(), &named).map_err(usage)?;
        cli::delete::Which::Labels(labels)
    };
    let client = f.cluster.client().await?;
    let waits = cli::apply::Waits {
        timeout: std::time::Duration::from_secs(f.timeout),
        poll: std::time::Duration::from_millis(500),
    };
    let stdout = cli::delete::delete(&client, namespace.as_deref(), &which, f.include_crd, waits, &|line| {
        eprintln!("{line}")
    })
    .await
    .map_err(cli::GenerateError::Cluster)?;
    Ok(cli::Output { stdout, stderr: Vec::new() })
}

async fn migrate(f: MigrateFlags) -> Result<cli::Output, cli::GenerateError> {
    if !f.from_file.is_empty() {
        let mut files = Vec::new();
        for path in &f.from_file {
            let text = match path.to_str() {
                Some("-") => std::io::read_to_string(std::io::stdin()),
                _ => std::fs::read_to_string(path),
            }
            .map_err(|e| cli::GenerateError::Usage(format!("cannot read {}: {e}", path.display())))?;
            files.push((path.display().to_string(), text));
        }
        let converted = cli::migrate::files::convert(&files).map_err(cli::GenerateError::Usage)?;
        let mut stderr = converted.report;
        stderr.push(format!("{} provider objects converted", converted.providers));
        return Ok(cli::Output { stdout: converted.yaml, stderr });
    }
    let old_operator = match f.old_operator.as_deref() {
        None => None,
        Some(text) => match text.split_once('/') {
            Some((ns, name)) if !ns.is_empty() && !name.is_empty() => {
                Some((ns.to_string(), name.to_string()))
            }
            _ => {
                return Err(cli::GenerateError::CommandLine(format!(
                    "--old-operator {text}: give the Deployment as NAMESPACE/NAME"
                )));
            }
        },
    };
    let options = cli::migrate::Options {
        namespace: f.namespace,
        old_operator,
        dry_run: f.dry_run,
        leave_unsupported: f.leave_unsupported,
        copy_secrets: f.copy_secrets,
        waits: cli::apply::Waits {
            timeout: std::time::Duration::from_secs(f.timeout),
            poll: std::time::Duration::from_millis(500),
        },
    };
    let client = f.cluster.client().await?;
    let stdout = cli::migrate::migrate(&client, &options, &|line| eprintln!("{line}"))
        .await
        .map_err(cli::GenerateError::Cluster)?;
    Ok(cli::Output { stdout, stderr: Vec::new() })
}

async fn airgap(what: Airgap) -> Result<cli::Output, cli::GenerateError> {
    match what {
        Airgap::Pack { providers, config, output } => {
            let providers = providers.items();
            let files = cli::airgap::pack_files(&providers, config.as_deref()).await?;
            let written = cli::airgap::write_bundle(&output, &files)?;
            Ok(cli::airgap::packed(&written))
        }
        Airgap::Load { file, namespace, skip_operator, cluster } => {
            let files = cli::airgap::read_bundle(&file)?;
            let client = cluster.client().await?;
            let stdout =
                cli::airgap::load(&client, &files, &namespace, skip_operator, &|l| eprintln!("{l}")).await?;
            Ok(cli::Output { stdout, stderr: Vec::new() })
        }
    }
}

async fn init(f: InitFlags) -> Result<cli::Output, cli::GenerateError> {
    let providers = f.providers.items();
    let config = butler_repository::ClusterctlConfig::load(f.config.as_deref())?;
    let mut operator_rules = Vec::new();
    if f.upstream_rbac {
        operator_rules.extend(butler_operator::manifest::upstream_rules());
    }
    if let Some(path) = &f.operator_rules {
        let text = std::fs::read_to_string(path)
            .map_err(|e| cli::GenerateError::Usage(format!("cannot read {}: {e}", path.display())))?;
        let rules = butler_operator::manifest::parse_rules(&text)
            .map_err(|e| cli::GenerateError::Usage(format!("--operator-rules {}: {e}", path.display())))?;
        operator_rules.extend(rules);
    }
    if let Some(output) = &f.output {
        let args = cli::init::InitArgs {
            providers,
            target_namespace: f.target_namespace,
            operator_image: f.operator_image,
            operator_rules: operator_rules.clone(),
            explicit: Default::default(),
        };
        let plan = cli::init::plan(&args, &config, false).await?;
        let yaml = plan.to_gitops_yaml();
        let secrets = plan.secrets_to_create();
        let mut warning = Vec::new();
        if !secrets.is_empty() {
            warning.push("the set names these config Secrets but holds none of their values (they do not belong in Git); create each in the cluster (kubectl create secret generic NAME -n NAMESPACE --from-literal=KEY=VALUE ...), or commit it encrypted (SOPS, Sealed Secrets):".to_string());
            warning.extend(secrets.iter().map(|s| format!("  Secret {s}")));
        }
        if output.as_os_str() == "-" {
            return Ok(cli::Output { stdout: yaml, stderr: warning });
        }
        std::fs::write(output, yaml)
            .map_err(|e| cli::GenerateError::Usage(format!("cannot write {}: {e}", output.display())))?;
        return Ok(cli::Output { stdout: format!("wrote {}\n", output.display()), stderr: warning });
    }
    let client = f.cluster.client().await?;
    let present = cli::init::operator_present(&client).await?;
    let args = cli::init::InitArgs {
        providers,
        target_namespace: f.target_namespace,
        operator_image: f.operator_image,
        operator_rules,
        explicit: Default::default(),
    };
    let plan = cli::init::plan(&args, &config, present).await?;
    if f.dry_run {
        return Ok(cli::Output { stdout: plan.to_yaml(), stderr: Vec::new() });
    }
    let waits = f.wait_providers.then(|| cli::apply::Waits {
        timeout: std::time::Duration::from_secs(f.wait_provider_timeout),
        poll: std::time::Duration::from_millis(500),
    });
    let stdout = cli::init::apply(&client, &plan, waits, &|l| eprintln!("{l}")).await?;
    Ok(cli::Output { stdout, stderr: Vec::new() })
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
