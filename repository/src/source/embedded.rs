//! Butler's own provider repository, compiled in: the core provider `butler` and the
//! infrastructure providers, at the version of this build, with their metadata and cluster
//! templates. It needs no network and no configuration, so an air-gapped install works as it
//! is.

use super::Source;
use crate::error::{RepositoryError, Result};
use crate::metadata::METADATA_FILE;
use crate::provider::{BUTLER_GITHUB, ProviderEntry, ProviderType};
use crate::version::Version;

/// The version of the embedded repository: this build's.
pub const EMBEDDED_VERSION: &str = concat!("v", env!("CARGO_PKG_VERSION"));

const METADATA: &str = include_str!("../../../metadata.yaml");
const CORE_BASE: &str = include_str!("../../../components/core/butler.yaml");
/// The CRDs of the core provider, from `crds/` (a test keeps this list complete).
const CORE_CRDS: [&str; 5] = [
    include_str!("../../../crds/butler.butlerlabs.dev_teams.yaml"),
    include_str!("../../../crds/butler.butlerlabs.dev_providerconfigs.yaml"),
    include_str!("../../../crds/butler.butlerlabs.dev_networkpools.yaml"),
    include_str!("../../../crds/butler.butlerlabs.dev_ipallocations.yaml"),
    include_str!("../../../crds/butler.butlerlabs.dev_tenantclusters.yaml"),
];

type Files = &'static [(&'static str, &'static str)];

macro_rules! infrastructure {
    ($name:literal, [$($flavor:literal),*]) => {
        EmbeddedProvider {
            name: $name,
            type_: ProviderType::Infrastructure,
            components: include_str!(concat!("../../../components/infrastructure/", $name, ".yaml")),
            files: &[
                ("cluster-template.yaml", include_str!(concat!("../../../templates/", $name, "/cluster-template.yaml"))),
                $((concat!("cluster-template-", $flavor, ".yaml"),
                   include_str!(concat!("../../../templates/", $name, "/cluster-template-", $flavor, ".yaml"))),)*
            ],
        }
    };
}

/// One provider of the embedded repository.
pub struct EmbeddedProvider {
    pub name: &'static str,
    pub type_: ProviderType,
    components: &'static str,
    /// Templates and other files besides metadata and components.
    files: Files,
}

/// Butler's providers: the one list of them in the workspace.
const PROVIDERS: [EmbeddedProvider; 7] = [
    EmbeddedProvider { name: "butler", type_: ProviderType::Core, components: CORE_BASE, files: &[] },
    infrastructure!("harvester", ["elastic"]),
    infrastructure!("nutanix", ["elastic"]),
    infrastructure!("proxmox", ["elastic"]),
    infrastructure!("aws", ["vpc"]),
    infrastructure!("azure", ["vnet"]),
    infrastructure!("gcp", ["network"]),
];

impl EmbeddedProvider {
    /// The provider label, also its folder in a local repository.
    pub fn label(&self) -> String {
        self.type_.label(self.name)
    }

    pub fn components_file(&self) -> &'static str {
        self.type_.components_file()
    }

    /// The components YAML; the core provider's carries the CRDs of `crds/`.
    pub fn components(&self) -> String {
        if self.type_ != ProviderType::Core {
            return self.components.to_string();
        }
        let mut text = self.components.to_string();
        for crd in CORE_CRDS {
            text.push_str("---\n");
            text.push_str(crd);
        }
        text
    }

    /// Every file of a release of this provider, by name: metadata, components, templates.
    pub fn files(&self) -> Vec<(String, String)> {
        let mut files = vec![
            (METADATA_FILE.to_string(), METADATA.to_string()),
            (self.components_file().to_string(), self.components()),
        ];
        files.extend(self.files.iter().map(|(name, text)| (name.to_string(), text.to_string())));
        files
    }

    /// Where this provider's GitHub releases would be published.
    pub fn github_url(&self) -> String {
        match self.type_ {
            ProviderType::Core => {
                format!("{BUTLER_GITHUB}/butler/releases/latest/{}", self.components_file())
            }
            _ => format!(
                "{BUTLER_GITHUB}/butler-provider-{}/releases/latest/{}",
                self.name,
                self.components_file()
            ),
        }
    }
}

/// Every provider of the embedded repository.
pub fn embedded_providers() -> &'static [EmbeddedProvider] {
    &PROVIDERS
}

/// The names of Butler's infrastructure providers, in the repository's order.
pub fn butler_infrastructure() -> Vec<&'static str> {
    PROVIDERS.iter().filter(|p| p.type_ == ProviderType::Infrastructure).map(|p| p.name).collect()
}

/// The providers known without configuration: Butler's core provider `butler` and its
/// infrastructure providers, from the repository compiled into this build (no network needed).
pub fn built_in() -> Vec<ProviderEntry> {
    PROVIDERS
        .iter()
        .map(|p| ProviderEntry {
            name: p.name.to_string(),
            type_: p.type_,
            url: format!("embedded:{}", p.label()),
        })
        .collect()
}

/// The embedded provider with this label.
pub fn embedded_provider(label: &str) -> Option<&'static EmbeddedProvider> {
    PROVIDERS.iter().find(|p| p.label() == label)
}

/// One provider of the embedded repository, as a source.
pub struct EmbeddedSource {
    provider: &'static EmbeddedProvider,
}

impl EmbeddedSource {
    pub fn new(label: &str) -> Result<EmbeddedSource> {
        embedded_provider(label).map(|provider| EmbeddedSource { provider }).ok_or_else(|| {
            let labels: Vec<String> = PROVIDERS.iter().map(|p| p.label()).collect();
            RepositoryError::NotFound {
                what: format!("provider {label}"),
                location: format!("the embedded repository, which holds {}", labels.join(", ")),
            }
        })
    }
}

impl Source for EmbeddedSource {
    fn location(&self) -> String {
        format!("the embedded repository of {}", self.provider.label())
    }

    async fn versions(&self) -> Result<Vec<Version>> {
        Ok(vec![Version::parse(EMBEDDED_VERSION, "this build")?])
    }

    async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        if *version != Version::parse(EMBEDDED_VERSION, "this build")? {
            return Err(RepositoryError::NotFound {
                what: format!("version {version}"),
                location: format!(
                    "{}, which holds {EMBEDDED_VERSION}, the version of this build; for other versions give the provider the URL of its releases, {}",
                    self.location(),
                    self.provider.github_url()
                ),
            });
        }
        self.provider
            .files()
            .into_iter()
            .find(|(file, _)| file == name)
            .map(|(_, text)| text.into_bytes())
            .ok_or_else(|| RepositoryError::NotFound {
                what: name.to_string(),
                location: format!("{} {version}", self.location()),
            })
    }
}
