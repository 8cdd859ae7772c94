//! ResourceQuota's object counts, as the quota admission plugin holds them: a create in a
//! namespace whose quota sets `count/{resource}.{group}` (`count/{resource}` for the core
//! group) is refused once the namespace holds that many. The counts are read live (a real
//! server reads the quota's `status.used`, which its controller keeps a moment behind).

use serde_json::Value;

use super::{Store, namespace_of};
use crate::errors::{ApiError, qualified};
use crate::registry::ResourceType;

/// The quota key that counts objects of `rt`.
fn count_key(rt: &ResourceType) -> String {
    match rt.group.as_str() {
        "" => format!("count/{}", rt.plural),
        group => format!("count/{}.{group}", rt.plural),
    }
}

impl Store {
    /// Refuses the create of one more `rt` in `namespace` beyond a quota's count.
    pub(super) fn check_quota(&self, rt: &ResourceType, namespace: &str, name: &str) -> Result<(), ApiError> {
        let Some(quotas) = self.registry.find("", "v1", "resourcequotas") else { return Ok(()) };
        let key = count_key(rt);
        let limits: Vec<(String, i64)> = self
            .objects
            .get(&quotas.storage_key())
            .into_iter()
            .flat_map(|all| all.values())
            .filter(|q| namespace_of(q) == namespace)
            .filter_map(|q| {
                let hard = q["spec"]["hard"].get(&key)?;
                let limit = match hard {
                    Value::String(s) => s.parse().ok()?,
                    Value::Number(n) => n.as_i64()?,
                    _ => return None,
                };
                Some((q["metadata"]["name"].as_str().unwrap_or_default().to_string(), limit))
            })
            .collect();
        if limits.is_empty() {
            return Ok(());
        }
        let used = self
            .objects
            .get(&rt.storage_key())
            .map_or(0, |all| all.values().filter(|o| namespace_of(o) == namespace).count())
            as i64;
        match limits.into_iter().find(|(_, limit)| used + 1 > *limit) {
            None => Ok(()),
            Some((quota, limit)) => Err(ApiError::forbidden(format!(
                "{} \"{name}\" is forbidden: exceeded quota: {quota}, requested: {key}=1, used: {key}={used}, limited: {key}={limit}",
                qualified(&rt.group, &rt.plural)
            ))),
        }
    }
}
