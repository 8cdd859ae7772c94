//! Objects deleted a short while ago, so that what a reconcile still running at their deletion
//! keeps of them (a failure, a status) is dropped when it ends.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::keys::Gone;

/// How long a deleted object is remembered: longer than any reconcile runs (every call in one
/// has a deadline).
const KEPT: Duration = Duration::from_secs(600);

/// Deleted objects by their [`crate::keys::failure_key`], with when they went.
#[derive(Default)]
pub struct Tombstones(Mutex<HashMap<String, (Gone, Instant)>>);

impl Tombstones {
    /// Remembers `gone`, and forgets those deleted longer ago than any reconcile runs.
    pub fn bury(&self, gone: &Gone, now: Instant) {
        let mut buried = self.0.lock().expect("not poisoned");
        buried.retain(|_, (_, at)| now.duration_since(*at) < KEPT);
        buried.insert(gone.key.clone(), (gone.clone(), now));
    }

    /// The object deleted under `key`, if one was lately.
    pub fn find(&self, key: &str) -> Option<Gone> {
        self.0.lock().expect("not poisoned").get(key).map(|(gone, _)| gone.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(name: &str) -> Gone {
        Gone { uid: format!("uid-{name}"), key: format!("ProviderConfig team-a/{name}") }
    }

    #[test]
    fn a_deleted_object_is_found_by_its_key_until_no_reconcile_can_still_run() {
        let tombstones = Tombstones::default();
        let start = Instant::now();
        tombstones.bury(&gone("pc"), start);
        assert_eq!(tombstones.find("ProviderConfig team-a/pc"), Some(gone("pc")));
        assert_eq!(tombstones.find("ProviderConfig team-b/pc"), None);
        // One buried later sweeps those older than any reconcile.
        tombstones.bury(&gone("other"), start + KEPT);
        assert_eq!(tombstones.find("ProviderConfig team-a/pc"), None);
        assert_eq!(tombstones.find("ProviderConfig team-a/other"), Some(gone("other")));
    }
}
