//! The NetworkPool admission rules: a spec the allocator can read (each error names the
//! field), and no change that strands blocks live allocations hold (a reserved range over one,
//! the range or the CIDR shrunk under one). What gets in anyway (the webhook down, a forced
//! write) the pool reports by name; nothing is released.

use std::net::IpAddr;

use butler_core::api::NetworkPool;

use crate::ipam::networkpool::spec;

/// The most stranded allocations a refusal names.
const NAMED: usize = 10;

/// The rules of create and update. `held` are the blocks of the allocations that name the pool,
/// by allocation name; `old` is the pool before an update.
pub fn validate(
    pool: &NetworkPool,
    old: Option<&NetworkPool>,
    held: &[(String, (IpAddr, IpAddr))],
) -> Result<(), String> {
    let allocator = spec::allocator(pool)?;
    if old.is_some_and(|o| o.spec == pool.spec) {
        return Ok(());
    }
    let stranded: Vec<String> = held
        .iter()
        .filter_map(|(name, (start, end))| {
            allocator.breaks_spec(*start, *end).map(|e| format!("{name} ({e})"))
        })
        .collect();
    if stranded.is_empty() {
        return Ok(());
    }
    let mut named = stranded.iter().take(NAMED).cloned().collect::<Vec<_>>().join("; ");
    if stranded.len() > NAMED {
        named.push_str(&format!("; and {} more", stranded.len() - NAMED));
    }
    Err(format!(
        "this change would strand {} IPAllocations of the pool: {named}; keep their addresses allocatable, or delete those allocations first",
        stranded.len()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pool(spec: serde_json::Value) -> NetworkPool {
        serde_json::from_value(json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
            "metadata": {"name": "lab", "namespace": "butler-system"}, "spec": spec}))
        .unwrap()
    }

    fn held(name: &str, start: &str, end: &str) -> (String, (IpAddr, IpAddr)) {
        (name.into(), (start.parse().unwrap(), end.parse().unwrap()))
    }

    #[test]
    fn specs_are_read_and_changes_that_strand_blocks_refused() {
        let before = pool(json!({"cidr": "10.0.0.0/24"}));
        let blocks = [held("a", "10.0.0.0", "10.0.0.3"), held("b", "10.0.0.64", "10.0.0.71")];
        let cases = [
            (json!({"cidr": "10.0.0"}), Some("spec.cidr \"10.0.0\" is not a CIDR")),
            (json!({"cidr": "10.0.0.0/24", "reserved": [{"cidr": "10.0.0.128/25"}]}), None),
            (
                json!({"cidr": "10.0.0.0/24", "reserved": [{"cidr": "10.0.0.0/28"}]}),
                Some(
                    "this change would strand 1 IPAllocations of the pool: a (10.0.0.0-10.0.0.3 conflicts with reserved range 10.0.0.0/28 at address 10.0.0.0)",
                ),
            ),
            (
                json!({"cidr": "10.0.0.0/26"}),
                Some(
                    "this change would strand 1 IPAllocations of the pool: b (10.0.0.64-10.0.0.71 is outside the pool 10.0.0.0/26)",
                ),
            ),
            (
                json!({"cidr": "10.0.0.0/24", "tenantAllocation": {"start": "10.0.0.32"}}),
                Some(
                    "this change would strand 1 IPAllocations of the pool: a (10.0.0.0-10.0.0.3 is outside the pool's allocatable range 10.0.0.32-10.0.0.255)",
                ),
            ),
        ];
        for (spec, refusal) in cases {
            let result = validate(&pool(spec.clone()), Some(&before), &blocks);
            match refusal {
                None => assert_eq!(result, Ok(()), "{spec}"),
                Some(wanted) => {
                    let message = result.expect_err(&spec.to_string());
                    assert!(message.starts_with(wanted), "{spec}: {message}");
                }
            }
        }
        // A change of metadata only (the finalizer) is never refused for what holds already.
        let stranded = pool(json!({"cidr": "10.0.0.0/24", "reserved": [{"cidr": "10.0.0.0/28"}]}));
        assert_eq!(validate(&stranded, Some(&stranded.clone()), &blocks), Ok(()));
    }
}
