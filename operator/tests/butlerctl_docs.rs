//! The book's page of butlerctl's commands is its `--help`, every command's, so it cannot
//! drift: this test fails when the page differs from what the binary says, and
//! `BUTLER_UPDATE_DOCS=1` (`make docs-generate`) writes it anew.

use std::path::Path;
use std::process::Command;

/// `butlerctl {path} --help`.
fn help(path: &[String]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_butlerctl"))
        .args(path)
        .arg("--help")
        .env("NO_COLOR", "1")
        .output()
        .expect("butlerctl runs");
    assert!(out.status.success(), "butlerctl {} --help failed", path.join(" "));
    String::from_utf8(out.stdout).unwrap()
}

/// The subcommands a help text lists (`help` aside).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next().map(String::from))
        .filter(|c| c != "help")
        .collect()
}

/// Every command, depth first, with its help.
fn commands(path: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let text = help(&path);
    let children = subcommands(&text);
    out.push((path.clone(), text));
    for child in children {
        let mut next = path.clone();
        next.push(child);
        commands(next, out);
    }
}

fn page() -> String {
    let mut all = Vec::new();
    commands(Vec::new(), &mut all);
    let mut text = String::from(
        "# Every command\n\n<!-- Generated from `butlerctl ... --help`; `make docs-generate` writes it anew. -->\n\n\
         Each command's own `--help`, as the binary prints it. The [guide](index.md) shows them at work.\n",
    );
    for (path, help) in all {
        let name = match path.is_empty() {
            true => "butlerctl".to_string(),
            false => format!("butlerctl {}", path.join(" ")),
        };
        text.push_str(&format!("\n## {name}\n\n```text\n{}\n```\n", help.trim_end()));
    }
    text
}

#[test]
fn the_book_lists_every_command_as_its_help_says() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/butlerctl/commands.md");
    let wanted = page();
    if std::env::var_os("BUTLER_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &wanted).unwrap();
    }
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        found == wanted,
        "docs/src/butlerctl/commands.md is not butlerctl's --help: run `make docs-generate`"
    );
    for command in ["## butlerctl upgrade plan", "## butlerctl airgap pack", "## butlerctl generate cluster"]
    {
        assert!(wanted.contains(&format!("{command}\n")), "{command} is missing");
    }
}

#[test]
fn the_books_clusterctl_config_examples_read_as_butlerctl_reads_them() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/examples");
    let mut read = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if !path.file_name().unwrap().to_string_lossy().starts_with("clusterctl-config") {
            continue;
        }
        let config = butler_repository::ClusterctlConfig::load(Some(&path))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(!config.images.is_empty(), "{}: its images are read", path.display());
        read += 1;
    }
    assert_eq!(read, 2);
}
