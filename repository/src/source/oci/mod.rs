//! OCI registries: a provider's releases as artifacts tagged with their versions
//! (`oci://registry/repository[:tag][@digest]`), read through [`session`] and published with
//! `oci-client`.
//!
//! One reconcile reads one manifest per version and only the layers it needs; layers and
//! manifests named by digest are kept in the on-disk cache (content-addressed, so never stale)
//! and checked against their digest when read back, so a repeated fetch costs one manifest
//! request; offline, tags are answered from the cache too.

mod artifact;
mod client;
mod credentials;
mod publish;
mod refresh;
mod session;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use oci_client::manifest::{
    IMAGE_MANIFEST_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest,
};

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
/// The largest manifest or page of tags read (the distribution specification's limit of what a
/// registry must accept as a manifest).
const MAX_DOCUMENT: u64 = 4 << 20;

/// Artifacts a source keeps with their unpacked files at the most.
const MOST_ARTIFACTS: usize = 4;

/// Files by name.
type Files = Arc<BTreeMap<String, Vec<u8>>>;

/// One version's manifest, and what was read of it.
struct Artifact {
    /// The manifest's digest.
    digest: String,
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
    /// How the registry is read, made at the first request that reaches it.
    session: tokio::sync::OnceCell<Box<session::Session>>,
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

    /// Where the cache keeps what the registry answered for [`OciSource::key`]: beside a
    /// digest of the credentials it was read with, unless anonymous, so that offline mode
    /// serves one reader nothing that only another's credentials could read.
    fn cache_key(&self, suffix: &str) -> String {
        let anonymous =
            self.options.credentials == OciCredentials::Anonymous && self.options.docker_config.is_none();
        let material = self.options.credential_material();
        crate::http::cache_key(&self.key(suffix), (!anonymous).then_some(material.as_str()))
    }

    async fn session(&self) -> Result<&session::Session> {
        self.session
            .get_or_try_init(|| async {
                session::Session::new(
                    &self.options,
                    &self.http,
                    &self.registry,
                    &self.repository,
                    self.plain_http,
                )
                .map(Box::new)
            })
            .await
            .map(|session| &**session)
    }

    /// The tags of the repository, every page.
    async fn tags(&self) -> Result<Vec<String>> {
        if self.http.offline {
            return self.cached_json("/tags");
        }
        let session = self.session().await?;
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
            let query = {
                let mut query = form_urlencoded::Serializer::new(String::new());
                query.append_pair("n", &TAGS_PER_PAGE.to_string());
                if let Some(last) = &last {
                    query.append_pair("last", last);
                }
                query.finish()
            };
            let what = "the tag list";
            let path = format!("tags/list?{query}");
            let received = self
                .within_deadline(what, session.get(&path, &["application/json"], MAX_DOCUMENT, what))
                .await?;
            if received.status == 404 {
                return Err(RepositoryError::NotFound { what: what.into(), location: self.key("") });
            }
            #[derive(serde::Deserialize)]
            struct Page {
                tags: Option<Vec<String>>,
            }
            let page: Page = serde_json::from_slice(&received.body).map_err(|e| RepositoryError::Oci {
                reference: self.key("/tags"),
                message: format!(
                    "the tag list is not the JSON of the distribution specification: {}",
                    crate::yaml::describe_json_error(&e)
                ),
            })?;
            let page = page.tags.unwrap_or_default();
            let full = page.len() >= TAGS_PER_PAGE;
            tags.extend(page);
            // A page that does not move `last` on would be asked for again and again.
            if !full || tags.last() == last.as_ref() {
                break;
            }
        }
        let mut seen = std::collections::HashSet::new();
        tags.retain(|t| seen.insert(t.clone()));
        if let Some(cache) = &self.http.cache {
            let key = self.cache_key("/tags");
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
            message: format!(
                "the manifest is not an OCI image manifest: {}",
                crate::yaml::describe_json_error(&e)
            ),
        })
    }

    /// What the cache holds for [`OciSource::key`]`(suffix)`, read with these credentials.
    fn cached_json<T: serde::de::DeserializeOwned>(&self, suffix: &str) -> Result<T> {
        let missing = || self.not_cached(&self.key(suffix));
        let entry =
            self.http.cache.as_ref().and_then(|c| c.lookup(&self.cache_key(suffix))).ok_or_else(missing)?;
        serde_json::from_slice(&entry.body).map_err(|_| missing())
    }

    /// Content named by its digest, from the cache when it is there (and still matches).
    fn cached_by_digest(&self, digest: &str) -> Option<Vec<u8>> {
        let entry = self.http.cache.as_ref()?.lookup(&self.cache_key(&format!("@{digest}")))?;
        (digest.strip_prefix("sha256:") == Some(sha256_hex(&entry.body).as_str())).then_some(entry.body)
    }

    fn keep_by_digest(&self, digest: &str, body: &[u8]) -> Result<()> {
        match &self.http.cache {
            Some(cache) => cache.store(&self.cache_key(&format!("@{digest}")), body, None, None, None),
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
        let tag_suffix = format!(":{tag}");
        if self.http.offline {
            let digest: String = self.cached_json(&tag_suffix)?;
            let body =
                self.cached_by_digest(&digest).ok_or_else(|| self.not_cached(&self.key(&tag_suffix)))?;
            return Ok((body, digest));
        }
        let session = self.session().await?;
        let what = format!("the manifest of {tag}");
        let target = self.digest.clone().unwrap_or_else(|| tag.to_string());
        let accept = [OCI_IMAGE_MEDIA_TYPE, IMAGE_MANIFEST_MEDIA_TYPE];
        let received = self
            .within_deadline(&what, session.get(&format!("manifests/{target}"), &accept, MAX_DOCUMENT, &what))
            .await?;
        if received.status == 404 {
            return Err(RepositoryError::NotFound { what, location: self.key("") });
        }
        // The digest of what came, never what the registry says it is.
        let body = received.body;
        let digest = format!("sha256:{}", sha256_hex(&body));
        if let Some(pinned) = &self.digest
            && *pinned != digest
        {
            return Err(RepositoryError::Oci {
                reference: self.key(&format!("@{pinned}")),
                message: format!(
                    "the registry sent a manifest whose digest is {digest}, not the one pinned; check the digest and the registry"
                ),
            });
        }
        self.keep_by_digest(&digest, &body)?;
        if let Some(cache) = &self.http.cache {
            cache.store(
                &self.cache_key(&tag_suffix),
                &serde_json::to_vec(&digest).expect("a digest serializes"),
                None,
                None,
                None,
            )?;
        }
        Ok((body, digest))
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
        let layout = artifact::layout(&manifest);
        let artifact = Arc::new(Artifact { digest, layout, unpacked: Mutex::new(None) });
        let mut artifacts = self.artifacts.lock().expect("not poisoned");
        // Bounded: each keeps its unpacked files (up to the download limit).
        if artifacts.len() >= MOST_ARTIFACTS {
            artifacts.clear();
        }
        artifacts.insert(key, artifact.clone());
        drop(artifacts);
        Ok(artifact)
    }

    /// A layer's bytes, read within its declared size and checked against its digest (when
    /// pulled, and when read back from the cache).
    async fn blob(&self, layer: &OciDescriptor, what: &str) -> Result<Vec<u8>> {
        if let Some(body) = self.cached_by_digest(&layer.digest) {
            return Ok(body);
        }
        if self.http.offline {
            return Err(self.not_cached(&self.key(&format!("@{}", layer.digest))));
        }
        let Some(expected) = layer.digest.strip_prefix("sha256:") else {
            return Err(RepositoryError::Oci {
                reference: self.key(""),
                message: format!(
                    "{what} is named by a {} digest; only sha256 digests are read",
                    layer.digest.split(':').next().unwrap_or_default()
                ),
            });
        };
        let declared = u64::try_from(layer.size).unwrap_or(u64::MAX);
        if declared > self.http.max_download {
            return Err(RepositoryError::TooLarge { what: what.to_string(), limit: self.http.max_download });
        }
        let session = self.session().await?;
        // Read through the declared size: the registry may send more, and the digest is known
        // only at the end.
        let received = match self
            .within_deadline(what, session.get(&format!("blobs/{}", layer.digest), &[], declared, what))
            .await
        {
            Err(RepositoryError::TooLarge { .. }) => {
                return Err(RepositoryError::TooLarge {
                    what: format!("{what} (more than its declared size)"),
                    limit: declared,
                });
            }
            answer => answer?,
        };
        if received.status == 404 {
            return Err(RepositoryError::NotFound { what: what.to_string(), location: self.key("") });
        }
        if sha256_hex(&received.body) != expected {
            return Err(RepositoryError::Oci {
                reference: self.key(&format!("@{}", layer.digest)),
                message: format!("the registry sent {what} with other content than its digest names"),
            });
        }
        self.keep_by_digest(&layer.digest, &received.body)?;
        Ok(received.body)
    }

    /// One registry read (its token handshake and redirects included), within the time limit
    /// of a request.
    async fn within_deadline<T>(
        &self,
        what: &str,
        call: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match tokio::time::timeout(self.http.timeout, call).await {
            Ok(answer) => answer,
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
        // One total for every layer of the artifact: many layers of the most each may hold
        // would hold that many times as much.
        let mut left = self.http.max_download;
        for layer in &artifact.layout.archives {
            let bytes = self.blob(layer, &format!("the layer {}", layer.digest)).await?;
            let gzipped = bytes.starts_with(&[0x1f, 0x8b]);
            let unpacked =
                artifact::unpack(&bytes, gzipped, left).map_err(|message| RepositoryError::Oci {
                    reference: self.key(&format!("@{}", layer.digest)),
                    message: format!(
                        "{message} (unpacked, the artifact's layers hold at most {} bytes)",
                        self.http.max_download
                    ),
                })?;
            let size: u64 = unpacked.values().map(|data| data.len() as u64).sum();
            left = left.saturating_sub(size);
            files.extend(unpacked);
        }
        let files = Arc::new(files);
        *artifact.unpacked.lock().expect("not poisoned") = Some(files.clone());
        Ok(files)
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
                return self.blob(layer, &format!("{candidate} of {version}")).await;
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
            location: format!("version {version} of {} (digest {})", self.location(), artifact.digest),
        })
    }
}
