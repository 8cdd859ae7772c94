//! What a reconcile reads before it plans: the operator's config file, the provider's config
//! Secret, its release (fetched, or kept from an earlier reconcile) and additional manifests,
//! its inventory and its Deployments. A stop names what could not be read.

use butler_repository::{ClusterctlConfig, RemoteOptions, Version};

use crate::api::ProviderSpec;
use crate::controller::context::Context;
use crate::controller::error::Error;
use crate::controller::install::installed::Inventory;
use crate::controller::install::inventory::inventory_of;
use crate::controller::install::preflight::core_of;
use crate::controller::report::reason::{Reason, Stop};
use crate::controller::vocabulary::{Fetched, LiveDeployment, ProviderKey, ProviderView};
use crate::controller::wanted::config::{self, ConfigSecretValues, Redactor};
use crate::controller::wanted::fetch::{self, Installed};

/// Why observing stopped: a reason for the status (with the redactor of what was read so far),
/// or a failure of the API server.
pub(super) enum Unobserved {
    Stop(Stop, Redactor),
    Failed(Error),
}

/// What an install reads besides the provider objects.
pub(super) struct Observed {
    pub(super) values: ConfigSecretValues,
    /// The YAML of `spec.additionalManifests`.
    pub(super) additional: Option<String>,
    pub(super) fetched: Fetched,
    pub(super) previous: Option<Inventory>,
    pub(super) live: Vec<LiveDeployment>,
}

/// Releases kept in memory at the most (each a components file, often a megabyte).
const MOST_RELEASES: usize = 32;

/// The most bytes of components the releases kept in memory hold together (a components file
/// may hold 32 MiB).
const MOST_RELEASE_BYTES: usize = 64 << 20;

/// The operator's config file, read at every reconcile: a mounted ConfigMap that changes
/// takes effect without a restart.
pub(super) fn operator_config(ctx: &Context) -> Result<ClusterctlConfig, Stop> {
    match &ctx.config_path {
        Some(path) => ClusterctlConfig::load(Some(path)).map_err(|e| {
            Stop::new(
                Reason::OperatorConfigUnreadable,
                format!("the operator's config file: {e}; fix it (--config), the provider waits"),
            )
        }),
        None => Ok(ClusterctlConfig::default()),
    }
}

/// Reads the config Secret, fetches the release, and reads the inventory and the Deployments.
/// A stop comes with the redactor of what was read so far.
pub(super) async fn observe(
    ctx: &Context,
    key: &ProviderKey,
    me: &ProviderView,
    all: &[ProviderView],
    spec: &ProviderSpec,
    operator_config: &ClusterctlConfig,
    kept: Option<&(String, String)>,
) -> Result<Observed, Unobserved> {
    // The Secret's messages name keys, never values: nothing to redact yet.
    let values = config::load(
        &ctx.client,
        &ctx.secrets,
        &key.namespace,
        spec,
        &fetch::operator_credentials_for(
            spec,
            &fetch::operator_remote(&ctx.remote, operator_config),
            &ctx.policy.credential_hosts,
        ),
    )
    .await
    .map_err(|config::Unreadable(message)| {
        let nothing = Redactor::new(&Default::default(), &Default::default());
        Unobserved::Stop(Stop::new(Reason::ConfigSecretUnreadable, message), nothing)
    })?;
    let fetched = fetch_release(ctx, key, me, all, spec, &values.remote, operator_config, kept)
        .await
        .map_err(|message| {
            let stop =
                Stop::new(Reason::FetchFailed, format!("cannot fetch the provider's release: {message}"));
            Unobserved::Stop(stop, Redactor::new(&values.variables, &operator_config.variables))
        })?;
    let additional = additional_manifests(ctx, key, spec).await.map_err(|message| {
        let stop = Stop::new(Reason::RenderFailed, message);
        Unobserved::Stop(stop, Redactor::new(&values.variables, &operator_config.variables))
    })?;
    let previous = inventory_of(ctx, key, &me.uid).await.map_err(Unobserved::Failed)?;
    let live = ctx.live_deployments(key);
    Ok(Observed { values, additional, fetched, previous, live })
}

/// The `manifests` of the ConfigMap `spec.additionalManifests` names, which must be beside the
/// provider object (never read elsewhere).
async fn additional_manifests(
    ctx: &Context,
    key: &ProviderKey,
    spec: &ProviderSpec,
) -> Result<Option<String>, String> {
    let Some(reference) = &spec.additional_manifests else { return Ok(None) };
    if let Some(other) = reference.namespace.as_deref().filter(|n| !n.is_empty() && *n != key.namespace) {
        return Err(format!(
            "spec.additionalManifests.namespace {other:?} is not the provider's namespace {:?}; the ConfigMap must be beside the provider object: create it there and drop the namespace",
            key.namespace
        ));
    }
    let what = format!("the ConfigMap {}/{} of spec.additionalManifests", key.namespace, reference.name);
    let api: kube::Api<k8s_openapi::api::core::v1::ConfigMap> =
        kube::Api::namespaced(ctx.client.clone(), &key.namespace);
    let found = api
        .get_opt(&reference.name)
        .await
        .map_err(|e| format!("cannot read {what}: {}", butler_runtime::error::describe(&e)))?;
    let configmap = found
        .ok_or_else(|| format!("{what} does not exist; create it, or remove spec.additionalManifests"))?;
    let manifests = configmap.data.and_then(|mut d| d.remove("manifests"));
    manifests.map(Some).ok_or_else(|| format!("{what} has no key \"manifests\"; put the YAML to apply there"))
}

/// Fetches the release the spec and the installed state ask for. Releases of remote URLs are
/// kept in memory, since a published release does not change.
#[allow(clippy::too_many_arguments)]
pub(super) async fn fetch_release(
    ctx: &Context,
    key: &ProviderKey,
    me: &ProviderView,
    all: &[ProviderView],
    spec: &ProviderSpec,
    remote: &RemoteOptions,
    operator_config: &ClusterctlConfig,
    kept: Option<&(String, String)>,
) -> Result<Fetched, String> {
    let repo = fetch::repository(
        &ctx.client,
        key.kind,
        &key.namespace,
        &key.name,
        spec,
        remote,
        operator_config,
        ctx.policy.local_root.as_deref(),
    )?;
    let core_contract = core_of(all).and_then(|c| c.contract.clone());
    let installed = me
        .installed_version
        .as_deref()
        .zip(me.contract.as_deref())
        .map(|(version, contract)| Installed { version, contract });
    let choice = fetch::choose_version(key.kind, spec, installed, core_contract.as_deref());
    // One deadline for the whole fetch: each request has its own timeout, but a repository of
    // endless pages (or one that answers each just in time) must not hold the reconcile.
    let deadline = tokio::time::Instant::now() + ctx.fetch_deadline;
    let late = || {
        format!(
            "the fetch did not finish within {} s (--fetch-deadline, every request of it together); the repository is slow or holds too many pages: it is tried again, or pin spec.version",
            ctx.fetch_deadline.as_secs()
        )
    };
    let version =
        tokio::time::timeout_at(deadline, fetch::resolve(&repo, &choice)).await.map_err(|_| late())??;
    // Kept apart by the credentials that fetched it (a provider that names the same private
    // release without them must fetch it, and be refused, itself) and by its pins (a release
    // kept unpinned is checked when a pin comes).
    let pins = spec.fetch_config.as_ref().and_then(|f| f.sha256.as_ref());
    let cache_key = fetch::remote_url(spec, operator_config, key.kind, &key.name).map(|u| {
        let pins = serde_json::to_string(&pins).expect("pins serialize");
        format!("{u}#{version}#{}#{pins}", remote.credentials_fingerprint())
    });
    if let Some(hit) =
        cache_key.as_ref().and_then(|k| ctx.releases.lock().expect("not poisoned").get(k).cloned())
    {
        return Ok(hit);
    }
    let from_kept = match kept {
        Some((to, sha256)) if Version::parse(to, "rollback-to").ok().as_ref() == Some(&version) => {
            crate::controller::wanted::keep::read(&ctx.client, key, to, sha256).await
        }
        _ => None,
    };
    let shown = version.to_string();
    let fetched = match from_kept {
        Some(fetched) => fetched,
        None => tokio::time::timeout_at(deadline, fetch::release(&repo, version))
            .await
            .map_err(|_| late())?
            .map_err(|e| {
                match fetch::butler_name_hint(key.kind, &key.name, spec, operator_config, &shown) {
                    Some(hint) => format!("{e}; {hint}"),
                    None => e,
                }
            })?,
    };
    if let Some(k) = cache_key {
        let mut releases = ctx.releases.lock().expect("not poisoned");
        // Bounded: rotated credentials and old versions would otherwise pile up.
        let bytes: usize = releases.values().map(|r| r.components.len()).sum();
        if releases.len() >= MOST_RELEASES || bytes + fetched.components.len() > MOST_RELEASE_BYTES {
            releases.clear();
        }
        releases.insert(k, fetched.clone());
    }
    Ok(fetched)
}
