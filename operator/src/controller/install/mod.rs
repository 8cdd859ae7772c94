//! Making what is wanted so, and keeping it so: the checks before any fetch ([`preflight`]) and
//! the plan decided without I/O ([`plan`]), the
//! reconcile that reads what it needs ([`observe`]), plans and writes it ([`reconcile`],
//! [`applying`]), the record of what was installed ([`installed`],
//! kept by [`inventory`]), taking over what clusterctl or cluster-api-operator installed
//! ([`adopt`]), storage-version migration ([`storage`]), drift and its repair ([`drift`],
//! [`repair`]), and the authorizer's refusals read back into rules ([`forbidden`]). These write
//! the provider's objects; they never delete one the inventory does not name.

pub mod adopt;
pub mod applying;
pub mod drift;
pub mod forbidden;
pub mod installed;
pub mod inventory;
pub mod observe;
pub mod plan;
pub mod preflight;
pub mod reconcile;
pub mod repair;
pub mod storage;
