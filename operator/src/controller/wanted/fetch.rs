//! Finding and fetching a provider's release: from `fetchConfig.url` or `.oci`, from the ConfigMaps of
//! `fetchConfig.selector`, else from where the operator's config file or the built-in list (the
//! embedded repository, for Butler's provider names) says the provider lives.

use butler_repository::{
    AnySource, ClusterctlConfig, ConfigMapSource, Location, ProviderUrl, RemoteOptions, Repository, Version,
    oci::OciOptions,
};

use crate::api::{ProviderKind, ProviderSpec};
use crate::controller::vocabulary::Fetched;

/// Whether a provider of this kind and name needs no fetchConfig: the built-in list or the
/// operator's config file knows where it lives.
pub fn known(config: &ClusterctlConfig, kind: ProviderKind, name: &str) -> bool {
    config.provider(kind, name).is_ok()
}

/// Whether a provider object may read the local folder of its `fetchConfig.url`: only under
/// the root the operator's configuration names (`--local-repository-root`), decided on the
/// path as written (no `..`, nothing read first), so that nobody who may write provider
/// objects probes the operator's filesystem through its error messages.
pub fn local_allowed(location: &Location, root: Option<&std::path::Path>) -> Result<(), String> {
    let Location::Local { base, .. } = location else { return Ok(()) };
    let climbs = base.components().any(|c| matches!(c, std::path::Component::ParentDir));
    match root {
        Some(root) if base.is_absolute() && base.starts_with(root) && !climbs => Ok(()),
        _ => Err(format!(
            "spec.fetchConfig.url: a local folder is not a repository a provider object may name{}; publish the release as ConfigMaps (butlerctl airgap pack) or an OCI artifact",
            root.map(|r| format!(" outside {}", r.display())).unwrap_or_default()
        )),
    }
}

/// Where a location's requests go, as `--credentials-for` names it: `github.com/{owner}` for
/// GitHub, the host of a GitLab package, the registry of an OCI artifact; `None` for what
/// takes no credentials (local folders, the embedded repository).
fn credential_target(location: &Location) -> Option<String> {
    match location {
        Location::GitHub { owner, .. } => Some(format!("github.com/{owner}")),
        Location::GitLab { host, .. } => Some(host.to_ascii_lowercase()),
        Location::Oci { registry, .. } => Some(registry.to_ascii_lowercase()),
        Location::Local { .. } | Location::Embedded { .. } => None,
    }
}

/// The operator's own repository access: the tokens of its environment, else those its config
/// file holds under clusterctl's names (`github-token`, `gitlab-access-token`; `GITHUB_TOKEN`,
/// `GITLAB_ACCESS_TOKEN`), as clusterctl reads its own.
pub fn operator_remote(base: &RemoteOptions, config: &ClusterctlConfig) -> RemoteOptions {
    let mut remote = base.clone();
    let lookup = |key: &str| config.variables.get(key).cloned();
    if remote.github.token.is_none() {
        remote.github.token = butler_repository::token(&butler_repository::GITHUB_TOKEN, lookup);
    }
    if remote.gitlab_token.is_none() {
        remote.gitlab_token = butler_repository::token(&butler_repository::GITLAB_TOKEN, lookup);
    }
    remote
}

/// The operator's own repository access for a provider: its tokens and registry credentials
/// go only where the operator's configuration sends them. A provider object that names its
/// repository (`fetchConfig.url` or `.oci`) gets them only for a target listed with
/// `--credentials-for` (`github.com` for every owner, `github.com/{owner}`, a GitLab host, a
/// registry); otherwise it reads anonymously or with its own config Secret's credentials.
pub fn operator_credentials_for(
    spec: &ProviderSpec,
    base: &RemoteOptions,
    allowed: &[String],
) -> RemoteOptions {
    if !names_unlisted_repository(spec, allowed) {
        return base.clone();
    }
    let mut remote = base.clone();
    remote.github.token = None;
    remote.gitlab_token = None;
    remote.oci.credentials = butler_repository::oci::OciCredentials::Anonymous;
    remote.oci.docker_config = None;
    remote
}

/// Whether the variables of the operator's config file (by `providerVariables`) may reach a
/// provider: as its credentials, only when its release comes from where the operator's
/// configuration says (the provider's label is its kind and name, which whoever writes a
/// provider object picks, so a provider object `aws` naming its own repository would otherwise
/// have `AWS_B64ENCODED_CREDENTIALS` rendered into what that repository serves).
pub fn operator_variables_reach(spec: &ProviderSpec, allowed: &[String]) -> bool {
    !names_unlisted_repository(spec, allowed)
}

/// Whether a provider object names its repository (`fetchConfig.url` or `.oci`) at a target
/// `--credentials-for` does not list.
fn names_unlisted_repository(spec: &ProviderSpec, allowed: &[String]) -> bool {
    let fetch = spec.fetch_config.as_ref();
    let named = fetch
        .and_then(|f| f.url.as_deref())
        .and_then(|u| ProviderUrl::parse(u).ok())
        .or_else(|| fetch.and_then(|f| f.oci.as_deref()).and_then(|o| ProviderUrl::parse_oci_field(o).ok()));
    let Some(target) = named.as_ref().and_then(|u| credential_target(&u.location)) else {
        return false;
    };
    !allowed
        .iter()
        .map(|a| a.trim().to_ascii_lowercase())
        .any(|a| a == target || (a == "github.com" && target.starts_with("github.com/")))
}

/// Whether a provider object may have a registry reached over plain HTTP (`http://`): only one
/// the operator's own configuration lists (`OCI_INSECURE_REGISTRIES` of the operator).
pub fn plain_http_allowed(location: &Location, remote: &RemoteOptions, field: &str) -> Result<(), String> {
    match location {
        Location::Oci { registry, plain_http: true, .. } if !remote.oci.is_insecure(registry) => {
            Err(format!(
                "{field}: plain HTTP to {registry} is refused: the operator reaches a registry over plain HTTP only when its own configuration lists it ({} of the operator); write the reference without http://",
                butler_repository::oci::INSECURE_VARIABLE
            ))
        }
        _ => Ok(()),
    }
}

/// `repo` checking the files `spec.fetchConfig.sha256` pins: only files the operator reads may
/// be pinned (a pin that checks nothing would be a false comfort), and only with a version
/// that holds still.
pub fn pinned(mut repo: Repository, spec: &ProviderSpec) -> Result<Repository, String> {
    let Some(pins) = spec.fetch_config.as_ref().and_then(|f| f.sha256.as_ref()).filter(|p| !p.is_empty())
    else {
        return Ok(repo);
    };
    if spec.version.is_none() && !has_url_version(spec) {
        return Err("spec.fetchConfig.sha256: pins hold the files of one release; set spec.version as well (a newer release would not match them)".into());
    }
    let readable = [butler_repository::METADATA_FILE.to_string(), repo.components_file().to_string()];
    for (file, digest) in pins {
        if !readable.contains(file) {
            return Err(format!(
                "spec.fetchConfig.sha256: {file} is not a file the operator reads from this repository; pin {} or {}",
                readable[0], readable[1]
            ));
        }
        if digest.len() != 64 || !digest.chars().all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c)) {
            return Err(format!(
                "spec.fetchConfig.sha256.{file}: {digest:?} is not a sha256 (64 lowercase hex digits, as sha256sum prints it)"
            ));
        }
        repo = repo.with_pin(file, digest);
    }
    Ok(repo)
}

/// The repository of a provider, with the pins of `spec.fetchConfig.sha256`; `local_root` is
/// where provider objects may name local folders (none: nowhere).
#[allow(clippy::too_many_arguments)]
pub fn repository(
    client: &kube::Client,
    kind: ProviderKind,
    namespace: &str,
    name: &str,
    spec: &ProviderSpec,
    remote: &RemoteOptions,
    config: &ClusterctlConfig,
    local_root: Option<&std::path::Path>,
) -> Result<Repository, String> {
    let label = kind.label(name);
    let fetch = spec.fetch_config.as_ref();
    // OCI artifacts are mirrored where the config's image overrides say images are.
    let mirrored;
    let remote = if remote.oci.mirrors.is_empty() && !config.images.is_empty() {
        mirrored = RemoteOptions {
            oci: OciOptions { mirrors: config.images.clone(), ..remote.oci.clone() },
            ..remote.clone()
        };
        &mirrored
    } else {
        remote
    };
    let repo = match (fetch.and_then(|f| f.url.as_deref()), fetch.and_then(|f| f.selector.as_ref())) {
        (Some(url), _) => {
            let url = ProviderUrl::parse(url).map_err(|e| format!("spec.fetchConfig.url: {e}"))?;
            local_allowed(&url.location, local_root)?;
            plain_http_allowed(&url.location, remote, "spec.fetchConfig.url")?;
            Repository::from_url(&label, &url, remote).map_err(|e| e.to_string())
        }
        (None, _) if let Some(oci) = fetch.and_then(|f| f.oci.as_deref()) => {
            let url = ProviderUrl::parse_oci_field(oci).map_err(|e| format!("spec.fetchConfig.oci: {e}"))?;
            plain_http_allowed(&url.location, remote, "spec.fetchConfig.oci")?;
            Repository::from_url(&label, &url, remote).map_err(|e| e.to_string())
        }
        (None, Some(selector)) => {
            let source = ConfigMapSource::new(client.clone(), namespace, selector)
                .map_err(|e| format!("spec.fetchConfig.selector.{e}"))?;
            let source = AnySource::ConfigMap(source);
            Ok(Repository::new(&label, source, kind.components_file()))
        }
        (None, None) => {
            let entry = config.provider(kind, name).map_err(|e| e.to_string())?;
            let url = ProviderUrl::parse(&entry.url)
                .map_err(|e| format!("the url of {label} in the operator's config: {e}"))?;
            let repo = Repository::from_url(&label, &url, remote).map_err(|e| e.to_string())?;
            Ok(repo.with_overrides(config.overrides_folder.clone()))
        }
    }?;
    pinned(repo, spec)
}

/// The URL of a remote repository the provider comes from (not a ConfigMap selector, not the
/// embedded repository): its releases may be kept, since a published release does not change.
pub fn remote_url(
    spec: &ProviderSpec,
    config: &ClusterctlConfig,
    kind: ProviderKind,
    name: &str,
) -> Option<String> {
    let fetch = spec.fetch_config.as_ref();
    let url = match fetch {
        Some(f) => f.url.clone().or_else(|| f.oci.clone())?,
        None => config.provider(kind, name).ok()?.url,
    };
    (!url.starts_with("embedded:")).then_some(url)
}

/// Which version a reconcile fetches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionChoice {
    /// This version.
    Exact(String),
    /// The repository's default: the URL's version, else the latest release.
    Default,
    /// The latest release a core provider of this contract accepts: of the contract, else of
    /// an earlier one the core still supports (v1beta1 providers under a v1beta2 core).
    LatestFor(String),
}

/// What the installed state says of a provider, for choosing a version.
#[derive(Debug, Clone, Copy)]
pub struct Installed<'a> {
    pub version: &'a str,
    pub contract: &'a str,
}

/// The version to fetch. `spec.version` wins, then a version in the URL. An empty version
/// keeps what is installed while its contract is the core provider's, so a new release never
/// upgrades a provider by surprise; otherwise it is the latest release of the core provider's
/// contract (for the core provider itself, the latest release).
pub fn choose_version(
    kind: ProviderKind,
    spec: &ProviderSpec,
    installed: Option<Installed<'_>>,
    core_contract: Option<&str>,
) -> VersionChoice {
    if let Some(version) = spec.version.as_deref().filter(|v| !v.is_empty()) {
        return VersionChoice::Exact(version.to_string());
    }
    if has_url_version(spec) {
        return VersionChoice::Default;
    }
    match (kind, installed, core_contract) {
        (ProviderKind::Core, Some(i), _) => VersionChoice::Exact(i.version.into()),
        (_, Some(i), Some(core)) if butler_repository::core_supports(core, i.contract) => {
            VersionChoice::Exact(i.version.into())
        }
        (ProviderKind::Core, None, _) => VersionChoice::Default,
        (_, _, Some(core)) => VersionChoice::LatestFor(core.into()),
        (_, _, None) => VersionChoice::Default,
    }
}

/// The version a choice stands for; only `Exact` needs no listing.
pub async fn resolve(repo: &Repository, choice: &VersionChoice) -> Result<Version, String> {
    match choice {
        VersionChoice::Exact(v) => repo.resolve(Some(v)).await,
        VersionChoice::Default => repo.resolve(None).await,
        VersionChoice::LatestFor(contract) => crate::upgrade::moves::latest_under_core(repo, contract).await,
    }
    .map_err(|e| e.to_string())
}

/// One version's contract and components.
pub async fn release(repo: &Repository, version: Version) -> Result<Fetched, String> {
    let said = |e: butler_repository::RepositoryError| match e {
        e @ butler_repository::RepositoryError::Checksum { .. } => format!("spec.fetchConfig.sha256: {e}"),
        e => e.to_string(),
    };
    let contract = repo.contract_of(&version).await.map_err(said)?;
    let bytes = repo.components(&version).await.map_err(said)?;
    let components = String::from_utf8(bytes)
        .map_err(|_| format!("the components of {} {version} are not UTF-8 text", repo.provider()))?;
    Ok(Fetched { version, contract, components })
}

/// The URL of Cluster API's provider that a provider without a repository of its own reaches
/// Butler's in place of: its name is in both lists (`aws`, `azure`, `gcp`, `nutanix`,
/// `proxmox`) and the config sends it to the embedded repository.
fn shadowed_upstream(
    kind: ProviderKind,
    name: &str,
    spec: &ProviderSpec,
    config: &ClusterctlConfig,
) -> Option<String> {
    if spec.fetch_config.is_some() {
        return None;
    }
    let here = config.provider(kind, name).ok()?;
    let upstream =
        butler_repository::upstream_providers().into_iter().find(|p| p.type_ == kind && p.name == name)?;
    (here.url != upstream.url && here.url.starts_with("embedded:")).then_some(upstream.url)
}

/// When a provider without a repository of its own names one of Butler's providers (`azure`,
/// `aws`, ...) at a version that is not Butler's, what to do: the same name is Cluster API's
/// provider in clusterctl's list, which is reached with its URL.
pub fn butler_name_hint(
    kind: ProviderKind,
    name: &str,
    spec: &ProviderSpec,
    config: &ClusterctlConfig,
    version: &str,
) -> Option<String> {
    shadowed_upstream(kind, name, spec, config).map(|url| {
        format!(
            "{name} here names Butler's own {} {name}, which has no release {version}; if {version} is a release of Cluster API's {name} provider, name its repository: spec.fetchConfig.url: {url}",
            kind.type_name()
        )
    })
}

/// What a provider object without a version or fetchConfig, named as both Butler and Cluster
/// API name a provider (`aws`, `azure`, `gcp`, `nutanix`, `proxmox`), gets said on its status
/// and event: it is Butler's, and how Cluster API's is reached (a cluster-api-operator user's
/// `infrastructure: {aws: {}}` meant Cluster API's).
pub fn butler_name_shadows(
    kind: ProviderKind,
    name: &str,
    spec: &ProviderSpec,
    config: &ClusterctlConfig,
) -> Option<String> {
    if spec.version.is_some() {
        return None;
    }
    shadowed_upstream(kind, name, spec, config).map(|url| {
        format!(
            "{name} names Butler's own {} {name}; Cluster API's {name} provider is reached with spec.fetchConfig.url: {url}",
            kind.type_name()
        )
    })
}

fn has_url_version(spec: &ProviderSpec) -> bool {
    let fetch = spec.fetch_config.as_ref();
    let url = fetch.and_then(|f| f.url.as_deref()).and_then(|u| ProviderUrl::parse(u).ok());
    let oci = fetch.and_then(|f| f.oci.as_deref()).and_then(|u| ProviderUrl::parse_oci_field(u).ok());
    url.or(oci).is_some_and(|u| u.version.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_operators_credentials_go_only_where_its_configuration_sends_them() {
        let mut base = RemoteOptions::default();
        base.github.token = Some("ghp_operator".into());
        base.gitlab_token = Some("glpat-operator".into());
        base.oci.credentials = butler_repository::oci::OciCredentials::Token("oci-operator".into());
        let spec = |fetch: &str| -> ProviderSpec {
            serde_json::from_str(&format!("{{\"fetchConfig\": {fetch}}}")).unwrap()
        };
        let github = spec(
            r#"{"url": "https://github.com/someone/provider/releases/latest/infrastructure-components.yaml"}"#,
        );
        let oci = spec(r#"{"oci": "registry.example.com/p/x:v1.0.0"}"#);
        let stripped = operator_credentials_for(&github, &base, &[]);
        assert!(stripped.github.token.is_none() && stripped.gitlab_token.is_none());
        assert_eq!(stripped.oci.credentials, butler_repository::oci::OciCredentials::Anonymous);
        for allowed in ["github.com", "github.com/someone", "GitHub.com/Someone"] {
            let kept = operator_credentials_for(&github, &base, &[allowed.to_string()]);
            assert_eq!(kept.github.token.as_deref(), Some("ghp_operator"), "{allowed}");
        }
        assert!(
            operator_credentials_for(&github, &base, &["github.com/other".into()]).github.token.is_none()
        );
        assert!(
            operator_credentials_for(&oci, &base, &["registry.example.com".into()]).oci.credentials
                != butler_repository::oci::OciCredentials::Anonymous
        );
        // Without a fetchConfig the operator's own configuration chose the repository.
        let chosen = operator_credentials_for(&ProviderSpec::default(), &base, &[]);
        assert_eq!(chosen.github.token.as_deref(), Some("ghp_operator"));
    }

    #[test]
    fn the_config_files_variables_reach_a_provider_only_from_where_the_configuration_says() {
        let spec = |fetch: &str| -> ProviderSpec {
            serde_json::from_str(&format!("{{\"fetchConfig\": {fetch}}}")).unwrap()
        };
        // A provider object named aws that names its own repository: no AWS credentials.
        let own = spec(
            r#"{"url": "https://github.com/someone/aws/releases/latest/infrastructure-components.yaml"}"#,
        );
        assert!(!operator_variables_reach(&own, &[]));
        assert!(operator_variables_reach(&own, &["github.com/someone".into()]), "a listed target");
        assert!(operator_variables_reach(&ProviderSpec::default(), &[]), "the configuration's repository");
        let air_gapped = spec(r#"{"selector": {"matchLabels": {"provider.cluster.x-k8s.io/name": "aws"}}}"#);
        assert!(operator_variables_reach(&air_gapped, &[]), "ConfigMaps of the provider's namespace");
    }

    #[test]
    fn the_operators_config_file_gives_its_tokens_under_clusterctls_names() {
        let config = ClusterctlConfig::parse(
            "github-token: ghp_file\ngitlab-access-token: glpat-file\n",
            std::path::Path::new("clusterctl.yaml"),
        )
        .unwrap();
        let remote = operator_remote(&RemoteOptions::default(), &config);
        assert_eq!(remote.github.token.as_deref(), Some("ghp_file"));
        assert_eq!(remote.gitlab_token.as_deref(), Some("glpat-file"));
        let mut from_env = RemoteOptions::default();
        from_env.github.token = Some("ghp_env".into());
        assert_eq!(
            operator_remote(&from_env, &config).github.token.as_deref(),
            Some("ghp_env"),
            "the environment first"
        );
    }

    #[test]
    fn plain_http_only_to_registries_the_operator_lists() {
        let oci = |field: &str| ProviderUrl::parse_oci_field(field).unwrap().location;
        let mut remote = RemoteOptions::default();
        let refused =
            plain_http_allowed(&oci("http://registry.lab:5000/p/x"), &remote, "spec.fetchConfig.oci")
                .unwrap_err();
        assert!(
            refused.starts_with("spec.fetchConfig.oci: plain HTTP to registry.lab:5000 is refused"),
            "{refused}"
        );
        assert_eq!(plain_http_allowed(&oci("registry.lab:5000/p/x"), &remote, "f"), Ok(()));
        remote.oci.insecure = vec!["registry.lab:5000".into()];
        assert_eq!(plain_http_allowed(&oci("http://registry.lab:5000/p/x"), &remote, "f"), Ok(()));
    }

    #[test]
    fn local_folders_only_under_the_configured_root() {
        let local = |path: &str| ProviderUrl::parse(path).unwrap().location;
        let at = local("file:///srv/providers/infrastructure-x/v1.0.0/infrastructure-components.yaml");
        let root = std::path::Path::new("/srv/providers");
        assert_eq!(local_allowed(&at, Some(root)), Ok(()));
        let refused = local_allowed(&at, None).unwrap_err();
        assert!(
            refused.starts_with(
                "spec.fetchConfig.url: a local folder is not a repository a provider object may name;"
            ),
            "{refused}"
        );
        let elsewhere = local("/etc/infrastructure-x/v1.0.0/infrastructure-components.yaml");
        assert!(local_allowed(&elsewhere, Some(root)).unwrap_err().contains("outside /srv/providers"));
        // A climbing path is no repository URL at all any more.
        let climbing = "/srv/providers/../../etc/infrastructure-x/v1.0.0/infrastructure-components.yaml";
        assert!(ProviderUrl::parse(climbing).is_err());
        let github = local("https://github.com/o/r/releases/latest/infrastructure-components.yaml");
        assert_eq!(local_allowed(&github, None), Ok(()));
    }

    #[test]
    fn pins_name_files_the_operator_reads_of_one_release() {
        let spec = |json: serde_json::Value| -> ProviderSpec { serde_json::from_value(json).unwrap() };
        let repo = || {
            let source = AnySource::Embedded(
                butler_repository::EmbeddedSource::new("infrastructure-harvester").unwrap(),
            );
            Repository::new("infrastructure-harvester", source, "infrastructure-components.yaml")
        };
        let digest = "a".repeat(64);
        let pinned_spec = |version: Option<&str>, file: &str, digest: &str| {
            spec(
                serde_json::json!({"version": version, "fetchConfig": {"oci": "r.io/p/x", "sha256": {file: digest}}}),
            )
        };
        assert!(pinned(repo(), &pinned_spec(Some("v1.0.0"), "metadata.yaml", &digest)).is_ok());
        let unversioned = pinned(repo(), &pinned_spec(None, "metadata.yaml", &digest)).err().unwrap();
        assert!(unversioned.contains("set spec.version as well"), "{unversioned}");
        let versioned_url = spec(
            serde_json::json!({"fetchConfig": {"oci": "r.io/p/x:v1.0.0", "sha256": {"metadata.yaml": digest}}}),
        );
        assert!(pinned(repo(), &versioned_url).is_ok(), "a version in the reference holds still too");
        let other =
            pinned(repo(), &pinned_spec(Some("v1.0.0"), "cluster-template.yaml", &digest)).err().unwrap();
        assert!(other.contains("pin metadata.yaml or infrastructure-components.yaml"), "{other}");
        let upper =
            pinned(repo(), &pinned_spec(Some("v1.0.0"), "metadata.yaml", &"A".repeat(64))).err().unwrap();
        assert!(
            upper.contains("spec.fetchConfig.sha256.metadata.yaml") && upper.contains("64 lowercase hex"),
            "{upper}"
        );
    }

    #[test]
    fn a_butler_name_at_a_version_only_upstream_has_is_told_where_upstream_is() {
        let config = ClusterctlConfig::default();
        let hint =
            butler_name_hint(ProviderKind::Infrastructure, "azure", &spec("{}"), &config, "v1.17.0").unwrap();
        assert_eq!(
            hint,
            "azure here names Butler's own InfrastructureProvider azure, which has no release v1.17.0; if v1.17.0 is a release of Cluster API's azure provider, name its repository: spec.fetchConfig.url: https://github.com/kubernetes-sigs/cluster-api-provider-azure/releases/latest/infrastructure-components.yaml"
        );
        let fetched = spec("fetchConfig: {url: 'https://example.com/x/infrastructure-components.yaml'}");
        assert_eq!(
            butler_name_hint(ProviderKind::Infrastructure, "azure", &fetched, &config, "v1.17.0"),
            None
        );
        let said = butler_name_shadows(ProviderKind::Infrastructure, "azure", &spec("{}"), &config).unwrap();
        assert!(said.starts_with("azure names Butler's own InfrastructureProvider azure; Cluster API's azure provider is reached with spec.fetchConfig.url: https://github.com/"), "{said}");
        assert_eq!(
            butler_name_shadows(ProviderKind::Infrastructure, "azure", &spec("version: v0.1.0"), &config),
            None
        );
        assert_eq!(
            butler_name_shadows(ProviderKind::Infrastructure, "harvester", &spec("{}"), &config),
            None
        );
        assert_eq!(
            butler_name_hint(ProviderKind::Infrastructure, "vsphere", &spec("{}"), &config, "v1.9.0"),
            None
        );
    }

    fn spec(yaml: &str) -> ProviderSpec {
        serde_saphyr::from_str(yaml).expect("spec parses")
    }

    #[test]
    fn an_empty_version_keeps_what_is_installed_while_the_contract_holds() {
        let empty = ProviderSpec::default();
        let v1 = Installed { version: "v1.0.0", contract: "v1beta1" };
        let infra = ProviderKind::Infrastructure;
        assert_eq!(
            choose_version(infra, &spec("version: v1.2.0\n"), Some(v1), Some("v1beta1")),
            VersionChoice::Exact("v1.2.0".into())
        );
        assert_eq!(
            choose_version(infra, &empty, None, Some("v1beta1")),
            VersionChoice::LatestFor("v1beta1".into())
        );
        assert_eq!(
            choose_version(infra, &empty, Some(v1), Some("v1beta1")),
            VersionChoice::Exact("v1.0.0".into())
        );
        // A v1beta2 core still supports v1beta1: what is installed stays.
        assert_eq!(
            choose_version(infra, &empty, Some(v1), Some("v1beta2")),
            VersionChoice::Exact("v1.0.0".into())
        );
        assert_eq!(
            choose_version(infra, &empty, Some(v1), Some("v1")),
            VersionChoice::LatestFor("v1".into())
        );
        assert_eq!(choose_version(ProviderKind::Core, &empty, None, None), VersionChoice::Default);
        assert_eq!(
            choose_version(ProviderKind::Core, &empty, Some(v1), Some("v1beta1")),
            VersionChoice::Exact("v1.0.0".into())
        );
        let pinned = spec(
            "fetchConfig: {url: 'https://github.com/o/r/releases/v0.3.0/infrastructure-components.yaml'}\n",
        );
        assert_eq!(choose_version(infra, &pinned, Some(v1), Some("v1beta1")), VersionChoice::Default);
    }
}
