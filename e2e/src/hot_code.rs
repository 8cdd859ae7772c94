//! The code a shipped binary runs, laid out together. The kernel maps a binary's code 64 KiB
//! around each page a process touches, and the functions one run calls are strewn across the
//! whole of `.text`: `butler-operator` had nearly all of its 20 MB of code resident though it
//! ran a quarter of it. A benchmark records which functions its run executes (under
//! callgrind, which counts every call, not a sample); [`linker_script`] turns them into a
//! linker script that gathers their sections into `.text.hot` ahead of `.text`, which each
//! binary's build script passes to the linker of its release build.
//!
//! The script names functions by their v0-mangled symbols (the workspace mangles with v0, so
//! that each generic instantiation has a name of its own) with every crate's disambiguator
//! left open (`Cs*_`): those change with features, dependencies and compilers, the paths and
//! types do not. A function the script misses still links, into `.text`. Valgrind names only
//! the functions of `.text`, so a recording runs a build without the script
//! (`BUTLER_HOT_CODE=off`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Where a benchmark asks for its recording: the linker script to write.
pub const RECORD_VARIABLE: &str = "BUTLER_RECORD_HOT_CODE";

/// The functions of `object` (a binary's file name) that a callgrind output names, each as its
/// symbol (run with `--demangle=no`). Callgrind names an object (`ob=`, `cob=` for a callee's)
/// and a function (`fn=`, `cfn=`) once, as `(id) name`, and by its id afterwards; it marks
/// recursion with `'2`.
pub fn executed_functions<'a>(callgrind: &'a str, object: &str) -> BTreeSet<String> {
    let mut objects: std::collections::HashMap<&str, bool> = std::collections::HashMap::new();
    let mut ours = |spec: &'a str| -> bool {
        let (id, name) = id_and_name(spec);
        if let Some(name) = name {
            objects.insert(id, name.rsplit('/').next() == Some(object));
        }
        objects.get(id).copied().unwrap_or(false)
    };
    let (mut in_object, mut callee_in_object) = (false, None);
    let mut functions = BTreeSet::new();
    for line in callgrind.lines() {
        if let Some(spec) = line.strip_prefix("ob=") {
            in_object = ours(spec);
        } else if let Some(spec) = line.strip_prefix("cob=") {
            callee_in_object = Some(ours(spec));
        } else if let Some((spec, callee)) = line
            .strip_prefix("fn=")
            .map(|s| (s, false))
            .or_else(|| line.strip_prefix("cfn=").map(|s| (s, true)))
        {
            let here = if callee { callee_in_object.take().unwrap_or(in_object) } else { in_object };
            let name = id_and_name(spec).1.map(|name| name.split('\'').next().unwrap_or_default());
            if let Some(name) = name.filter(|n| here && !n.is_empty()) {
                functions.insert(name.to_string());
            }
        }
    }
    functions
}

/// `(id) name` as the id and the name, `(id)` alone as the id (a name given before).
fn id_and_name(spec: &str) -> (&str, Option<&str>) {
    let (id, name) = spec.split_once(')').unwrap_or((spec, ""));
    (id.trim_start_matches('('), Some(name.trim()).filter(|n| !n.is_empty()))
}

/// The section pattern that finds `symbol` in another build of the same code, or `None` for a
/// symbol no section is named after.
fn pattern(symbol: &str) -> Option<String> {
    let base = symbol.split('.').next().unwrap_or(symbol);
    if base.is_empty() || !base.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'$') {
        return None;
    }
    let named = if let Some(v0) = base.strip_prefix("_R") {
        format!("_R{}", open_disambiguators(v0))
    } else if let Some(legacy) = base.strip_prefix("_ZN") {
        // The legacy form ends in its hash, `17h<16 hex digits>E`.
        let path = legacy.rsplit_once("17h").map_or(legacy, |(path, _)| path);
        format!("_ZN{path}17h")
    } else {
        // A C function (ring's, say): its own name, exactly.
        return Some(format!("*(.text.{base} .text.{base}.*)"));
    };
    // Any prefix LLVM gives a section (`.text.unlikely.` for a cold function), and any suffix
    // (a hash, a local copy's number).
    Some(format!("*(.text.*{named}*)"))
}

/// `Cs<base-62 number>_`, a crate's disambiguator, as `Cs*_`.
fn open_disambiguators(v0: &str) -> String {
    let mut out = String::with_capacity(v0.len());
    let mut rest = v0;
    while let Some(at) = rest.find("Cs") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let digits = after.bytes().take_while(u8::is_ascii_alphanumeric).count();
        if after[digits..].starts_with('_') {
            out.push_str("Cs*_");
            rest = &after[digits + 1..];
        } else {
            out.push_str("Cs");
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// A linker script that puts the sections of `functions` into `.text.hot`, ahead of `.text`
/// (GNU ld and LLD both take `INSERT`, which keeps their own layout for the rest).
pub fn linker_script(what: &str, functions: &BTreeSet<String>) -> String {
    let patterns: BTreeSet<String> = functions.iter().filter_map(|f| pattern(f)).collect();
    let mut script = format!(
        "/* The functions {what} runs, laid out together ahead of the rest of its code (see\n   e2e/src/hot_code.rs). Written by `make hot-code`; {} patterns. */\nSECTIONS\n{{\n  .text.hot :\n  {{\n",
        patterns.len()
    );
    for pattern in &patterns {
        script.push_str("    ");
        script.push_str(pattern);
        script.push('\n');
    }
    script.push_str("  }\n}\nINSERT BEFORE .text;\n");
    script
}

/// `binary` run under callgrind, writing its counts into `folder` (one file per process,
/// written when it exits).
pub fn under_callgrind(binary: &Path, folder: &Path) -> Command {
    let mut command = Command::new("valgrind");
    command
        .arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}/callgrind.%p", folder.display()))
        .args(["--demangle=no", "--dump-instr=no", "--quiet"])
        .arg(binary);
    command
}

/// Every function of `object` that the callgrind outputs in `folder` name.
pub fn recorded(folder: &Path, object: &str) -> BTreeSet<String> {
    let mut functions = BTreeSet::new();
    for entry in std::fs::read_dir(folder).expect("the recording folder").flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        functions.extend(executed_functions(&text, object));
    }
    functions
}

#[cfg(test)]
mod tests {
    use super::*;

    const OUTPUT: &str = "version: 1\ncreator: callgrind-3.19.0\ncmd: butler-operator run\nevents: Ir\n\
ob=(1) /usr/local/bin/butler-operator\nfn=(1) _RNvCs32gj3y4fnmh_8operator5start\n0 12\n\
cfn=(2) _RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeNtCs32gj3y4fnmh_8operator4PlanE.llvm.77\ncalls=1 0\n0 4\n\
cob=(2) /usr/lib/x86_64-linux-gnu/libc.so.6\ncfn=(3) memcpy\ncalls=1 0\n0 9\n\
fn=(2)\n0 3\nfn=(4) _RNvCs32gj3y4fnmh_8operator4walk'2\n0 1\n\
ob=(2)\nfn=(5) __memcpy_avx_unaligned_erms\n0 9\n\
ob=(1)\nfn=(6) ring_core_0_17_14__bn_mul_mont\n0 2\nfn=(7) _ZN4core3fmt5write17h0123456789abcdefE\n0 2\n";

    #[test]
    fn every_function_of_the_binary_is_read_once_without_recursion_marks() {
        let functions = executed_functions(OUTPUT, "butler-operator");
        let expected = [
            "_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeNtCs32gj3y4fnmh_8operator4PlanE.llvm.77",
            "_RNvCs32gj3y4fnmh_8operator4walk",
            "_RNvCs32gj3y4fnmh_8operator5start",
            "_ZN4core3fmt5write17h0123456789abcdefE",
            "ring_core_0_17_14__bn_mul_mont",
        ];
        assert_eq!(functions.iter().map(String::as_str).collect::<Vec<_>>(), expected);
        assert!(executed_functions(OUTPUT, "butler-controller").is_empty());
    }

    #[test]
    fn patterns_leave_crate_disambiguators_hashes_and_suffixes_open() {
        assert_eq!(
            pattern("_RINvNtCsgEmfK2I1SDS_4core3ptr13drop_in_placeNtCs32gj3y4fnmh_8operator4PlanE.llvm.77")
                .unwrap(),
            "*(.text.*_RINvNtCs*_4core3ptr13drop_in_placeNtCs*_8operator4PlanE*)"
        );
        assert_eq!(
            pattern("_ZN4core3fmt5write17h0123456789abcdefE").unwrap(),
            "*(.text.*_ZN4core3fmt5write17h*)"
        );
        assert_eq!(
            pattern("ring_core_0_17_14__bn_mul_mont").unwrap(),
            "*(.text.ring_core_0_17_14__bn_mul_mont .text.ring_core_0_17_14__bn_mul_mont.*)"
        );
        // An identifier that merely holds "Cs" is kept as it is.
        assert_eq!(open_disambiguators("NvCs3ab_4main8CsvTable"), "NvCs*_4main8CsvTable");
        assert_eq!(pattern("odd name"), None);
    }

    #[test]
    fn the_script_gathers_the_patterns_once_each_ahead_of_text() {
        let mut functions = executed_functions(OUTPUT, "butler-operator");
        // Two builds' names of one function are one pattern.
        functions.insert("_RNvCs99zz_8operator5start".into());
        let script = linker_script("butler-operator", &functions);
        assert_eq!(script.matches("8operator5start").count(), 1, "{script}");
        assert!(script.contains("SECTIONS\n{\n  .text.hot :\n  {\n    *(.text."), "{script}");
        assert!(script.ends_with("  }\n}\nINSERT BEFORE .text;\n"), "{script}");
        assert!(script.contains("5 patterns"), "{script}");
    }
}
