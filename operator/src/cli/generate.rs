//! `generate provider` and `generate cluster`.

use std::collections::BTreeMap;
use std::path::PathBuf;

use butler_repository::{
    ClusterVariables, ClusterctlConfig, ComponentsOptions, Http, ProviderType, ProviderUrl, RemoteOptions,
    Repository, Variables, clusterclass_file, process_components, process_template, template_file,
    template_variables,
};
use thiserror::Error;

use super::variables::{format_variables, quoted};

/// Why a command failed; printed to stderr.
#[derive(Debug, Error)]
pub enum GenerateError {
    #[error(transparent)]
    Config(#[from] butler_repository::ConfigError),
    #[error(transparent)]
    Repository(#[from] butler_repository::RepositoryError),
    #[error(transparent)]
    Process(#[from] butler_repository::ProcessError),
    #[error("{0}")]
    Usage(String),
    /// Reaching or reading the cluster failed.
    #[error("{0}")]
    Cluster(String),
    /// The command line is wrong (exit code 2).
    #[error("{0}")]
    CommandLine(String),
}

/// What a command prints.
#[derive(Debug, Default, PartialEq)]
pub struct Output {
    pub stdout: String,
    /// Warnings, one a line.
    pub stderr: Vec<String>,
}

/// Which provider `generate provider` generates (exactly one is set).
#[derive(Debug, Clone, Default)]
pub struct ProviderChoice {
    pub core: Option<String>,
    pub infrastructure: Option<String>,
    pub bootstrap: Option<String>,
    pub control_plane: Option<String>,
    pub addon: Option<String>,
    pub ipam: Option<String>,
    pub runtime_extension: Option<String>,
}

impl ProviderChoice {
    fn resolve(&self) -> Result<(ProviderType, super::provider_ref::ProviderRef), GenerateError> {
        let all = [
            (ProviderType::Core, &self.core),
            (ProviderType::Infrastructure, &self.infrastructure),
            (ProviderType::Bootstrap, &self.bootstrap),
            (ProviderType::ControlPlane, &self.control_plane),
            (ProviderType::Addon, &self.addon),
            (ProviderType::Ipam, &self.ipam),
            (ProviderType::RuntimeExtension, &self.runtime_extension),
        ];
        let chosen: Vec<(ProviderType, &String)> =
            all.iter().filter_map(|(t, v)| v.as_ref().map(|v| (*t, v))).collect();
        match chosen.as_slice() {
            [(type_, text)] => Ok((*type_, provider_ref(text)?)),
            _ => Err(GenerateError::CommandLine(
                "give exactly one of --core, --infrastructure, --bootstrap, --control-plane, --addon or --ipam".into(),
            )),
        }
    }
}

/// A provider argument in any of the forms users write (see [`super::provider_ref`]).
pub(super) fn provider_ref(text: &str) -> Result<super::provider_ref::ProviderRef, GenerateError> {
    super::provider_ref::parse(text).map_err(GenerateError::CommandLine)
}

#[derive(Debug, Clone, Default)]
pub struct ProviderArgs {
    pub which: ProviderChoice,
    pub target_namespace: Option<String>,
    pub list_variables: bool,
    pub config: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct ClusterArgs {
    pub name: String,
    pub infrastructure: Option<String>,
    pub flavor: Option<String>,
    pub from: Option<String>,
    pub target_namespace: Option<String>,
    pub kubernetes_version: Option<String>,
    pub control_plane_machine_count: i64,
    pub worker_machine_count: i64,
    pub list_variables: bool,
    pub config: Option<PathBuf>,
}

/// Remote options whose tokens come through the same path as every variable (flags, then the
/// environment, then the config file).
fn remote_options(variables: &Variables, config: &ClusterctlConfig) -> RemoteOptions {
    let mut remote = RemoteOptions::from_env();
    // As clusterctl: `GITHUB_TOKEN` in the environment or `github-token` in its config file.
    remote.github.token = butler_repository::token(&butler_repository::GITHUB_TOKEN, |k| variables.lookup(k));
    remote.gitlab_token = butler_repository::token(&butler_repository::GITLAB_TOKEN, |k| variables.lookup(k));
    remote.oci.apply_variables(|key| variables.lookup(key));
    remote.oci.mirrors = config.images.clone();
    remote
}

pub(super) fn repository(
    config: &ClusterctlConfig,
    variables: &Variables,
    type_: ProviderType,
    name: &str,
) -> Result<Repository, GenerateError> {
    let entry = config.provider(type_, name)?;
    let url = ProviderUrl::parse(&entry.url)?;
    let repo = Repository::from_url(&type_.label(name), &url, &remote_options(variables, config))?;
    Ok(repo.with_overrides(config.overrides_folder.clone()))
}

/// Splits listed variables into required and optional (with the defaults shown).
fn listing(variables: &[butler_repository::VariableUse], flag_defaults: &BTreeMap<&str, String>) -> String {
    let mut required = Vec::new();
    let mut optional = Vec::new();
    for v in variables {
        match (&v.default, flag_defaults.get(v.name.as_str())) {
            (Some(default), _) => optional.push((v.name.clone(), quoted(default))),
            (None, Some(shown)) => optional.push((v.name.clone(), shown.clone())),
            (None, None) => required.push(v.name.clone()),
        }
    }
    format_variables(&required, &optional)
}

/// `generate provider`: the provider's components, processed, as YAML.
pub async fn generate_provider(args: &ProviderArgs) -> Result<Output, GenerateError> {
    let config = ClusterctlConfig::load(args.config.as_deref())?;
    let (type_, named) = args.which.resolve()?;
    let variables = config.variables(BTreeMap::new());
    let repo = repository(&config, &variables, type_, &named.name)?;
    let version = repo.resolve(named.version.as_deref()).await?;
    let bytes = repo.components(&version).await?;
    let text = String::from_utf8(bytes).map_err(|_| {
        GenerateError::Usage(format!("{} {version}: the components file is not UTF-8 text", repo.provider()))
    })?;
    if args.list_variables {
        let variables = butler_repository::list_variables(&text);
        return Ok(Output { stdout: listing(&variables, &BTreeMap::new()), stderr: Vec::new() });
    }
    let lookup = |name: &str| variables.lookup(name);
    let what = format!("{} {version}", repo.provider());
    let options = ComponentsOptions {
        what: &what,
        provider_label: repo.provider(),
        // The flag, else a namespace in the provider's argument (NAME:NAMESPACE:VERSION).
        target_namespace: args.target_namespace.as_deref().or(named.namespace.as_deref()),
        images: &config.images,
        variables: &lookup,
    };
    let components = process_components(&text, &options)?;
    Ok(Output { stdout: components.to_yaml(), stderr: components.warnings })
}

/// `generate cluster`: a workload cluster template (and the ClusterClasses it uses),
/// processed, as YAML.
pub async fn generate_cluster(args: &ClusterArgs) -> Result<Output, GenerateError> {
    let config = ClusterctlConfig::load(args.config.as_deref())?;
    let namespace = args.target_namespace.clone().unwrap_or_else(|| "default".to_string());
    let common = ClusterVariables {
        cluster_name: args.name.clone(),
        namespace: namespace.clone(),
        kubernetes_version: args.kubernetes_version.clone(),
        control_plane_machine_count: args.control_plane_machine_count,
        worker_machine_count: args.worker_machine_count,
    };
    let explicit = common.validate()?;
    let variables = config.variables(explicit);
    let mut stderr = Vec::new();

    // The template, and the repository its ClusterClasses come from.
    let (text, repo) = match (&args.from, &args.infrastructure) {
        (Some(from), _) => (read_from(from).await?, None),
        (None, Some(infrastructure)) => {
            let named = provider_ref(infrastructure)?;
            let repo = repository(&config, &variables, ProviderType::Infrastructure, &named.name)?;
            let version = repo.resolve(named.version.as_deref()).await?;
            let bytes = repo.file(&version, &template_file(args.flavor.as_deref())).await?;
            (utf8(bytes, "the cluster template")?, Some((repo, version)))
        }
        (None, None) => {
            return Err(GenerateError::CommandLine(
                "name the infrastructure provider with --infrastructure NAME[:VERSION], or give a template with --from".into(),
            ));
        }
    };
    let lookup = |name: &str| variables.lookup(name);

    if args.list_variables {
        let mut used = template_variables(&text);
        // The ClusterClasses' variables count too; find the classes with every variable empty.
        let preview =
            process_template("the cluster template", &text, Some(&namespace), &|_| Some(String::new()))?;
        if let Some((repo, version)) = &repo {
            for class in preview.classes() {
                let bytes = repo.file(version, &clusterclass_file(&class)).await?;
                used.extend(template_variables(&utf8(bytes, "a ClusterClass")?));
            }
        }
        used.sort_by(|a, b| a.name.cmp(&b.name));
        used.dedup_by(|a, b| a.name == b.name);
        let mut shown = BTreeMap::from([
            ("CLUSTER_NAME", quoted(&args.name)),
            ("NAMESPACE", quoted(&namespace)),
            ("CONTROL_PLANE_MACHINE_COUNT", args.control_plane_machine_count.to_string()),
            ("WORKER_MACHINE_COUNT", args.worker_machine_count.to_string()),
        ]);
        if let Some(version) = args.kubernetes_version.as_deref().filter(|v| !v.is_empty()) {
            shown.insert("KUBERNETES_VERSION", quoted(version));
        }
        return Ok(Output { stdout: listing(&used, &shown), stderr });
    }

    let template = process_template("the cluster template", &text, Some(&namespace), &lookup)?;
    let mut yaml = String::new();
    for class in template.classes() {
        match &repo {
            Some((repo, version)) => {
                let bytes = repo.file(version, &clusterclass_file(&class)).await?;
                let what = clusterclass_file(&class);
                yaml.push_str(&process_template(&what, &utf8(bytes, "a ClusterClass")?, Some(&namespace), &lookup)?.to_yaml());
            }
            None => stderr.push(format!(
                "the template uses the ClusterClass {class}, which is not fetched with --from; create it in namespace {namespace} yourself"
            )),
        }
    }
    yaml.push_str(&template.to_yaml());
    Ok(Output { stdout: yaml, stderr })
}

fn utf8(bytes: Vec<u8>, what: &str) -> Result<String, GenerateError> {
    String::from_utf8(bytes).map_err(|_| GenerateError::Usage(format!("{what} is not UTF-8 text")))
}

/// A template from a file or an https URL.
async fn read_from(from: &str) -> Result<String, GenerateError> {
    if from.starts_with("https://") || from.starts_with("http://") {
        let http = Http::new(RemoteOptions::from_env().http);
        let fetched = http.get(from, &Default::default(), None).await?;
        return utf8(fetched.body, from);
    }
    let path = from.strip_prefix("file://").unwrap_or(from);
    std::fs::read_to_string(path)
        .map_err(|e| GenerateError::Usage(format!("cannot read the template {path}: {e}")))
}
