//! Every reason the operator and `butler-controller` write has its entry in the book's
//! troubleshooting page. The reasons are read from the sources: the operator's typed list (the
//! `reasons!` table) and every CamelCase string of the controllers' code that is not a kind, a
//! condition type or an event action (listed below), so a reason added without an entry fails
//! here.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// CamelCase strings of the controllers' code that are no reason.
const NOT_REASONS: &[&str] = &[
    // Kinds.
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "CoreProvider",
    "CronJob",
    "CustomResourceDefinition",
    "DaemonSet",
    "LoadBalancer",
    "MutatingWebhookConfiguration",
    "NetworkPolicy",
    "NetworkPool",
    "PodDisruptionBudget",
    "PodTemplate",
    "ProviderConfig",
    "ProviderUpgrade",
    "ReplicaSet",
    "ReplicationController",
    "ResourceQuota",
    "RoleBinding",
    "ServiceAccount",
    "StatefulSet",
    "TenantCluster",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ValidatingWebhookConfiguration",
    // Condition types whose reasons are listed.
    "PreflightCheckPassed",
    "ProviderInstalled",
    "ProviderUpgraded",
    "CapacityWarning",
    "CapacityCritical",
    "CapacityExhausted",
    // Event actions.
    "CheckUpgrades",
    "CollectOrphans",
];

/// The Rust files of `dir` outside tests.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            sources(&path, out);
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
}

/// `"CamelCase"` strings (two humps or more) of a source, before its tests.
fn camel_strings(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let mut out = BTreeSet::new();
    for piece in code.split('"').skip(1).step_by(2) {
        let humps = piece.chars().filter(|c| c.is_ascii_uppercase()).count();
        let word = piece.chars().all(|c| c.is_ascii_alphabetic());
        if word
            && humps >= 2
            && piece.starts_with(|c: char| c.is_ascii_uppercase())
            && piece.chars().nth(1).is_some_and(|c| c.is_ascii_lowercase())
        {
            out.insert(piece.to_string());
        }
    }
    out
}

/// One-word reasons, where a reason is written: the third argument of `Wanted::new(...)` and
/// the value of a `reason:` field, when they are string literals.
fn reasons_in_place(text: &str) -> BTreeSet<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or_default();
    let literal = |arg: &str| {
        let arg = arg.trim();
        let inner = arg.strip_prefix('"')?.strip_suffix('"')?;
        inner.chars().all(|c| c.is_ascii_alphabetic()).then(|| inner.to_string())
    };
    let mut out = BTreeSet::new();
    for call in code.split("Wanted::new(").skip(1) {
        // The arguments up to the closing parenthesis, split at the commas outside nesting.
        let (mut depth, mut args, mut current) = (0, Vec::new(), String::new());
        for c in call.chars() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' | '}' if depth == 0 => break,
                ')' | ']' | '}' => depth -= 1,
                ',' if depth == 0 => {
                    args.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        args.push(current);
        if let Some(reason) = args.get(2).and_then(|a| literal(a)) {
            out.insert(reason);
        }
    }
    for field in code.split("reason: ").skip(1) {
        if let Some(reason) =
            field.split([',', '\n', '}']).next().and_then(|v| literal(v.trim_end_matches(".into()")))
        {
            out.insert(reason);
        }
    }
    out
}

/// The operator's typed reasons: the names of its `reasons!` table.
fn typed_reasons() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("operator/src/controller/report/reason.rs")).unwrap();
    let table = text.split("reasons! {").nth(1).unwrap().split('}').next().unwrap();
    table.lines().filter_map(|l| l.trim().split_once(" => ").map(|(name, _)| name.to_string())).collect()
}

/// The headings of the troubleshooting page.
fn entries() -> BTreeSet<String> {
    let text = std::fs::read_to_string(root().join("docs/src/operating/reasons.md")).unwrap();
    text.lines().filter_map(|l| l.strip_prefix("### ")).map(|l| l.trim().to_string()).collect()
}

#[test]
fn every_reason_written_has_an_entry_in_the_book() {
    let mut reasons = typed_reasons();
    assert!(reasons.contains("FetchFailed") && reasons.len() > 20, "{reasons:?}");
    let mut files = Vec::new();
    sources(&root().join("operator/src/controller"), &mut files);
    sources(&root().join("controller/src"), &mut files);
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        reasons.extend(camel_strings(&text));
        reasons.extend(reasons_in_place(&text));
    }
    let listed = entries();
    let missing: Vec<&String> =
        reasons.iter().filter(|r| !listed.contains(*r) && !NOT_REASONS.contains(&r.as_str())).collect();
    assert!(
        missing.is_empty(),
        "reasons without an entry in docs/src/operating/reasons.md (or, if one is no reason, in NOT_REASONS here): {missing:?}"
    );
}

#[test]
fn one_word_reasons_are_found_where_reasons_are_written() {
    let code = "Wanted::new(READY, f(a, b), \"Ready\", format!(\"x, y\"));\nEvent { reason: \"Synced\".into(), note }\nWanted::new(T, true, &reason, m)";
    assert_eq!(reasons_in_place(code), BTreeSet::from(["Ready".to_string(), "Synced".to_string()]));
}

#[test]
fn camel_case_strings_are_told_from_other_strings() {
    let found = camel_strings(
        "x(\"PoolNotFound\", \"a message\", \"Ready\", \"RBACReady\");\n#[cfg(test)]\n\"TestOnly\"",
    );
    assert_eq!(found, BTreeSet::from(["PoolNotFound".to_string()]));
}
