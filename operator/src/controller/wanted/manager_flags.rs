//! A provider's `manager` settings as flags of its `manager` container, as cluster-api-operator
//! passes them: which flags the settings make, the names the manager's release understands
//! (Cluster API v1.9 renamed the metrics flag), the feature gates joined with the provider's
//! own, and the flags set in the container's arguments over the same flags there.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::ManagerSpec;

/// The flags that ManagerSpec sets, in order, as (name without dashes, value).
pub fn manager_flags(manager: &ManagerSpec) -> Result<Vec<(String, String)>, String> {
    if manager.debug == Some(true) {
        let others = ManagerSpec { debug: None, ..manager.clone() };
        if others != ManagerSpec::default() {
            return Err("spec.manager.debug sets verbosity and the profiler itself; remove the other manager fields, or debug".into());
        }
        return Ok(vec![("v".into(), "5".into()), ("profiler-address".into(), "localhost:6060".into())]);
    }
    let mut flags = Vec::new();
    let mut push = |name: &str, value: Option<String>| {
        if let Some(v) = value {
            flags.push((name.to_string(), v));
        }
    };
    // In cluster-api-operator's order, with its forms, so that an object carried over from it
    // renders the very arguments it ran with (a pod template that differs restarts the pod).
    if let Some(concurrency) = manager.controller.as_ref().and_then(|c| c.group_kind_concurrency.as_ref()) {
        for (kind, n) in concurrency {
            push(&format!("{}-concurrency", kind.to_lowercase()), Some(n.to_string()));
        }
    }
    push("max-concurrent-reconciles", manager.max_concurrent_reconciles.map(|n| n.to_string()));
    push("namespace", manager.cache_namespace.clone());
    push("health-addr", manager.health.as_ref().and_then(|h| h.health_probe_bind_address.clone()));
    // The lock's kind and the graceful shutdown take no flag; the lock's name goes with its
    // namespace as `--leader-election-id`; its timings only while leader election is on.
    if let Some(le) = &manager.leader_election {
        push("leader-elect", le.leader_elect.map(|b| b.to_string()));
        if le.leader_elect == Some(true) {
            if let (Some(name), Some(namespace)) = (&le.resource_name, &le.resource_namespace) {
                push("leader-election-id", Some(format!("{namespace}/{name}")));
            }
            push("leader-elect-lease-duration", seconds(le.lease_duration));
            push("leader-elect-renew-deadline", seconds(le.renew_deadline));
            push("leader-elect-retry-period", seconds(le.retry_period));
        }
    }
    if let Some(metrics) = &manager.metrics {
        push(METRICS_FLAG, metrics.bind_address.clone());
        push("diagnostics-address", metrics.diagnostics_address.clone());
        // Only when true: a manager that takes no such flag exits on `=false` (Cluster API's
        // OpenStack provider), and false is every manager's default.
        push("insecure-diagnostics", metrics.insecure_diagnostics.filter(|b| *b).map(|b| b.to_string()));
    }
    if let Some(w) = &manager.webhook {
        push("webhook-host", w.host.clone());
        push("webhook-port", w.port.map(|p| p.to_string()));
        push("webhook-cert-dir", w.cert_dir.clone());
    }
    push("sync-period", seconds(manager.sync_period));
    push("profiler-address", manager.profiler_address.clone());
    // 1 is the managers' default, and cluster-api-operator's CRD writes it into every object:
    // as there, it is passed only when it is another level (a carried-over object keeps its pods).
    push("v", manager.verbosity.filter(|v| *v != 1).map(|v| v.to_string()));
    if let Some(gates) = manager.feature_gates.as_ref().filter(|g| !g.is_empty()) {
        // BTreeMap: sorted by name.
        push(
            "feature-gates",
            Some(gates.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",")),
        );
    }
    for (name, value) in manager.additional_args.iter().flatten() {
        let name = name.trim_start_matches('-');
        flags.retain(|(n, _)| n != name);
        flags.push((name.to_string(), value.clone()));
    }
    Ok(flags)
}

/// A duration as cluster-api-operator passes it: whole seconds (`600s` for `10m`), none when
/// it rounds to nothing.
fn seconds(duration: Option<kube::core::Duration>) -> Option<String> {
    let duration: std::time::Duration = duration?.into();
    let whole = (duration.as_millis() + 500) / 1000;
    (whole > 0).then(|| format!("{whole}s"))
}

/// The flag `metrics.bindAddress` is passed as, unless the manager speaks Cluster API v1.9's.
const METRICS_FLAG: &str = "metrics-bind-addr";

/// `flags` as the manager's release understands them: `metrics.bindAddress` goes to
/// `--diagnostics-address` when the release's arguments use that flag and not the older one
/// (Cluster API v1.9 removed `--metrics-bind-addr`; an unknown flag stops a manager), unless a
/// diagnostics address is set already.
pub(super) fn for_release(flags: Vec<(String, String)>, args: &[Value]) -> Vec<(String, String)> {
    let uses = |name: &str| args.iter().any(|a| a.as_str().and_then(flag_name) == Some(name));
    let newer = uses("diagnostics-address") && !uses(METRICS_FLAG);
    let diagnostics_set = flags.iter().any(|(n, _)| n == "diagnostics-address");
    flags
        .into_iter()
        .filter_map(|(name, value)| match name.as_str() {
            METRICS_FLAG if newer && diagnostics_set => None,
            METRICS_FLAG if newer => Some(("diagnostics-address".to_string(), value)),
            _ => Some((name, value)),
        })
        .collect()
}

/// A flag's name in an argument (`--name=value` or `--name`), if it is one.
fn flag_name(arg: &str) -> Option<&str> {
    let rest = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    Some(rest.split('=').next().unwrap_or(rest))
}

/// The value of flag `name` in `args` (`--name=value`, or `--name value`).
fn flag_value(args: &[Value], name: &str) -> Option<String> {
    let i = args.iter().position(|a| a.as_str().and_then(flag_name) == Some(name))?;
    let arg = args[i].as_str()?;
    match arg.split_once('=') {
        Some((_, value)) => Some(value.to_string()),
        None => args.get(i + 1)?.as_str().filter(|next| !next.starts_with('-')).map(String::from),
    }
}

/// `flags` with the feature gates the container sets already kept beside those of
/// `spec.manager.featureGates`, which win for a gate both name (`--feature-gates` takes one
/// list: the spec's alone would turn the provider's own gates off).
pub(super) fn with_own_gates(flags: &[(String, String)], args: &[Value]) -> Vec<(String, String)> {
    let Some(own) = flag_value(args, "feature-gates") else { return flags.to_vec() };
    flags
        .iter()
        .map(|(name, value)| {
            if name != "feature-gates" {
                return (name.clone(), value.clone());
            }
            let mut gates: BTreeMap<&str, &str> =
                own.split(',').filter_map(|g| g.trim().split_once('=')).collect();
            gates.extend(value.split(',').filter_map(|g| g.split_once('=')));
            let merged = gates.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(",");
            (name.clone(), merged)
        })
        .collect()
}

/// `args` with each flag set to its value as cluster-api-operator sets it: the first argument
/// `--name=...` replaced, else `--name=value` appended; a flag written without `=` (a bare
/// `--leader-elect`, `--v 1`) is left as it is and the new form appended after it (the manager
/// reads the last), so that a carried-over object renders the arguments it ran with.
pub(super) fn set_flags(args: &mut Vec<Value>, flags: &[(String, String)]) {
    for (name, value) in flags {
        // Keys may be written with their dashes (`--v`), as cluster-api-operator accepts.
        let name = name.trim_start_matches('-');
        let prefix = format!("--{name}=");
        let text = format!("{prefix}{value}");
        match args.iter().position(|a| a.as_str().is_some_and(|a| a.starts_with(&prefix))) {
            Some(i) => args[i] = Value::String(text),
            None => args.push(Value::String(text)),
        }
    }
}
