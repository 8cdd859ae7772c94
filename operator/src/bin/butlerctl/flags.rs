//! The subcommands of `butlerctl` and their flags, as `--help` shows them.

use std::path::PathBuf;

use butler_operator::cli;
use clap::{Args, Subcommand};

#[derive(Subcommand)]
pub(crate) enum Describe {
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
pub(crate) enum Upgrade {
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
pub(crate) struct ApplyFlags {
    #[command(flatten)]
    pub(crate) target: TargetFlags,
    /// Only the providers of this namespace; the whole cluster by default.
    #[arg(long, short = 'n', value_name = "NS")]
    pub(crate) namespace: Option<String>,
    /// How long the upgrade may go without a step moving on, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) cluster: KubeFlags,
}

/// What an upgrade moves to.
#[derive(Args)]
pub(crate) struct TargetFlags {
    /// Every provider to its newest release of this contract (see upgrade plan).
    #[arg(long, value_name = "CONTRACT", conflicts_with_all = ["core", "infrastructure", "bootstrap", "control_plane", "addon", "ipam"])]
    pub(crate) contract: Option<String>,
    #[command(flatten)]
    pub(crate) providers: ProviderList,
}

impl TargetFlags {
    /// What is asked for, and the namespace the providers named are in (`namespace` when
    /// given); `None` when nothing is asked for.
    pub(crate) fn wanted(
        self,
        namespace: Option<String>,
    ) -> Result<Option<(butler_operator::upgrade::moves::Wanted, Option<String>)>, cli::GenerateError> {
        let usage = cli::GenerateError::CommandLine;
        if let Some(contract) = self.contract {
            return Ok(Some((butler_operator::upgrade::moves::Wanted::Contract(contract), namespace)));
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
        Ok(Some((butler_operator::upgrade::moves::Wanted::Versions(list), namespace)))
    }
}

#[derive(Args)]
pub(crate) struct DeleteFlags {
    /// Every provider.
    #[arg(long, conflicts_with_all = ["core", "infrastructure", "bootstrap", "control_plane", "addon", "ipam"])]
    pub(crate) all: bool,
    #[command(flatten)]
    pub(crate) providers: ProviderList,
    /// Delete the providers' CRDs too, and with them every object of them.
    #[arg(long)]
    pub(crate) include_crd: bool,
    /// Delete the providers' namespaces too, with all they hold, once their providers are gone
    /// (a namespace where another provider stays is kept, and named).
    #[arg(long)]
    pub(crate) include_namespace: bool,
    /// Only the providers of this namespace; the whole cluster by default.
    #[arg(long, short = 'n', value_name = "NS")]
    pub(crate) namespace: Option<String>,
    /// How long each provider may take to go, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) cluster: KubeFlags,
}

#[derive(Args)]
pub(crate) struct MigrateFlags {
    /// Print what would be done, and what cannot be carried over; change nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Only the providers of this namespace; the whole cluster by default.
    #[arg(long, short = 'n', value_name = "NS")]
    pub(crate) namespace: Option<String>,
    /// cluster-api-operator's Deployment; the one labelled clusterctl.cluster.x-k8s.io/core=capi-operator by default.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub(crate) old_operator: Option<String>,
    /// Go on when some provider is of a kind this operator lacks (one a later
    /// cluster-api-operator adds): it stays with cluster-api-operator, which is scaled down.
    #[arg(long)]
    pub(crate) leave_unsupported: bool,
    /// Copy each config Secret of another namespace (as cluster-api-operator's chart and plugin
    /// make them) into its provider's namespace, under its name; the new provider objects read
    /// the copies. Without it such a provider stops the move.
    #[arg(long)]
    pub(crate) copy_secrets: bool,
    /// Go on although Argo CD or Flux manages cluster-api-operator or its provider objects:
    /// give it once their automated sync is off (suspended), or they would undo the move.
    #[arg(long)]
    pub(crate) gitops_paused: bool,
    /// Convert cluster-api-operator's provider objects in these files (as kept in Git) into
    /// this operator's, printed on stdout with the files' other documents as they are, without
    /// a cluster; what changed and what is left behind goes to stderr (repeat for more files,
    /// `-` for stdin).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dry_run", "namespace", "old_operator"])]
    pub(crate) from_file: Vec<PathBuf>,
    /// With --from-file: give each object without a version the one that runs in the cluster
    /// (read from cluster-api-operator's objects with the kubeconfig). Without it, an object
    /// with no version stops the conversion: applied from Git, it would install the newest
    /// release.
    #[arg(long, requires = "from_file")]
    pub(crate) versions_from_cluster: bool,
    /// How long each step may take, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub(crate) timeout: u64,
    #[command(flatten)]
    pub(crate) cluster: KubeFlags,
}

#[derive(Subcommand)]
pub(crate) enum Airgap {
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
pub(crate) struct InitFlags {
    #[command(flatten)]
    pub(crate) providers: ProviderList,
    /// The namespace of every provider object and its Secrets; by default each provider goes
    /// to the namespace its components declare (butler-system for Butler's core,
    /// butler-harvester-system for Harvester, capi-system for Cluster API's), as clusterctl
    /// lays them out. A namespace init puts providers in is labelled
    /// operator.butlerlabs.dev/providers=true, so that the operator honours it, and one init
    /// makes enforces Pod Security's baseline (an existing one keeps its labels).
    #[arg(long, short = 'n', value_name = "NS")]
    pub(crate) target_namespace: Option<String>,
    /// The clusterctl config file (providers, variables, image overrides).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Wait until every provider is Ready (or say why not), as cluster-api-operator's plugin
    /// does; --wait-providers=false returns once everything is applied.
    #[arg(long, default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub(crate) wait_providers: bool,
    /// How long to wait for each provider, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600)]
    pub(crate) wait_provider_timeout: u64,
    /// A config Secret of your own that every provider reads its variables from, as
    /// NAME[:NAMESPACE] (the provider's namespace when none is given), as cluster-api-operator's
    /// plugin takes it; init then writes no Secret of variables and asks for none.
    #[arg(long, value_name = "NAME[:NAMESPACE]", value_parser = butler_operator::cli::init::parse_config_secret)]
    pub(crate) config_secret: Option<(String, Option<String>)>,
    /// The operator's image, when the operator is installed (an air-gapped mirror).
    #[arg(long, value_name = "IMAGE")]
    pub(crate) operator_image: Option<String>,
    /// Also grant the operator what upstream providers ship beyond Butler's (cert-manager
    /// Issuers and Certificates, Secrets): the ClusterRole butler-operator-upstream.
    #[arg(long)]
    pub(crate) upstream_rbac: bool,
    /// Also grant the operator these rules (a YAML list of PolicyRules), in the same ClusterRole.
    #[arg(long, value_name = "FILE")]
    pub(crate) operator_rules: Option<PathBuf>,
    /// Print what would be applied (Secret values masked) and apply nothing.
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Write the whole set (the operator's manifest, the provider objects naming their config
    /// Secrets) to this file (`-` for stdout) for Flux or Argo CD, instead of applying it; no
    /// cluster is read. The Secrets' values stay out: which to create is said on stderr.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["dry_run", "wait_providers"])]
    pub(crate) output: Option<PathBuf>,
    #[command(flatten)]
    pub(crate) cluster: KubeFlags,
}

/// Providers named on the command line, by type: NAME or NAME:VERSION, as each command wants
/// (also NAMESPACE/NAME:VERSION, and cluster-api-operator's NAME:NAMESPACE:VERSION,
/// NAME::VERSION and NAME:NAMESPACE).
#[derive(Args)]
pub(crate) struct ProviderList {
    /// The core provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    pub(crate) core: Option<String>,
    /// Infrastructure providers, NAME[:VERSION] (repeat, or separate with commas).
    #[arg(long, short = 'i', value_name = "NAME[:VERSION]", value_delimiter = ',')]
    pub(crate) infrastructure: Vec<String>,
    /// Bootstrap providers, NAME[:VERSION].
    #[arg(long, short = 'b', value_name = "NAME[:VERSION]", value_delimiter = ',')]
    pub(crate) bootstrap: Vec<String>,
    /// Control-plane providers, NAME[:VERSION].
    #[arg(long, short = 'c', value_name = "NAME[:VERSION]", value_delimiter = ',')]
    pub(crate) control_plane: Vec<String>,
    /// Addon providers, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    pub(crate) addon: Vec<String>,
    /// IPAM providers, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    pub(crate) ipam: Vec<String>,
    /// Runtime extension providers, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]", value_delimiter = ',')]
    pub(crate) runtime_extension: Vec<String>,
}

impl ProviderList {
    /// Each named provider with its type, the core provider first.
    pub(crate) fn items(self) -> Vec<(butler_repository::ProviderType, String)> {
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
pub(crate) struct KubeFlags {
    /// The kubeconfig file; $KUBECONFIG, else ~/.kube/config, by default.
    #[arg(long, value_name = "FILE")]
    pub(crate) kubeconfig: Option<PathBuf>,
    /// The kubeconfig context; the current context by default.
    #[arg(long, visible_alias = "kubeconfig-context", value_name = "NAME")]
    pub(crate) context: Option<String>,
}

impl KubeFlags {
    pub(crate) async fn client(&self) -> Result<kube::Client, cli::GenerateError> {
        cli::cluster::client(self.kubeconfig.as_deref(), self.context.as_deref())
            .await
            .map_err(cli::GenerateError::Cluster)
    }
}

#[derive(Args)]
pub(crate) struct PublishFlags {
    /// Where to: oci://REGISTRY/REPOSITORY:VERSION (with --all, the prefix of one repository per
    /// provider).
    #[arg(value_name = "oci://REGISTRY/REPOSITORY:VERSION")]
    pub(crate) reference: String,
    /// The provider label, for example infrastructure-harvester or butler.
    #[arg(long, value_name = "LABEL")]
    pub(crate) provider: Option<String>,
    /// Every provider of this build, each to REPOSITORY/LABEL:VERSION.
    #[arg(long)]
    pub(crate) all: bool,
    /// A folder with the release's files (metadata.yaml, components, templates); by default
    /// the files of this build.
    #[arg(long, value_name = "FOLDER")]
    pub(crate) from: Option<PathBuf>,
    /// The clusterctl config file (for OCI_* variables).
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

#[derive(Subcommand)]
pub(crate) enum Generate {
    /// The YAML of a provider's components, ready for `kubectl apply`.
    Provider(ProviderFlags),
    /// The YAML of a workload cluster from a provider's template.
    Cluster(ClusterFlags),
}

#[derive(Args)]
#[group(required = true, multiple = false)]
pub(crate) struct Which {
    /// The core provider, NAME[:VERSION] (for example butler:v0.1.0).
    #[arg(long, value_name = "NAME[:VERSION]")]
    pub(crate) core: Option<String>,
    /// An infrastructure provider, NAME[:VERSION] (for example harvester).
    #[arg(long, short = 'i', value_name = "NAME[:VERSION]")]
    pub(crate) infrastructure: Option<String>,
    /// A bootstrap provider, NAME[:VERSION].
    #[arg(long, short = 'b', value_name = "NAME[:VERSION]")]
    pub(crate) bootstrap: Option<String>,
    /// A control-plane provider, NAME[:VERSION].
    #[arg(long, short = 'c', value_name = "NAME[:VERSION]")]
    pub(crate) control_plane: Option<String>,
    /// An addon provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    pub(crate) addon: Option<String>,
    /// An IPAM provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    pub(crate) ipam: Option<String>,
    /// A runtime extension provider, NAME[:VERSION].
    #[arg(long, value_name = "NAME[:VERSION]")]
    pub(crate) runtime_extension: Option<String>,
}

#[derive(Args)]
pub(crate) struct ProviderFlags {
    #[command(flatten)]
    pub(crate) which: Which,
    /// The namespace to install into; the components' own namespace when unset.
    #[arg(long, short = 'n', value_name = "NS")]
    pub(crate) target_namespace: Option<String>,
    /// List the variables the components use instead of generating them.
    #[arg(long)]
    pub(crate) list_variables: bool,
    /// The clusterctl config file; by default $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}

#[derive(Args)]
pub(crate) struct ClusterFlags {
    /// The name of the workload cluster (CLUSTER_NAME).
    pub(crate) name: String,
    /// The infrastructure provider whose template to use, NAME[:VERSION].
    #[arg(long, short = 'i', value_name = "NAME[:VERSION]")]
    pub(crate) infrastructure: Option<String>,
    /// The template flavor: cluster-template-FLAVOR.yaml instead of cluster-template.yaml.
    #[arg(long, short = 'f')]
    pub(crate) flavor: Option<String>,
    /// A template file or https URL to use instead of a provider's.
    #[arg(long, value_name = "URL|FILE", conflicts_with_all = ["infrastructure", "flavor"])]
    pub(crate) from: Option<String>,
    /// The namespace of the cluster's objects (NAMESPACE); default `default`.
    #[arg(long, short = 'n', value_name = "NS")]
    pub(crate) target_namespace: Option<String>,
    /// The Kubernetes version (KUBERNETES_VERSION), for example v1.30.4.
    #[arg(long, value_name = "VERSION")]
    pub(crate) kubernetes_version: Option<String>,
    /// Control-plane machines (CONTROL_PLANE_MACHINE_COUNT).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) control_plane_machine_count: i64,
    /// Worker machines (WORKER_MACHINE_COUNT).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub(crate) worker_machine_count: i64,
    /// List the variables the template uses instead of generating it.
    #[arg(long)]
    pub(crate) list_variables: bool,
    /// The clusterctl config file; by default $XDG_CONFIG_HOME/cluster-api/clusterctl.yaml.
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
}
