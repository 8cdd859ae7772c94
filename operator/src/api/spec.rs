//! [`ProviderSpec`]: what a provider object asks for.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Affinity, EnvVar, LocalObjectReference, ResourceRequirements, Toleration};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::core::Duration;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Go's duration syntax as `time.ParseDuration` reads it (for example `10m`, `1h30m`, `90s`).
pub(crate) const DURATION_PATTERN: &str = r"^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$";

/// The desired state of a provider: which version, how its controller manager and Deployment are
/// set up, where its variables and its components come from, and whether it is paused.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.upgradePolicy) || self.upgradePolicy.follow == 'Pin' || has(self.version)",
    "message": "spec.upgradePolicy follows releases from spec.version: set spec.version too"
}]))]
pub struct ProviderSpec {
    /// Version of the provider to install, with the leading `v` (for example `v1.2.0`). When
    /// empty, the newest version that speaks the core provider's contract; the version chosen is
    /// shown in status.installedVersion and never written back here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Settings of the provider's controller manager, passed to the `manager` container as flags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<ManagerSpec>,
    /// Changes to the provider's Deployment: replicas, scheduling and per-container settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSpec>,
    /// The Secret whose keys are the provider's variables (credentials and settings that its
    /// components YAML uses as `${VARIABLE}`), and may hold `GITHUB_TOKEN` or
    /// `GITLAB_ACCESS_TOKEN` (or clusterctl's `github-token`, `gitlab-access-token`) for
    /// fetching. Changing its data re-renders the provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_secret: Option<ConfigSecretReference>,
    /// Where the provider's components and metadata come from. When empty, Butler's embedded
    /// repository, which knows the core provider `butler` and the infrastructure providers
    /// `harvester`, `nutanix`, `proxmox`, `aws`, `azure` and `gcp`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fetch_config: Option<FetchConfig>,
    /// Scale the provider's Deployments to zero, keeping the replica counts to restore. Pause
    /// every provider before an upgrade that changes the contract.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// What happens to the provider's CRDs when the provider object is deleted: Keep (the
    /// default, as clusterctl delete does without --include-crd) leaves them and every object of
    /// them; Delete removes them, and with them every object of them, so the deletion waits
    /// until no such object is left.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crd_deletion_policy: Option<CrdDeletionPolicy>,
    /// Settings of other Deployments of the components than the manager's, by their exact name
    /// (cluster-api-operator's field): each with its own `manager` and `deployment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_deployments: Option<BTreeMap<String, AdditionalDeployment>>,
    /// A ConfigMap in the provider's namespace whose key `manifests` holds more YAML to apply
    /// with the provider (cluster-api-operator's field): processed as the components are, held
    /// to the same policy, and pruned with the provider, or when it leaves the ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_manifests: Option<ConfigMapReference>,
    /// RFC 7396 merge patches of the rendered objects, as YAML, each naming the `kind` (and
    /// optionally `apiVersion`, `metadata.name` and `metadata.namespace`) of the objects it
    /// changes (cluster-api-operator's field); applied after `manager` and `deployment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_patches: Option<Vec<String>>,
    /// Patches of the rendered objects a target selects: a merge patch (a map) or RFC 6902
    /// operations (a list), as YAML; applied after `manifestPatches`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub patches: Option<Vec<ProviderPatch>>,
    /// Which newer releases the operator looks for and proposes as ProviderUpgrades, and when
    /// they may run. Without it (or with `follow: Pin`) the provider stays at spec.version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upgrade_policy: Option<super::UpgradePolicy>,
}

/// A patch of some of a provider's rendered objects.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderPatch {
    /// The patch, as YAML: a map is a merge patch, a list RFC 6902 operations.
    #[schemars(length(min = 1))]
    pub patch: String,
    /// The objects it applies to; every one when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<PatchTarget>,
}

/// Which rendered objects a patch applies to; every field that is set must match.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PatchTarget {
    /// API group (`apps`; empty for the core group).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// API version (`v1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Kind (`Deployment`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Name of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Labels it carries, as kubectl writes a selector (`tier=manager,!canary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<String>,
}

/// A ConfigMap beside the provider object.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ConfigMapReference {
    /// Name of the ConfigMap.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Its namespace; only the provider's own is accepted (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Settings of one more Deployment of a provider's components.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AdditionalDeployment {
    /// Flags of its `manager` container, as `spec.manager`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manager: Option<ManagerSpec>,
    /// Changes to it, as `spec.deployment`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<DeploymentSpec>,
}

// What happens to a provider's CRDs when it is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum CrdDeletionPolicy {
    #[default]
    Keep,
    Delete,
}

/// A reference to the Secret with a provider's variables.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ConfigSecretReference {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the Secret. When empty, the provider object's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Where a provider's components and metadata come from: exactly one of url, oci and selector.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "(has(self.url) ? 1 : 0) + (has(self.oci) ? 1 : 0) + (has(self.selector) ? 1 : 0) == 1",
    "message": "fetchConfig needs exactly one of url, oci or selector"
}]))]
pub struct FetchConfig {
    /// A clusterctl provider repository URL: a GitHub release
    /// (`https://github.com/{owner}/{repo}/releases/latest/{components}.yaml`), a GitLab generic
    /// package (`https://gitlab.{host}/api/v4/projects/{project}/packages/generic/{package}/{version}/{components}.yaml`)
    /// or a local folder (`file:///{base}/{provider}/latest/{components}.yaml`), or an OCI
    /// repository (`oci://{registry}/{repository}[:{version}][@sha256:{digest}]`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// An OCI repository as cluster-api-operator's field writes it:
    /// `{registry}/{repository}[:{version}]`, with `http://` in front for a registry served over
    /// plain HTTP. Credentials come from the config Secret (`OCI_USERNAME` and `OCI_PASSWORD`,
    /// `OCI_ACCESS_TOKEN`, or a Docker config.json under `.dockerconfigjson`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oci: Option<String>,
    /// Selects ConfigMaps in the provider's namespace, one per version, each with the data keys
    /// `metadata` and `components` (for air-gapped clusters). The version comes from the label
    /// `provider.cluster.x-k8s.io/version`, else from the ConfigMap's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The sha256 (64 lowercase hex digits) of files of the release, by file name:
    /// `metadata.yaml` and the components file (`infrastructure-components.yaml` and the like).
    /// A file whose content differs is refused and nothing of the release is applied. Pins
    /// hold one release: set spec.version (or a version in the URL) too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("additionalProperties" = {"type": "string", "pattern": "^[0-9a-f]{64}$"}))]
    pub sha256: Option<BTreeMap<String, String>>,
}

/// Controller manager settings, passed to the provider's `manager` container as flags. They win
/// over the same flags in deployment.containers[].args.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ManagerSpec {
    /// Least frequency at which every watched object is reconciled (`--sync-period`), as a Go
    /// duration (for example `10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub sync_period: Option<Duration>,
    /// Leader election of the controller manager.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_election: Option<LeaderElectionConfiguration>,
    /// Restrict the manager's cache to one namespace (`--namespace`); by Butler's deployment
    /// model providers watch every namespace, so this is normally empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_namespace: Option<String>,
    /// How long the manager waits for its controllers to stop on shutdown, as a Go duration.
    #[serde(rename = "gracefulShutDown", default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub graceful_shutdown_timeout: Option<Duration>,
    /// Prometheus metrics endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<ControllerMetrics>,
    /// Health probe endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ControllerHealth>,
    /// Admission webhook server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<ControllerWebhook>,
    /// Address of the pprof profiler (`--profiler-address`, for example `localhost:6060`); when
    /// empty the profiler is off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profiler_address: Option<String>,
    /// Reconciles each controller may run at once (`--max-concurrent-reconciles`). A more
    /// specific concurrency flag in containers[].args wins over it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_concurrent_reconciles: Option<i32>,
    /// Log verbosity (`--v`), passed only when it is not 1, the managers' default (as
    /// cluster-api-operator does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub verbosity: Option<i32>,
    /// Debug session: verbosity 5 and the profiler on `localhost:6060`. No other manager field
    /// may be set with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debug: Option<bool>,
    /// Provider feature flags (`--feature-gates`, passed sorted by name and joined with the
    /// gates the manager's arguments set already; these win for a gate both name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_gates: Option<BTreeMap<String, bool>>,
    /// Settings of the manager's controllers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub controller: Option<ControllerConfigurationSpec>,
    /// More flags of the manager, by name (`--` optional): `{diagnostics-address: ":8443"}`
    /// becomes `--diagnostics-address=:8443`. They win over the same flags in
    /// deployment.containers[].args and the fields above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub additional_args: Option<BTreeMap<String, String>>,
}

/// Settings of a manager's controllers.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerConfigurationSpec {
    /// Reconciles at once per kind (`ReplicaSet.apps`: 5), each passed as
    /// `--{kind in lower case}-concurrency` (`--replicaset.apps-concurrency=5`), as
    /// cluster-api-operator does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_kind_concurrency: Option<BTreeMap<String, i32>>,
    /// How long the caches may take to sync, as a Go duration or (as cluster-api-operator
    /// writes it) an integer of nanoseconds; accepted though no manager flag takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_sync_timeout: Option<super::NanosOrDuration>,
    /// Whether panics are recovered; accepted (cluster-api-operator's field) though no manager
    /// flag takes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recover_panic: Option<bool>,
}

/// Leader election of a controller manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct LeaderElectionConfiguration {
    /// Take a leader lease before working; needed when more than one replica runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_elect: Option<bool>,
    /// How long a lease lasts without renewal before others may take it, as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub lease_duration: Option<Duration>,
    /// How long the leader keeps trying to renew before it gives up, as a Go duration; at most
    /// leaseDuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub renew_deadline: Option<Duration>,
    /// Wait between attempts to take or renew the lease, as a Go duration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(pattern(DURATION_PATTERN))]
    pub retry_period: Option<Duration>,
    /// Kind of object that holds the lock (normally `leases`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_lock: Option<String>,
    /// Name of the lock object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
    /// Namespace of the lock object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_namespace: Option<String>,
}

/// Metrics endpoint of a controller manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerMetrics {
    /// Address the metrics endpoint listens on, for example `:8080`; `0` turns it off. Passed
    /// as `--metrics-bind-addr`, or as `--diagnostics-address` to a manager whose arguments
    /// use that flag (Cluster API v1.9 and later removed `--metrics-bind-addr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind_address: Option<String>,
    /// Address of the diagnostics endpoint (`--diagnostics-address`, Cluster API v1.9 and
    /// later), which serves metrics over HTTPS with authorization.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diagnostics_address: Option<String>,
    /// Serve diagnostics over plain HTTP without authorization (`--insecure-diagnostics`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_diagnostics: Option<bool>,
}

/// Health probe endpoint of a controller manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerHealth {
    /// Address the health probes listen on (`--health-addr`, for example `:9440`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_probe_bind_address: Option<String>,
    /// Path of the readiness probe; the providers' default is `readyz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness_endpoint_name: Option<String>,
    /// Path of the liveness probe; the providers' default is `healthz`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub liveness_endpoint_name: Option<String>,
}

/// Admission webhook server of a controller manager.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ControllerWebhook {
    /// Port the webhook server listens on (`--webhook-port`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
    /// Host name the webhook server binds to (`--webhook-host`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Folder with the webhook server's `tls.crt` and `tls.key` (`--webhook-cert-dir`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_dir: Option<String>,
}

/// Changes to a provider's Deployment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    /// Number of replicas; when empty, what the components YAML says (normally 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i32>,
    /// Node labels a node must carry for the provider's pods to run on it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Taints the provider's pods tolerate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Scheduling constraints of the provider's pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Per-container changes; each name must be a container of the provider's Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub containers: Option<Vec<ContainerSpec>>,
    /// The ServiceAccount the provider's pods run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
    /// Secrets with the credentials of the registries the provider's images come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secrets: Option<Vec<LocalObjectReference>>,
}

/// Changes to one container of a provider's Deployment.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ContainerSpec {
    /// Name of the container (for example `manager`).
    #[schemars(length(min = 1))]
    pub name: String,
    /// Replace parts of the container's image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageMeta>,
    /// The container's whole image reference (cluster-api-operator's spelling); not with
    /// `image`.
    #[serde(default, rename = "imageUrl", skip_serializing_if = "Option::is_none")]
    pub image_url: Option<String>,
    /// The container's entrypoint, replacing the image's and the components'.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Vec<String>>,
    /// Extra flags, without the leading dashes (`{"awscluster-concurrency": "12"}` becomes
    /// `--awscluster-concurrency=12`). Manager settings win over the same flags here; the
    /// `namespace` flag is ignored because providers watch every namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<BTreeMap<String, String>>,
    /// Environment variables to set in the container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Vec<EnvVar>>,
    /// CPU and memory requests and limits; when empty, those of the components YAML.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
}

/// Parts of a container image to replace; the parts left empty are kept.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ImageMeta {
    /// Registry and path to pull from (for example `registry.internal/mirror`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<String>,
    /// Image name (for example `cluster-api-controller`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Image tag (for example `v1.8.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}
