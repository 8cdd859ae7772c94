//! Provider URLs, as clusterctl reads them: where a provider's repository is, which version the
//! URL names (or latest), and the components file name.

use std::fmt;
use std::path::PathBuf;

use reqwest::Url;

use crate::error::RepositoryError;
use crate::version::Version;

const GITHUB_FORM: &str = "https://github.com/{owner}/{repo}/releases/{latest|vX.Y.Z}/{components file}";
const GITLAB_FORM: &str = "https://gitlab.{host}/api/v4/projects/{project id or escaped path}/packages/generic/{package}/{vX.Y.Z}/{components file}";
const OCI_FORM: &str = "oci://{registry}/{repository}[:{vX.Y.Z}][@sha256:{digest}]";
const LOCAL_FORM: &str =
    "/{base path}/{provider label}/{latest|vX.Y.Z}/{components file}, or the same as a file:// URL";

/// Where a provider repository is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location {
    /// GitHub releases of `owner/repo`.
    GitHub { owner: String, repo: String },
    /// A GitLab generic package. `project` stays escaped (`group%2Fproject`).
    GitLab { host: String, project: String, package: String },
    /// A folder `{base}/{label}/{version}/`.
    Local { base: PathBuf, label: String },
    /// A provider of the repository compiled into this build (`embedded:{label}`).
    Embedded { label: String },
    /// An OCI artifact per version in `registry/repository`, tagged with the version; a
    /// digest pins the content.
    Oci { registry: String, repository: String, digest: Option<String>, plain_http: bool },
}

/// A parsed provider URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderUrl {
    pub location: Location,
    /// The version the URL names; `None` for `latest`.
    pub version: Option<Version>,
    pub components_file: String,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::GitHub { owner, repo } => write!(f, "the GitHub releases of {owner}/{repo}"),
            Location::GitLab { host, project, package } => {
                write!(f, "the GitLab package {package} of project {project} on {host}")
            }
            Location::Local { base, label } => {
                write!(f, "the local repository {}", base.join(label).display())
            }
            Location::Embedded { label } => write!(f, "the embedded repository of {label}"),
            Location::Oci { registry, repository, .. } => {
                write!(f, "the OCI repository {registry}/{repository}")
            }
        }
    }
}

fn version_segment(segment: &str, url: &str) -> Result<Option<Version>, RepositoryError> {
    if segment == "latest" {
        Ok(None)
    } else {
        Version::parse(segment, &format!("the URL {url:?}")).map(Some)
    }
}

/// A GitHub release's tag: clusterctl takes any tag (`releases/nightly/...`), semantic or not.
fn tag_segment(segment: &str) -> Option<Version> {
    (segment != "latest").then(|| Version::tag(segment))
}

impl ProviderUrl {
    /// Parses a GitHub, GitLab or local provider URL.
    pub fn parse(text: &str) -> Result<ProviderUrl, RepositoryError> {
        let text = text.trim();
        if let Some(label) = text.strip_prefix("embedded:") {
            let provider =
                crate::source::embedded_provider(label).ok_or_else(|| RepositoryError::InvalidUrl {
                    url: text.to_string(),
                    expected: format!(
                        "embedded:{{label}} with a label of the embedded repository ({})",
                        crate::source::embedded_providers()
                            .iter()
                            .map(|p| p.label())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                })?;
            return Ok(ProviderUrl {
                location: Location::Embedded { label: label.to_string() },
                version: None,
                components_file: provider.components_file().to_string(),
            });
        }
        if text.starts_with('/') {
            return ProviderUrl::local(text, text);
        }
        if let Some(reference) = text.strip_prefix("oci://") {
            return ProviderUrl::oci(reference, false, text);
        }
        let invalid = |expected: &str| RepositoryError::InvalidUrl {
            url: text.to_string(),
            expected: expected.to_string(),
        };
        let url = Url::parse(text)
            .map_err(|_| invalid(&format!("one of {GITHUB_FORM}; {GITLAB_FORM}; {LOCAL_FORM}")))?;
        match url.scheme() {
            // The path as Go's url.Parse gives it: percent-decoded (`my%20repo` is `my repo`).
            "file" => {
                let path = percent_encoding::percent_decode_str(url.path())
                    .decode_utf8()
                    .map_err(|_| invalid(LOCAL_FORM))?;
                ProviderUrl::local(&path, text)
            }
            "https" | "http" => {
                let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
                let kind = if host == "github.com" {
                    "GitHub"
                } else if host.starts_with("gitlab.") {
                    "GitLab"
                } else {
                    return Err(invalid(&format!("a GitHub ({GITHUB_FORM}) or GitLab ({GITLAB_FORM}) URL")));
                };
                if url.scheme() == "http" {
                    return Err(RepositoryError::PlainHttp { url: text.to_string(), source_kind: kind });
                }
                let segments: Vec<&str> = url.path().trim_matches('/').split('/').collect();
                if kind == "GitHub" {
                    // As clusterctl: whatever follows the version is a path, and the release
                    // asset is its file name (release assets have no folders).
                    match segments.as_slice() {
                        [owner, repo, "releases", version, path @ ..]
                            if !owner.is_empty()
                                && !repo.is_empty()
                                && !path.is_empty()
                                && path.iter().all(|p| !p.is_empty()) =>
                        {
                            Ok(ProviderUrl {
                                location: Location::GitHub {
                                    owner: owner.to_string(),
                                    repo: repo.to_string(),
                                },
                                version: tag_segment(version),
                                components_file: path.last().expect("not empty").to_string(),
                            })
                        }
                        _ => Err(invalid(GITHUB_FORM)),
                    }
                } else {
                    let host = match url.port() {
                        Some(port) => format!("{host}:{port}"),
                        None => host,
                    };
                    match segments.as_slice() {
                        ["api", "v4", "projects", project, "packages", "generic", package, version, file]
                            if !project.is_empty() && !file.is_empty() =>
                        {
                            Ok(ProviderUrl {
                                location: Location::GitLab {
                                    host,
                                    project: project.to_string(),
                                    package: package.to_string(),
                                },
                                version: version_segment(version, text)?,
                                components_file: file.to_string(),
                            })
                        }
                        _ => Err(invalid(GITLAB_FORM)),
                    }
                }
            }
            _ => Err(invalid(&format!("one of {GITHUB_FORM}; {GITLAB_FORM}; {OCI_FORM}; {LOCAL_FORM}"))),
        }
    }

    /// The `fetchConfig.oci` field of cluster-api-operator: `registry/repository[:tag]`
    /// without a scheme; `http://` in front marks a registry served over plain HTTP.
    pub fn parse_oci_field(text: &str) -> Result<ProviderUrl, RepositoryError> {
        let text = text.trim();
        let (reference, plain_http) = match text.strip_prefix("http://") {
            Some(rest) => (rest, true),
            None => (text.strip_prefix("oci://").unwrap_or(text), false),
        };
        ProviderUrl::oci(reference, plain_http, text)
    }

    /// `registry/repository[:tag][@sha256:digest]`, as image references are written, but the
    /// registry is required (an artifact has no default registry).
    fn oci(reference: &str, plain_http: bool, original: &str) -> Result<ProviderUrl, RepositoryError> {
        let invalid = |why: &str| RepositoryError::InvalidUrl {
            url: original.to_string(),
            expected: format!("{OCI_FORM} ({why})"),
        };
        let (rest, digest) = match reference.split_once('@') {
            Some((rest, digest)) => {
                let hex = digest.strip_prefix("sha256:").unwrap_or_default();
                if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)) {
                    return Err(invalid("a digest is sha256: and 64 lowercase hex digits"));
                }
                (rest, Some(digest.to_string()))
            }
            None => (reference, None),
        };
        let Some((registry, path)) = rest.split_once('/') else {
            return Err(invalid("the registry host comes first"));
        };
        let host_like = registry.contains('.') || registry.contains(':') || registry == "localhost";
        if !host_like {
            return Err(invalid("the registry host comes first, such as ghcr.io or registry.local:5000"));
        }
        let slash = path.rfind('/').map_or(0, |i| i + 1);
        let (repository, tag) = match path[slash..].rfind(':') {
            Some(i) => (&path[..slash + i], Some(&path[slash + i + 1..])),
            None => (path, None),
        };
        let component_ok = |c: &str| {
            !c.is_empty()
                && c.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-".contains(&b))
        };
        if !repository.split('/').all(component_ok) {
            return Err(invalid("a repository path is lowercase letters, digits, '.', '_', '-' and '/'"));
        }
        let version = match tag {
            Some(tag) => Some(Version::parse(tag, &format!("the tag of {original:?}"))?),
            None => None,
        };
        Ok(ProviderUrl {
            location: Location::Oci {
                registry: registry.to_ascii_lowercase(),
                repository: repository.to_string(),
                digest,
                plain_http,
            },
            version,
            // The artifact's files are found by the provider's type (see the OCI source).
            components_file: "components.yaml".to_string(),
        })
    }

    fn local(path: &str, original: &str) -> Result<ProviderUrl, RepositoryError> {
        let parts: Vec<&str> = path.split('/').collect();
        // A `..` (as the label, the version or anywhere) would climb out of the folder that the
        // URL names, and out of the root the operator allows local folders under.
        if parts.iter().any(|p| *p == ".." || *p == ".") {
            return Err(RepositoryError::InvalidUrl {
                url: original.to_string(),
                expected: format!("{LOCAL_FORM}, without `.` or `..` segments"),
            });
        }
        match parts.as_slice() {
            [base @ .., label, version, file]
                if !base.is_empty() && !label.is_empty() && !file.is_empty() =>
            {
                let base = base.join("/");
                Ok(ProviderUrl {
                    location: Location::Local {
                        base: PathBuf::from(if base.is_empty() { "/".to_string() } else { base }),
                        label: label.to_string(),
                    },
                    version: version_segment(version, original)?,
                    components_file: file.to_string(),
                })
            }
            _ => Err(RepositoryError::InvalidUrl {
                url: original.to_string(),
                expected: LOCAL_FORM.to_string(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_parse() {
        let gh = ProviderUrl::parse(
            "https://github.com/kubernetes-sigs/cluster-api/releases/latest/core-components.yaml",
        )
        .unwrap();
        assert_eq!(
            gh.location,
            Location::GitHub { owner: "kubernetes-sigs".into(), repo: "cluster-api".into() }
        );
        assert_eq!((gh.version, gh.components_file.as_str()), (None, "core-components.yaml"));

        let nested = ProviderUrl::parse(
            "https://github.com/o/r/releases/v1.2.3/config/default/infrastructure-components.yaml",
        )
        .unwrap();
        assert_eq!(
            nested.components_file, "infrastructure-components.yaml",
            "a subfolder, as clusterctl reads it"
        );
        assert!(ProviderUrl::parse("https://github.com/o/r/releases/v1.2.3/a//b.yaml").is_err());
        let gh = ProviderUrl::parse("https://github.com/o/r/releases/v1.2.3/infrastructure-components.yaml")
            .unwrap();
        assert_eq!(gh.version.unwrap().to_string(), "v1.2.3");

        let gl = ProviderUrl::parse(
            "https://gitlab.example.com/api/v4/projects/external-packages%2Fcluster-api/packages/generic/cluster-api/v1.2.3/core-components.yaml",
        )
        .unwrap();
        assert_eq!(
            gl.location,
            Location::GitLab {
                host: "gitlab.example.com".into(),
                project: "external-packages%2Fcluster-api".into(),
                package: "cluster-api".into()
            }
        );
        assert_eq!(gl.version.unwrap().to_string(), "v1.2.3");

        for text in [
            "/home/me/repo/infrastructure-aws/v0.5.2/infrastructure-components.yaml",
            "file:///home/me/repo/infrastructure-aws/v0.5.2/infrastructure-components.yaml",
        ] {
            let local = ProviderUrl::parse(text).unwrap();
            assert_eq!(
                local.location,
                Location::Local { base: "/home/me/repo".into(), label: "infrastructure-aws".into() }
            );
            assert_eq!(local.version.unwrap().to_string(), "v0.5.2");
        }
        let spaced = ProviderUrl::parse(
            "file:///home/me/my%20repo/infrastructure-aws/v0.5.2/infrastructure-components.yaml",
        )
        .unwrap();
        assert_eq!(
            spaced.location,
            Location::Local { base: "/home/me/my repo".into(), label: "infrastructure-aws".into() },
            "percent-decoded, as clusterctl reads it"
        );
        let latest = ProviderUrl::parse("/repo/core-butler/latest/core-components.yaml").unwrap();
        assert_eq!(latest.version, None);
        for climbing in [
            "/srv/providers/../v0.5.2/infrastructure-components.yaml",
            "/srv/providers/../../etc/v0.5.2/passwd",
            "/srv/./infrastructure-aws/v0.5.2/infrastructure-components.yaml",
        ] {
            let refused = ProviderUrl::parse(climbing).unwrap_err().to_string();
            assert!(refused.contains("without `.` or `..` segments"), "{climbing}: {refused}");
        }
    }

    #[test]
    fn oci_references_parse_as_image_references_with_a_registry() {
        let digest = format!("sha256:{}", "a".repeat(64));
        type Expected<'a> = Option<(&'a str, &'a str, Option<&'a str>, bool)>;
        let cases: [(&str, Expected, Option<&str>); 10] = [
            (
                "oci://ghcr.io/butlerdotdev/infrastructure-harvester",
                Some(("ghcr.io", "butlerdotdev/infrastructure-harvester", None, false)),
                None,
            ),
            (
                "oci://registry.local:5000/capi/core:v1.2.3",
                Some(("registry.local:5000", "capi/core", None, false)),
                Some("v1.2.3"),
            ),
            ("oci://localhost/p", Some(("localhost", "p", None, false)), None),
            ("oci://Reg.IO/p:1.0.0", Some(("reg.io", "p", None, false)), Some("1.0.0")),
            ("oci://butlerdotdev/p", None, None),
            ("oci://ghcr.io/", None, None),
            ("oci://ghcr.io/Upper/p", None, None),
            ("oci://ghcr.io/p@sha256:abc", None, None),
            ("oci://ghcr.io/p:latest", None, None),
            ("oci://ghcr.io//p", None, None),
        ];
        for (text, expected, version) in cases {
            match (ProviderUrl::parse(text), expected) {
                (Ok(url), Some((registry, repository, digest, plain_http))) => {
                    assert_eq!(
                        url.location,
                        Location::Oci {
                            registry: registry.into(),
                            repository: repository.into(),
                            digest: digest.map(String::from),
                            plain_http
                        },
                        "{text}"
                    );
                    assert_eq!(url.version.map(|v| v.to_string()).as_deref(), version, "{text}");
                }
                (Err(e), None) => {
                    let e = e.to_string();
                    assert!(
                        e.contains("oci://{registry}") || e.contains("is not a semantic version"),
                        "{text}: {e}"
                    )
                }
                (got, _) => panic!("{text}: {got:?}"),
            }
        }
        let pinned = ProviderUrl::parse(&format!("oci://ghcr.io/o/p:v0.1.0@{digest}")).unwrap();
        assert!(matches!(pinned.location, Location::Oci { digest: Some(ref d), .. } if *d == digest));
        // cluster-api-operator's fetchConfig.oci: no scheme, http:// for a plain-HTTP registry.
        let field = ProviderUrl::parse_oci_field("http://127.0.0.1:5000/capi/aws:v2.0.0").unwrap();
        assert!(matches!(field.location, Location::Oci { plain_http: true, .. }));
        let field = ProviderUrl::parse_oci_field("ghcr.io/o/p").unwrap();
        assert!(matches!(field.location, Location::Oci { plain_http: false, .. }));
    }

    #[test]
    fn wrong_forms_show_the_expected_form() {
        let cases = [
            ("https://github.com/o/r/releases/core.yaml", GITHUB_FORM),
            ("https://gitlab.example.com/o/r/core.yaml", GITLAB_FORM),
            ("https://example.com/o/r/releases/latest/c.yaml", "a GitHub"),
            ("/core.yaml", LOCAL_FORM),
        ];
        for (text, expected) in cases {
            let err = ProviderUrl::parse(text).unwrap_err().to_string();
            assert!(err.contains(expected), "{text}: {err}");
        }
        let err = ProviderUrl::parse("http://github.com/o/r/releases/latest/c.yaml").unwrap_err().to_string();
        assert!(err.contains("uses plain http; GitHub repositories must be read over https"), "{err}");
        let err =
            ProviderUrl::parse("http://gitlab.x.org/api/v4/projects/1/packages/generic/p/v1.0.0/c.yaml")
                .unwrap_err()
                .to_string();
        assert!(err.contains("GitLab repositories must be read over https"), "{err}");
        let embedded = ProviderUrl::parse("embedded:infrastructure-harvester").unwrap();
        assert_eq!(embedded.components_file, "infrastructure-components.yaml");
        assert!(
            ProviderUrl::parse("embedded:nope")
                .unwrap_err()
                .to_string()
                .contains("embedded:{label} with a label")
        );
        let err = ProviderUrl::parse("https://gitlab.x.org/api/v4/projects/1/packages/generic/p/1.2/c.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a semantic version"), "{err}");
        // A GitHub release may be any tag, as clusterctl takes it.
        let nightly = ProviderUrl::parse("https://github.com/o/r/releases/nightly/c.yaml").unwrap();
        let tag = nightly.version.unwrap();
        assert!(tag.is_tag_only() && tag.to_string() == "nightly");
        let v = ProviderUrl::parse("https://github.com/o/r/releases/1.2.3/c.yaml").unwrap().version.unwrap();
        assert!(!v.is_tag_only() && v.to_string() == "1.2.3");
    }
}
