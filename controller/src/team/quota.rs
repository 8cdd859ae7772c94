//! The ResourceQuota of a team namespace, `butler-team-objects`: how many TenantClusters and
//! ProviderConfigs it may hold. Each one is held by both replicas' caches for as long as it
//! lives; without a bound, one team could make enough of them to run every replica out of
//! memory, and admission for every team with them. A backstop under the Team's own limits
//! (`maxClusters`, checked at admission with a clearer word), which no team member may change.

use serde_json::{Value, json};

/// The quota's name in each team namespace.
pub const NAME: &str = "butler-team-objects";

/// Objects of each kind a team namespace may hold unless `--team-object-quota` says otherwise.
pub const DEFAULT_OBJECTS: u32 = 100;

/// The kinds the quota counts, by their quota key.
const COUNTED: [&str; 2] =
    ["count/tenantclusters.butler.butlerlabs.dev", "count/providerconfigs.butler.butlerlabs.dev"];

/// How many objects of each counted kind a team namespace may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TeamQuota {
    pub objects: u32,
}

impl Default for TeamQuota {
    fn default() -> Self {
        TeamQuota { objects: DEFAULT_OBJECTS }
    }
}

impl TeamQuota {
    /// The quota's `spec.hard`.
    pub fn hard(&self) -> Value {
        let count = self.objects.to_string();
        Value::Object(COUNTED.iter().map(|key| (key.to_string(), json!(count))).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quota_counts_butlers_kinds_a_team_makes() {
        let hard = TeamQuota { objects: 20 }.hard();
        assert_eq!(
            hard,
            json!({"count/tenantclusters.butler.butlerlabs.dev": "20", "count/providerconfigs.butler.butlerlabs.dev": "20"})
        );
        assert_eq!(TeamQuota::default().objects, 100);
    }
}
