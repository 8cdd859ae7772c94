//! clusterctl metadata (`metadata.yaml`): release series and the contract each abides by.

use serde::{Deserialize, Serialize};

use crate::error::RepositoryError;
use crate::version::{self, Version};

pub const METADATA_API_VERSION: &str = "clusterctl.cluster.x-k8s.io/v1alpha3";
pub const METADATA_KIND: &str = "Metadata";
pub const METADATA_FILE: &str = "metadata.yaml";

/// One release series: every `major.minor.*` version abides by `contract`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseSeries {
    pub major: u64,
    pub minor: u64,
    pub contract: String,
}

/// A provider's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Metadata {
    pub api_version: String,
    /// Providers publish metadata without it; clusterctl's decoder takes the kind from the
    /// type it decodes into, so a missing kind is `Metadata`.
    #[serde(default = "metadata_kind")]
    pub kind: String,
    #[serde(default)]
    pub release_series: Vec<ReleaseSeries>,
}

fn metadata_kind() -> String {
    METADATA_KIND.to_string()
}

impl Metadata {
    /// Reads and validates `metadata.yaml` of `provider`.
    pub fn parse(provider: &str, bytes: &[u8]) -> Result<Metadata, RepositoryError> {
        let invalid = |problem: String| RepositoryError::Metadata { provider: provider.to_string(), problem };
        let text = std::str::from_utf8(bytes).map_err(|_| invalid("it is not UTF-8 text".into()))?;
        let metadata: Metadata = serde_saphyr::from_str(text)
            .map_err(|e| invalid(format!("it is not metadata YAML: {}", crate::yaml::describe_error(&e))))?;
        if metadata.api_version != METADATA_API_VERSION {
            return Err(invalid(format!(
                "apiVersion is {:?}, expected {METADATA_API_VERSION}",
                metadata.api_version
            )));
        }
        if metadata.kind != METADATA_KIND {
            return Err(invalid(format!("kind is {:?}, expected {METADATA_KIND}", metadata.kind)));
        }
        if metadata.release_series.is_empty() {
            return Err(invalid(
                "releaseSeries is empty; it needs at least one major/minor/contract entry".into(),
            ));
        }
        if let Some(s) = metadata.release_series.iter().find(|s| s.contract.is_empty()) {
            return Err(invalid(format!("release series v{}.{} has no contract", s.major, s.minor)));
        }
        Ok(metadata)
    }

    /// The series as text: `v0.2 (v1beta1), v0.1 (v1alpha4)`.
    pub fn series_list(&self) -> String {
        let mut series: Vec<&ReleaseSeries> = self.release_series.iter().collect();
        series.sort_by_key(|s| std::cmp::Reverse((s.major, s.minor)));
        series
            .iter()
            .map(|s| format!("v{}.{} ({})", s.major, s.minor, s.contract))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The release series of `version`.
    pub fn series_of(&self, version: &Version) -> Option<&ReleaseSeries> {
        if version.is_tag_only() {
            return None;
        }
        self.release_series.iter().find(|s| s.major == version.major() && s.minor == version.minor())
    }

    /// The contract `version` abides by.
    pub fn contract_of(&self, provider: &str, version: &Version) -> Result<&str, RepositoryError> {
        if version.is_tag_only() {
            return Err(RepositoryError::TagWithoutSeries {
                provider: provider.to_string(),
                tag: version.to_string(),
            });
        }
        self.series_of(version).map(|s| s.contract.as_str()).ok_or_else(|| RepositoryError::NoSeries {
            provider: provider.to_string(),
            version: version.to_string(),
            series: self.series_list(),
        })
    }

    /// The newest of `versions` whose series abides by `contract` (releases before pre-releases).
    pub fn latest_for_contract(
        &self,
        provider: &str,
        versions: &[Version],
        contract: &str,
    ) -> Result<Version, RepositoryError> {
        let matching: Vec<Version> = versions
            .iter()
            .filter(|v| self.series_of(v).is_some_and(|s| s.contract == contract))
            .cloned()
            .collect();
        version::latest(&matching).cloned().ok_or_else(|| RepositoryError::NoVersionForContract {
            provider: provider.to_string(),
            contract: contract.to_string(),
            series: self.series_list(),
        })
    }
}

/// The contracts a core provider still supports besides its own: Cluster API v1.11 and later
/// (contract v1beta2) accept providers that abide by v1beta1.
const STILL_SUPPORTED: &[(&str, &str)] = &[("v1beta2", "v1beta1")];

/// The contracts a core provider of contract `core` accepts other providers at: its own first,
/// then the earlier one it still supports.
pub fn supported_contracts(core: &str) -> Vec<&str> {
    let earlier = STILL_SUPPORTED.iter().filter(|(c, _)| *c == core).map(|(_, e)| *e);
    std::iter::once(core).chain(earlier).collect()
}

/// Whether a core provider of contract `core` accepts a provider of contract `provider`.
pub fn core_supports(core: &str, provider: &str) -> bool {
    supported_contracts(core).contains(&provider)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_v1beta2_core_still_supports_v1beta1_and_nothing_else_crosses() {
        assert_eq!(supported_contracts("v1beta2"), ["v1beta2", "v1beta1"]);
        assert_eq!(supported_contracts("v1beta1"), ["v1beta1"]);
        assert!(core_supports("v1beta2", "v1beta1"));
        assert!(!core_supports("v1beta1", "v1beta2"), "an older core never runs newer providers");
        assert!(!core_supports("v1beta2", "v1alpha4"));
        assert!(!core_supports("v1beta1", "v1alpha4"));
    }

    const GOOD: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: 0\n  minor: 3\n  contract: v1alpha3\n- major: 0\n  minor: 2\n  contract: v1alpha2\n";

    #[test]
    fn versions_map_to_their_series_contract() {
        let m = Metadata::parse("infrastructure-aws", GOOD.as_bytes()).unwrap();
        assert_eq!(m.contract_of("p", &"v0.3.7".parse().unwrap()).unwrap(), "v1alpha3");
        let err = m.contract_of("infrastructure-aws", &"v0.4.0".parse().unwrap()).unwrap_err().to_string();
        assert_eq!(
            err,
            "infrastructure-aws v0.4.0 belongs to no release series of its metadata; the series are v0.3 (v1alpha3), v0.2 (v1alpha2)"
        );
        let versions: Vec<Version> =
            ["v0.2.1", "v0.2.5", "v0.3.0", "v0.3.1-rc.0"].iter().map(|v| v.parse().unwrap()).collect();
        assert_eq!(m.latest_for_contract("p", &versions, "v1alpha2").unwrap().to_string(), "v0.2.5");
        assert_eq!(m.latest_for_contract("p", &versions, "v1alpha3").unwrap().to_string(), "v0.3.0");
        assert!(m.latest_for_contract("p", &versions, "v1beta1").is_err());
    }

    #[test]
    fn metadata_without_a_kind_is_read_as_clusterctl_reads_it() {
        // clusterctl decodes into its Metadata type, which supplies a missing kind.
        let without = GOOD.replace("kind: Metadata\n", "");
        let m = Metadata::parse("infrastructure-x", without.as_bytes()).unwrap();
        assert_eq!((m.kind.as_str(), m.release_series.len()), ("Metadata", 2));
    }

    #[test]
    fn invalid_metadata_is_named() {
        let cases = [
            (GOOD.replace("v1alpha3\nkind", "v1\nkind"), "apiVersion is \"clusterctl.cluster.x-k8s.io/v1\""),
            (GOOD.replace("kind: Metadata", "kind: Other"), "kind is \"Other\""),
            (
                "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries: []\n"
                    .to_string(),
                "releaseSeries is empty",
            ),
            ("{".to_string(), "it is not metadata YAML"),
        ];
        for (text, expect) in cases {
            let err = Metadata::parse("core-butler", text.as_bytes()).unwrap_err().to_string();
            assert!(
                err.starts_with("the metadata of core-butler is not valid: ") && err.contains(expect),
                "{err}"
            );
        }
    }
}
