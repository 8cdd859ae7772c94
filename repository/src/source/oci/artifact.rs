//! What an OCI provider artifact holds, read from its manifest alone (no I/O): the files it
//! names, the archives to unpack, and whose provider it says it is.
//!
//! Two layouts are read. cluster-api-operator's (and `oras push`'s): one layer per file, named
//! by its `org.opencontainers.image.title` annotation. Cluster API's proposal: one `tar+gzip`
//! layer holding the files, the manifest annotated with the provider's type and name.

use std::collections::BTreeMap;

use oci_client::manifest::{OciDescriptor, OciImageManifest};

/// A layer's file name.
pub const TITLE_ANNOTATION: &str = "org.opencontainers.image.title";
/// The release version, on the manifest.
pub const VERSION_ANNOTATION: &str = "org.opencontainers.image.version";
/// Whose artifact this is (Cluster API's proposal): `core`, `infrastructure`, ...
pub const PROVIDER_TYPE_ANNOTATION: &str = "cluster-api.sigs.k8s.io/provider-type";
/// ... and the provider's name (`butler`, `harvester`).
pub const PROVIDER_NAME_ANNOTATION: &str = "cluster-api.sigs.k8s.io/provider-name";
/// `oras push` marks a titled layer that is a packed folder.
const UNPACK_ANNOTATION: &str = "io.deis.oras.content.unpack";
/// The artifact type `butlerctl publish` writes.
pub const ARTIFACT_TYPE: &str = "application/vnd.cluster-api.provider.v1";
pub const TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// The files and archives of a manifest.
#[derive(Debug, Clone, Default)]
pub struct Layout {
    /// Layers that are one file each, by name.
    pub files: BTreeMap<String, OciDescriptor>,
    /// Layers that are archives of files.
    pub archives: Vec<OciDescriptor>,
}

fn annotation<'a>(descriptor: &'a OciDescriptor, key: &str) -> Option<&'a str> {
    descriptor.annotations.as_ref()?.get(key).map(String::as_str)
}

/// The layout of a manifest. A titled layer is a file (whatever its media type: `oras push`
/// calls a plain file a tar), unless oras marks it for unpacking; an untitled tar layer is an
/// archive; other layers are not the provider's.
pub fn layout(manifest: &OciImageManifest) -> Layout {
    let mut out = Layout::default();
    for layer in &manifest.layers {
        let archive = layer.media_type == TAR_GZIP || layer.media_type == TAR;
        match annotation(layer, TITLE_ANNOTATION) {
            Some(_) if annotation(layer, UNPACK_ANNOTATION) == Some("true") => {
                out.archives.push(layer.clone())
            }
            Some(title) => {
                out.files.insert(title.to_string(), layer.clone());
            }
            None if archive => out.archives.push(layer.clone()),
            None => {}
        }
    }
    out
}

/// The type word and name of a provider label (`infrastructure-harvester` is
/// (`infrastructure`, `harvester`); a label without a type prefix is the core provider's).
pub fn type_and_name(label: &str) -> (&str, &str) {
    for prefix in ["infrastructure", "bootstrap", "control-plane", "addon", "ipam"] {
        if let Some(name) = label.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) {
            return (prefix, name);
        }
    }
    ("core", label)
}

/// An artifact that names its provider must name this one: installing another provider's
/// release under this provider's name would be silent damage.
pub fn check_provider(manifest: &OciImageManifest, label: &str) -> Result<(), String> {
    let annotations = manifest.annotations.clone().unwrap_or_default();
    let (kind, name) = type_and_name(label);
    for (key, expected) in [(PROVIDER_TYPE_ANNOTATION, kind), (PROVIDER_NAME_ANNOTATION, name)] {
        if let Some(found) = annotations.get(key)
            && found != expected
        {
            return Err(format!(
                "the artifact is not {label}'s: its annotation {key} is {found:?}, {expected:?} was expected; check the reference"
            ));
        }
    }
    Ok(())
}

/// The names under which an artifact may hold `name` for `label` at `version`, best first, as
/// cluster-api-operator looks for them: `{type}-{name}-{version}-metadata.yaml` before
/// `metadata.yaml`; for components the full name, the asked name, `{type}-components.yaml`,
/// then `components.yaml`.
pub fn candidates(name: &str, label: &str, version: &str) -> Vec<String> {
    let (kind, provider) = type_and_name(label);
    let full = |what: &str| format!("{kind}-{provider}-{version}-{what}");
    let mut out = match name {
        "metadata.yaml" => vec![full("metadata.yaml"), name.to_string()],
        _ if name == "components.yaml" || name.ends_with("-components.yaml") => vec![
            full("components.yaml"),
            name.to_string(),
            format!("{kind}-components.yaml"),
            "components.yaml".to_string(),
        ],
        _ => vec![name.to_string()],
    };
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|n| seen.insert(n.clone()));
    out
}

/// The regular files of a tar (optionally gzipped) archive, bounded as [`crate::digest::untar`].
pub fn unpack(bytes: &[u8], gzipped: bool, limit: u64) -> Result<BTreeMap<String, Vec<u8>>, String> {
    match gzipped {
        true => crate::digest::untar(flate2::read::GzDecoder::new(bytes), limit),
        false => crate::digest::untar(bytes, limit),
    }
}

/// A tar+gzip archive of `files` (what `butlerctl publish` pushes), with fixed modes and times
/// so that the same files make the same digest.
pub fn pack(files: &BTreeMap<String, Vec<u8>>) -> Vec<u8> {
    let mut builder =
        tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default()));
    for (name, data) in files {
        let mut header = tar::Header::new_ustar();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        builder.append_data(&mut header, name, data.as_slice()).expect("writing to memory");
    }
    builder.into_inner().and_then(|gz| gz.finish()).expect("writing to memory")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layer(media_type: &str, title: Option<&str>, unpack: bool) -> OciDescriptor {
        let mut annotations = BTreeMap::new();
        if let Some(title) = title {
            annotations.insert(TITLE_ANNOTATION.to_string(), title.to_string());
        }
        if unpack {
            annotations.insert(UNPACK_ANNOTATION.to_string(), "true".to_string());
        }
        OciDescriptor {
            media_type: media_type.into(),
            digest: format!("sha256:{}", title.unwrap_or("x")),
            annotations: (!annotations.is_empty()).then_some(annotations),
            ..Default::default()
        }
    }

    #[test]
    fn both_layouts_are_read() {
        let per_file = OciImageManifest {
            layers: vec![
                layer(TAR, Some("metadata.yaml"), false),
                layer("application/yaml", Some("infrastructure-components.yaml"), false),
                layer("application/vnd.example", None, false),
            ],
            ..Default::default()
        };
        let l = layout(&per_file);
        assert_eq!(l.files.keys().collect::<Vec<_>>(), ["infrastructure-components.yaml", "metadata.yaml"]);
        assert!(l.archives.is_empty());

        let packed = OciImageManifest { layers: vec![layer(TAR_GZIP, None, false)], ..Default::default() };
        let l = layout(&packed);
        assert!(l.files.is_empty());
        assert_eq!(l.archives.len(), 1);

        let oras_folder =
            OciImageManifest { layers: vec![layer(TAR_GZIP, Some("release"), true)], ..Default::default() };
        assert_eq!(layout(&oras_folder).archives.len(), 1);
    }

    #[test]
    fn file_names_as_cluster_api_operator_looks_for_them() {
        let table: [(&str, &str, &[&str]); 4] = [
            (
                "metadata.yaml",
                "infrastructure-aws",
                &["infrastructure-aws-v2.0.0-metadata.yaml", "metadata.yaml"],
            ),
            (
                "infrastructure-components.yaml",
                "infrastructure-aws",
                &[
                    "infrastructure-aws-v2.0.0-components.yaml",
                    "infrastructure-components.yaml",
                    "components.yaml",
                ],
            ),
            (
                "core-components.yaml",
                "butler",
                &["core-butler-v2.0.0-components.yaml", "core-components.yaml", "components.yaml"],
            ),
            ("cluster-template.yaml", "infrastructure-aws", &["cluster-template.yaml"]),
        ];
        for (name, label, expected) in table {
            assert_eq!(candidates(name, label, "v2.0.0"), expected, "{name}");
        }
        assert_eq!(type_and_name("control-plane-kubeadm"), ("control-plane", "kubeadm"));
        assert_eq!(type_and_name("cluster-api"), ("core", "cluster-api"));
    }

    #[test]
    fn an_artifact_of_another_provider_is_refused() {
        let annotated = |kind: &str, name: &str| OciImageManifest {
            annotations: Some(BTreeMap::from([
                (PROVIDER_TYPE_ANNOTATION.to_string(), kind.to_string()),
                (PROVIDER_NAME_ANNOTATION.to_string(), name.to_string()),
            ])),
            ..Default::default()
        };
        assert!(
            check_provider(&annotated("infrastructure", "harvester"), "infrastructure-harvester").is_ok()
        );
        assert!(check_provider(&annotated("core", "butler"), "butler").is_ok());
        let err =
            check_provider(&annotated("infrastructure", "aws"), "infrastructure-harvester").unwrap_err();
        assert!(err.contains("provider-name is \"aws\""), "{err}");
        assert!(check_provider(&OciImageManifest::default(), "butler").is_ok(), "no annotations, no claim");
    }

    #[test]
    fn archives_round_trip_and_stay_inside() {
        let files = BTreeMap::from([
            ("metadata.yaml".to_string(), b"kind: Metadata\n".to_vec()),
            ("core-components.yaml".to_string(), b"---\n".to_vec()),
        ]);
        let packed = pack(&files);
        assert_eq!(pack(&files), packed, "the same files make the same bytes");
        assert_eq!(unpack(&packed, true, 1 << 20).unwrap(), files);
        assert!(unpack(&packed, true, 5).unwrap_err().contains("more than 5 bytes"));

        let mut raw = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_gnu();
        header.set_size(1);
        header.set_entry_type(tar::EntryType::Regular);
        let name = b"../evil";
        header.as_gnu_mut().unwrap().name[..name.len()].copy_from_slice(name);
        header.set_cksum();
        raw.append(&header, &b"x"[..]).unwrap();
        let raw = raw.into_inner().unwrap();
        assert!(unpack(&raw, false, 1 << 20).unwrap_err().contains("outside the archive"));
    }
}
