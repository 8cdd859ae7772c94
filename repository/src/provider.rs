//! Provider types and names as clusterctl writes them, and the providers `butlerctl` knows
//! without configuration.

use std::fmt;
use std::str::FromStr;

/// clusterctl's provider types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProviderType {
    Core,
    Infrastructure,
    Bootstrap,
    ControlPlane,
    Addon,
    Ipam,
    RuntimeExtension,
}

impl ProviderType {
    pub const ALL: [ProviderType; 7] = [
        ProviderType::Core,
        ProviderType::Infrastructure,
        ProviderType::Bootstrap,
        ProviderType::ControlPlane,
        ProviderType::Addon,
        ProviderType::Ipam,
        ProviderType::RuntimeExtension,
    ];

    /// The type as clusterctl's config writes it (`CoreProvider`, ...).
    pub fn type_name(self) -> &'static str {
        match self {
            ProviderType::Core => "CoreProvider",
            ProviderType::Infrastructure => "InfrastructureProvider",
            ProviderType::Bootstrap => "BootstrapProvider",
            ProviderType::ControlPlane => "ControlPlaneProvider",
            ProviderType::Addon => "AddonProvider",
            ProviderType::Ipam => "IPAMProvider",
            ProviderType::RuntimeExtension => "RuntimeExtensionProvider",
        }
    }

    /// The provider label (`cluster.x-k8s.io/provider`), also the folder of a local
    /// repository: the name for the core provider, else `{type}-{name}`.
    pub fn label(self, name: &str) -> String {
        match self {
            ProviderType::Core => name.to_string(),
            ProviderType::Infrastructure => format!("infrastructure-{name}"),
            ProviderType::Bootstrap => format!("bootstrap-{name}"),
            ProviderType::ControlPlane => format!("control-plane-{name}"),
            ProviderType::Addon => format!("addon-{name}"),
            ProviderType::Ipam => format!("ipam-{name}"),
            ProviderType::RuntimeExtension => format!("runtime-extension-{name}"),
        }
    }

    /// The components file name the clusterctl contract recommends.
    pub fn components_file(self) -> &'static str {
        match self {
            ProviderType::Core => "core-components.yaml",
            ProviderType::Infrastructure => "infrastructure-components.yaml",
            ProviderType::Bootstrap => "bootstrap-components.yaml",
            ProviderType::ControlPlane => "control-plane-components.yaml",
            ProviderType::Addon => "addon-components.yaml",
            ProviderType::Ipam => "ipam-components.yaml",
            ProviderType::RuntimeExtension => "runtime-extension-components.yaml",
        }
    }
}

impl fmt::Display for ProviderType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.type_name())
    }
}

impl FromStr for ProviderType {
    type Err = String;
    fn from_str(text: &str) -> Result<ProviderType, String> {
        ProviderType::ALL.into_iter().find(|t| t.type_name().eq_ignore_ascii_case(text)).ok_or_else(|| {
            let names: Vec<&str> = ProviderType::ALL.iter().map(|t| t.type_name()).collect();
            format!("{text:?} is not a provider type; use one of {}", names.join(", "))
        })
    }
}

/// A provider: its type, name and repository URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderEntry {
    pub name: String,
    pub type_: ProviderType,
    pub url: String,
}

/// The GitHub organisation that publishes Butler's providers.
pub const BUTLER_GITHUB: &str = "https://github.com/butlerdotdev";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_follow_clusterctl() {
        assert_eq!(ProviderType::Core.label("cluster-api"), "cluster-api");
        assert_eq!(ProviderType::Infrastructure.label("aws"), "infrastructure-aws");
        assert_eq!(ProviderType::ControlPlane.label("kubeadm"), "control-plane-kubeadm");
        assert_eq!(ProviderType::RuntimeExtension.label("nutanix"), "runtime-extension-nutanix");
        assert_eq!("infrastructureprovider".parse::<ProviderType>().unwrap(), ProviderType::Infrastructure);
        assert!("Other".parse::<ProviderType>().unwrap_err().contains("use one of CoreProvider"));
    }
}
