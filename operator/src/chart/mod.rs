//! The Helm chart of the operator (`charts/butler-operator`). Its templates are written by hand;
//! what the operator's code decides is generated into it and checked for drift, as `crds/` is:
//! `Chart.yaml` (the version), `crds/` (the provider CRDs), `templates/_generated.tpl` (the
//! ClusterRoles' rules and Butler's provider names) and `values.schema.json` (each provider's
//! keys from the CRD, so that a misspelt key is refused by name). A test renders the chart with
//! a real helm and compares it object by object with the install manifest.

mod package;
mod reference;
mod schema;

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use serde_json::{Value, json};

use crate::api::{KindNames, ProviderKind};
use crate::manifest;

pub use package::package;
pub use reference::values_reference;
pub use schema::values_schema;

/// Where the chart lives in the repository.
pub const DIR: &str = "charts/butler-operator";

/// The chart's name.
pub const NAME: &str = "butler-operator";

/// The value keys of the provider kinds, as cluster-api-operator's chart names them, each with
/// its kind and the suffix of its default namespace (`{name}-{suffix}`; the core's is
/// `capi-system`).
pub const PROVIDER_VALUES: [(&str, ProviderKind, &str); 7] = [
    ("core", ProviderKind::Core, ""),
    ("bootstrap", ProviderKind::Bootstrap, "bootstrap-system"),
    ("controlPlane", ProviderKind::ControlPlane, "control-plane-system"),
    ("infrastructure", ProviderKind::Infrastructure, "infrastructure-system"),
    ("addon", ProviderKind::Addon, "addon-system"),
    ("ipam", ProviderKind::Ipam, "ipam-system"),
    ("runtimeExtension", ProviderKind::RuntimeExtension, "runtime-extension-system"),
];

/// The rules of the pre-delete hook that deletes the chart's provider objects and waits for
/// them to go (`butler-operator uninstall`): it reads and deletes provider objects, nothing else.
fn uninstall_rules() -> Vec<Value> {
    let kinds: Vec<&str> = ProviderKind::ALL.map(KindNames::plural).to_vec();
    vec![
        // patch: a release that keeps its providers takes the operator's finalizer off them.
        json!({"apiGroups": [crate::api::GROUP], "resources": kinds, "verbs": ["get", "list", "watch", "delete", "patch"]}),
    ]
}

/// A named template holding `value` as YAML at column 0.
fn define(name: &str, value: &Value) -> String {
    let text = serde_saphyr::to_string(value).expect("values serialize");
    format!("{{{{- define \"butler-operator.{name}\" -}}}}\n{}{{{{- end -}}}}\n", text)
}

/// `templates/_generated.tpl`.
fn generated_template() -> String {
    let butler: Vec<String> = butler_repository::embedded_providers()
        .iter()
        .map(|p| format!("{}/{}", p.type_.type_name(), p.name))
        .collect();
    let mut out = String::from(
        "{{/* Generated from the operator's code by `make crds`: edit the code, not this file. */}}\n",
    );
    out.push_str(&define("rules", &json!(manifest::cluster_rules())));
    out.push_str(&define("upstreamRules", &json!(manifest::upstream_rules())));
    out.push_str(&define("ceilingRules", &json!(manifest::ceiling_rules())));
    out.push_str(&define("uninstallRules", &json!(uninstall_rules())));
    // The provider kinds: value key, kind, suffix of the default namespace.
    let kinds: Vec<Value> =
        PROVIDER_VALUES.iter().map(|(key, kind, suffix)| json!([key, kind.kind(), suffix])).collect();
    out.push_str(&define("kinds", &json!(kinds)));
    // Kind/name of Butler's own providers: any other declared provider needs the upstream rules.
    out.push_str(&format!(
        "{{{{- define \"butler-operator.butlerProviders\" -}}}}\n{}\n{{{{- end -}}}}\n",
        butler.join(" ")
    ));
    out
}

/// `Chart.yaml` of this build's version.
fn chart_yaml(version: &str) -> String {
    let chart = json!({
        "apiVersion": "v2",
        "name": NAME,
        "description": "The Butler provider operator: installs, upgrades and deletes Cluster API providers declared as objects, Butler's and Cluster API's own",
        "type": "application",
        "version": version.trim_start_matches('v'),
        "appVersion": version,
        "kubeVersion": ">=1.31.0-0",
        "home": env!("CARGO_PKG_REPOSITORY"),
        "keywords": ["cluster-api", "operator", "butler"],
    });
    serde_saphyr::to_string(&chart).expect("Chart.yaml serializes")
}

/// The generated files of the chart at `version`, by path inside the chart.
pub fn generated_files(version: &str) -> BTreeMap<String, String> {
    let mut files = BTreeMap::new();
    files.insert("Chart.yaml".to_string(), chart_yaml(version));
    for crd in crate::crds::operator() {
        files.insert(
            format!("crds/{}", butler_runtime::crds::file_name(&crd)),
            butler_runtime::crds::render(&crd),
        );
    }
    files.insert("templates/_generated.tpl".to_string(), generated_template());
    let schema = serde_json::to_string_pretty(&values_schema()).expect("the schema serializes");
    files.insert("values.schema.json".to_string(), schema + "\n");
    files
}

/// The version of this build, as the committed chart carries it.
pub fn this_version() -> String {
    format!("v{}", env!("CARGO_PKG_VERSION"))
}

/// The generated files of the chart in `dir` that differ from what the code generates.
pub fn stale_files(dir: &Path) -> io::Result<Vec<String>> {
    let wanted = generated_files(&this_version());
    let mut stale = crate::crds::changed_or_missing(dir, &wanted)?;
    for entry in std::fs::read_dir(dir.join("crds"))? {
        let name = format!("crds/{}", entry?.file_name().to_string_lossy());
        if !wanted.contains_key(&name) {
            stale.push(format!("{name} (no longer generated)"));
        }
    }
    Ok(stale)
}

/// Writes the generated files into the chart in `dir` (removing CRD files no longer generated).
pub fn write_generated(dir: &Path) -> io::Result<()> {
    let wanted = generated_files(&this_version());
    let crds = dir.join("crds");
    std::fs::create_dir_all(&crds)?;
    for entry in std::fs::read_dir(&crds)? {
        let entry = entry?;
        if !wanted.contains_key(&format!("crds/{}", entry.file_name().to_string_lossy())) {
            std::fs::remove_file(entry.path())?;
        }
    }
    for (name, content) in wanted {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, content)?;
    }
    Ok(())
}
