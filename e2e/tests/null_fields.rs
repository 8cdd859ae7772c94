//! No product code reads a JSON object by indexing it mutably. `object["rules"]` on a
//! `&mut Value` inserts `rules: null` when the key is missing, and an object sent to the API
//! server that way carries a field its kind may not declare (a server-side apply of a
//! ServiceAccount with `rules: null` is refused) or takes ownership of a null field. Reads go
//! through `get_mut` or `pointer_mut`, which insert nothing; writes (`object["a"] = ...`) stay.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A line that reads through a mutable index: `x["k"].as_array_mut()`, `&mut x["k"]`, and the
/// like.
fn reads_through_mutable_index(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or_default();
    ["].as_array_mut()", "].as_object_mut()", "].as_str_mut()"].iter().any(|p| code.contains(p))
        || code.split("&mut ").skip(1).any(|rest| {
            let word: String =
                rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '.').collect();
            rest[word.len()..].starts_with("[\"")
        })
}

#[test]
fn product_code_never_reads_json_through_a_mutable_index() {
    let mut files = Vec::new();
    for krate in
        ["apiserver", "butler-core", "controller", "operator", "repository", "runtime", "sandbox", "e2e"]
    {
        sources(&root().join(krate).join("src"), &mut files);
    }
    // The controllers' scenarios install the shipped objects as an administrator would.
    sources(&root().join("controller/tests/scenarios"), &mut files);
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests below `#[cfg(test)]` build their own objects and send none.
        let product = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in product.lines().enumerate() {
            if reads_through_mutable_index(line) {
                found.push(format!(
                    "{}:{}: {}",
                    file.strip_prefix(root()).unwrap_or(file).display(),
                    n + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(found.is_empty(), "read these through get_mut or pointer_mut:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_the_pattern() {
    assert!(reads_through_mutable_index(r#"for r in object["rules"].as_array_mut().into_iter() {"#));
    assert!(reads_through_mutable_index(r#"let pod = &mut spec["template"]["spec"];"#));
    assert!(!reads_through_mutable_index(r#"object["metadata"]["name"] = json!(name);"#));
    assert!(!reads_through_mutable_index(r#"object.get_mut("rules").and_then(Value::as_array_mut)"#));
}
