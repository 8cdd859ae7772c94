//! OCI registries: a provider's releases as artifacts tagged with their versions
//! (`oci://registry/repository[:tag][@digest]`), read with `oci-client`.
//!
//! One reconcile reads one manifest per version and only the layers it needs; layers and
//! manifests named by digest are kept in the on-disk cache (content-addressed, so never stale)
//! and checked against their digest when read back, so a repeated fetch costs one manifest
//! request; offline, tags are answered from the cache too.

mod artifact;
mod bounded;
mod client;
mod credentials;
mod publish;
mod refresh;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::{
    IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest,
};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

pub(crate) use artifact::type_and_name;
pub use artifact::{
    ARTIFACT_TYPE, PROVIDER_NAME_ANNOTATION, PROVIDER_TYPE_ANNOTATION, TITLE_ANNOTATION, VERSION_ANNOTATION,
};
pub use credentials::{
    CA_VARIABLE, DOCKER_CONFIG_KEY, DockerConfig, INSECURE_VARIABLE, OciCredentials, OciOptions,
    PASSWORD_VARIABLE, REFRESH_TOKEN_VARIABLE, TOKEN_HOSTS_VARIABLE, TOKEN_VARIABLE, USERNAME_VARIABLE,
};
pub use publish::{Published, publish};

use super::Source;
use crate::digest::sha256_hex;
use crate::error::{RepositoryError, Result};
use crate::http::HttpOptions;
use crate::version::Version;

/// Tags asked for per page of the tag list.
const TAGS_PER_PAGE: usize = 1000;
/// At most this many pages of tags (a registry that keeps answering full pages would otherwise
/// be read for ever).
const MAX_TAG_PAGES: usize = 50;

/// Files by name.
type Files = Arc<BTreeMap<String, Vec<u8>>>;

/// One version's manifest, and what was read of it.
struct Artifact {
    reference: Reference,
    layout: artifact::Layout,
    /// The files of its archives, once unpacked.
    unpacked: Mutex<Option<Files>>,
}

pub struct OciSource {
    registry: String,
    repository: String,
    digest: Option<String>,
    /// The provider label, to find its files and check the artifact's claim.
    label: String,
    plain_http: bool,
    options: OciOptions,
    /// The client and what it sends, made at the first request that reaches the registry.
    session: tokio::sync::OnceCell<(Client, RegistryAuth)>,
    http: HttpOptions,
    artifacts: Mutex<BTreeMap<String, Arc<Artifact>>>,
}

impl OciSource {
    /// The artifacts of `label` in `registry/repository` (or its mirror); `digest` pins the
    /// content of every version read.
    pub fn new(
        label: &str,
        registry: &str,
        repository: &str,
        digest: Option<String>,
        plain_http: bool,
        options: &OciOptions,
        http: HttpOptions,
    ) -> Result<OciSource> {
        let (registry, repository) = options.mirror(label, registry, repository);
        Ok(OciSource {
            registry,
            repository,
            digest,
            label: label.to_string(),
            plain_http,
            options: options.clone(),
            session: tokio::sync::OnceCell::new(),
            http,
            artifacts: Mutex::new(BTreeMap::new()),
        })
    }

    fn key(&self, suffix: &str) -> String {
        format!("oci://{}/{}{suffix}", self.registry, self.repository)
    }

    fn error(&self, what: &str, e: OciDistributionError) -> RepositoryError {
        describe(&self.key(""), what, e)
    }

    async fn session(&self) -> Result<&(Client, RegistryAuth)> {
        self.session
            .get_or_try_init(|| async {
                // oci-client resolves names itself: the registry's addresses are checked here.
                if let Some(why) = crate::network::refusal_of_host(&self.http.network, &self.registry).await {
                    return Err(RepositoryError::Refused { url: self.key(""), why });
                }
                client::connect(
                    &self.options,
                    &self.registry,
                    &self.repository,
                    self.plain_http,
                    false,
                    self.http.timeout,
                )
                .await
            })
            .await
    }

    /// The tags of the repository, every page.
    async fn tags(&self) -> Result<Vec<String>> {
        let key = self.key("/tags");
        if self.http.offline {
            return self.cached_json(&key);
        }
        let reference = Reference::with_tag(self.registry.clone(), self.repository.clone(), "latest".into());
        let (client, auth) = self.session().await?;
        let mut tags: Vec<String> = Vec::new();
        for page_number in 1.. {
            if page_number > MAX_TAG_PAGES {
                return Err(RepositoryError::Oci {
                    reference: self.key("/tags"),
                    message: format!(
                        "the registry lists more than {} tags; pin the version (or a digest) instead of asking for the latest",
                        MAX_TAG_PAGES * TAGS_PER_PAGE
                    ),
                });
            }
            let last = tags.last().cloned();
            let page = self
                .within_deadline(
                    "the tag list",
                    client.list_tags(&reference, auth, Some(TAGS_PER_PAGE), last.as_deref()),
                )
                .await?;
            let full = page.tags.len() >= TAGS_PER_PAGE;
            tags.extend(page.tags);
            // A page that does not move `last` on would be asked for again and again.
            if !full || tags.last() == last.as_ref() {
                break;
            }
        }
        let mut seen = std::collections::HashSet::new();
        tags.retain(|t| seen.insert(t.clone()));
        if let Some(cache) = &self.http.cache {
            cache.store(&key, &serde_json::to_vec(&tags).expect("tags serialize"), None, None, None)?;
        }
        Ok(tags)
    }

    /// Offline, `key` is not in the cache.
    fn not_cached(&self, key: &str) -> RepositoryError {
        RepositoryError::NotCached {
            url: key.to_string(),
            cache: self.http.cache.as_ref().map(|c| c.dir().to_path_buf()).unwrap_or_default(),
        }
    }

    /// A manifest's body read as an OCI image manifest; `reference` names it in the error.
    fn parse_manifest(&self, body: &[u8], reference: &str) -> Result<OciImageManifest> {
        serde_json::from_slice(body).map_err(|e| RepositoryError::Oci {
            reference: self.key(reference),
            message: format!("the manifest is not an OCI image manifest: {e}"),
        })
    }

    fn cached_json<T: serde::de::DeserializeOwned>(&self, key: &str) -> Result<T> {
        let entry =
            self.http.cache.as_ref().and_then(|c| c.lookup(key)).ok_or_else(|| self.not_cached(key))?;
        serde_json::from_slice(&entry.body).map_err(|_| self.not_cached(key))
    }

    /// Content named by its digest, from the cache when it is there (and still matches).
    fn cached_by_digest(&self, digest: &str) -> Option<Vec<u8>> {
        let entry = self.http.cache.as_ref()?.lookup(&self.key(&format!("@{digest}")))?;
        (digest.strip_prefix("sha256:") == Some(sha256_hex(&entry.body).as_str())).then_some(entry.body)
    }

    fn keep_by_digest(&self, digest: &str, body: &[u8]) -> Result<()> {
        match &self.http.cache {
            Some(cache) => cache.store(&self.key(&format!("@{digest}")), body, None, None, None),
            None => Ok(()),
        }
    }

    /// The raw manifest of `tag` (or of the pinned digest) and its digest.
    async fn manifest_bytes(&self, tag: &str) -> Result<(Vec<u8>, String)> {
        // Offline, a pinned digest is served from the cache. Online the registry is asked even
        // for a pinned digest: knowing a digest must not read what another's credentials
        // fetched (the layers are served from the cache only after this answer).
        if self.http.offline
            && let Some(digest) = &self.digest
            && let Some(body) = self.cached_by_digest(digest)
        {
            return Ok((body, digest.clone()));
        }
        let tag_key = self.key(&format!(":{tag}"));
        if self.http.offline {
            let digest: String = self.cached_json(&tag_key)?;
            let body = self.cached_by_digest(&digest).ok_or_else(|| self.not_cached(&tag_key))?;
            return Ok((body, digest));
        }
        let reference = match &self.digest {
            Some(digest) => {
                Reference::with_digest(self.registry.clone(), self.repository.clone(), digest.clone())
            }
            None => Reference::with_tag(self.registry.clone(), self.repository.clone(), tag.to_string()),
        };
        // oci-client checks the body against a digest in the reference.
        let (client, auth) = self.session().await?;
        let what = format!("the manifest of {tag}");
        let (body, digest) = self
            .within_deadline(
                &what,
                client.pull_manifest_raw(
                    &reference,
                    auth,
                    &[OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE],
                ),
            )
            .await?;
        self.keep_by_digest(&digest, &body)?;
        if let Some(cache) = &self.http.cache {
            cache.store(
                &tag_key,
                &serde_json::to_vec(&digest).expect("a digest serializes"),
                None,
                None,
                None,
            )?;
        }
        Ok((body.to_vec(), digest))
    }

    /// The artifact of `version`: its manifest, read once per source.
    async fn artifact(&self, version: &Version) -> Result<Arc<Artifact>> {
        let key = version.to_string();
        if let Some(found) = self.artifacts.lock().expect("not poisoned").get(&key) {
            return Ok(found.clone());
        }
        // Tags may be written with or without the leading v.
        let mut last = None;
        let mut found = None;
        for tag in version.spellings() {
            match self.manifest_bytes(&tag).await {
                Ok(answer) => {
                    found = Some((tag, answer));
                    break;
                }
                Err(e @ RepositoryError::NotFound { .. }) if self.digest.is_none() => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        let Some((tag, (body, digest))) = found else {
            return Err(last.unwrap_or_else(|| RepositoryError::NotFound {
                what: format!("version {version}"),
                location: self.location(),
            }));
        };
        let manifest = self.parse_manifest(&body, &format!(":{tag}"))?;
        let annotations = manifest.annotations.clone().unwrap_or_default();
        if let Some(pinned) = annotations.get(VERSION_ANNOTATION)
            && self.digest.is_some()
            && Version::parse(pinned, "the manifest").ok().as_ref() != Some(version)
        {
            return Err(RepositoryError::Oci {
                reference: self.key(&format!("@{digest}")),
                message: format!(
                    "the digest pins version {pinned}, not {version}; change the version or the digest"
                ),
            });
        }
        artifact::check_provider(&manifest, &self.label)
            .map_err(|message| RepositoryError::Oci { reference: self.key(&format!(":{tag}")), message })?;
        let reference = Reference::with_digest(self.registry.clone(), self.repository.clone(), digest);
        let layout = artifact::layout(&manifest);
        let artifact = Arc::new(Artifact { reference, layout, unpacked: Mutex::new(None) });
        self.artifacts.lock().expect("not poisoned").insert(key, artifact.clone());
        Ok(artifact)
    }

    /// A layer's bytes, checked against its digest (by oci-client when pulled, here when read
    /// back from the cache).
    async fn blob(&self, artifact: &Artifact, layer: &OciDescriptor, what: &str) -> Result<Vec<u8>> {
        if let Some(body) = self.cached_by_digest(&layer.digest) {
            return Ok(body);
        }
        if self.http.offline {
            return Err(self.not_cached(&self.key(&format!("@{}", layer.digest))));
        }
        let declared = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if declared > self.http.max_download {
            return Err(RepositoryError::TooLarge { what: what.to_string(), limit: self.http.max_download });
        }
        // Read through a limit: the registry may send more than the manifest declared, and the
        // digest is known only at the end.
        let mut body = bounded::Bounded::new(declared);
        let (client, _) = self.session().await?;
        let pulled =
            self.within_deadline(what, client.pull_blob(&artifact.reference, layer, &mut body)).await;
        if body.exceeded() {
            return Err(RepositoryError::TooLarge {
                what: format!("{what} (more than its declared size)"),
                limit: declared,
            });
        }
        pulled?;
        let body = body.into_inner();
        self.keep_by_digest(&layer.digest, &body)?;
        Ok(body)
    }

    /// One registry call, within the time limit of a request.
    async fn within_deadline<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = std::result::Result<T, OciDistributionError>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.http.timeout, call).await {
            Ok(answer) => answer.map_err(|e| self.error(what, e)),
            Err(_) => Err(RepositoryError::Oci {
                reference: self.key(""),
                message: format!(
                    "{what} did not arrive within {} s; check the registry",
                    self.http.timeout.as_secs()
                ),
            }),
        }
    }

    async fn unpacked(&self, artifact: &Artifact) -> Result<Files> {
        if let Some(files) = artifact.unpacked.lock().expect("not poisoned").clone() {
            return Ok(files);
        }
        let mut files = BTreeMap::new();
        for layer in &artifact.layout.archives {
            let bytes = self.blob(artifact, layer, &format!("the layer {}", layer.digest)).await?;
            let gzipped = bytes.starts_with(&[0x1f, 0x8b]);
            let unpacked = artifact::unpack(&bytes, gzipped, self.http.max_download).map_err(|message| {
                RepositoryError::Oci { reference: self.key(&format!("@{}", layer.digest)), message }
            })?;
            files.extend(unpacked);
        }
        let files = Arc::new(files);
        *artifact.unpacked.lock().expect("not poisoned") = Some(files.clone());
        Ok(files)
    }
}

/// An oci-client error as ours: not found, refused (with what to set), or what the registry said.
fn describe(reference: &str, what: &str, e: OciDistributionError) -> RepositoryError {
    let not_found = || RepositoryError::NotFound { what: what.to_string(), location: reference.to_string() };
    let refused = || RepositoryError::Oci {
        reference: reference.to_string(),
        message: format!(
            "the registry refused to give {what}: set {USERNAME_VARIABLE} and {PASSWORD_VARIABLE}, or {TOKEN_VARIABLE}, or {REFRESH_TOKEN_VARIABLE}, or a Docker config.json ({DOCKER_CONFIG_KEY}) with the registry's credentials"
        ),
    };
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

impl Source for OciSource {
    fn location(&self) -> String {
        format!("the OCI repository {}/{}", self.registry, self.repository)
    }

    /// The tags that are versions; with a digest, the version its manifest states.
    async fn versions(&self) -> Result<Vec<Version>> {
        if let Some(digest) = &self.digest {
            let (body, _) = self.manifest_bytes(digest).await?;
            let manifest = self.parse_manifest(&body, &format!("@{digest}"))?;
            let stated = manifest.annotations.unwrap_or_default().get(VERSION_ANNOTATION).cloned();
            return match stated {
                Some(v) => {
                    Ok(vec![Version::parse(&v, &format!("{VERSION_ANNOTATION} of {}", self.key("")))?])
                }
                None => Err(RepositoryError::Oci {
                    reference: self.key(&format!("@{digest}")),
                    message: format!(
                        "the manifest does not state its version ({VERSION_ANNOTATION}); name the version with the digest (:vX.Y.Z@sha256:...)"
                    ),
                }),
            };
        }
        Ok(self.tags().await?.iter().filter_map(|t| Version::parse(t, "a tag").ok()).collect())
    }

    async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        let artifact = self.artifact(version).await?;
        let candidates = artifact::candidates(name, &self.label, &version.to_string());
        for candidate in &candidates {
            if let Some(layer) = artifact.layout.files.get(candidate) {
                return self.blob(&artifact, layer, &format!("{candidate} of {version}")).await;
            }
        }
        if !artifact.layout.archives.is_empty() {
            let files = self.unpacked(&artifact).await?;
            if let Some(found) = candidates.iter().find_map(|c| files.get(c)) {
                return Ok(found.clone());
            }
        }
        Err(RepositoryError::NotFound {
            what: candidates.join(" or "),
            location: format!(
                "version {version} of {} (digest {})",
                self.location(),
                artifact.reference.digest().unwrap_or_default()
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
