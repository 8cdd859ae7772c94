//! [`UpgradePolicy`]: which newer releases of a provider the operator proposes by itself, and
//! [`MaintenanceWindow`]: when an upgrade may start.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Approval;

/// Which newer releases of the provider the operator looks for on its resync, and how the
/// upgrade it then makes (a ProviderUpgrade named `{provider label}-{version}`) is approved
/// and scheduled.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpgradePolicy {
    /// `Pin`: stay at spec.version (an upgrade by contract refuses to move it). `Patch`: the
    /// newest `vX.Y.*` of the same contract. `Minor`: the newest `vX.*.*` of the same contract.
    /// `Contract`: the newest release, for the core provider across contracts too (every
    /// provider of the namespace then moves with it); for another provider, the newest of the
    /// core provider's contract.
    pub follow: Follow,
    /// `Manual` (the default): the upgrade waits for `spec.approved` (or `butlerctl upgrade
    /// approve NAME`). `Automatic`: it runs once planned, in the maintenance window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Manual"))]
    pub approval: Option<Approval>,
    /// When the upgrades this policy makes may start; any time when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maintenance_window: Option<MaintenanceWindow>,
}

/// Which releases a policy follows.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum Follow {
    #[default]
    Pin,
    Patch,
    Minor,
    Contract,
}

/// Times an upgrade may start: each opens when `schedule` fires and stays open for
/// `duration`. An upgrade that started in a window runs to its end.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MaintenanceWindow {
    /// When a window opens, in cron's five fields as a Kubernetes CronJob reads them
    /// (`minute hour day-of-month month day-of-week`, for example `0 2 * * 6` for 02:00 on
    /// Saturdays), or `@daily`, `@weekly` and the like.
    #[schemars(length(min = 1))]
    pub schedule: String,
    /// How long a window stays open, as a Go duration (`4h`, `90m`).
    #[schemars(regex(pattern = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"))]
    pub duration: String,
    /// The IANA time zone the schedule is read in (`Europe/Berlin`); UTC when empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}
