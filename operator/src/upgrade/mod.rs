//! What an upgrade is, apart from who runs it: the providers as they stand ([`providers`]),
//! the moves to a target in the contract's order ([`moves`]), and what each move does to the
//! provider's objects ([`changes`]). The ProviderUpgrade controller plans and runs upgrades
//! with it; `butlerctl` shows the same plan and follows it. Nothing here writes to a cluster.

pub mod changes;
pub mod moves;
pub mod providers;
