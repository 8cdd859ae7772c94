//! The expander, the YAML splitter and outlined documents never panic, on any input (the same
//! properties as the cargo fuzz targets in `fuzz/`, here on every test run).

use butler_repository::{Document, expand, list_variables, split_documents};
use proptest::prelude::*;

/// Text biased towards the characters that matter: `$`, braces, operators, YAML markers.
fn tricky() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            Just("${".to_string()),
            Just("}".to_string()),
            Just("$$".to_string()),
            Just(":=".to_string()),
            Just("#".to_string()),
            Just("%".to_string()),
            Just("/".to_string()),
            Just("\n---\n".to_string()),
            Just("\n- ".to_string()),
            Just(": ".to_string()),
            Just("\n  ".to_string()),
            "[A-Za-z_ ]{0,4}",
            any::<char>().prop_map(String::from),
        ],
        0..60,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn expansion_never_panics(text in tricky()) {
        let _ = list_variables(&text);
        let _ = expand(&text, &|name| (name.len() % 2 == 0).then(|| format!("{name}$${{X}}")));
        let _ = expand(&text, &|_| None);
    }

    #[test]
    fn splitting_and_outlining_never_panic(text in tricky(), pad in 0usize..20_000) {
        // Padding makes documents large enough to be outlined.
        let text = format!("{text}\nfiller: |\n{}", "  x\n".repeat(pad / 4));
        for document in split_documents(&text) {
            if let Ok(mut doc) = Document::parse(&document) {
                let _ = doc.get("metadata");
                let _ = doc.get_child("spec", "names");
                let _ = doc.set_child("spec", "conversion", serde_json::json!(true));
                let _ = doc.to_yaml();
            }
        }
    }
}
