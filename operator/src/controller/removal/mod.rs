//! Taking a provider away: refused while workload clusters use it ([`users`]), then every
//! object its inventory names is deleted ([`delete`]), its CRDs only when asked and last.

pub mod delete;
pub mod users;
