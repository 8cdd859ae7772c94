//! The release build of `butler-operator` lays the functions it runs out together, ahead of
//! the rest of its code (`hot-code.ld`, written by `make hot-code`): the kernel maps code
//! 64 KiB around each page a process touches, so strewn functions keep the whole binary
//! resident. GNU ld and LLD both take the script; other builds link as they would, and so does
//! a build with `BUTLER_HOT_CODE=off`: valgrind names only the functions of `.text`, so
//! `make hot-code` records on such a build.

use std::path::Path;

fn main() {
    let script = Path::new(&std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets it")).join("hot-code.ld");
    println!("cargo:rerun-if-changed={}", script.display());
    println!("cargo:rerun-if-env-changed=BUTLER_HOT_CODE");
    let off = std::env::var("BUTLER_HOT_CODE").is_ok_and(|v| v == "off");
    let release = !off && std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let linux = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "linux");
    if release && linux && script.is_file() {
        println!("cargo:rustc-link-arg-bin=butler-operator=-Wl,-T,{}", script.display());
    }
}
