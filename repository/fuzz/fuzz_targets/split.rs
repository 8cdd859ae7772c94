//! The YAML splitter and the outlined documents never panic, whatever the text.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for document in butler_repository::split_documents(text) {
        if let Ok(mut doc) = butler_repository::Document::parse(&document) {
            let _ = doc.get("metadata");
            let _ = doc.get_child("spec", "names");
            let _ = doc.set_child("spec", "conversion", serde_json_value());
            let _ = doc.to_yaml();
        }
    }
});

fn serde_json_value() -> butler_repository::Value {
    butler_repository::Value::Bool(true)
}
