//! The release shapes of Butler's provider repository, written from the repository compiled
//! into this build (`make release VERSION=vX.Y.Z`):
//!
//! - `github/{provider label}/`: the assets of each provider's GitHub release;
//! - `local/{provider label}/{version}/`: a clusterctl local repository;
//! - `configmaps/{provider label}-{version}.yaml`: one ConfigMap per provider version for
//!   air-gapped clusters, in the format of the ConfigMap source (components gzipped into
//!   `binaryData` when they would not fit);
//! - `operator/butler-operator.yaml`: the operator's install manifest ([`crate::manifest`]);
//!   `operator/butler-operator-upstream-rbac.yaml`: what upstream providers need besides.
//!   `operator/butler-operator-servicemonitor.yaml`: a ServiceMonitor of the operator's metrics.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use butler_repository::{COMPRESSED_ANNOTATION, EMBEDDED_VERSION, VERSION_LABEL, embedded_providers};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::ObjectMeta;
use thiserror::Error;

/// The label that selects a provider's ConfigMaps: `fetchConfig.selector.matchLabels` of a
/// provider object names it with the provider label (for example `infrastructure-harvester`).
pub const CONFIGMAP_PROVIDER_LABEL: &str = "butler.butlerlabs.dev/provider";

/// Above this many bytes of data, components go into the ConfigMap gzipped (a ConfigMap holds
/// at most 1 MiB).
pub const COMPRESS_ABOVE: usize = 768 * 1024;

#[derive(Debug, Error)]
pub enum ReleaseError {
    #[error(
        "this build carries version {EMBEDDED_VERSION} of Butler's providers, not {0}; set the workspace version (Cargo.toml, [workspace.package]), the image tags in components/ and the release series of metadata.yaml to it, then build again"
    )]
    WrongVersion(String),
    #[error("cannot write {path}: {message}")]
    Write { path: PathBuf, message: String },
}

/// Every file of a release, by path below the output folder.
pub fn release_files(version: &str) -> Result<BTreeMap<PathBuf, Vec<u8>>, ReleaseError> {
    if version != EMBEDDED_VERSION {
        return Err(ReleaseError::WrongVersion(version.to_string()));
    }
    let mut files = BTreeMap::new();
    for provider in embedded_providers() {
        let label = provider.label();
        for (name, text) in provider.files() {
            files.insert(Path::new("github").join(&label).join(&name), text.clone().into_bytes());
            files.insert(Path::new("local").join(&label).join(version).join(&name), text.into_bytes());
        }
        let configmap = provider_configmap(&label, version, &provider.files());
        let yaml = serde_saphyr::to_string(&configmap).expect("a ConfigMap serializes");
        files.insert(Path::new("configmaps").join(format!("{label}-{version}.yaml")), yaml.into_bytes());
    }
    files.insert(
        Path::new("operator").join("butler-operator.yaml"),
        crate::manifest::render(version).into_bytes(),
    );
    // Applied beside the manifest by those who install upstream providers too.
    let upstream = crate::manifest::extra_rbac(version, &crate::manifest::upstream_rules());
    let upstream: Vec<String> =
        upstream.iter().map(|o| serde_saphyr::to_string(o).expect("objects serialize")).collect();
    files.insert(
        Path::new("operator").join("butler-operator-upstream-rbac.yaml"),
        upstream.join("---\n").into_bytes(),
    );
    // Applied by those who run the Prometheus Operator.
    let monitor =
        serde_saphyr::to_string(&crate::manifest::service_monitor(version)).expect("objects serialize");
    files.insert(Path::new("operator").join("butler-operator-servicemonitor.yaml"), monitor.into_bytes());
    Ok(files)
}

/// One provider version as a ConfigMap: `metadata` and `components`, gzipped when large.
pub fn provider_configmap(label: &str, version: &str, files: &[(String, String)]) -> ConfigMap {
    let metadata =
        files.iter().find(|(n, _)| n == "metadata.yaml").map(|(_, t)| t.clone()).unwrap_or_default();
    let components = files
        .iter()
        .find(|(n, _)| n.ends_with("components.yaml"))
        .map(|(_, t)| t.clone())
        .unwrap_or_default();
    let mut cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("{label}-{version}")),
            labels: Some(BTreeMap::from([
                (CONFIGMAP_PROVIDER_LABEL.to_string(), label.to_string()),
                (VERSION_LABEL.to_string(), version.to_string()),
            ])),
            ..Default::default()
        },
        data: Some(BTreeMap::from([("metadata".to_string(), metadata.clone())])),
        ..Default::default()
    };
    if metadata.len() + components.len() > COMPRESS_ABOVE {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(components.as_bytes()).expect("writing to memory");
        let packed = encoder.finish().expect("writing to memory");
        cm.binary_data = Some(BTreeMap::from([("components".to_string(), ByteString(packed))]));
        cm.metadata.annotations =
            Some(BTreeMap::from([(COMPRESSED_ANNOTATION.to_string(), "true".to_string())]));
    } else {
        cm.data.get_or_insert_default().insert("components".to_string(), components);
    }
    cm
}

/// Writes a release into `dir`.
pub fn write_release(dir: &Path, version: &str) -> Result<Vec<PathBuf>, ReleaseError> {
    let files = release_files(version)?;
    let mut written = Vec::new();
    for (path, bytes) in files {
        let full = dir.join(&path);
        let fail = |e: std::io::Error| ReleaseError::Write { path: full.clone(), message: e.to_string() };
        std::fs::create_dir_all(full.parent().expect("release paths have folders")).map_err(fail)?;
        std::fs::write(&full, bytes).map_err(fail)?;
        written.push(full);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_components_are_gzipped_small_ones_are_not() {
        let small = provider_configmap(
            "infrastructure-x",
            "v0.1.0",
            &[("metadata.yaml".into(), "m".into()), ("infrastructure-components.yaml".into(), "c".into())],
        );
        assert_eq!(small.data.as_ref().unwrap()["components"], "c");
        assert!(small.binary_data.is_none());
        let big = "x".repeat(COMPRESS_ABOVE + 1);
        let large = provider_configmap(
            "infrastructure-x",
            "v0.1.0",
            &[("metadata.yaml".into(), "m".into()), ("infrastructure-components.yaml".into(), big.clone())],
        );
        assert_eq!(large.metadata.annotations.as_ref().unwrap()[COMPRESSED_ANNOTATION], "true");
        let packed = &large.binary_data.as_ref().unwrap()["components"].0;
        assert_eq!(butler_repository::gunzip(packed, 1 << 21, "t").unwrap(), big.as_bytes());
        assert_eq!(large.metadata.labels.as_ref().unwrap()[VERSION_LABEL], "v0.1.0");
    }

    #[test]
    fn another_version_is_refused_with_what_to_do() {
        let error = release_files("v9.9.9").unwrap_err().to_string();
        assert!(
            error.starts_with(&format!(
                "this build carries version {EMBEDDED_VERSION} of Butler's providers, not v9.9.9"
            )),
            "{error}"
        );
    }
}
