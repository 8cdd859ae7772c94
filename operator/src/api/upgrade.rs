//! [`ProviderUpgrade`]: an upgrade of the providers of a namespace as an object, planned by the
//! operator, approved by a person (or by itself), and run step by step in the contract's order.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An upgrade of the providers of its namespace: every one to the newest release of a contract,
/// or the providers named to the versions named. The operator writes the plan into the status
/// before anything changes, waits for approval (`approval: Automatic`, or `approved: true`), then
/// runs the steps in the contract's order (pause every provider when the contract changes, the
/// core provider, the others, unpause, every provider Ready), each recorded in the status.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operator.butlerlabs.dev",
    version = "v1alpha1",
    kind = "ProviderUpgrade",
    plural = "providerupgrades",
    shortname = "provupgrade",
    namespaced,
    status = "ProviderUpgradeStatus",
    category = "butler",
    printcolumn(name = "Contract", type_ = "string", json_path = ".status.toContract"),
    printcolumn(name = "Approval", type_ = "string", json_path = ".spec.approval"),
    printcolumn(
        name = "Approved",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Approved\")].status"
    ),
    printcolumn(name = "Step", type_ = "string", json_path = ".status.currentStep"),
    printcolumn(
        name = "Succeeded",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Succeeded\")].status"
    ),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.contract) != has(self.providers)",
    "message": "give spec.contract or spec.providers, one of them"
}]))]
pub struct ProviderUpgradeSpec {
    /// Every provider of the namespace to its newest release of this contract (for example
    /// `v1beta2`). Give this or `providers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contract: Option<String>,
    /// The providers to upgrade, each to a version. Give this or `contract`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub providers: Option<Vec<UpgradeTarget>>,
    /// `Manual` (the default): the plan waits until `approved` is true (or `butlerctl upgrade
    /// approve NAME`). `Automatic`: it runs once planned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Manual"))]
    pub approval: Option<Approval>,
    /// Approves the plan; a GitOps commit can set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<bool>,
    /// The upgrade this one rolls back (`butlerctl upgrade rollback` writes it): each provider
    /// goes back to the version it had before that one, a downgrade the operator allows for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<String>,
    /// How long one step may take before the upgrade fails, as a Go duration (`10m` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub step_timeout: Option<String>,
    /// When the upgrade may start (an upgrade policy copies its own); any time when empty.
    /// Once started, it runs to its end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<super::MaintenanceWindow>,
}

/// One provider to upgrade.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct UpgradeTarget {
    /// Its kind: `CoreProvider`, `InfrastructureProvider`, ...
    pub kind: String,
    /// Its name, in the upgrade's namespace.
    pub name: String,
    /// The version to install (`v1.2.0`).
    pub version: String,
}

/// Whether the plan runs by itself.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Approval {
    #[default]
    Manual,
    Automatic,
}

/// What the operator planned and did.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderUpgradeStatus {
    /// The core provider's contract before the upgrade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_contract: Option<String>,
    /// Its contract after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to_contract: Option<String>,
    /// The moves, the core provider first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plan: Vec<PlannedMove>,
    /// The steps in the order they run, each with when it ran and how it ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<UpgradeStep>,
    /// The stored objects of the moved providers' CRDs written again at a new storage version,
    /// as the migrations go.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_migrations: Vec<StorageMigration>,
    /// The step under way, for `kubectl get`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_step: Option<String>,
    /// `Planned`, `Approved`, `Progressing`, `Succeeded` (False once it failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The generation of the spec the plan was made for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}

/// One provider's move.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PlannedMove {
    pub kind: String,
    pub name: String,
    /// The version installed when the plan was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    pub to: String,
    /// What the move does to the provider's objects, both versions rendered as the operator
    /// renders them; none when they could not be compared (`Planned` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects: Option<ObjectChanges>,
}

/// The objects a move adds, changes and removes, counted by kind.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectChanges {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub added: BTreeMap<String, i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub changed: BTreeMap<String, i64>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub removed: BTreeMap<String, i64>,
    /// CRDs the new version no longer has: kept, with their objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_crds: Vec<String>,
    /// CRDs whose storage version moves (`gadgets.x.io: v1alpha1 -> v1beta1`); their stored
    /// objects are written again after the move.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage_versions: Vec<String>,
}

/// The migration of one CRD's stored objects to its storage version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct StorageMigration {
    /// The CRD (`gadgets.x.io`).
    pub crd: String,
    /// The provider whose upgrade moved it: `InfrastructureProvider widget`.
    pub provider: String,
    /// The storage version its objects are written at.
    pub version: String,
    /// Objects written so far.
    pub written: i64,
    /// Objects deleted before their turn came.
    pub gone: i64,
    /// `Running` until every object is written and the CRD's storedVersions trimmed.
    pub state: StepState,
}

/// One step of the upgrade.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeStep {
    /// What it does, for people: `Pause every provider`, `Upgrade CoreProvider butler to v0.2.0`.
    pub name: String,
    pub action: StepAction,
    /// The provider an `Upgrade` moves: its kind, name and target version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The move is a roll-back: the provider may go back across minor versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub downgrade: Option<bool>,
    /// The release the provider ran before, kept in its namespace as the step started, for a
    /// roll-back without network (a release from the cluster or compiled in needs none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kept: Option<KeptRelease>,
    pub state: StepState,
    /// RFC 3339 time it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// RFC 3339 time it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<String>,
    /// How it ended, or why it waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A release kept for a roll-back.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KeptRelease {
    /// The ConfigMap, in the provider's namespace, that keeps it.
    pub config_map: String,
    pub version: String,
    /// The sha256 of what it keeps: a roll-back uses it only if it still holds that.
    pub sha256: String,
}

/// What a step does.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StepAction {
    /// Pause every provider of the namespace and wait until each is held at 0 replicas.
    #[default]
    Pause,
    /// Set one provider's version and wait until it is installed.
    Upgrade,
    /// Unpause the providers this upgrade paused.
    Unpause,
    /// Wait until every running provider is Ready.
    Ready,
}

/// Where a step stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum StepState {
    #[default]
    Pending,
    Running,
    Succeeded,
    Failed,
}
