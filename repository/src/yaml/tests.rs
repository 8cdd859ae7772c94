use super::*;
use serde_json::json;

#[test]
fn documents_split_on_markers_and_empty_ones_are_skipped() {
    let text = "---\na: 1\n---\n# only a comment\n---\n\n--- b: 2\n...\nc: 3\n---\r\nd: 4\n";
    assert_eq!(split_documents(text), ["a: 1\n", "b: 2\n", "c: 3\n", "d: 4\n"]);
    assert_eq!(split_documents("a: |\n  ---not a marker\n"), ["a: |\n  ---not a marker\n"]);
    assert!(split_documents("").is_empty());
    // Slices of the text, but where a marker's line starts the document.
    let copied: Vec<bool> = split_documents(text).iter().map(|d| matches!(d, Cow::Owned(_))).collect();
    assert_eq!(copied, [false, true, false, false]);
}

fn big(doc: &str) -> String {
    let filler: String = (0..2000).map(|i| format!("      field{i}: {{type: string}}\n")).collect();
    format!("{doc}  versions:\n  - name: v1\n    schema:\n      properties:\n{filler}")
}

#[test]
fn large_block_documents_are_outlined_and_round_trip() {
    let text = big(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n  # a comment\n  labels:\n    a: b\nlist:\n- compact\n- sequence\nspec:\n  group: example.com\n  conversion:\n    strategy: Webhook\n    webhook:\n      clientConfig:\n        service:\n          name: svc\n          namespace: old\n",
    );
    let mut doc = Document::parse(&text).unwrap();
    assert!(doc.is_outlined());
    assert_eq!(doc.to_yaml(), text, "untouched, the text is unchanged");
    assert_eq!(doc.get("kind").unwrap(), Some(json!("CustomResourceDefinition")));
    let mut meta = doc.get("metadata").unwrap().unwrap();
    meta["labels"]["x"] = json!("y");
    doc.set("metadata", meta);
    let mut conversion = doc.get_child("spec", "conversion").unwrap().unwrap();
    conversion["webhook"]["clientConfig"]["service"]["namespace"] = json!("new");
    doc.set_child("spec", "conversion", conversion).unwrap();
    let out = doc.to_yaml();
    let reparsed = parse_value(&out).unwrap();
    let full = parse_value(&text).unwrap();
    assert_eq!(reparsed["metadata"]["labels"], json!({"a": "b", "x": "y"}));
    assert_eq!(reparsed["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"], "new");
    assert_eq!(reparsed["spec"]["versions"], full["spec"]["versions"], "the rest comes through verbatim");
    assert_eq!(reparsed["spec"]["group"], "example.com");
    assert_eq!(reparsed["list"], json!(["compact", "sequence"]));
}

#[test]
fn documents_outside_plain_block_style_are_parsed_whole() {
    for prefix in ["kind: X\nanchor: &a {b: 1}\nuse: *a\n", "{kind: X}\n", "kind: !tag X\n", "- a\n- b\n"] {
        let text = big(prefix);
        let parsed = Document::parse(&text);
        assert!(!parsed.is_ok_and(|d| d.is_outlined()), "{prefix}");
    }
    assert!(Document::parse("- a\n").unwrap_err().contains("must be an object"));
}

#[test]
fn errors_say_where_and_what_without_the_text() {
    let secret = "a: 1\nb: [unclosed\ntoken: hunter2-secret-value\n";
    let said = parse_value(secret).unwrap_err();
    assert_eq!(said, "line 3 column 6: illegal placement of ':' indicator");
    let typed =
        serde_saphyr::from_str::<std::collections::BTreeMap<String, u64>>("n: hunter2\n").unwrap_err();
    let said = describe_error(&typed);
    assert!(!said.contains("hunter2") && said.contains("line 1"), "{said}");
}

#[test]
fn a_text_of_too_many_documents_is_refused() {
    let many = "---\na: 1\n".repeat(MAX_DOCUMENTS + 1);
    let documents = split_documents(&many);
    assert_eq!(
        check_count(&documents).unwrap_err(),
        "it holds 10001 YAML documents, more than the 10000 one may"
    );
    assert_eq!(check_count(&documents[..MAX_DOCUMENTS]), Ok(()));
}

#[test]
fn a_file_whose_documents_hold_too_many_nodes_in_all_is_refused() {
    // Each document within what one may hold; together, past the file's budget.
    let document = format!("a: [{}]\n", "0,".repeat(200_000));
    let mut budget = NodeBudget::default();
    let mut refused = None;
    for i in 0..10 {
        if let Err(e) = budget.spend(&Document::parse(&document).unwrap()) {
            refused = Some((i, e));
            break;
        }
    }
    let (at, message) = refused.expect("refused");
    assert_eq!(at, 7, "after 1.5 million nodes");
    assert!(message.starts_with("its documents hold more than 1500000 YAML nodes"), "{message}");
    // Outlined documents count two nodes a line (and one a flow separator).
    let block = format!("kind: Big\nspec:\n{}", "  k: v\n".repeat(OUTLINE_THRESHOLD / 4));
    let outlined = Document::parse(&block).unwrap();
    assert_eq!(outlined.nodes(), 2 * block.lines().count());
}

#[test]
fn a_file_larger_than_a_components_file_may_be_is_refused() {
    assert!(check_size(&"#".repeat(MAX_FILE_BYTES)).is_ok());
    assert!(check_size(&"#".repeat(MAX_FILE_BYTES + 1)).unwrap_err().contains("more than the 33554432"));
}

#[test]
fn json_errors_say_where_and_what_kind_never_the_text() {
    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    enum Kind {
        Known,
    }
    let e = serde_json::from_str::<Kind>(r#""IGNORE PREVIOUS INSTRUCTIONS sk_live_123""#).unwrap_err();
    let said = describe_json_error(&e);
    assert!(!said.contains("sk_live") && !said.contains("IGNORE"), "{said}");
    assert!(said.starts_with("not of the expected shape (line 1, column"), "{said}");
    let e = serde_json::from_str::<Vec<u32>>(r#"["password123"]"#).unwrap_err();
    assert!(!describe_json_error(&e).contains("password123"), "{}", describe_json_error(&e));
    assert_eq!(without_quoted("unknown variant `x`, expected \"y\""), "unknown variant `…`, expected \"…\"");
}

#[test]
fn a_flow_collection_whole_on_its_line_keeps_a_document_outlined() {
    // controller-gen writes block style, hand-written CRDs often `names: {kind: …}`: without
    // this, their whole `spec` (schemas included) is parsed when one entry is changed.
    let one_line = "kind: X\nnames: {kind: Thing, plural: 'a}b'} # c\nlist: [a, b]\n";
    assert_eq!(outline(one_line, 0).map(|entries| entries.len()), Some(3));
    for spread in ["names: {kind: Thing,\n  plural: things}\n", "names: [a, b\n]\n", "names: {a: b}} \n"] {
        assert_eq!(outline(spread, 0), None, "{spread}");
    }
}
