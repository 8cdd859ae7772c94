//! What one set of credentials fetched is not read by knowing where it came from: a digest of
//! a private artifact, with the same cache but no credentials, is refused by the registry.

use std::collections::BTreeMap;
use std::time::Duration;

use butler_e2e::registry::Registry;
use butler_repository::oci::{self, OciCredentials, OciOptions};
use butler_repository::{
    EMBEDDED_VERSION, ProviderUrl, RemoteOptions, Repository, Version, embedded_provider,
};

use crate::support::http_options;

#[tokio::test]
async fn a_known_digest_does_not_read_a_private_artifact_from_the_cache() {
    let registry = Registry::start_tls(Some(("owner", "owners-pass")));
    let ca = vec![registry.ca_pem.clone().expect("a CA")];
    let cache = tempfile::tempdir().unwrap();
    let mut http = http_options(&cache);
    http.timeout = Duration::from_secs(10);
    let private = OciOptions {
        credentials: OciCredentials::Basic { username: "owner".into(), password: "owners-pass".into() },
        ca_certificates: ca.clone(),
        ..Default::default()
    };
    let files: BTreeMap<String, Vec<u8>> = embedded_provider("infrastructure-harvester")
        .expect("embedded")
        .files()
        .into_iter()
        .map(|(name, text)| (name, text.into_bytes()))
        .collect();
    let version = Version::parse(EMBEDDED_VERSION, "test").unwrap();
    let published = oci::publish(
        &registry.addr,
        "private/infrastructure-harvester",
        false,
        "infrastructure-harvester",
        &version,
        &files,
        &private,
    )
    .await
    .expect("published");
    let url = ProviderUrl::parse(&format!(
        "oci://{}/private/infrastructure-harvester@{}",
        registry.addr, published.digest
    ))
    .unwrap();
    // The owner reads it, and the cache keeps it.
    let owner = RemoteOptions { http: http.clone(), oci: private.clone(), ..Default::default() };
    let repo = Repository::from_url("infrastructure-harvester", &url, &owner).unwrap();
    assert!(repo.components(&version).await.is_ok());
    // Another, with the digest and the same cache but no credentials, is refused.
    let stranger = RemoteOptions {
        http,
        oci: OciOptions { ca_certificates: ca, ..Default::default() },
        ..Default::default()
    };
    let repo = Repository::from_url("infrastructure-harvester", &url, &stranger).unwrap();
    let refused = repo.components(&version).await.unwrap_err().to_string();
    assert!(refused.contains("set OCI_USERNAME and OCI_PASSWORD"), "{refused}");
}
