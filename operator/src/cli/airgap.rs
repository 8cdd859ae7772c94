//! `butlerctl airgap pack` and `load`: on the connected side, fetch each provider's release
//! once and write it as the ConfigMaps the operator reads (gzipped when large), with the
//! operator's install manifest; on the air-gapped side, apply them. The bundle is a folder or a
//! `.tar.gz`:
//!
//! - `operator/butler-operator.yaml`: the operator of this build;
//! - `configmaps/{provider label}-{version}.yaml`: one ConfigMap per provider version, selected
//!   by `butler.butlerlabs.dev/provider: {provider label}`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use butler_repository::{ClusterctlConfig, EMBEDDED_VERSION, METADATA_FILE, ProviderType};
use butler_runtime::apply::Applier;
use serde_json::Value;

use super::generate::{provider_ref, repository};
use super::{GenerateError, Output};
use crate::release::{CONFIGMAP_PROVIDER_LABEL, provider_configmap};

const OPERATOR_FILE: &str = "operator/butler-operator.yaml";
const FIELD_MANAGER: &str = "butlerctl";

/// The files of a bundle for `providers` (type, `NAME[:VERSION]`), fetched as `generate`
/// fetches them (built-in providers, the clusterctl config, its overrides).
pub async fn pack_files(
    providers: &[(ProviderType, String)],
    config: Option<&Path>,
) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    if providers.is_empty() {
        return Err(GenerateError::CommandLine(
            "name the providers to pack: --core NAME[:VERSION], --infrastructure NAME[:VERSION],...".into(),
        ));
    }
    let config = ClusterctlConfig::load(config)?;
    let variables = config.variables(BTreeMap::new());
    let mut files = BTreeMap::new();
    files.insert(OPERATOR_FILE.to_string(), crate::manifest::render(EMBEDDED_VERSION).into_bytes());
    for (type_, text) in providers {
        // A namespace in the argument is the load's to choose (airgap load -n).
        let named = provider_ref(text)?;
        let (name, version) = (named.name, named.version);
        let repo = repository(&config, &variables, *type_, &name)?;
        let version = repo.resolve(version.as_deref()).await?;
        let utf8 = |bytes: Vec<u8>, what: &str| {
            String::from_utf8(bytes).map_err(|_| {
                GenerateError::Usage(format!("{what} of {} {version} is not UTF-8 text", repo.provider()))
            })
        };
        let metadata = utf8(repo.file(&version, METADATA_FILE).await?, "the metadata")?;
        let components = utf8(repo.components(&version).await?, "the components")?;
        let label = type_.label(&name);
        let configmap = provider_configmap(
            &label,
            &version.to_string(),
            &[(METADATA_FILE.to_string(), metadata), (repo.components_file().to_string(), components)],
        );
        let yaml = serde_saphyr::to_string(&configmap).expect("a ConfigMap serializes");
        files.insert(format!("configmaps/{label}-{version}.yaml"), yaml.into_bytes());
    }
    Ok(files)
}

fn io(path: &Path, e: impl std::fmt::Display) -> GenerateError {
    GenerateError::Usage(format!("{}: {e}", path.display()))
}

/// Writes the bundle to `out`: a `.tar.gz` when the name says so, else a folder.
pub fn write_bundle(out: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<Vec<PathBuf>, GenerateError> {
    let name = out.to_string_lossy();
    if name.ends_with(".tar.gz") || name.ends_with(".tgz") {
        let file = std::fs::File::create(out).map_err(|e| io(out, e))?;
        let mut builder =
            tar::Builder::new(flate2::write::GzEncoder::new(file, flate2::Compression::default()));
        for (path, data) in files {
            let mut header = tar::Header::new_ustar();
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            header.set_mtime(0);
            builder.append_data(&mut header, path, data.as_slice()).map_err(|e| io(out, e))?;
        }
        builder.into_inner().and_then(|gz| gz.finish()).map_err(|e| io(out, e))?;
        return Ok(vec![out.to_path_buf()]);
    }
    let mut written = Vec::new();
    for (path, data) in files {
        let full = out.join(path);
        std::fs::create_dir_all(full.parent().expect("bundle paths have folders"))
            .map_err(|e| io(&full, e))?;
        std::fs::write(&full, data).map_err(|e| io(&full, e))?;
        written.push(full);
    }
    Ok(written)
}

/// The most a bundle may hold, decompressed: every provider's releases with room to spare.
const BUNDLE_LIMIT: u64 = 512 << 20;

/// Reads a bundle from a folder or a `.tar.gz`.
pub fn read_bundle(from: &Path) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    read_bundle_within(from, BUNDLE_LIMIT)
}

/// [`read_bundle`] within `limit` bytes.
fn read_bundle_within(from: &Path, limit: u64) -> Result<BTreeMap<String, Vec<u8>>, GenerateError> {
    let mut files = BTreeMap::new();
    if from.is_dir() {
        // A folder is bounded as an archive is: in bytes and entries, each file read no
        // further than what is left (a folder someone handed over may hold anything).
        let mut total = 0u64;
        for folder in ["operator", "configmaps"] {
            let dir = from.join(folder);
            let Ok(entries) = std::fs::read_dir(&dir) else { continue };
            for entry in entries {
                let entry = entry.map_err(|e| io(&dir, e))?;
                let path = entry.path();
                if !path.is_file() {
                    continue;
                }
                if files.len() >= butler_repository::MAX_TAR_ENTRIES {
                    return Err(GenerateError::Usage(format!(
                        "{}: the bundle holds more than {} files",
                        from.display(),
                        butler_repository::MAX_TAR_ENTRIES
                    )));
                }
                let file = std::fs::File::open(&path).map_err(|e| io(&path, e))?;
                let mut data = Vec::new();
                std::io::Read::read_to_end(&mut std::io::Read::take(file, limit - total + 1), &mut data)
                    .map_err(|e| io(&path, e))?;
                total += data.len() as u64;
                if total > limit {
                    return Err(GenerateError::Usage(format!(
                        "{}: the bundle holds more than {limit} bytes",
                        from.display()
                    )));
                }
                files.insert(format!("{folder}/{}", entry.file_name().to_string_lossy()), data);
            }
        }
    } else {
        let file = std::fs::File::open(from).map_err(|e| io(from, e))?;
        // A bundle is read whole: bounded in bytes and entries, so that a bomb is refused.
        files = butler_repository::untar(flate2::read::GzDecoder::new(file), limit)
            .map_err(|why| GenerateError::Usage(format!("{}: {why}", from.display())))?;
    }
    if !files.keys().any(|k| k.starts_with("configmaps/")) {
        return Err(GenerateError::Usage(format!(
            "{} holds no configmaps/: it is not a bundle of butlerctl airgap pack",
            from.display()
        )));
    }
    Ok(files)
}

/// Applies a bundle: the operator's manifest (unless `skip_operator`), then the ConfigMaps in
/// `namespace`, where the providers that select them live.
pub async fn load(
    client: &kube::Client,
    files: &BTreeMap<String, Vec<u8>>,
    namespace: &str,
    skip_operator: bool,
    progress: &dyn Fn(&str),
) -> Result<String, GenerateError> {
    let applier = Applier::new(client.clone(), FIELD_MANAGER);
    let mut done = String::new();
    let docs = |path: &str, bytes: &[u8]| -> Result<Vec<Value>, GenerateError> {
        let text = std::str::from_utf8(bytes)
            .map_err(|_| GenerateError::Usage(format!("{path} is not UTF-8 text")))?;
        let values: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| GenerateError::Usage(format!("{path}: {e}")))?;
        Ok(values.into_iter().filter(|v| !v.is_null()).collect())
    };
    // Everything is checked before anything is applied: a bundle is a file someone handed
    // over, and a half-applied one helps nobody.
    let operator = match files.get(OPERATOR_FILE).filter(|_| !skip_operator) {
        Some(bytes) => {
            let objects = docs(OPERATOR_FILE, bytes)?;
            let own: Vec<Value> = crate::manifest::objects(EMBEDDED_VERSION);
            if objects != own {
                return Err(GenerateError::Usage(format!(
                    "{OPERATOR_FILE} of the bundle is not the install manifest of this butlerctl ({EMBEDDED_VERSION}); load the bundle with the butlerctl that packed it, or with --skip-operator and install the operator from a manifest you trust"
                )));
            }
            objects
        }
        None => Vec::new(),
    };
    let mut configmaps = Vec::new();
    for (path, bytes) in files.iter().filter(|(p, _)| p.starts_with("configmaps/")) {
        for object in docs(path, bytes)? {
            let labelled = object["metadata"]["labels"][CONFIGMAP_PROVIDER_LABEL].is_string();
            if object["apiVersion"] != "v1" || object["kind"] != "ConfigMap" || !labelled {
                return Err(GenerateError::Usage(format!(
                    "{path} holds a {} {:?}: a bundle's configmaps/ hold provider ConfigMaps (labelled {CONFIGMAP_PROVIDER_LABEL}) only; nothing was applied",
                    object["kind"].as_str().unwrap_or("document without a kind"),
                    object["metadata"]["name"].as_str().unwrap_or_default()
                )));
            }
            configmaps.push(object);
        }
    }
    if !operator.is_empty() {
        progress("Applying the operator's manifest...");
        for object in &operator {
            // A CRD of the manifest may define a later kind: wait for it to be served.
            applier.apply(object, true).await.map_err(GenerateError::Cluster)?;
        }
        done.push_str(&format!("{OPERATOR_FILE} applied\n"));
    }
    for mut object in configmaps {
        object["metadata"]["namespace"] = Value::String(namespace.to_string());
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        progress(&format!("Applying ConfigMap {namespace}/{name}..."));
        applier.apply(&object, false).await.map_err(GenerateError::Cluster)?;
        done.push_str(&format!("ConfigMap {namespace}/{name} applied\n"));
    }
    Ok(done)
}

/// What `airgap pack` prints: the files written.
pub fn packed(written: &[PathBuf]) -> Output {
    Output { stdout: written.iter().map(|p| format!("{}\n", p.display())).collect(), stderr: Vec::new() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bundle_folder_is_read_within_the_bundles_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("configmaps")).unwrap();
        std::fs::write(dir.path().join("configmaps/a.yaml"), vec![b'a'; 600]).unwrap();
        assert!(read_bundle_within(dir.path(), 1000).is_ok());
        std::fs::write(dir.path().join("configmaps/b.yaml"), vec![b'b'; 600]).unwrap();
        let refused = read_bundle_within(dir.path(), 1000).unwrap_err().to_string();
        assert!(refused.contains("holds more than 1000 bytes"), "{refused}");
    }
}
