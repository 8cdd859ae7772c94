//! Image references and clusterctl's image overrides (`images:` of clusterctl.yaml): `all`, a
//! component (`infrastructure-aws`, `cert-manager`) or a component and image name
//! (`infrastructure-aws/cluster-api-aws-controller`), each replacing the repository, the name
//! and/or the tag; the more specific wins field by field.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

/// The parts of an image to replace.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ImageMeta {
    #[serde(default)]
    pub repository: Option<String>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub tag: Option<String>,
}

impl ImageMeta {
    fn layer(&mut self, over: &ImageMeta) {
        for (slot, value) in [
            (&mut self.repository, &over.repository),
            (&mut self.name, &over.name),
            (&mut self.tag, &over.tag),
        ] {
            if let Some(v) = value.as_ref().filter(|v| !v.is_empty()) {
                *slot = Some(v.clone());
            }
        }
    }
}

/// An image reference taken apart as written: a short name keeps no registry (`nginx:1.0` has
/// an empty repository), as clusterctl's parser leaves it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageRef {
    /// Registry and path (`registry.k8s.io/cluster-api`); empty for a bare name.
    pub repository: String,
    pub name: String,
    pub tag: Option<String>,
    pub digest: Option<String>,
}

impl ImageRef {
    pub fn parse(text: &str) -> Result<ImageRef, String> {
        let text = text.trim();
        if text.is_empty() || text.contains(char::is_whitespace) {
            return Err(format!("{text:?} is not an image reference"));
        }
        let (rest, digest) = match text.split_once('@') {
            Some((r, d)) => (r, Some(d.to_string())),
            None => (text, None),
        };
        // A tag is after the last `:` that follows the last `/` (a `:` before it is a port).
        let slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (path, tag) = match rest[slash..].rfind(':') {
            Some(i) => (&rest[..slash + i], Some(rest[slash + i + 1..].to_string())),
            None => (rest, None),
        };
        let mut parts: Vec<&str> = path.split('/').collect();
        if parts.iter().any(|p| p.is_empty()) {
            return Err(format!("{text:?} is not an image reference"));
        }
        let name = parts.pop().expect("a path has a last part").to_string();
        Ok(ImageRef { repository: parts.join("/"), name, tag, digest })
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.repository.is_empty() {
            write!(f, "{}/", self.repository)?;
        }
        f.write_str(&self.name)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

/// The `images:` section of clusterctl.yaml.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct ImageOverrides(pub BTreeMap<String, ImageMeta>);

impl ImageOverrides {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The override for an image of `component`, if any applies.
    pub fn for_image(&self, component: &str, image: &ImageRef) -> Option<ImageMeta> {
        let keys = ["all".to_string(), component.to_string(), format!("{component}/{}", image.name)];
        let mut merged: Option<ImageMeta> = None;
        for key in keys {
            if let Some(meta) = self.0.get(&key) {
                merged.get_or_insert_with(ImageMeta::default).layer(meta);
            }
        }
        merged
    }

    /// `image` with the overrides for `component` applied; as written when none applies. A
    /// tag override keeps a digest, as clusterctl's does.
    pub fn apply(&self, component: &str, image: &str) -> Result<String, String> {
        let mut reference = ImageRef::parse(image)?;
        let Some(meta) = self.for_image(component, &reference) else { return Ok(image.to_string()) };
        if let Some(repository) = meta.repository {
            reference.repository = repository.trim_end_matches('/').to_string();
        }
        if let Some(name) = meta.name {
            reference.name = name;
        }
        if let Some(tag) = meta.tag {
            reference.tag = Some(tag);
        }
        Ok(reference.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_are_taken_apart_as_written() {
        let cases = [
            ("nginx:1.0", "nginx:1.0"),
            ("nginx", "nginx"),
            ("org/app:v1", "org/app:v1"),
            (
                "registry.k8s.io/cluster-api/cluster-api-controller:v1.5.0",
                "registry.k8s.io/cluster-api/cluster-api-controller:v1.5.0",
            ),
            ("localhost:5000/app:dev", "localhost:5000/app:dev"),
            ("ghcr.io/x/y@sha256:abc", "ghcr.io/x/y@sha256:abc"),
        ];
        for (text, normal) in cases {
            assert_eq!(ImageRef::parse(text).unwrap().to_string(), normal);
        }
        let r = ImageRef::parse("localhost:5000/team/app:dev").unwrap();
        assert_eq!(
            (r.repository.as_str(), r.name.as_str(), r.tag.as_deref()),
            ("localhost:5000/team", "app", Some("dev"))
        );
        assert!(ImageRef::parse("a//b").is_err());
        let bare = ImageRef::parse("nginx:1").unwrap();
        assert_eq!((bare.repository.as_str(), bare.name.as_str()), ("", "nginx"));
    }

    #[test]
    fn the_most_specific_override_wins_field_by_field() {
        let overrides: ImageOverrides = serde_saphyr::from_str(
            "all:\n  repository: mirror.internal/all\ninfrastructure-aws:\n  tag: v9\ninfrastructure-aws/sidecar:\n  repository: mirror.internal/side\n  name: side-car\n",
        )
        .unwrap();
        let apply = |component: &str, image: &str| overrides.apply(component, image).unwrap();
        assert_eq!(
            apply("infrastructure-aws", "gcr.io/k8s/capa-manager:v1@sha256:0"),
            "mirror.internal/all/capa-manager:v9@sha256:0",
            "a tag override keeps the digest, as clusterctl's"
        );
        assert_eq!(apply("infrastructure-aws", "quay.io/x/sidecar:v1"), "mirror.internal/side/side-car:v9");
        assert_eq!(
            apply("cert-manager", "quay.io/jetstack/cert-manager-controller:v1.5.3"),
            "mirror.internal/all/cert-manager-controller:v1.5.3"
        );
        assert_eq!(ImageOverrides::default().apply("x", "nginx:1"), Ok("nginx:1".to_string()), "as written");
        let tag_only: ImageOverrides = serde_saphyr::from_str("x:\n  tag: v2\n").unwrap();
        assert_eq!(tag_only.apply("x", "nginx:1"), Ok("nginx:v2".to_string()));
    }
}
