//! The clusterctl config file (`clusterctl.yaml`): providers that override or add to the
//! built-in list, image overrides, variables, and the overrides folder.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use thiserror::Error;

use crate::images::ImageOverrides;
use crate::provider::{ProviderEntry, ProviderType};
use crate::source::built_in;
use crate::variables::Variables;

#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("the clusterctl config {path} cannot be read: {message}")]
    Read { path: PathBuf, message: String },
    #[error("the clusterctl config {path} is not valid: {message}")]
    Invalid { path: PathBuf, message: String },
    #[error(
        "no {type_} named {name:?} is known; known: {known}. Add it to the providers list of the clusterctl config file"
    )]
    UnknownProvider { type_: ProviderType, name: String, known: String },
}

/// A loaded clusterctl config (empty when there is no file).
#[derive(Debug, Clone, Default)]
pub struct ClusterctlConfig {
    pub path: Option<PathBuf>,
    pub providers: Vec<ProviderEntry>,
    pub images: ImageOverrides,
    /// Every other top-level key, as a variable.
    pub variables: BTreeMap<String, String>,
    /// `providerVariables`: which variables reach which provider, by provider label
    /// (`infrastructure-aws`; `*` for every provider). The operator gives a provider only these
    /// of the file's variables; clusterctl, which runs for the one who wrote the file, gives all.
    pub provider_variables: BTreeMap<String, Vec<String>>,
    pub overrides_folder: Option<PathBuf>,
}

/// Keys of the file that are not variables.
const RESERVED: [&str; 5] = ["providers", "images", "overridesFolder", "cert-manager", PROVIDER_VARIABLES];

/// clusterctl's names of the GitHub token: `github-token`, the key clusterctl reads from its
/// config file (and cluster-api-operator from a provider's config Secret), and `GITHUB_TOKEN`,
/// its environment form.
pub const GITHUB_TOKEN: [&str; 2] = ["GITHUB_TOKEN", "github-token"];

/// clusterctl's names of the GitLab token, as [`GITHUB_TOKEN`].
pub const GITLAB_TOKEN: [&str; 2] = ["GITLAB_ACCESS_TOKEN", "gitlab-access-token"];

/// The first of `names` that `lookup` finds set (not empty).
pub fn token(names: &[&str], lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    names.iter().find_map(|name| lookup(name).filter(|t| !t.is_empty()))
}

/// The key of [`ClusterctlConfig::provider_variables`].
pub const PROVIDER_VARIABLES: &str = "providerVariables";

fn config_home() -> Option<PathBuf> {
    std::env::var_os("XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))
}

/// clusterctl's overrides folder: `overridesFolder` when it is set and not blank, else
/// `$XDG_CONFIG_HOME/cluster-api/overrides` (wherever the config file is).
fn overrides_folder(configured: Option<&str>, config_home: Option<PathBuf>) -> Option<PathBuf> {
    match configured.map(str::trim).filter(|f| !f.is_empty()) {
        Some(folder) => Some(PathBuf::from(folder)),
        None => config_home.map(|home| home.join("cluster-api").join("overrides")),
    }
}

impl ClusterctlConfig {
    /// clusterctl's default location: `$XDG_CONFIG_HOME/cluster-api/clusterctl.yaml` (or under
    /// `~/.config`), else the legacy `~/.cluster-api/clusterctl.yaml`.
    pub fn default_path() -> Option<PathBuf> {
        let xdg = config_home().map(|h| h.join("cluster-api").join("clusterctl.yaml"));
        let legacy =
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cluster-api").join("clusterctl.yaml"));
        [xdg, legacy].into_iter().flatten().find(|p| p.is_file())
    }

    /// Loads `path`, or the default location when `None` (where a missing file is no error).
    pub fn load(path: Option<&Path>) -> Result<ClusterctlConfig, ConfigError> {
        let path = match path {
            Some(p) => p.to_path_buf(),
            None => match ClusterctlConfig::default_path() {
                Some(p) => p,
                None => {
                    let overrides_folder = overrides_folder(None, config_home());
                    return Ok(ClusterctlConfig { overrides_folder, ..ClusterctlConfig::default() });
                }
            },
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|e| ConfigError::Read { path: path.clone(), message: e.to_string() })?;
        ClusterctlConfig::parse(&text, &path)
    }

    /// Reads the text of a config file found at `path`.
    pub fn parse(text: &str, path: &Path) -> Result<ClusterctlConfig, ConfigError> {
        let invalid = |message: String| ConfigError::Invalid { path: path.to_path_buf(), message };
        let value: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_saphyr::from_str(text).map_err(|e| invalid(crate::yaml::describe_error(&e)))?
        };
        let map = match value {
            Value::Object(map) => map,
            Value::Null => Default::default(),
            _ => return Err(invalid("it must be a mapping of keys to values".into())),
        };
        let mut config = ClusterctlConfig { path: Some(path.to_path_buf()), ..Default::default() };
        for (index, entry) in map.get("providers").and_then(Value::as_array).into_iter().flatten().enumerate()
        {
            let field = |key: &str| {
                entry[key]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .ok_or_else(|| invalid(format!("providers[{index}].{key} is missing")))
            };
            let type_: ProviderType = field("type")?
                .parse()
                .map_err(|e: String| invalid(format!("providers[{index}].type: {e}")))?;
            config.providers.push(ProviderEntry { name: field("name")?, type_, url: field("url")? });
        }
        if let Some(images) = map.get("images") {
            config.images =
                serde_json::from_value(images.clone()).map_err(|e| invalid(format!("images: {e}")))?;
        }
        config.overrides_folder =
            overrides_folder(map.get("overridesFolder").and_then(Value::as_str), config_home());
        if let Some(scoped) = map.get(PROVIDER_VARIABLES) {
            config.provider_variables = serde_json::from_value(scoped.clone()).map_err(|_| {
                invalid(format!(
                    "{PROVIDER_VARIABLES} must map provider labels (infrastructure-aws, or * for every provider) to lists of variable names"
                ))
            })?;
        }
        for (key, value) in map.iter().filter(|(k, _)| !RESERVED.contains(&k.as_str())) {
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            config.variables.insert(key.clone(), text);
        }
        Ok(config)
    }

    /// The file's variable `name` for the provider `label`, when `providerVariables` names it
    /// for that provider (or for `*`): a variable never reaches a provider it was not meant for
    /// (a third-party release asking for `${AWS_B64ENCODED_CREDENTIALS}`).
    pub fn variable_for(&self, label: &str, name: &str) -> Option<&String> {
        let named =
            |key: &str| self.provider_variables.get(key).is_some_and(|list| list.iter().any(|n| n == name));
        (named(label) || named("*")).then(|| self.variables.get(name)).flatten()
    }

    /// The known providers: the built-in list, with the file's entries replacing those of the
    /// same name and type and adding the others.
    pub fn providers(&self) -> Vec<ProviderEntry> {
        // Butler's embedded providers, then clusterctl's public ones under names Butler's do
        // not take, then the file's, which win over both.
        let mut list = built_in();
        for upstream in crate::upstream::upstream_providers() {
            if !list.iter().any(|p| p.name == upstream.name && p.type_ == upstream.type_) {
                list.push(upstream);
            }
        }
        for entry in &self.providers {
            match list.iter_mut().find(|p| p.name == entry.name && p.type_ == entry.type_) {
                Some(known) => *known = entry.clone(),
                None => list.push(entry.clone()),
            }
        }
        list
    }

    /// The provider of `type_` named `name`.
    pub fn provider(&self, type_: ProviderType, name: &str) -> Result<ProviderEntry, ConfigError> {
        let providers = self.providers();
        providers.iter().find(|p| p.type_ == type_ && p.name == name).cloned().ok_or_else(|| {
            let names: Vec<&str> =
                providers.iter().filter(|p| p.type_ == type_).map(|p| p.name.as_str()).collect();
            ConfigError::UnknownProvider {
                type_,
                name: name.to_string(),
                known: if names.is_empty() { "none".into() } else { names.join(", ") },
            }
        })
    }

    /// Variable values: `explicit`, then the environment, then this file.
    pub fn variables(&self, explicit: BTreeMap<String, String>) -> Variables {
        Variables { explicit, use_environment: true, file: self.variables.clone() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_read_under_clusterctls_names() {
        let file = BTreeMap::from([("github-token".to_string(), "ghp_file".to_string())]);
        assert_eq!(token(&GITHUB_TOKEN, |k| file.get(k).cloned()).as_deref(), Some("ghp_file"));
        let both = BTreeMap::from([
            ("GITHUB_TOKEN".to_string(), "ghp_env".to_string()),
            ("github-token".to_string(), "ghp_file".to_string()),
        ]);
        assert_eq!(token(&GITHUB_TOKEN, |k| both.get(k).cloned()).as_deref(), Some("ghp_env"));
        let empty = BTreeMap::from([("GITLAB_ACCESS_TOKEN".to_string(), String::new())]);
        assert_eq!(token(&GITLAB_TOKEN, |k| empty.get(k).cloned()), None);
    }

    #[test]
    fn the_overrides_folder_is_clusterctls() {
        let home = Some(PathBuf::from("/home/me/.config"));
        assert_eq!(
            overrides_folder(None, home.clone()),
            Some(PathBuf::from("/home/me/.config/cluster-api/overrides"))
        );
        assert_eq!(
            overrides_folder(Some("  "), home.clone()),
            Some(PathBuf::from("/home/me/.config/cluster-api/overrides"))
        );
        assert_eq!(overrides_folder(Some("/srv/overrides"), home), Some(PathBuf::from("/srv/overrides")));
        assert_eq!(overrides_folder(None, None), None);
    }

    #[test]
    fn a_variable_reaches_only_the_providers_the_file_names_for_it() {
        let text = "AWS_B64ENCODED_CREDENTIALS: secret\nGREETING: hi\nproviderVariables:\n  infrastructure-aws: [AWS_B64ENCODED_CREDENTIALS]\n  \"*\": [GREETING]\n";
        let config = ClusterctlConfig::parse(text, Path::new("c.yaml")).unwrap();
        assert_eq!(
            config.variable_for("infrastructure-aws", "AWS_B64ENCODED_CREDENTIALS").map(String::as_str),
            Some("secret")
        );
        assert_eq!(config.variable_for("infrastructure-thirdparty", "AWS_B64ENCODED_CREDENTIALS"), None);
        assert_eq!(
            config.variable_for("infrastructure-thirdparty", "GREETING").map(String::as_str),
            Some("hi")
        );
        assert!(!config.variables.contains_key(PROVIDER_VARIABLES), "the section is no variable");
        let bad = ClusterctlConfig::parse("providerVariables: [A]\n", Path::new("c.yaml")).unwrap_err();
        assert!(bad.to_string().contains("providerVariables must map provider labels"), "{bad}");
    }

    #[test]
    fn providers_images_variables_and_overrides_are_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("overrides")).unwrap();
        let path = dir.path().join("clusterctl.yaml");
        let text = "overridesFolder: OVERRIDES\nproviders:\n- name: harvester\n  url: /repo/infrastructure-harvester/latest/infrastructure-components.yaml\n  type: InfrastructureProvider\n- name: mine\n  url: https://github.com/me/mine/releases/latest/infrastructure-components.yaml\n  type: InfrastructureProvider\nimages:\n  all:\n    repository: mirror.internal\nHARVESTER_VLAN: 40\nEMPTY:\nNAME: value\n";
        let text = text.replace("OVERRIDES", &dir.path().join("overrides").display().to_string());
        std::fs::write(&path, text).unwrap();
        let config = ClusterctlConfig::load(Some(&path)).unwrap();
        assert_eq!(
            config.provider(ProviderType::Infrastructure, "harvester").unwrap().url,
            "/repo/infrastructure-harvester/latest/infrastructure-components.yaml"
        );
        assert!(config.provider(ProviderType::Infrastructure, "mine").is_ok());
        assert_eq!(config.provider(ProviderType::Core, "butler").unwrap().url, "embedded:butler");
        // clusterctl's public providers by name; Butler's own wins where both have one.
        assert_eq!(
            config.provider(ProviderType::Infrastructure, "vsphere").unwrap().url,
            "https://github.com/kubernetes-sigs/cluster-api-provider-vsphere/releases/latest/infrastructure-components.yaml"
        );
        assert_eq!(
            config.provider(ProviderType::ControlPlane, "kubeadm").unwrap().url,
            "https://github.com/kubernetes-sigs/cluster-api/releases/latest/control-plane-components.yaml"
        );
        assert_eq!(
            config.provider(ProviderType::Infrastructure, "aws").unwrap().url,
            "embedded:infrastructure-aws"
        );
        let error = config.provider(ProviderType::Infrastructure, "nonesuch").unwrap_err().to_string();
        assert!(
            error.starts_with("no InfrastructureProvider named \"nonesuch\" is known; known: harvester, nutanix, proxmox, aws, azure, gcp, linode-linode, docker,"),
            "{error}"
        );
        assert!(
            error.ends_with(", mine. Add it to the providers list of the clusterctl config file"),
            "{error}"
        );
        assert_eq!(config.images.0["all"].repository.as_deref(), Some("mirror.internal"));
        assert_eq!(config.variables["HARVESTER_VLAN"], "40");
        assert_eq!(config.variables["EMPTY"], "");
        assert_eq!(config.overrides_folder, Some(dir.path().join("overrides")));
        let variables = Variables {
            explicit: [("NAME".to_string(), "flag".to_string())].into(),
            use_environment: false,
            file: config.variables.clone(),
        };
        assert_eq!(variables.lookup("NAME").as_deref(), Some("flag"));
        assert_eq!(variables.lookup("HARVESTER_VLAN").as_deref(), Some("40"));
    }

    #[test]
    fn a_bad_file_names_the_problem() {
        let path = Path::new("/x/clusterctl.yaml");
        let error = ClusterctlConfig::parse("providers:\n- name: a\n  type: Nope\n  url: u\n", path)
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("the clusterctl config /x/clusterctl.yaml is not valid: providers[0].type: \"Nope\" is not a provider type"), "{error}");
        let error = ClusterctlConfig::parse("providers:\n- name: a\n  type: CoreProvider\n", path)
            .unwrap_err()
            .to_string();
        assert!(error.ends_with("providers[0].url is missing"), "{error}");
        let error =
            ClusterctlConfig::load(Some(Path::new("/nonexistent/clusterctl.yaml"))).unwrap_err().to_string();
        assert!(
            error.starts_with("the clusterctl config /nonexistent/clusterctl.yaml cannot be read"),
            "{error}"
        );
    }
}
