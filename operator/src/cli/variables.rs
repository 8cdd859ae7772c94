//! The `--list-variables` listing, as clusterctl prints it.

/// "Required Variables:" then "Optional Variables:" with `(defaults to ...)` aligned in a
/// column, each part only when it has entries.
pub fn format_variables(required: &[String], optional: &[(String, String)]) -> String {
    let mut out = String::new();
    if !required.is_empty() {
        out.push_str("Required Variables:\n");
        for name in required {
            out.push_str(&format!("  - {name}\n"));
        }
    }
    if !optional.is_empty() {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str("Optional Variables:\n");
        let width = optional.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        for (name, default) in optional {
            out.push_str(&format!("  - {name:<width$} (defaults to {default})\n"));
        }
    }
    out.push('\n');
    out
}

/// A default as clusterctl shows it: quoted, unless it is quoted already.
pub fn quoted(default: &str) -> String {
    if default.starts_with('"') { default.to_string() } else { format!("{default:?}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_looks_like_clusterctl() {
        let out = format_variables(
            &["AWS_REGION".into()],
            &[("CLUSTER_NAME".into(), quoted("dev")), ("A".into(), quoted(""))],
        );
        assert_eq!(
            out,
            "Required Variables:\n  - AWS_REGION\n\nOptional Variables:\n  - CLUSTER_NAME (defaults to \"dev\")\n  - A            (defaults to \"\")\n\n"
        );
        assert_eq!(format_variables(&[], &[]), "\n");
    }
}
