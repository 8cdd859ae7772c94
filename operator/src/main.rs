//! `butler-operator`: the provider lifecycle operator.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use butler_operator::api::FIELD_MANAGER;
use butler_operator::controller::{self, Options};
use butler_operator::metrics::Metrics;
use butler_repository::{Cache, RemoteOptions};
use butler_runtime::process::Started;
use clap::{Parser, Subcommand};
use futures::FutureExt;

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
    Run(Box<RunArgs>),
    /// Print every CustomResourceDefinition (the provider kinds, then Butler's API) as one YAML
    /// stream, ready for `kubectl apply -f -`.
    Crds {
        /// Instead of printing, write one file per CRD into this folder, named
        /// `{group}_{plural}.yaml`, and remove files of CRDs that no longer exist.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
        /// Also write the book's API reference, generated from the CRDs, into this file.
        #[arg(long, value_name = "FILE")]
        reference: Option<PathBuf>,
        /// Also write the generated files of the Helm chart in this folder (its CRDs, RBAC
        /// rules, values schema and version).
        #[arg(long, value_name = "DIR")]
        chart: Option<PathBuf>,
        /// Also write the book's page of the chart's values (with --chart) into this file.
        #[arg(long, value_name = "FILE", requires = "chart")]
        values_reference: Option<PathBuf>,
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
        /// The Helm chart to package beside the release (`operator/butler-operator-X.Y.Z.tgz`).
        #[arg(long, value_name = "DIR", default_value = butler_operator::chart::DIR)]
        chart: PathBuf,
    },
    /// Delete the provider objects a Helm release declared, every other kind before the core,
    /// each waited for until the operator has removed its components: the chart's pre-delete
    /// hook, so that the operator goes only after its providers.
    Uninstall {
        /// A provider object, as KIND/NAMESPACE/NAME (repeat the flag for more).
        #[arg(long = "provider", value_name = "KIND/NAMESPACE/NAME", required = true)]
        providers: Vec<String>,
        /// How long each provider may take to go, in seconds.
        #[arg(long, value_name = "SECONDS", default_value_t = 600)]
        timeout: u64,
        /// Keep the providers instead: scale the operator to none, then take its finalizer off
        /// each provider object, so that their components run on and an object deleted later
        /// goes at once.
        #[arg(long, default_value_t = false)]
        keep: bool,
        /// The operator's Deployment, as NAMESPACE/NAME, scaled to none before the providers
        /// are kept.
        #[arg(long = "operator-deployment", value_name = "NAMESPACE/NAME", value_parser = butler_operator::cli::keep::parse_deployment)]
        operator_deployment: Option<(String, String)>,
    },
}

#[derive(clap::Args)]
struct RunArgs {
    #[command(flatten)]
    process: butler_runtime::process::ProcessArgs,
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
    /// Manage only the providers of this namespace (their Deployments and inventories are
    /// there too), as a Cluster API manager's --namespace does; every namespace when not given.
    #[arg(long, env = "BUTLER_NAMESPACE", value_name = "NAMESPACE")]
    namespace: Option<String>,
    /// A ClusterRole that providers' bindings may name besides their own roles (repeat the
    /// flag for more); the render-time policy refuses any other.
    #[arg(long = "allow-cluster-role", value_name = "NAME")]
    allow_cluster_roles: Vec<String>,
    /// A kind, as GROUP/KIND (KIND alone for the core group), that providers' components may
    /// create besides those Cluster API's providers ship and their own CRDs' kinds (repeat the
    /// flag for more); any other kind is refused.
    #[arg(long = "allow-kind", value_name = "GROUP/KIND")]
    allow_kinds: Vec<String>,
    /// A power that providers' Roles and ClusterRoles may grant (repeat the flag for more):
    /// escalate, bind (on roles beyond their own), impersonate, token (create on
    /// serviceaccounts/token), nodes-proxy, wildcard (every resource of every group).
    #[arg(long = "allow-role-power", value_name = "POWER", value_parser = role_power)]
    allow_role_powers: Vec<String>,
    /// A ClusterRole whose rules every rule of providers' Roles and ClusterRoles must stay
    /// within, part by part, as Kubernetes checks that a role does not escalate (read at each
    /// install, so widening it takes effect at once); without it, any rule but the powers of
    /// --allow-role-power.
    #[arg(long = "role-ceiling", value_name = "CLUSTERROLE")]
    role_ceiling: Option<String>,
    /// Let providers' pods go beyond Pod Security's baseline (privileged containers, the
    /// node's namespaces, paths and ports, added capabilities); refused without it.
    #[arg(long = "allow-privileged-pods", default_value_t = false)]
    allow_privileged_pods: bool,
    /// An API group that providers' webhook configurations may intercept besides their own
    /// CRDs' groups (repeat the flag for more).
    #[arg(long = "allow-webhook-group", value_name = "GROUP")]
    allow_webhook_groups: Vec<String>,
    /// A URL (or a prefix ending in /) that providers' webhook configurations may call instead
    /// of one of their Services (repeat the flag for more).
    #[arg(long = "allow-webhook-url", value_name = "URL")]
    allow_webhook_urls: Vec<String>,
    /// An API group (with the groups under it) whose CRDs, made outside this operator,
    /// providers may take over besides Cluster API's and Butler's (repeat the flag for more).
    #[arg(long = "adopt-crd-group", value_name = "GROUP")]
    adopt_crd_groups: Vec<String>,
    /// A folder under which provider objects may name local repositories
    /// (`fetchConfig.url: file:///...`); without it they may name none.
    #[arg(long = "local-repository-root", value_name = "DIR")]
    local_repository_root: Option<std::path::PathBuf>,
    /// Where the operator's own tokens and registry credentials may go when a provider object
    /// names its repository: `github.com` (every owner), `github.com/OWNER`, a GitLab host, or a
    /// registry (repeat for more). Elsewhere such a provider reads anonymously or with its own
    /// config Secret's credentials.
    #[arg(long = "credentials-for", value_name = "TARGET")]
    credentials_for: Vec<String>,
    /// A namespace whose provider objects the operator honours (repeat for more; `*` for
    /// every one). Default: the --namespace it manages, else its own (POD_NAMESPACE), else
    /// every one. Elsewhere a provider object is left alone: nothing is installed, written or
    /// deleted for it.
    #[arg(long = "provider-namespace", value_name = "NAMESPACE")]
    provider_namespaces: Vec<String>,
    /// A namespace label that honours the namespaces where it is `true`, besides those
    /// --provider-namespace names (`butlerctl init` and `migrate` set it on the namespaces
    /// they put providers in); empty: none. Who may label namespaces decides, as who may
    /// write --provider-namespace does.
    #[arg(long = "provider-namespace-label", value_name = "LABEL", default_value = butler_operator::controller::wanted::policy::NAMESPACE_LABEL, value_parser = label_key)]
    provider_namespace_label: String,
    /// A network the operator may fetch from although it is local (loopback, private,
    /// link-local, shared): `10.20.0.0/16` for an in-house GitLab or registry, or one address
    /// (repeat for more). Every other local address is refused, for the URLs provider objects
    /// name, their redirects and what their names resolve to.
    #[arg(long = "allow-network", value_name = "CIDR", value_parser = network)]
    allow_networks: Vec<butler_repository::IpNet>,
    /// The HTTP proxy fetches go through (`http://proxy.internal:3128`). Without it the
    /// operator uses none, whatever HTTPS_PROXY its environment holds: a proxy resolves the
    /// names it is asked for, so the address checks would not hold.
    #[arg(long = "proxy", env = "BUTLER_PROXY", value_name = "URL")]
    proxy: Option<String>,
    /// How often every provider is reconciled when nothing wakes it, as a Go duration (`10m`).
    /// Changes to provider objects, their config Secrets, the ConfigMaps they read releases
    /// from and their Deployments wake them at once.
    #[arg(long = "sync-period", value_name = "DURATION", default_value = "10m", value_parser = sync_period)]
    sync_period: std::time::Duration,
    /// The least time between two looks into a provider's repository for releases its
    /// spec.upgradePolicy follows, as a Go duration; a look happens on a resync, and at once
    /// when the provider's spec changes.
    #[arg(long = "upgrade-check-interval", value_name = "DURATION", default_value = "1h", value_parser = sync_period)]
    upgrade_check_interval: std::time::Duration,
    /// The longest a provider's whole fetch may take (every request of it together: the
    /// version's resolution, its pages, metadata and components), as a Go duration.
    #[arg(long = "fetch-deadline", value_name = "DURATION", default_value = "2m", value_parser = sync_period)]
    fetch_deadline: std::time::Duration,
}

/// A Go duration of at least a second.
fn sync_period(text: &str) -> Result<std::time::Duration, String> {
    let parsed: kube::core::Duration =
        text.parse().map_err(|e| format!("{text:?} is not a duration (10m, 1h30m, 600s): {e}"))?;
    let duration: std::time::Duration = parsed.into();
    match parsed.is_negative() || duration < std::time::Duration::from_secs(1) {
        true => Err(format!("{text:?}: the sync period is at least 1s")),
        false => Ok(duration),
    }
}

/// A label key (`[prefix/]name`), or empty for none.
fn label_key(text: &str) -> Result<String, String> {
    let (prefix, name) = text.rsplit_once('/').unwrap_or(("", text));
    let name_ok = |n: &str| {
        n.len() <= 63
            && n.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && n.starts_with(|c: char| c.is_ascii_alphanumeric())
            && n.ends_with(|c: char| c.is_ascii_alphanumeric())
    };
    let prefix_ok = prefix.len() <= 253
        && prefix.split('.').all(|p| {
            !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        });
    match text.is_empty() || (name_ok(name) && (prefix.is_empty() && !text.contains('/') || prefix_ok)) {
        true => Ok(text.to_string()),
        false => {
            Err(format!("{text:?} is not a label key ([prefix/]name, as operator.butlerlabs.dev/providers)"))
        }
    }
}

/// A network, or one address as the network of just it.
fn network(text: &str) -> Result<butler_repository::IpNet, String> {
    text.parse::<butler_repository::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(butler_repository::IpNet::from))
        .map_err(|_| format!("{text:?} is neither a network (10.20.0.0/16) nor an address"))
}

/// One of the powers `--allow-role-power` names.
fn role_power(text: &str) -> Result<String, String> {
    use butler_operator::controller::wanted::admission::ceiling::Power;
    let names: Vec<&str> = Power::ALL.iter().map(|p| p.flag()).collect();
    match names.contains(&text) {
        true => Ok(text.to_string()),
        false => Err(format!("{text:?} is not a power a role may be allowed; one of {}", names.join(", "))),
    }
}

fn run(args: RunArgs) -> ExitCode {
    let settings = match args.process.settings(FIELD_MANAGER) {
        Ok(s) => s,
        Err(message) => {
            eprintln!("error: {message}");
            return ExitCode::from(2);
        }
    };
    let mut remote = RemoteOptions::from_env();
    remote.http.offline = args.offline;
    remote.http.network = butler_repository::NetworkPolicy::refusing_local(args.allow_networks.clone());
    remote.http.proxy = match &args.proxy {
        Some(url) => butler_repository::ProxySetting::Url(url.clone()),
        None => butler_repository::ProxySetting::Off,
    };
    if let Some(dir) = &args.cache_dir {
        remote.http.cache =
            Some(Cache::new(dir.clone(), remote.http.cache.as_ref().map(Cache::max_age).unwrap_or_default()));
    }
    let metrics = Arc::new(Metrics::new());
    butler_runtime::process::execute(
        settings,
        metrics.base(),
        |_, _| Started::nothing(),
        move |leading| {
            let options = Options {
                remote,
                instance: leading.instance,
                concurrency: args.concurrency,
                config: args.config,
                namespace: args.namespace.clone(),
                sync_period: args.sync_period,
                upgrade_check_interval: args.upgrade_check_interval,
                fetch_deadline: args.fetch_deadline,
                policy: controller::wanted::policy::Policy {
                    cluster_roles: args.allow_cluster_roles,
                    kinds: args.allow_kinds,
                    role_powers: args.allow_role_powers,
                    role_ceiling: args.role_ceiling,
                    privileged_pods: args.allow_privileged_pods,
                    webhook_groups: args.allow_webhook_groups,
                    webhook_urls: args.allow_webhook_urls,
                    adopt_crd_groups: args.adopt_crd_groups,
                    local_root: args.local_repository_root,
                    credential_hosts: args.credentials_for,
                    provider_namespaces: butler_operator::controller::wanted::policy::honoured_namespaces(
                        &args.provider_namespaces,
                        args.namespace.as_deref(),
                        std::env::var("POD_NAMESPACE").ok().as_deref(),
                    ),
                    namespace_label: Some(args.provider_namespace_label).filter(|l| !l.is_empty()),
                },
            };
            let operator = controller::start(leading.client, metrics, options, leading.shutdown);
            let ctx = operator.context.clone();
            Started { run: operator.run, ready: async move { controller::caches_ready(&ctx).await }.boxed() }
        },
    )
}

fn main() -> ExitCode {
    // Only ring is compiled in; installing it explicitly keeps rustls from guessing.
    let _ = rustls::crypto::ring::default_provider().install_default();
    // One arena: a release rendered on one worker thread is applied on another, and what one
    // freed is then what the other reuses.
    butler_runtime::process::limit_allocator(1);
    let cli = Cli::parse();
    match cli.command {
        Command::Run(args) => run(*args),
        Command::Crds { dir, reference, chart, values_reference } => {
            finish(crds(dir, reference, chart, values_reference))
        }
        Command::Release { version, out, chart } => finish(release(&version, &out, &chart)),
        Command::Uninstall { providers, timeout, keep, operator_deployment } => {
            finish(uninstall(&providers, timeout, keep.then_some(operator_deployment)))
        }
    }
}

/// The exit code of a one-shot command, its error printed.
fn finish(result: Result<(), String>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn crds(
    dir: Option<PathBuf>,
    reference: Option<PathBuf>,
    chart: Option<PathBuf>,
    values_reference: Option<PathBuf>,
) -> Result<(), String> {
    use butler_operator::crds;
    if let Some(file) = reference {
        std::fs::write(&file, butler_operator::reference::api_reference(&crds::all()))
            .map_err(|e| format!("cannot write the API reference into {}: {e}", file.display()))?;
    }
    if let Some(chart) = chart {
        butler_operator::chart::write_generated(&chart)
            .map_err(|e| format!("cannot write the chart's generated files into {}: {e}", chart.display()))?;
        if let Some(file) = values_reference {
            let values = std::fs::read_to_string(chart.join("values.yaml"))
                .map_err(|e| format!("cannot read {}: {e}", chart.join("values.yaml").display()))?;
            std::fs::write(&file, butler_operator::chart::values_reference(&values))
                .map_err(|e| format!("cannot write the values reference into {}: {e}", file.display()))?;
        }
    }
    match dir {
        Some(dir) => crds::write_dir(&dir)
            .map_err(|e| format!("cannot write the CRD files into {}: {e}", dir.display())),
        None => {
            print!("{}", butler_runtime::crds::render_all(&crds::all()));
            Ok(())
        }
    }
}

fn release(version: &str, out: &std::path::Path, chart: &std::path::Path) -> Result<(), String> {
    let files = butler_operator::release::write_release(out, version).map_err(|e| e.to_string())?;
    let (name, bytes) = butler_operator::chart::package(chart, version)
        .map_err(|e| format!("cannot package the chart in {}: {e}", chart.display()))?;
    let path = out.join("operator").join(name);
    std::fs::write(&path, bytes).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    println!("wrote {} files and the chart {} into {}", files.len(), path.display(), out.display());
    Ok(())
}

/// Deletes the providers (or, with `keep`, keeps them, the operator's Deployment stopped first).
fn uninstall(
    providers: &[String],
    timeout: u64,
    keep: Option<Option<(String, String)>>,
) -> Result<(), String> {
    let keys = providers
        .iter()
        .map(|text| butler_operator::cli::delete::parse_key(text))
        .collect::<Result<Vec<_>, _>>()?;
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
    runtime.block_on(async {
        let client =
            kube::Client::try_default().await.map_err(|e| format!("cannot reach the cluster: {e}"))?;
        let waits = butler_operator::cli::apply::Waits {
            timeout: std::time::Duration::from_secs(timeout),
            poll: std::time::Duration::from_millis(500),
        };
        let say = |line: &str| println!("{line}");
        let done = match &keep {
            Some(operator) => {
                butler_operator::cli::keep::keep_these(&client, &keys, operator.as_ref(), waits, &say).await?
            }
            None => butler_operator::cli::delete::delete_these(&client, &keys, waits, &say).await?,
        };
        print!("{done}");
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::{network, sync_period};
    use butler_operator::controller::wanted::policy::honoured_namespaces as provider_namespaces;

    #[test]
    fn the_sync_period_is_a_go_duration_of_a_second_or_more() {
        assert_eq!(sync_period("10m"), Ok(std::time::Duration::from_secs(600)));
        assert_eq!(sync_period("1h30m"), Ok(std::time::Duration::from_secs(5400)));
        assert!(sync_period("500ms").unwrap_err().contains("at least 1s"));
        assert!(sync_period("-5m").unwrap_err().contains("at least 1s"));
        assert!(sync_period("often").unwrap_err().contains("is not a duration"));
    }

    #[test]
    fn allowed_networks_are_networks_or_addresses() {
        assert_eq!(network("10.20.0.0/16").unwrap().to_string(), "10.20.0.0/16");
        assert_eq!(network("127.0.0.1").unwrap().to_string(), "127.0.0.1/32");
        assert!(network("gitlab.example.com").unwrap_err().contains("neither a network"));
    }

    #[test]
    fn a_namespace_label_is_a_label_key_or_empty() {
        assert!(super::label_key("operator.butlerlabs.dev/providers").is_ok());
        assert!(super::label_key("providers").is_ok());
        assert!(super::label_key("").is_ok());
        for bad in ["a b", "/providers", "Example.com/x", "x/", "-x"] {
            assert!(super::label_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn provider_namespaces_default_to_the_managed_then_the_own_namespace() {
        let list = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        assert_eq!(provider_namespaces(&list(&["a", "b"]), Some("m"), Some("o")), Some(list(&["a", "b"])));
        assert_eq!(provider_namespaces(&list(&["*"]), Some("m"), Some("o")), None);
        assert_eq!(provider_namespaces(&[], Some("m"), Some("o")), Some(list(&["m"])));
        assert_eq!(provider_namespaces(&[], None, Some("o")), Some(list(&["o"])));
        assert_eq!(provider_namespaces(&[], None, None), None);
    }
}
