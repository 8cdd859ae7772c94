//! The README and the book lead somewhere: every relative link reaches a file (and a heading of
//! it, for `#anchors`), every page is in the book's table of contents and every entry of it
//! exists, and every included file exists. Links to other sites are not followed (no network
//! in tests).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The book's pages and the README.
fn pages() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let mut all = vec![root().join("README.md")];
    walk(&root().join("docs/src"), &mut all);
    all.sort();
    all
}

/// The text outside fenced code blocks and inline code, where links are links.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            let mut inline = false;
            for c in line.chars() {
                if c == '`' {
                    inline = !inline;
                } else if !inline {
                    out.push(c);
                }
            }
            out.push('\n');
        }
    }
    out
}

/// The targets of the Markdown links `[text](target)` of a page's prose.
fn links(text: &str) -> Vec<String> {
    let prose = prose(text);
    let mut out = Vec::new();
    let mut rest = prose.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let Some(end) = after.find(')') else { break };
        out.push(after[..end].trim().to_string());
        rest = &after[end..];
    }
    out
}

/// The anchors of a page's headings, as mdBook and GitHub make them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut fenced = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        }
        if fenced || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let slug: String = title
            .to_lowercase()
            .chars()
            .filter_map(|c| match c {
                ' ' => Some('-'),
                c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
                _ => None,
            })
            .collect();
        out.insert(slug);
    }
    out
}

#[test]
fn every_link_of_the_readme_and_the_book_leads_somewhere() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = std::fs::read_to_string(&page).unwrap();
        let shown = page.strip_prefix(root()).unwrap_or(&page).display().to_string();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let path = match file.is_empty() {
                true => page.clone(),
                false => page.parent().unwrap().join(file),
            };
            if !path.exists() {
                broken.push(format!("{shown}: {target} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor {
                let there = std::fs::read_to_string(&path).unwrap_or_default();
                if !anchors(&there).contains(anchor) {
                    broken.push(format!("{shown}: {target} (no such heading)"));
                }
            }
        }
        for line in text.lines() {
            if let Some(include) = line.trim().strip_prefix("{{#include ").and_then(|l| l.strip_suffix("}}"))
            {
                let file = include.split(':').next().unwrap_or_default().trim();
                if !page.parent().unwrap().join(file).exists() {
                    broken.push(format!("{shown}: includes {file}, which is missing"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_page_is_in_the_table_of_contents_and_every_entry_exists() {
    let src = root().join("docs/src");
    let summary = std::fs::read_to_string(src.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary).into_iter().map(|l| src.join(l)).collect();
    for entry in &listed {
        assert!(entry.exists(), "SUMMARY.md lists {}, which is missing", entry.display());
    }
    for page in pages().into_iter().filter(|p| p.starts_with(&src) && !p.ends_with("SUMMARY.md")) {
        assert!(listed.contains(&page), "{} is not in SUMMARY.md", page.display());
    }
}

#[test]
fn the_readme_stays_a_front_page() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let lines = readme.lines().count();
    assert!(lines <= 200, "the README has {lines} lines: move the detail into the book (docs/src)");
    assert!(readme.contains("make test"), "the README names the test command CI runs");
}

#[test]
fn anchors_are_made_as_mdbook_makes_them() {
    let made = anchors(
        "# Upgrades as objects (GitOps)\n## A contract change, step by step\n```\n# not a heading\n```\n",
    );
    assert_eq!(
        made,
        BTreeSet::from([
            "upgrades-as-objects-gitops".to_string(),
            "a-contract-change-step-by-step".to_string()
        ])
    );
    assert_eq!(links("see [a](b.md) and `[c](d)`\n```\n[e](f)\n```\n"), ["b.md"]);
}
