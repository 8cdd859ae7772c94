//! The checks of a provider that need no fetching, without I/O: one provider of a name, a
//! readable fetchConfig and version, a name the operator knows, and the core provider the
//! others need.

use butler_repository::Version;

use crate::api::{ProviderKind, ProviderSpec};
use crate::controller::report::reason::{Reason, Stop};
use crate::controller::vocabulary::ProviderView;

/// The checks that need no fetching: duplicates, fetchConfig, version, a known name, and the
/// core provider for the others.
pub fn preflight(
    me: &ProviderView,
    spec: &ProviderSpec,
    all: &[ProviderView],
    embedded: bool,
) -> Result<(), Stop> {
    let (key, kind) = (&me.key, me.key.kind);
    let older = all
        .iter()
        .filter(|o| o.key.kind == kind && o.key.name == key.name && o.key.namespace != key.namespace)
        .find(|o| {
            (o.created.as_str(), o.key.namespace.as_str()) < (me.created.as_str(), key.namespace.as_str())
        });
    if let Some(other) = older {
        return Err(Stop::new(
            Reason::DuplicateProvider,
            format!(
                "{} exists already; a provider may be installed once per cluster. Delete this one or the other",
                other.describe()
            ),
        ));
    }
    // One core provider per cluster, whatever its name: the others take their contract from it.
    let first_core = |o: &&ProviderView| {
        o.key.kind == ProviderKind::Core
            && o.key != *key
            && !o.deleting
            && (o.created.as_str(), o.key.namespace.as_str(), o.key.name.as_str())
                < (me.created.as_str(), key.namespace.as_str(), key.name.as_str())
    };
    if kind == ProviderKind::Core
        && let Some(other) = all.iter().find(first_core)
    {
        return Err(Stop::new(
            Reason::DuplicateProvider,
            format!(
                "{} exists already; a cluster has one core provider, which the others take their contract from. Delete this one",
                other.describe()
            ),
        ));
    }
    if let Some(fetch) = &spec.fetch_config
        && [fetch.url.is_some(), fetch.oci.is_some(), fetch.selector.is_some()].iter().filter(|s| **s).count()
            != 1
    {
        return Err(Stop::new(
            Reason::InvalidFetchConfig,
            "spec.fetchConfig needs exactly one of url, oci and selector",
        ));
    }
    if spec.fetch_config.is_none() && !embedded {
        return Err(Stop::new(
            Reason::UnknownProvider,
            format!(
                "no built-in repository knows the {kind} {:?}; add spec.fetchConfig with the url of its repository, or a selector of ConfigMaps that hold it",
                key.name
            ),
        ));
    }
    // spec/004: the config Secret lives beside the provider.
    if let Err(message) = crate::controller::wanted::config::beside_the_provider(&key.namespace, spec) {
        return Err(Stop::new(Reason::ConfigSecretUnreadable, message));
    }
    if let Some(version) = spec.version.as_deref().filter(|v| !v.is_empty())
        && Version::parse(version, "spec.version").is_err()
    {
        return Err(Stop::new(
            Reason::InvalidVersion,
            format!("spec.version {version:?} is not a semantic version; write it as vX.Y.Z"),
        ));
    }
    if kind != ProviderKind::Core {
        match core_of(all) {
            // Versions bumped together move the core provider first, as clusterctl upgrades
            // them; a pause (a contract move) is left to run, since the core waits for it.
            Some(core) if me.moving() && !me.paused && !core.paused && core.moving() => {
                return Err(Stop::new(
                    Reason::WaitingForCoreProvider,
                    format!(
                        "waiting for {} to move to {} first: the core provider is upgraded before the others",
                        core.describe(),
                        core.wanted_version.as_deref().unwrap_or_default()
                    ),
                ));
            }
            Some(core) if core.installed() => {}
            Some(core) => {
                return Err(Stop::new(
                    Reason::WaitingForCoreProvider,
                    format!("waiting for {} to be installed", core.describe()),
                ));
            }
            None => {
                return Err(Stop::new(
                    Reason::WaitingForCoreProvider,
                    "waiting for a CoreProvider: the core provider is installed first",
                ));
            }
        }
    }
    Ok(())
}

/// The core provider that is not being deleted: the first made, when someone made two (the
/// second is refused).
pub fn core_of(all: &[ProviderView]) -> Option<&ProviderView> {
    all.iter().filter(|o| o.key.kind == ProviderKind::Core && !o.deleting).min_by(|a, b| {
        (&a.created, &a.key.namespace, &a.key.name).cmp(&(&b.created, &b.key.namespace, &b.key.name))
    })
}
