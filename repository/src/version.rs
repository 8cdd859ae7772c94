//! Provider versions: semantic versions written with a leading `v`, and clusterctl's rules for
//! "latest".

use std::fmt;
use std::str::FromStr;

use crate::error::RepositoryError;

/// A provider version (`v1.2.3`, `v2.0.0-rc.1`), kept as written: clusterctl fetches the tag or
/// folder named exactly as the version is written, so `1.2.3` is not fetched as `v1.2.3`.
/// Versions compare by their semantic version alone (`1.2.3` equals `v1.2.3`).
///
/// A GitHub URL may name any tag (clusterctl takes it as is): [`Version::tag`] keeps such a
/// tag, which is fetched as written but belongs to no release series, so it has no contract.
#[derive(Debug, Clone)]
pub struct Version {
    semver: semver::Version,
    written: String,
    /// A tag that is no semantic version (`semver` is then 0.0.0 and unused).
    tag_only: bool,
}

impl Version {
    /// Parses `v1.2.3` (or `1.2.3`); `origin` says where the text came from, for the error.
    pub fn parse(text: &str, origin: &str) -> Result<Version, RepositoryError> {
        let bare = text.strip_prefix('v').unwrap_or(text);
        semver::Version::parse(bare)
            .map(|semver| Version { semver, written: text.to_string(), tag_only: false })
            .map_err(|_| RepositoryError::InvalidVersion {
                version: text.to_string(),
                origin: origin.to_string(),
            })
    }

    /// A version as a tag: semantic when it parses as one, else a tag kept as written (which
    /// has no release series, so no contract).
    pub fn tag(text: &str) -> Version {
        Version::parse(text, "a tag").unwrap_or_else(|_| Version {
            semver: semver::Version::new(0, 0, 0),
            written: text.to_string(),
            tag_only: true,
        })
    }

    /// Whether this is a tag that is no semantic version.
    pub fn is_tag_only(&self) -> bool {
        self.tag_only
    }

    /// The semantic version, without the leading `v`.
    pub fn semver(&self) -> &semver::Version {
        &self.semver
    }

    /// The spellings a tag or folder of this version may have: as written first, then with and
    /// without the leading `v`.
    pub fn spellings(&self) -> Vec<String> {
        let mut all = vec![self.written.clone()];
        if self.tag_only {
            return all;
        }
        for other in [format!("v{}", self.semver), self.semver.to_string()] {
            if !all.contains(&other) {
                all.push(other);
            }
        }
        all
    }

    pub fn is_prerelease(&self) -> bool {
        !self.tag_only && !self.semver.pre.is_empty()
    }

    pub fn major(&self) -> u64 {
        self.semver.major
    }

    pub fn minor(&self) -> u64 {
        self.semver.minor
    }
}

impl PartialEq for Version {
    fn eq(&self, other: &Version) -> bool {
        match (self.tag_only, other.tag_only) {
            (false, false) => self.semver == other.semver,
            (true, true) => self.written == other.written,
            _ => false,
        }
    }
}

impl Eq for Version {}

impl std::hash::Hash for Version {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        if self.tag_only {
            self.written.hash(state);
        } else {
            self.semver.hash(state);
        }
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Version) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Version {
    /// Tags that are no semantic version sort before every version, among themselves by name.
    fn cmp(&self, other: &Version) -> std::cmp::Ordering {
        match (self.tag_only, other.tag_only) {
            (false, false) => self.semver.cmp(&other.semver),
            (true, true) => self.written.cmp(&other.written),
            (true, false) => std::cmp::Ordering::Less,
            (false, true) => std::cmp::Ordering::Greater,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.written)
    }
}

impl FromStr for Version {
    type Err = RepositoryError;
    fn from_str(text: &str) -> Result<Version, RepositoryError> {
        Version::parse(text, "the version given")
    }
}

/// clusterctl's latest: the newest release; a pre-release only when there is no release.
pub fn latest(versions: &[Version]) -> Option<&Version> {
    versions.iter().filter(|v| !v.is_prerelease()).max().or_else(|| versions.iter().max())
}

/// Versions as a readable list, newest first.
pub fn list(versions: &[Version]) -> String {
    if versions.is_empty() {
        return "none".to_string();
    }
    let mut sorted: Vec<&Version> = versions.iter().collect();
    sorted.sort_by(|a, b| b.cmp(a));
    sorted.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(list: &[&str]) -> Vec<Version> {
        list.iter().map(|v| v.parse().unwrap()).collect()
    }

    #[test]
    fn versions_are_kept_as_written_compare_by_semver_and_reject_non_semver() {
        assert_eq!(Version::parse("v1.2.3", "t").unwrap().to_string(), "v1.2.3");
        assert_eq!(Version::parse("1.2.3", "t").unwrap().to_string(), "1.2.3");
        assert_eq!(Version::parse("1.2.3", "t").unwrap(), Version::parse("v1.2.3", "t").unwrap());
        assert_eq!(Version::parse("1.2.3", "t").unwrap().spellings(), ["1.2.3", "v1.2.3"]);
        assert_eq!(Version::parse("v1.2.3", "t").unwrap().spellings(), ["v1.2.3", "1.2.3"]);
        let err = Version::parse("v1.2", "the tag").unwrap_err().to_string();
        assert_eq!(
            err,
            "\"v1.2\" from the tag is not a semantic version (expected vMAJOR.MINOR.PATCH, for example v1.2.3)"
        );
        assert!(Version::parse("latest", "t").is_err());
    }

    #[test]
    fn releases_outrank_prereleases() {
        assert_eq!(latest(&versions(&["v1.0.0", "v1.1.0-rc.1", "v0.9.0"])).unwrap().to_string(), "v1.0.0");
        assert_eq!(latest(&versions(&["v1.1.0-rc.1", "v1.1.0-alpha.0"])).unwrap().to_string(), "v1.1.0-rc.1");
        assert_eq!(latest(&versions(&["v1.10.0", "v1.9.0"])).unwrap().to_string(), "v1.10.0");
        assert_eq!(latest(&[]), None);
        assert_eq!(list(&versions(&["v1.0.0", "v2.0.0"])), "v2.0.0, v1.0.0");
    }
}
