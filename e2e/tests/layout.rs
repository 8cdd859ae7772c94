//! The layout's rules (see the architecture page of the book): the operator's controller never
//! depends on the command line, and no two source files of one folder import each other (what
//! both need lives in a third file). A module's own file re-exporting its children, or a child
//! using what its parent module defines, are one module's parts and not counted.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The modules under `dir` (a crate's root folder): each file's module path and the file. A
/// folder's `mod.rs` is the folder's module; `lib.rs` and `main.rs` are the crate's root.
fn modules(dir: &Path, path: &[String], out: &mut Vec<(Vec<String>, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.path();
        let name = entry.file_name().to_string_lossy().to_string();
        if file.is_dir() {
            let mut inner = path.to_vec();
            inner.push(name);
            modules(&file, &inner, out);
        } else if let Some(stem) = name.strip_suffix(".rs") {
            let mut module = path.to_vec();
            if !matches!(stem, "mod" | "lib" | "main") {
                module.push(stem.to_string());
            }
            out.push((module, file));
        }
    }
}

/// The crates' roots: each crate's `src/` and each binary's folder under `src/bin/`.
fn crate_roots() -> Vec<PathBuf> {
    let mut roots = Vec::new();
    for entry in std::fs::read_dir(root()).unwrap().flatten() {
        let src = entry.path().join("src");
        if entry.path().join("Cargo.toml").is_file() && src.is_dir() {
            roots.push(src.clone());
            for bin in std::fs::read_dir(src.join("bin")).into_iter().flatten().flatten() {
                if bin.path().is_dir() {
                    roots.push(bin.path());
                }
            }
        }
    }
    roots
}

/// The code of a file: comments and its unit tests (below `#[cfg(test)]`) left out.
fn code(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let product = text.split("#[cfg(test)]").next().unwrap_or_default();
    product.lines().map(|l| l.split("//").next().unwrap_or_default()).collect::<Vec<_>>().join("\n")
}

/// Where `code` names module `name` through `prefix` (`super::` or `crate::a::b::`), as
/// `prefix name` or inside `prefix{ ... }`: what follows the name each time (`::Item`, or
/// nothing).
fn named<'a>(code: &'a str, prefix: &str, name: &str) -> Vec<&'a str> {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    let direct = format!("{prefix}{name}");
    let mut at = 0;
    while let Some(found) = code[at..].find(&direct) {
        let start = at + found;
        let end = start + direct.len();
        let before = code[..start].chars().next_back();
        if !before.is_some_and(is_ident) && !code[end..].chars().next().is_some_and(is_ident) {
            out.push(&code[end..]);
        }
        at = end;
    }
    let grouped = format!("{prefix}{{");
    let mut at = 0;
    while let Some(found) = code[at..].find(&grouped) {
        let inner = at + found + grouped.len();
        let group = &code[inner..inner + code[inner..].find('}').unwrap_or(code.len() - inner)];
        for item in group.split(',') {
            let item = item.trim();
            if item.split("::").next().map(str::trim) == Some(name) {
                out.push(&item[name.len()..]);
            }
        }
        at = inner;
    }
    out
}

/// The first segment of a path that follows a module's name (`::probe::Probed` gives `probe`).
fn next_segment(rest: &str) -> Option<&str> {
    let rest = rest.strip_prefix("::")?;
    let end = rest.find(|c: char| !(c.is_alphanumeric() || c == '_')).unwrap_or(rest.len());
    Some(&rest[..end])
}

/// Pairs of files of one folder that import each other.
fn circles(src: &Path) -> Vec<String> {
    let mut all = Vec::new();
    modules(src, &[], &mut all);
    let by_path: BTreeMap<Vec<String>, PathBuf> = all.iter().cloned().collect();
    let mut uses: BTreeSet<(Vec<String>, Vec<String>)> = BTreeSet::new();
    for (module, file) in &all {
        let Some((_, parent)) = module.split_last() else { continue };
        let text = code(file);
        let full = |name: &str| {
            let mut path = vec!["crate".to_string()];
            path.extend(parent.iter().cloned());
            path.push(name.to_string());
            path.join("::")
        };
        for (sibling, _) in &all {
            let Some((name, sibling_parent)) = sibling.split_last() else { continue };
            if sibling == module || sibling_parent != parent {
                continue;
            }
            let crate_prefix = full("").trim_end_matches("::").to_string() + "::";
            let mut found = named(&text, "super::", name);
            found.extend(named(&text, &crate_prefix, name));
            // A path on into one of the sibling's own children names that child's file.
            let into_file = |rest: &&str| {
                next_segment(rest).is_some_and(|segment| {
                    let mut child = sibling.clone();
                    child.push(segment.to_string());
                    by_path.contains_key(&child)
                })
            };
            if found.iter().any(|rest| !into_file(rest)) {
                uses.insert((module.clone(), sibling.clone()));
            }
        }
    }
    uses.iter()
        .filter(|(a, b)| a < b && uses.contains(&(b.clone(), a.clone())))
        .map(|(a, b)| {
            let shown = |m: &Vec<String>| {
                by_path[m].strip_prefix(root()).unwrap_or(&by_path[m]).display().to_string()
            };
            format!("{} <-> {}", shown(a), shown(b))
        })
        .collect()
}

#[test]
fn no_two_files_of_a_folder_import_each_other() {
    let mut found = Vec::new();
    for src in crate_roots() {
        found.extend(circles(&src));
    }
    assert!(
        found.is_empty(),
        "files that import each other (move what both need into a third):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_circle_check_sees_a_circle() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use super::b::Thing;\npub struct Other;\n").unwrap();
    std::fs::write(src.join("b.rs"), "use crate::{a::Other, c};\npub struct Thing;\n").unwrap();
    std::fs::write(src.join("c.rs"), "use super::a::Other;\n").unwrap();
    let found = circles(src);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].ends_with("a.rs <-> ") || found[0].contains("a.rs <->"), "{found:?}");
}

#[test]
fn the_operators_controller_never_names_the_command_line() {
    let mut all = Vec::new();
    modules(&root().join("operator/src/controller"), &[], &mut all);
    let named: Vec<String> = all
        .iter()
        .filter(|(_, file)| code(file).contains("crate::cli"))
        .map(|(_, file)| file.strip_prefix(root()).unwrap_or(file).display().to_string())
        .collect();
    assert!(named.is_empty(), "the controller depends on the command line in: {named:?}");
}
