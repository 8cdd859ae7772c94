//! A NetworkPool's spec read into the allocator's terms, every error naming the field.

use std::net::IpAddr;

use butler_core::api::{AllocationType, NetworkPool};
use butler_core::ipam::{IpamError, Pool, PoolSpec};
use ipnet::IpNet;

/// Addresses per tenant when the pool does not say (spec/002).
pub const DEFAULT_NODES_PER_TENANT: i32 = 5;
pub const DEFAULT_LB_PER_TENANT: i32 = 8;

/// The pools of `others` whose CIDR overlaps `pool`'s, unless both allow it, as
/// `namespace/name (cidr)`; pools whose CIDR does not read are left to their own checks.
pub fn overlapping<'a>(pool: &NetworkPool, others: impl Iterator<Item = &'a NetworkPool>) -> Vec<String> {
    let Ok(mine) = pool.spec.cidr.trim().parse::<IpNet>() else { return Vec::new() };
    let shares = |p: &NetworkPool| p.spec.allow_overlap == Some(true);
    let me = (pool.metadata.namespace.as_deref(), pool.metadata.name.as_deref());
    others
        .filter(|o| (o.metadata.namespace.as_deref(), o.metadata.name.as_deref()) != me)
        .filter(|o| !(shares(pool) && shares(o)))
        .filter_map(|o| {
            let theirs = o.spec.cidr.trim().parse::<IpNet>().ok()?;
            let meet = mine.contains(&theirs.network()) || theirs.contains(&mine.network());
            meet.then(|| {
                format!(
                    "{}/{} ({})",
                    o.metadata.namespace.as_deref().unwrap_or_default(),
                    o.metadata.name.as_deref().unwrap_or_default(),
                    o.spec.cidr.trim()
                )
            })
        })
        .collect()
}

/// Why a pool overlaps: a message for its status or for admission.
pub fn overlap_message(pool: &NetworkPool, with: &[String]) -> String {
    format!(
        "spec.cidr {} overlaps NetworkPool {}; pools hand out the same addresses only when both set spec.allowOverlap",
        pool.spec.cidr.trim(),
        with.join(", ")
    )
}

/// An empty allocator built from the pool's spec, or what is wrong with the spec.
pub fn allocator(pool: &NetworkPool) -> Result<Pool, String> {
    let spec = &pool.spec;
    let cidr: IpNet = spec.cidr.trim().parse().map_err(|_| {
        format!(
            "spec.cidr {:?} is not a CIDR; write it as address/prefix (for example 10.40.0.0/21)",
            spec.cidr
        )
    })?;
    let mut built = PoolSpec::new(cidr);
    let range = spec.tenant_allocation.as_ref();
    let address = |field: &str, value: Option<&String>| -> Result<Option<IpAddr>, String> {
        value
            .filter(|v| !v.trim().is_empty())
            .map(|v| {
                v.trim().parse::<IpAddr>().map_err(|_| {
                    format!(
                        "spec.tenantAllocation.{field} {v:?} is not an IP address (for example 10.40.1.0)"
                    )
                })
            })
            .transpose()
    };
    let start = address("start", range.and_then(|r| r.start.as_ref()))?;
    let end = address("end", range.and_then(|r| r.end.as_ref()))?;
    if start.is_some() || end.is_some() {
        let trunc = cidr.trunc();
        built = built.with_allocatable(start.unwrap_or(trunc.network()), end.unwrap_or(trunc.broadcast()));
    }
    for (i, reserved) in spec.reserved.iter().flatten().enumerate() {
        let net: IpNet = reserved.cidr.trim().parse().map_err(|_| {
            format!(
                "spec.reserved[{i}].cidr {:?} is not a CIDR; write it as address/prefix (for example 10.40.0.0/28)",
                reserved.cidr
            )
        })?;
        built = built.with_reserved(net);
    }
    Pool::new(built).map_err(|e| match e {
        IpamError::StartAfterEnd { .. } | IpamError::AllocatableOutsideCidr { .. } => {
            format!("spec.tenantAllocation: {e}")
        }
        other => format!("spec: {other}"),
    })
}

/// How many addresses an allocation of `type_` without `spec.count` gets from this pool.
pub fn default_count(pool: &NetworkPool, type_: AllocationType) -> i32 {
    let defaults = pool.spec.tenant_allocation.as_ref().and_then(|t| t.defaults.as_ref());
    match type_ {
        AllocationType::Nodes => {
            defaults.and_then(|d| d.nodes_per_tenant).unwrap_or(DEFAULT_NODES_PER_TENANT)
        }
        AllocationType::Loadbalancer => {
            defaults.and_then(|d| d.lb_pool_per_tenant).unwrap_or(DEFAULT_LB_PER_TENANT)
        }
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn overlapping_pools_are_named_unless_both_allow_it() {
        let pool = |ns: &str, name: &str, cidr: &str, share: bool| -> NetworkPool {
            serde_json::from_value(
                serde_json::json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
                "metadata": {"name": name, "namespace": ns}, "spec": {"cidr": cidr, "allowOverlap": share}}),
            )
            .unwrap()
        };
        let mine = pool("a", "lab", "10.0.0.0/24", false);
        let others = [
            pool("a", "lab", "10.0.0.0/24", false),
            pool("b", "wide", "10.0.0.0/16", false),
            pool("c", "inside", "10.0.0.128/25", true),
            pool("d", "apart", "10.0.1.0/24", false),
            pool("e", "v6", "fd00::/64", false),
        ];
        assert_eq!(overlapping(&mine, others.iter()), ["b/wide (10.0.0.0/16)", "c/inside (10.0.0.128/25)"]);
        let sharing = pool("a", "lab", "10.0.0.0/24", true);
        assert_eq!(overlapping(&sharing, others.iter()), ["b/wide (10.0.0.0/16)"], "both must allow it");
        assert_eq!(
            overlap_message(&mine, &["b/wide (10.0.0.0/16)".into()]),
            "spec.cidr 10.0.0.0/24 overlaps NetworkPool b/wide (10.0.0.0/16); pools hand out the same addresses only when both set spec.allowOverlap"
        );
    }

    use super::*;

    fn pool(yaml: &str) -> NetworkPool {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "NetworkPool",
            "metadata": {"name": "p", "namespace": "butler-system"},
            "spec": serde_json::from_str::<serde_json::Value>(yaml).unwrap(),
        }))
        .unwrap()
    }

    #[test]
    fn the_document_example_gives_its_figures() {
        let p = pool(
            r#"{"cidr": "10.40.0.0/22", "reserved": [{"cidr": "10.40.0.0/28"}, {"cidr": "10.40.0.16/28"}],
                "tenantAllocation": {"start": "10.40.1.0", "end": "10.40.3.254",
                "defaults": {"nodesPerTenant": 5, "lbPoolPerTenant": 8}}}"#,
        );
        let allocator = allocator(&p).unwrap();
        assert_eq!(allocator.stats().total, 767);
        assert_eq!(default_count(&p, AllocationType::Nodes), 5);
    }

    #[test]
    fn errors_name_the_field() {
        let cases = [
            (r#"{"cidr": "10.40.0.0"}"#, "spec.cidr \"10.40.0.0\" is not a CIDR"),
            (
                r#"{"cidr": "10.40.0.0/22", "tenantAllocation": {"start": "ten"}}"#,
                "spec.tenantAllocation.start \"ten\" is not an IP address",
            ),
            (
                r#"{"cidr": "10.40.0.0/22", "reserved": [{"cidr": "10.40.0.0/28"}, {"cidr": "x"}]}"#,
                "spec.reserved[1].cidr \"x\" is not a CIDR",
            ),
            (
                r#"{"cidr": "10.40.0.0/22", "tenantAllocation": {"start": "10.41.0.0"}}"#,
                "spec.tenantAllocation: 10.41.0.0-10.40.3.255 is not a range",
            ),
            (
                r#"{"cidr": "10.40.0.0/22", "tenantAllocation": {"end": "10.41.0.0"}}"#,
                "spec.tenantAllocation: the allocatable range 10.40.0.0-10.41.0.0 is not inside the pool 10.40.0.0/22",
            ),
            (r#"{"cidr": "10.40.0.0/22", "reserved": [{"cidr": "2001:db8::/64"}]}"#, "spec: reserved range"),
        ];
        for (spec, wanted) in cases {
            let error = allocator(&pool(spec)).err().unwrap_or_default();
            assert!(error.starts_with(wanted), "{spec}: {error}");
        }
    }

    #[test]
    fn defaults_apply_by_type() {
        let p = pool(r#"{"cidr": "10.0.0.0/24"}"#);
        assert_eq!(default_count(&p, AllocationType::Nodes), 5);
        assert_eq!(default_count(&p, AllocationType::Loadbalancer), 8);
    }
}
