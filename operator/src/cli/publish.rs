//! `butlerctl publish`: pushes provider releases to an OCI registry as one artifact each
//! (Cluster API's proposed layout), so an air-gapped site mirrors one artifact per provider.
//! The files come from a release folder (`--from`) or from the repository compiled into this
//! build.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use butler_repository::oci::{self, OciOptions};
use butler_repository::{
    ClusterctlConfig, EMBEDDED_VERSION, Location, ProviderUrl, RemoteOptions, Version, embedded_provider,
    embedded_providers,
};

use super::{GenerateError, Output};

/// What `butlerctl publish` was asked.
#[derive(Debug, Clone, Default)]
pub struct PublishArgs {
    /// `oci://registry/repository:version`; with `all`, the repository is the prefix of
    /// one repository per provider (`{prefix}/{provider label}`).
    pub reference: String,
    /// The provider label (`infrastructure-harvester`, `butler`).
    pub provider: Option<String>,
    /// Every provider of this build.
    pub all: bool,
    /// A folder holding the release's files (metadata.yaml, components, templates).
    pub from: Option<PathBuf>,
    pub config: Option<PathBuf>,
}

struct Target {
    registry: String,
    repository: String,
    plain_http: bool,
    version: Version,
}

fn usage(message: impl Into<String>) -> GenerateError {
    GenerateError::CommandLine(message.into())
}

fn target(reference: &str) -> Result<Target, GenerateError> {
    if !reference.starts_with("oci://") {
        return Err(usage(format!(
            "{reference:?}: publish to an oci://registry/repository:vX.Y.Z reference"
        )));
    }
    let url = ProviderUrl::parse(reference)?;
    let Location::Oci { registry, repository, digest, plain_http } = url.location else {
        unreachable!("an oci:// URL parses to an OCI location")
    };
    if digest.is_some() {
        return Err(usage(format!(
            "{reference:?}: a digest names content that exists; publish to a tag (:vX.Y.Z)"
        )));
    }
    let version =
        url.version.ok_or_else(|| usage(format!("{reference:?}: give the version as the tag (:vX.Y.Z)")))?;
    Ok(Target { registry, repository, plain_http, version })
}

/// The regular files directly in `folder`.
fn folder_files(folder: &Path) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    let unreadable =
        |e: std::io::Error| usage(format!("cannot read the release folder {}: {e}", folder.display()));
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(folder).map_err(unreadable)? {
        let entry = entry.map_err(unreadable)?;
        if entry.file_type().map_err(unreadable)?.is_file() {
            let bytes = std::fs::read(entry.path()).map_err(unreadable)?;
            files.insert(entry.file_name().to_string_lossy().into_owned(), bytes);
        }
    }
    Ok(files)
}

fn embedded_files(label: &str, version: &Version) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    let provider = embedded_provider(label).ok_or_else(|| {
        let known: Vec<String> = embedded_providers().iter().map(|p| p.label()).collect();
        usage(format!(
            "this build carries no provider {label:?} (it carries {}); give the release's files with --from FOLDER",
            known.join(", ")
        ))
    })?;
    if version.to_string() != EMBEDDED_VERSION {
        return Err(usage(format!(
            "this build carries version {EMBEDDED_VERSION} of its providers, not {version}; tag with :{EMBEDDED_VERSION}, or give the release's files with --from FOLDER"
        )));
    }
    Ok(provider.files().into_iter().map(|(name, text)| (name, text.into_bytes())).collect())
}

/// Pushes the release(s) and prints where each went, with its digest.
pub async fn publish(args: &PublishArgs) -> Result<Output, GenerateError> {
    let target = target(&args.reference)?;
    let config = ClusterctlConfig::load(args.config.as_deref())?;
    let variables = config.variables(BTreeMap::new());
    let mut options: OciOptions = RemoteOptions::from_env().oci;
    options.apply_variables(|key| variables.lookup(key));
    let releases: Vec<(String, String, BTreeMap<String, Vec<u8>>)> = match (&args.provider, args.all) {
        (Some(_), true) => return Err(usage("give --provider LABEL or --all, not both")),
        (None, false) => {
            return Err(usage(
                "give the provider with --provider LABEL (or --all for every provider of this build)",
            ));
        }
        (None, true) => {
            if args.from.is_some() {
                return Err(usage("--from gives one provider's files; use it with --provider"));
            }
            embedded_providers()
                .iter()
                .map(|p| {
                    let label = p.label();
                    let files = embedded_files(&label, &target.version)?;
                    Ok((format!("{}/{label}", target.repository), label, files))
                })
                .collect::<Result<_, GenerateError>>()?
        }
        (Some(label), false) => {
            let files = match &args.from {
                Some(folder) => folder_files(folder)?,
                None => embedded_files(label, &target.version)?,
            };
            vec![(target.repository.clone(), label.clone(), files)]
        }
    };
    let mut out = Output::default();
    for (repository, label, files) in releases {
        let published = oci::publish(
            &target.registry,
            &repository,
            target.plain_http,
            &label,
            &target.version,
            &files,
            &options,
        )
        .await?;
        out.stdout.push_str(&format!("{label} oci://{}\n", published.reference));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_an_oci_tag() {
        assert!(target("oci://ghcr.io/o/p:v1.0.0").is_ok());
        let cases = [
            ("ghcr.io/o/p:v1.0.0", "publish to an oci://"),
            ("oci://ghcr.io/o/p", "give the version as the tag"),
            (&*format!("oci://ghcr.io/o/p:v1.0.0@sha256:{}", "0".repeat(64)), "publish to a tag"),
        ];
        for (reference, expected) in cases {
            let err = target(reference).err().expect("refused").to_string();
            assert!(err.contains(expected), "{reference}: {err}");
        }
        let v = Version::parse("v9.9.9", "t").unwrap();
        assert!(
            embedded_files("infrastructure-harvester", &v).unwrap_err().to_string().contains("--from FOLDER")
        );
        assert!(embedded_files("nope", &v).unwrap_err().to_string().contains("carries no provider \"nope\""));
    }
}
