//! cluster-api-operator v0.28's renderings (`tests/capi-operator-renderings/`, see its README)
//! against this operator's: each provider object converted as `butlerctl migrate` converts it,
//! its release rendered as this operator installs it, every container compared argument for
//! argument. A difference is a pod that restarts on the move.

use std::path::Path;

use butler_operator::api::{KindNames, ProviderKind, ProviderSpec};
use butler_operator::cli::migrate::{files, images};
use butler_repository::ImageOverrides;
use serde_json::Value;

/// One case of the folder.
struct Case {
    file: String,
    provider: Value,
    mounted: Option<ImageOverrides>,
    release: String,
    rendered: Vec<Value>,
}

fn cases() -> Vec<Case> {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/capi-operator-renderings");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&folder).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let case: Value = serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.push(Case {
            file: path.file_name().unwrap().to_string_lossy().into_owned(),
            provider: case["provider"].clone(),
            mounted: case.get("mounted").map(|m| serde_json::from_value(m.clone()).unwrap()),
            release: case["release"].as_str().unwrap().to_string(),
            rendered: case["rendered"].as_array().unwrap().clone(),
        });
    }
    out.sort_by(|a, b| a.file.cmp(&b.file));
    out
}

/// The case's provider object as `butlerctl migrate` carries it over.
fn carried(case: &Case) -> Value {
    let text = serde_json::to_string(&case.provider).unwrap();
    let converted = files::convert(&[(case.file.clone(), text)]).unwrap();
    let documents: Vec<Value> = serde_saphyr::from_multiple(&converted.yaml).unwrap();
    let mut object =
        documents.into_iter().find(|d| d["apiVersion"] == "operator.butlerlabs.dev/v1alpha1").unwrap();
    if let Some(mounted) = &case.mounted {
        let kind = ProviderKind::from_kind(object["kind"].as_str().unwrap()).unwrap();
        let label = kind.label(object["metadata"]["name"].as_str().unwrap());
        images::late(&mut object, &label, mounted);
    }
    object
}

#[test]
fn each_container_renders_as_cluster_api_operator_v0_28_runs_it() {
    let cases = cases();
    assert!(cases.len() >= 4, "the cases are read: {}", cases.len());
    for case in &cases {
        let object = carried(case);
        let kind = ProviderKind::from_kind(object["kind"].as_str().unwrap()).unwrap();
        let (name, namespace) =
            (object["metadata"]["name"].as_str().unwrap(), object["metadata"]["namespace"].as_str().unwrap());
        let spec: ProviderSpec = serde_json::from_value(object["spec"].clone()).unwrap();
        // The mounted overrides reach the carried-over provider through its config Secret.
        let overrides = case.mounted.clone().unwrap_or_default();
        let objects = butler_operator::upgrade::changes::render_text(
            &case.release,
            &spec,
            &kind.label(name),
            namespace,
            spec.version.as_deref().unwrap_or("v0.0.0"),
            &overrides,
            &|_| None,
        )
        .unwrap_or_else(|e| panic!("{}: {e}", case.file));
        let deployment = objects.iter().find(|o| o["kind"] == "Deployment").unwrap();
        let ours = deployment["spec"]["template"]["spec"]["containers"].as_array().unwrap();
        assert_eq!(ours.len(), case.rendered.len(), "{}: the containers", case.file);
        for (mine, theirs) in ours.iter().zip(&case.rendered) {
            let at = format!("{}: container {}", case.file, theirs["name"]);
            assert_eq!(mine["name"], theirs["name"], "{at}");
            assert_eq!(mine["image"], theirs["image"], "{at}: image");
            assert_eq!(mine["args"], theirs["args"], "{at}: args");
            let env =
                |c: &Value| c.get("env").cloned().filter(|e| !e.is_null()).unwrap_or(Value::Array(vec![]));
            assert_eq!(env(mine), env(theirs), "{at}: env");
            assert_eq!(mine.get("command"), theirs.get("command"), "{at}: command");
        }
    }
}
