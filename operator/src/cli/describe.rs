//! `butlerctl describe providers`: a tree of the providers, each with its version, contract,
//! whether it is paused, and every condition (status, reason, age, message); `-o json|yaml`
//! prints the same for scripts.

use std::fmt::Write;

use crate::upgrade::providers::ProviderRow;

/// How `describe` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Tree,
    Json,
    Yaml,
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(text: &str) -> Result<Format, String> {
        match text {
            "" | "tree" => Ok(Format::Tree),
            "json" => Ok(Format::Json),
            "yaml" => Ok(Format::Yaml),
            other => Err(format!("-o {other:?}: use json or yaml (or leave it out for the tree)")),
        }
    }
}

const GREEN: &str = "\x1b[32m";
const RED: &str = "\x1b[31m";
const YELLOW: &str = "\x1b[33m";
const RESET: &str = "\x1b[0m";

fn status_text(status: &str, color: bool) -> String {
    let code = match status {
        "True" => GREEN,
        "False" => RED,
        _ => YELLOW,
    };
    if color { format!("{code}{status:<7}{RESET}") } else { format!("{status:<7}") }
}

/// The providers as a tree: namespace, then each provider with its version, contract and
/// Ready, then its conditions with reason, age and message.
pub fn render_tree(rows: &[ProviderRow], now: jiff::Timestamp, color: bool) -> String {
    if rows.is_empty() {
        return "No providers found.\n".to_string();
    }
    let name_width = rows
        .iter()
        .flat_map(|r| {
            std::iter::once(4 + r.kind.len() + 1 + r.name.len())
                .chain(r.conditions.iter().map(|c| 6 + c.type_.len()))
        })
        .max()
        .unwrap_or(0)
        .max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<name_width$}  {:<9}  {:<9}  {:<6}  {:<7}  {:<24}  {:<5}  MESSAGE",
        "NAME", "VERSION", "CONTRACT", "PAUSED", "READY", "REASON", "SINCE"
    );
    let mut namespaces: Vec<&str> = rows.iter().map(|r| r.namespace.as_str()).collect();
    namespaces.dedup();
    namespaces.sort();
    namespaces.dedup();
    for namespace in namespaces {
        let _ = writeln!(out, "Namespace/{namespace}");
        let mine: Vec<&ProviderRow> = rows.iter().filter(|r| r.namespace == namespace).collect();
        for (i, row) in mine.iter().enumerate() {
            let last = i + 1 == mine.len();
            let (branch, stem) = if last { ("└─", "  ") } else { ("├─", "│ ") };
            let ready = row.condition("Ready");
            let version =
                row.installed_version.clone().or_else(|| row.version.clone()).unwrap_or_else(|| "-".into());
            let _ = writeln!(
                out,
                "{:<name_width$}  {:<9}  {:<9}  {:<6}  {}",
                format!("{branch}{}/{}", row.kind, row.name),
                version,
                row.contract.as_deref().unwrap_or("-"),
                row.paused,
                status_text(ready.map_or("Unknown", |c| c.status.as_str()), color).trim_end(),
            );
            for (j, condition) in row.conditions.iter().enumerate() {
                let twig = if j + 1 == row.conditions.len() { "└─" } else { "├─" };
                let since = butler_runtime::age::human_duration(
                    now.as_second() - condition.last_transition_time.0.as_second(),
                );
                let message = condition.message.lines().next().unwrap_or_default();
                let _ = writeln!(
                    out,
                    "{:<name_width$}  {:<9}  {:<9}  {:<6}  {}  {:<24}  {:<5}  {}",
                    format!("{stem}{twig}{}", condition.type_),
                    "",
                    "",
                    "",
                    status_text(&condition.status, color),
                    condition.reason,
                    since,
                    message
                );
            }
        }
    }
    out.lines().map(str::trim_end).collect::<Vec<_>>().join("\n") + "\n"
}

/// The providers in `format`; in the tree, a namespace of `not_honoured` is followed by why no
/// operator serves its providers.
pub fn render(
    rows: &[ProviderRow],
    format: Format,
    now: jiff::Timestamp,
    color: bool,
    not_honoured: &[(String, String)],
) -> String {
    match format {
        Format::Tree => {
            let tree = render_tree(rows, now, color);
            let mut out = String::new();
            for line in tree.lines() {
                out.push_str(line);
                out.push('\n');
                let why =
                    line.strip_prefix("Namespace/").and_then(|ns| not_honoured.iter().find(|(n, _)| n == ns));
                if let Some((_, why)) = why {
                    out.push_str(&format!("  (not honoured) {why}\n"));
                }
            }
            out
        }
        Format::Json => serde_json::to_string_pretty(rows).expect("rows serialize") + "\n",
        Format::Yaml => serde_saphyr::to_string(&rows).expect("rows serialize"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProviderKind;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

    fn condition(type_: &str, status: &str, reason: &str, seconds_ago: i64, message: &str) -> Condition {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Time(now - jiff::SignedDuration::from_secs(seconds_ago)),
            observed_generation: None,
        }
    }

    fn row(kind: ProviderKind, name: &str, conditions: Vec<Condition>) -> ProviderRow {
        ProviderRow::sample(kind, name, "v0.1.0", conditions)
    }

    #[test]
    fn the_tree_shows_every_condition_with_its_age() {
        let rows = [
            row(
                ProviderKind::Core,
                "butler",
                vec![
                    condition("Ready", "True", "Ready", 300, ""),
                    condition("ProviderInstalled", "True", "Installed", 312, "v0.1.0 installed"),
                ],
            ),
            row(
                ProviderKind::Infrastructure,
                "aws",
                vec![condition(
                    "Ready",
                    "False",
                    "RenderFailed",
                    40,
                    "the variable AWS_REGION is not set\nmore",
                )],
            ),
        ];
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let text = render_tree(&rows, now, false);
        let expected = "\
NAME                            VERSION    CONTRACT   PAUSED  READY    REASON                    SINCE  MESSAGE
Namespace/butler-system
├─CoreProvider/butler           v0.1.0     v1beta1    false   True
│ ├─Ready                                                     True     Ready                     5m
│ └─ProviderInstalled                                         True     Installed                 5m12s  v0.1.0 installed
└─InfrastructureProvider/aws    v0.1.0     v1beta1    false   False
  └─Ready                                                     False    RenderFailed              40s    the variable AWS_REGION is not set
";
        assert_eq!(text, expected, "\n{text}");
        assert!(render_tree(&rows, now, true).contains("\x1b[31mFalse"), "red on a terminal");
        assert_eq!(render_tree(&[], now, false), "No providers found.\n");
        let json: serde_json::Value =
            serde_json::from_str(&render(&rows, Format::Json, now, false, &[])).unwrap();
        assert_eq!(json[1]["conditions"][0]["reason"], "RenderFailed");
        assert_eq!(json[0]["installedVersion"], "v0.1.0");
        assert!("xml".parse::<Format>().unwrap_err().contains("use json or yaml"));
        // A namespace no operator honours says so under its name.
        let not_honoured = [(
            "butler-system".to_string(),
            "no operator honours provider objects in butler-system".to_string(),
        )];
        let tree = render(&rows, Format::Tree, now, false, &not_honoured);
        assert!(
            tree.contains("Namespace/butler-system\n  (not honoured) no operator honours provider objects in butler-system\n├─CoreProvider"),
            "{tree}"
        );
    }
}
