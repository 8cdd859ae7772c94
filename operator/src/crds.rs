//! The CustomResourceDefinitions of the provider API, and the `crds/` folder that holds every CRD
//! of the workspace (provider kinds and Butler's API) as one YAML file each.

use std::collections::BTreeMap;
use std::io;
use std::path::Path;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::api::{
    AddonProvider, BootstrapProvider, ControlPlaneProvider, CoreProvider, IPAMProvider,
    InfrastructureProvider, ProviderUpgrade, RuntimeExtensionProvider,
};

/// Every provider CRD, core first, with tidied descriptions.
pub fn providers() -> Vec<CustomResourceDefinition> {
    [
        CoreProvider::crd(),
        InfrastructureProvider::crd(),
        BootstrapProvider::crd(),
        ControlPlaneProvider::crd(),
        AddonProvider::crd(),
        IPAMProvider::crd(),
        RuntimeExtensionProvider::crd(),
    ]
    .into_iter()
    .map(butler_runtime::crds::tidy)
    .map(spec_optional)
    .collect()
}

/// A provider object may leave out `spec` (cluster-api-operator's quick starts write
/// `kind: CoreProvider` with a name alone): the API server then stores `spec: {}`, the provider at
/// its defaults, so every reader still finds a spec.
fn spec_optional(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    for version in &mut crd.spec.versions {
        let Some(schema) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) else {
            continue;
        };
        if let Some(required) = schema.required.as_mut() {
            required.retain(|field| field != "spec");
        }
        if let Some(spec) = schema.properties.as_mut().and_then(|p| p.get_mut("spec")) {
            spec.default = Some(k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSON(
                serde_json::json!({}),
            ));
        }
    }
    crd
}

/// The CRD of upgrades as objects ([`ProviderUpgrade`]).
pub fn upgrades() -> CustomResourceDefinition {
    butler_runtime::crds::tidy(ProviderUpgrade::crd())
}

/// The operator's CRDs: the provider kinds, then upgrades.
pub fn operator() -> Vec<CustomResourceDefinition> {
    let mut crds = providers();
    crds.push(upgrades());
    crds
}

/// Every CRD of the workspace: the operator's, then Butler's API.
pub fn all() -> Vec<CustomResourceDefinition> {
    let mut crds = operator();
    crds.extend(butler_core::api::crds().into_iter().map(butler_runtime::crds::tidy));
    crds
}

/// The contents of the `crds/` folder: file name to YAML.
pub fn files() -> BTreeMap<String, String> {
    all()
        .iter()
        .map(|crd| (butler_runtime::crds::file_name(crd), butler_runtime::crds::render(crd)))
        .collect()
}

/// API groups whose CRD files in a folder belong to this workspace.
const GROUPS: [&str; 2] = [crate::api::GROUP, butler_core::api::GROUP];

fn is_ours(file_name: &str) -> bool {
    file_name.ends_with(".yaml") && GROUPS.iter().any(|g| file_name.starts_with(&format!("{g}_")))
}

/// The files of `dir` that differ from what the code generates: changed, missing, or left over
/// from a CRD that no longer exists.
pub fn stale_files(dir: &Path) -> io::Result<Vec<String>> {
    let wanted = files();
    let mut stale = changed_or_missing(dir, &wanted)?;
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().to_string();
        if is_ours(&name) && !wanted.contains_key(&name) {
            stale.push(format!("{name} (no longer generated)"));
        }
    }
    Ok(stale)
}

/// The files of `wanted` (path inside `dir` to content) that `dir` holds otherwise, or not at all.
pub(crate) fn changed_or_missing(dir: &Path, wanted: &BTreeMap<String, String>) -> io::Result<Vec<String>> {
    let mut stale = Vec::new();
    for (name, content) in wanted {
        match std::fs::read_to_string(dir.join(name)) {
            Ok(found) if &found == content => {}
            Ok(_) => stale.push(format!("{name} (changed)")),
            Err(e) if e.kind() == io::ErrorKind::NotFound => stale.push(format!("{name} (missing)")),
            Err(e) => return Err(e),
        }
    }
    Ok(stale)
}

/// Writes every CRD file into `dir` and removes the files of CRDs that no longer exist.
pub fn write_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let wanted = files();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().to_string();
        if is_ours(&name) && !wanted.contains_key(&name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    for (name, content) in wanted {
        std::fs::write(dir.join(name), content)?;
    }
    Ok(())
}
