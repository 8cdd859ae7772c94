//! The variable expander never panics, whatever the text and whichever variables are set.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = butler_repository::list_variables(text);
    let set = |name: &str| (name.len() % 2 == 0).then(|| format!("{name}$${{X}}"));
    let _ = butler_repository::expand(text, &set);
    let _ = butler_repository::expand(text, &|_| None);
});
