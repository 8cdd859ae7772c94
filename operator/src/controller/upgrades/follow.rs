//! Which release an upgrade policy moves a provider to: the candidates a policy follows, newest
//! first, and whether a candidate's contract suits it. Pure: the repository's answers are given.

use butler_repository::Version;

use crate::api::Follow;

/// The releases newer than `installed` that `follow` may move to, newest first (releases
/// only: a pre-release is never proposed).
pub fn candidates(follow: Follow, installed: &Version, versions: &[Version]) -> Vec<Version> {
    let mut found: Vec<Version> = versions
        .iter()
        .filter(|v| !v.is_tag_only() && !v.is_prerelease() && *v > installed)
        .filter(|v| match follow {
            Follow::Pin => false,
            Follow::Patch => v.major() == installed.major() && v.minor() == installed.minor(),
            Follow::Minor => v.major() == installed.major(),
            Follow::Contract => true,
        })
        .cloned()
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    found
}

/// Whether a release of contract `contract` suits `follow` for a provider now at `current`;
/// `core` is the core provider's contract, `is_core` says this is the core provider.
pub fn suits(follow: Follow, is_core: bool, current: &str, core: Option<&str>, contract: &str) -> bool {
    match follow {
        Follow::Pin => false,
        Follow::Patch | Follow::Minor => contract == current,
        // The core provider leads a contract change; the others follow the core's contract.
        Follow::Contract if is_core => true,
        Follow::Contract => Some(contract) == core,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn versions(list: &[&str]) -> Vec<Version> {
        list.iter().map(|v| Version::parse(v, "test").unwrap()).collect()
    }

    fn names(list: Vec<Version>) -> Vec<String> {
        list.iter().map(|v| v.to_string()).collect()
    }

    #[test]
    fn each_policy_follows_its_own_releases_newest_first() {
        let all = versions(&["v0.1.0", "v0.1.1", "v0.1.3", "v0.2.0", "v0.2.1-rc.1", "v1.0.0", "v0.1.2"]);
        let installed = Version::parse("v0.1.1", "test").unwrap();
        assert_eq!(names(candidates(Follow::Patch, &installed, &all)), ["v0.1.3", "v0.1.2"]);
        assert_eq!(names(candidates(Follow::Minor, &installed, &all)), ["v0.2.0", "v0.1.3", "v0.1.2"]);
        assert_eq!(
            names(candidates(Follow::Contract, &installed, &all)),
            ["v1.0.0", "v0.2.0", "v0.1.3", "v0.1.2"]
        );
        assert!(candidates(Follow::Pin, &installed, &all).is_empty());
        let newest = Version::parse("v1.0.0", "test").unwrap();
        assert!(candidates(Follow::Contract, &newest, &all).is_empty());
    }

    #[test]
    fn only_the_core_provider_leads_across_contracts() {
        assert!(suits(Follow::Patch, false, "v1beta1", Some("v1beta1"), "v1beta1"));
        assert!(!suits(Follow::Minor, true, "v1beta1", Some("v1beta1"), "v1beta2"));
        assert!(suits(Follow::Contract, true, "v1beta1", Some("v1beta1"), "v1beta2"));
        assert!(!suits(Follow::Contract, false, "v1beta1", Some("v1beta1"), "v1beta2"));
        assert!(suits(Follow::Contract, false, "v1beta1", Some("v1beta2"), "v1beta2"));
        assert!(!suits(Follow::Pin, true, "v1beta1", Some("v1beta1"), "v1beta1"));
    }
}
