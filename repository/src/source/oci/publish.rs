//! Pushing a provider release as one artifact in Cluster API's proposed layout: the files in
//! one `tar+gzip` layer, the manifest annotated with the provider's type, name and version.
//! The archive is reproducible, so publishing the same files twice gives the same digest.

use std::collections::BTreeMap;

use oci_client::Reference;
use oci_client::client::{Config, ImageLayer};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciImageManifest};

use super::artifact::{
    self, ARTIFACT_TYPE, PROVIDER_NAME_ANNOTATION, PROVIDER_TYPE_ANNOTATION, VERSION_ANNOTATION,
};
use oci_client::errors::{OciDistributionError, OciErrorCode};

use super::OciOptions;
use crate::error::{RepositoryError, Result};
use crate::metadata::METADATA_FILE;
use crate::version::Version;

/// The empty config of an artifact (OCI image spec 1.1).
const EMPTY_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// Where a release went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Published {
    /// `registry/repository:tag@digest`.
    pub reference: String,
    pub digest: String,
}

/// The manifest of a release: one layer, the annotations that say whose it is.
fn manifest(label: &str, version: &Version, layer: &ImageLayer, config: &Config) -> OciImageManifest {
    let (kind, name) = artifact::type_and_name(label);
    let annotations = BTreeMap::from([
        (PROVIDER_TYPE_ANNOTATION.to_string(), kind.to_string()),
        (PROVIDER_NAME_ANNOTATION.to_string(), name.to_string()),
        (VERSION_ANNOTATION.to_string(), version.to_string()),
    ]);
    let mut manifest = OciImageManifest::build(std::slice::from_ref(layer), config, Some(annotations));
    manifest.media_type = Some(OCI_IMAGE_MEDIA_TYPE.to_string());
    manifest.artifact_type = Some(ARTIFACT_TYPE.to_string());
    manifest
}

/// Pushes `files` (the release of `label` at `version`: metadata, components, templates) to
/// `registry/repository:{version}`.
pub async fn publish(
    registry: &str,
    repository: &str,
    plain_http: bool,
    label: &str,
    version: &Version,
    files: &BTreeMap<String, Vec<u8>>,
    options: &OciOptions,
) -> Result<Published> {
    let target = format!("oci://{registry}/{repository}:{version}");
    if !files.contains_key(METADATA_FILE) {
        return Err(RepositoryError::Oci {
            reference: target,
            message: format!("a release needs its {METADATA_FILE}; it is not among the files"),
        });
    }
    let (client, auth) = super::client::connect(
        options,
        registry,
        repository,
        plain_http,
        true,
        std::time::Duration::from_secs(60),
    )
    .await?;
    let reference = Reference::with_tag(registry.to_string(), repository.to_string(), version.to_string());
    let layer = ImageLayer::new(artifact::pack(files), artifact::TAR_GZIP.to_string(), None);
    let config = Config::new(b"{}".to_vec(), EMPTY_CONFIG_MEDIA_TYPE.to_string(), None);
    let manifest = manifest(label, version, &layer, &config);
    client
        .push(&reference, &[layer], config, &auth, Some(manifest))
        .await
        .map_err(|e| describe(&target, "the push", e))?;
    let digest = client
        .fetch_manifest_digest(&reference, &auth)
        .await
        .map_err(|e| describe(&target, "the pushed manifest", e))?;
    Ok(Published { reference: format!("{registry}/{repository}:{version}@{digest}"), digest })
}

/// An oci-client error as ours: not found, refused (with what to set), or what the registry said.
fn describe(reference: &str, what: &str, e: OciDistributionError) -> RepositoryError {
    let not_found = || RepositoryError::NotFound { what: what.to_string(), location: reference.to_string() };
    let refused = || super::credentials::refused(reference, what);
    match e {
        OciDistributionError::ImageManifestNotFoundError(_) => not_found(),
        OciDistributionError::RegistryError { ref envelope, .. } => {
            let codes: Vec<&OciErrorCode> = envelope.errors.iter().map(|e| &e.code).collect();
            if codes.iter().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                not_found()
            } else if codes.iter().any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied)) {
                refused()
            } else {
                RepositoryError::Oci { reference: reference.to_string(), message: format!("{what}: {e}") }
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => not_found(),
        OciDistributionError::ServerError { code: 401 | 403, .. }
        | OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => refused(),
        OciDistributionError::RequestError(e) => {
            RepositoryError::Network { url: reference.to_string(), message: format!("{what}: {e}") }
        }
        other => {
            RepositoryError::Oci { reference: reference.to_string(), message: format!("{what}: {other}") }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_manifest_says_whose_release_it_is() {
        let files = BTreeMap::from([("metadata.yaml".to_string(), b"x".to_vec())]);
        let layer = ImageLayer::new(artifact::pack(&files), artifact::TAR_GZIP.to_string(), None);
        let config = Config::new(b"{}".to_vec(), EMPTY_CONFIG_MEDIA_TYPE.to_string(), None);
        let version = Version::parse("v0.1.0", "t").unwrap();
        let m = manifest("infrastructure-harvester", &version, &layer, &config);
        let a = m.annotations.clone().unwrap();
        assert_eq!(a[PROVIDER_TYPE_ANNOTATION], "infrastructure");
        assert_eq!(a[PROVIDER_NAME_ANNOTATION], "harvester");
        assert_eq!(a[VERSION_ANNOTATION], "v0.1.0");
        assert!(artifact::check_provider(&m, "infrastructure-harvester").is_ok());
        assert_eq!(artifact::layout(&m).archives.len(), 1, "read back as the packed layout");
        assert_eq!(m.artifact_type.as_deref(), Some(ARTIFACT_TYPE));
    }

    #[test]
    fn registry_errors_say_what_to_do() {
        let refused = describe(
            "oci://r/p",
            "the tag list",
            OciDistributionError::UnauthorizedError { url: "u".into() },
        );
        assert!(
            refused.to_string().contains("set OCI_USERNAME and OCI_PASSWORD, or OCI_ACCESS_TOKEN"),
            "{refused}"
        );
        let missing = describe(
            "oci://r/p",
            "the manifest of v9.9.9",
            OciDistributionError::ServerError { code: 404, url: "u".into(), message: String::new() },
        );
        assert!(matches!(missing, RepositoryError::NotFound { .. }), "{missing}");
    }
}
