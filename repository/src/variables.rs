//! Where variable values come from, in clusterctl's order: explicit values (flags), then the
//! environment (a variable set to "" counts as set), then the clusterctl config file.

use std::collections::BTreeMap;

/// Variable values from the three places, looked up in order.
#[derive(Debug, Clone, Default)]
pub struct Variables {
    pub explicit: BTreeMap<String, String>,
    /// Read the process environment (tests turn it off).
    pub use_environment: bool,
    pub file: BTreeMap<String, String>,
}

impl Variables {
    pub fn lookup(&self, name: &str) -> Option<String> {
        self.explicit
            .get(name)
            .cloned()
            .or_else(|| if self.use_environment { std::env::var(name).ok() } else { None })
            .or_else(|| self.file.get(name).cloned())
    }
}
