//! Kept releases: before an upgrade moves a provider whose releases come from a remote
//! repository, the release it runs is kept in a ConfigMap beside it (gzip, well inside a
//! ConfigMap's 1 MiB), so that rolling it back needs no network. The upgrade records the kept
//! release's digest, and the roll-back names it on the provider: a ConfigMap anyone with write
//! access to the namespace could forge is used only when it holds exactly what was kept.

use std::collections::BTreeMap;
use std::io::{Read, Write};

use butler_repository::{Version, sha256_hex};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde_json::json;

use crate::api::KeptRelease;
use crate::controller::vocabulary::{Fetched, ProviderKey};

/// The annotation on a provider rolled back: the sha256 of the kept release it goes back to.
pub const ROLLBACK_SHA256: &str = "operator.butlerlabs.dev/rollback-sha256";
/// The label on a kept release: the provider's label.
pub const KEPT_OF: &str = "operator.butlerlabs.dev/kept-release-of";
const CONTRACT: &str = "contract";
const COMPONENTS: &str = "components.yaml.gz";
/// What a ConfigMap may hold, with room for its metadata.
const MOST: usize = 1000 * 1024;

/// The name of the ConfigMap that keeps `key`'s release `version`.
pub fn name(key: &ProviderKey, version: &str) -> String {
    let version: String = version
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '-' })
        .collect();
    format!("kept-{}-{}", key.kind.label(&key.name), version.to_ascii_lowercase())
}

/// The digest of a release: of its contract and components, as kept.
pub fn digest(fetched: &Fetched) -> String {
    sha256_hex(format!("{}\n{}", fetched.contract, fetched.components).as_bytes())
}

/// The ConfigMap keeping `fetched`, owned by `owner` (the upgrade that kept it).
pub fn to_configmap(
    key: &ProviderKey,
    fetched: &Fetched,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<ConfigMap, String> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(fetched.components.as_bytes()).map_err(|e| e.to_string())?;
    let packed = gz.finish().map_err(|e| e.to_string())?;
    if packed.len() > MOST {
        return Err(format!(
            "the release {} of {key} is {} bytes compressed, more than a ConfigMap holds",
            fetched.version,
            packed.len()
        ));
    }
    let version = fetched.version.to_string();
    serde_json::from_value(json!({
        "metadata": {
            "name": name(key, &version),
            "namespace": key.namespace,
            "labels": {KEPT_OF: key.kind.label(&key.name)},
            "annotations": {"operator.butlerlabs.dev/kept-release-version": version},
            "ownerReferences": [owner],
        },
        "data": {CONTRACT: fetched.contract},
    }))
    .map(|mut cm: ConfigMap| {
        cm.binary_data = Some(BTreeMap::from([(COMPONENTS.to_string(), ByteString(packed))]));
        cm
    })
    .map_err(|e| e.to_string())
}

/// The release a ConfigMap keeps, if it is the one whose digest is `sha256`.
pub fn from_configmap(cm: &ConfigMap, version: &str, sha256: &str) -> Option<Fetched> {
    let contract = cm.data.as_ref()?.get(CONTRACT)?.clone();
    let packed = &cm.binary_data.as_ref()?.get(COMPONENTS)?.0;
    let mut components = String::new();
    // Bounded: a forged ConfigMap must not inflate without end.
    flate2::read::GzDecoder::new(packed.as_slice())
        .take(64 * 1024 * 1024)
        .read_to_string(&mut components)
        .ok()?;
    let version = Version::parse(version, "the kept release").ok()?;
    let fetched = Fetched { version, contract, components };
    (digest(&fetched) == sha256).then_some(fetched)
}

/// Keeps `fetched` for `key`; one kept already under the name stays (its digest is the
/// record's).
pub async fn keep(
    client: &kube::Client,
    key: &ProviderKey,
    fetched: &Fetched,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) -> Result<KeptRelease, String> {
    let cm = to_configmap(key, fetched, owner)?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &key.namespace);
    let name = cm.metadata.name.clone().unwrap_or_default();
    match api.create(&PostParams::default(), &cm).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            let existing = api.get(&name).await.map_err(|e| butler_runtime::error::describe(&e))?;
            if from_configmap(&existing, &fetched.version.to_string(), &digest(fetched)).is_none() {
                return Err(format!(
                    "ConfigMap {}/{name} is in the way and holds another release: delete it",
                    key.namespace
                ));
            }
        }
        Err(e) => {
            return Err(format!(
                "keeping the release in ConfigMap {}/{name}: {}",
                key.namespace,
                butler_runtime::error::describe(&e)
            ));
        }
    }
    Ok(KeptRelease { config_map: name, version: fetched.version.to_string(), sha256: digest(fetched) })
}

/// The kept release `version` of `key` whose digest is `sha256`; none when it is not kept
/// (or what is kept differs: then the repository is read, as without it).
pub async fn read(client: &kube::Client, key: &ProviderKey, version: &str, sha256: &str) -> Option<Fetched> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &key.namespace);
    let found = api.get_opt(&name(key, version)).await.ok().flatten()?;
    let fetched = from_configmap(&found, version, sha256);
    if fetched.is_none() {
        tracing::warn!(provider = %key, version, "the kept release differs from the one recorded: reading the repository");
    }
    fetched
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ProviderKind;

    #[test]
    fn a_kept_release_reads_back_only_with_its_digest() {
        let key = ProviderKey::new(ProviderKind::Infrastructure, "butler-system", "aws");
        let fetched = Fetched {
            version: Version::parse("v2.5.0+build.1", "test").unwrap(),
            contract: "v1beta1".into(),
            components: "kind: Deployment\n".repeat(5000),
        };
        let owner = Default::default();
        let cm = to_configmap(&key, &fetched, owner).unwrap();
        assert_eq!(cm.metadata.name.as_deref(), Some("kept-infrastructure-aws-v2.5.0-build.1"));
        let packed = cm.binary_data.as_ref().unwrap()[COMPONENTS].0.len();
        assert!(packed < fetched.components.len() / 20, "compressed: {packed}");
        let back = from_configmap(&cm, "v2.5.0+build.1", &digest(&fetched)).unwrap();
        assert_eq!((back.components, back.contract), (fetched.components.clone(), fetched.contract.clone()));
        assert!(from_configmap(&cm, "v2.5.0+build.1", &"0".repeat(64)).is_none());
        let mut forged = cm.clone();
        forged.data.as_mut().unwrap().insert(CONTRACT.into(), "v1beta2".into());
        assert!(from_configmap(&forged, "v2.5.0+build.1", &digest(&fetched)).is_none());
    }
}
