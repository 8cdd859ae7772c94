//! The Helm chart: its generated parts in step with the code, and what a real helm (v4.1.4,
//! `make test-tools`) makes of it: lint, the install manifest object by object, the provider
//! objects cluster-api-operator's chart renders for the commands of its documentation, a
//! misspelt key refused by name, and the packaged chart.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use butler_operator::{chart, manifest};
use serde_json::Value;

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(chart::DIR)
}

/// helm with `args`, in a home of its own; `None` where helm is missing outside CI.
fn helm(args: &[&str]) -> Option<(bool, String, String)> {
    let binary = butler_e2e::clients::find("helm")?;
    let home = tempfile::tempdir().expect("a temp folder");
    let out = Command::new(binary)
        .args(args)
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .output()
        .expect("helm runs");
    Some((
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    ))
}

/// The objects `helm template` renders with `args` after the chart.
fn template(args: &[&str]) -> Option<Vec<Value>> {
    let dir = chart_dir();
    let mut all = vec!["template", "butler", dir.to_str().unwrap()];
    all.extend_from_slice(args);
    let (ok, stdout, stderr) = helm(&all)?;
    assert!(ok, "helm template {args:?} failed: {stderr}");
    let objects: Vec<Value> = serde_saphyr::from_multiple(&stdout).expect("helm renders YAML");
    Some(objects.into_iter().filter(|o| !o.is_null()).collect())
}

/// The labels helm's conventions add, which the install manifest has no need of.
fn without_helm_labels(mut object: Value) -> Value {
    if let Some(labels) = object.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.remove("app.kubernetes.io/instance");
        labels.remove("app.kubernetes.io/managed-by");
        labels.remove("helm.sh/chart");
    }
    object
}

/// `value` with `1.0` written `1`: the manifest writes a schema's bounds as floats, the CRD
/// files (and so the chart) as integers; the API server reads both the same.
fn whole_numbers(value: Value) -> Value {
    match value {
        Value::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0 && f.abs() < 1e15) => {
            Value::from(n.as_f64().unwrap() as i64)
        }
        Value::Array(items) => Value::Array(items.into_iter().map(whole_numbers).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, whole_numbers(v))).collect()),
        other => other,
    }
}

fn key(object: &Value) -> (String, String, String) {
    let text =
        |pointer: &str| object.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_string();
    (text("/kind"), text("/metadata/namespace"), text("/metadata/name"))
}

#[test]
fn the_charts_generated_files_match_the_code() {
    let stale = chart::stale_files(&chart_dir()).expect("the chart is readable");
    assert!(stale.is_empty(), "the chart's generated files are out of date: {stale:?}\nrun `make crds`");
}

#[test]
fn the_books_values_reference_matches_the_chart() {
    let values = std::fs::read_to_string(chart_dir().join("values.yaml")).unwrap();
    let wanted = chart::values_reference(&values);
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/chart-values.md");
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        found == wanted,
        "docs/src/reference/chart-values.md is out of date with the chart: run `make crds`"
    );
    for row in [
        "| `infrastructure` | InfrastructureProvider | `{name}-infrastructure-system` |",
        "| `uninstall.deleteProviders` | boolean | `true` |",
        "| `version` | string |",
    ] {
        assert!(wanted.contains(row), "{row} is missing:\n{wanted}");
    }
}

#[test]
fn helm_lint_strict_passes() {
    let dir = chart_dir();
    let Some((ok, stdout, stderr)) = helm(&["lint", "--strict", dir.to_str().unwrap()]) else { return };
    assert!(ok, "helm lint --strict:\n{stdout}\n{stderr}");
}

#[test]
fn default_values_render_the_install_manifest_object_by_object() {
    let args = ["-n", manifest::NAMESPACE, "--set", "createNamespace=true", "--include-crds"];
    let Some(rendered) = template(&args) else { return };
    let ours: BTreeMap<_, _> =
        rendered.into_iter().map(|o| (key(&o), whole_numbers(without_helm_labels(o)))).collect();
    // The manifest as its file reads, numbers as YAML writes them.
    let file: Vec<Value> = serde_saphyr::from_multiple(&manifest::render(&chart::this_version())).unwrap();
    let wanted: BTreeMap<_, _> = file.into_iter().map(|o| (key(&o), whole_numbers(o))).collect();
    assert_eq!(ours.keys().collect::<Vec<_>>(), wanted.keys().collect::<Vec<_>>(), "the same objects");
    for (key, object) in &wanted {
        let found = &ours[key];
        assert!(
            found == object,
            "{key:?} differs between the chart and the manifest:\n{}",
            differences(found, object, "")
        );
    }
}

/// Two releases in one cluster (each operator honouring its own namespaces) collide on no
/// cluster-wide name: `clusterRoleName` names each one's, and its bindings follow.
#[test]
fn each_release_names_its_cluster_wide_objects_after_its_cluster_role_name() {
    let args = [
        "-n",
        "team-a",
        "--set",
        "clusterRoleName=butler-operator-team-a",
        "--set",
        "upstreamRBAC.enabled=true",
        "--set",
        "infrastructure.widget.version=v1.0.0",
    ];
    let Some(rendered) = template(&args) else { return };
    let cluster_wide: Vec<&Value> = rendered
        .iter()
        .filter(|o| o["metadata"]["namespace"].is_null() && o["kind"] != "Namespace")
        .collect();
    let kinds: Vec<&str> = cluster_wide.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert!(kinds.contains(&"ClusterRole") && kinds.contains(&"ClusterRoleBinding"), "{kinds:?}");
    for object in &cluster_wide {
        let name = object["metadata"]["name"].as_str().unwrap();
        assert!(
            name.starts_with("butler-operator-team-a"),
            "{} {name} is not the release's own",
            object["kind"]
        );
        assert_eq!(object["metadata"]["labels"]["app.kubernetes.io/instance"], "butler", "{name}");
        if object["kind"] == "ClusterRoleBinding" {
            assert_eq!(object["roleRef"]["name"], object["metadata"]["name"], "{name} binds its own role");
        }
    }
    assert!(
        cluster_wide.len() >= 7,
        "the operator's, the reader's, the upstream rules' and the hook's: {}",
        cluster_wide.len()
    );
}

/// Where `a` and `b` differ, by JSON pointer.
fn differences(a: &Value, b: &Value, at: &str) -> String {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            keys.into_iter()
                .map(|k| {
                    differences(
                        x.get(k).unwrap_or(&Value::Null),
                        y.get(k).unwrap_or(&Value::Null),
                        &format!("{at}/{k}"),
                    )
                })
                .collect()
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().map(|(i, (p, q))| differences(p, q, &format!("{at}/{i}"))).collect()
        }
        _ if a == b => String::new(),
        _ => format!("{at}: chart {a}, manifest {b}\n"),
    }
}

/// Kind, namespace, name and spec of the Namespaces and provider objects among `objects`.
fn providers_and_namespaces(objects: &[Value]) -> BTreeMap<(String, String, String), Value> {
    objects
        .iter()
        .filter(|o| o["kind"] == "Namespace" || o["kind"].as_str().is_some_and(|k| k.ends_with("Provider")))
        .map(|o| (key(o), o.get("spec").cloned().unwrap_or(Value::Null)))
        .collect()
}

#[test]
fn cluster_api_operators_documented_values_give_the_providers_theirs_would() {
    let folder = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chart");
    let mut files: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 6, "every documented command has its fixture");
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let command = text.lines().next().unwrap().trim_start_matches('#').trim();
        let mut args: Vec<&str> = command.split_whitespace().collect();
        args.extend(["-n", "capi-operator-system"]);
        let Some(ours) = template(&args) else { return };
        let theirs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
        for object in &theirs {
            if object["kind"] != "Namespace" {
                assert_eq!(object["apiVersion"], "operator.cluster.x-k8s.io/v1alpha2", "{}", file.display());
            }
        }
        for object in ours.iter().filter(|o| o["kind"].as_str().is_some_and(|k| k.ends_with("Provider"))) {
            assert_eq!(object["apiVersion"], "operator.butlerlabs.dev/v1alpha1");
        }
        assert_eq!(
            providers_and_namespaces(&ours),
            providers_and_namespaces(&theirs),
            "{}: {command}",
            file.display()
        );
    }
}

#[test]
fn a_misspelt_key_is_refused_with_its_path() {
    let dir = chart_dir();
    for (set, path, key) in [
        ("infrastructure.docker.verison=v1.4.2", "/infrastructure/docker", "verison"),
        ("replicaCont=2", "", "replicaCont"),
        ("core.cluster-api.deployment.replica=2", "/core/cluster-api/deployment", "replica"),
    ] {
        let Some((ok, _, stderr)) = helm(&["template", "butler", dir.to_str().unwrap(), "--set", set]) else {
            return;
        };
        assert!(!ok, "{set} was accepted");
        assert!(
            stderr.contains(&format!("at '{path}'")) && stderr.contains(&format!("'{key}' not allowed")),
            "{set}: {stderr}"
        );
    }
}

#[test]
fn the_packaged_chart_is_the_chart_at_the_releases_version() {
    let (name, bytes) = chart::package(&chart_dir(), "v1.2.3").unwrap();
    assert_eq!(name, "butler-operator-1.2.3.tgz");
    assert_eq!(chart::package(&chart_dir(), "v1.2.3").unwrap().1, bytes, "the same bytes every time");
    let folder = tempfile::tempdir().unwrap();
    let path = folder.path().join(&name);
    std::fs::write(&path, &bytes).unwrap();
    let Some((ok, stdout, stderr)) = helm(&["show", "chart", path.to_str().unwrap()]) else { return };
    assert!(ok, "{stderr}");
    assert!(stdout.contains("version: 1.2.3") && stdout.contains("appVersion: v1.2.3"), "{stdout}");
    let Some((ok, stdout, stderr)) = helm(&["template", "butler", path.to_str().unwrap(), "--include-crds"])
    else {
        return;
    };
    assert!(ok, "{stderr}");
    assert!(
        stdout.contains("image: ghcr.io/butlerdotdev/butler-operator:v1.2.3"),
        "the image follows the version"
    );
    assert!(stdout.contains("name: coreproviders.operator.butlerlabs.dev"), "the CRDs are packaged");
}

#[test]
fn the_packaged_chart_is_pushed_to_an_oci_registry_and_installs_from_there() {
    if butler_e2e::clients::find("helm").is_none() {
        return;
    }
    let registry = butler_e2e::registry::Registry::start_tls(Some(("pusher", "secret")));
    let folder = tempfile::tempdir().unwrap();
    let ca = folder.path().join("ca.pem");
    std::fs::write(&ca, registry.ca_pem.as_deref().unwrap()).unwrap();
    let (name, bytes) = chart::package(&chart_dir(), "v1.2.3").unwrap();
    let package = folder.path().join(&name);
    std::fs::write(&package, &bytes).unwrap();
    // One helm home for the whole session: the login is kept there, as a user's is.
    let home = folder.path().join("home");
    let run = |args: &[&str]| {
        let out = Command::new(butler_e2e::clients::find("helm").unwrap())
            .args(args)
            .env_clear()
            .env("HOME", &home)
            .env("PATH", "/usr/bin:/bin")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "helm {args:?}: {text}");
        text
    };
    let ca = ca.to_str().unwrap();
    run(&["registry", "login", &registry.addr, "-u", "pusher", "-p", "secret", "--ca-file", ca]);
    let repository = format!("oci://{}/charts", registry.addr);
    let pushed = run(&["push", package.to_str().unwrap(), &repository, "--ca-file", ca]);
    assert!(pushed.contains("butler-operator:1.2.3"), "{pushed}");
    let reference = format!("{repository}/butler-operator");
    let shown = run(&["show", "chart", &reference, "--version", "1.2.3", "--ca-file", ca]);
    assert!(shown.contains("appVersion: v1.2.3"), "{shown}");
    let rendered = run(&["template", "butler", &reference, "--version", "1.2.3", "--ca-file", ca]);
    assert!(rendered.contains("image: ghcr.io/butlerdotdev/butler-operator:v1.2.3"), "{rendered}");
}
