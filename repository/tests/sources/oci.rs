//! The OCI source against a real registry (Debian's docker-registry on 127.0.0.1): both
//! artifact layouts, credentials, digest pins, another provider's artifact, and the cache.

use std::collections::BTreeMap;
use std::time::Duration;

use butler_e2e::registry::Registry;
use butler_repository::oci::{self, DockerConfig, OciCredentials, OciOptions};
use butler_repository::{
    EMBEDDED_VERSION, ProviderUrl, RemoteOptions, Repository, RepositoryError, Version, embedded_provider,
};
use oci_client::client::{ClientConfig, ClientProtocol, Config, ImageLayer};
use oci_client::{Client, Reference};

use crate::support::{METADATA, http_options};

fn options(cache: &tempfile::TempDir, registry: &Registry) -> RemoteOptions {
    let mut http = http_options(cache);
    http.timeout = Duration::from_secs(10);
    RemoteOptions {
        http,
        oci: OciOptions { insecure: vec![registry.addr.clone()], ..Default::default() },
        ..Default::default()
    }
}

fn harvester_files() -> BTreeMap<String, Vec<u8>> {
    embedded_provider("infrastructure-harvester")
        .expect("embedded")
        .files()
        .into_iter()
        .map(|(name, text)| (name, text.into_bytes()))
        .collect()
}

fn version(text: &str) -> Version {
    Version::parse(text, "a test").unwrap()
}

async fn publish(
    registry: &Registry,
    repository: &str,
    label: &str,
    at: &str,
    options: &OciOptions,
) -> oci::Published {
    oci::publish(&registry.addr, repository, false, label, &version(at), &harvester_files(), options)
        .await
        .expect("published")
}

fn repository(label: &str, url: &str, options: &RemoteOptions) -> Repository {
    Repository::from_url(label, &ProviderUrl::parse(url).unwrap(), options).unwrap()
}

#[tokio::test]
async fn a_published_release_reads_back_and_the_repeat_comes_from_the_cache() {
    let registry = Registry::start(None);
    let cache = tempfile::tempdir().unwrap();
    let options = options(&cache, &registry);
    let published = publish(
        &registry,
        "butler/infrastructure-harvester",
        "infrastructure-harvester",
        EMBEDDED_VERSION,
        &options.oci,
    )
    .await;
    publish(
        &registry,
        "butler/infrastructure-harvester",
        "infrastructure-harvester",
        "v0.0.1-rc.1",
        &options.oci,
    )
    .await;
    assert!(published.reference.ends_with(&published.digest));

    let url = format!("oci://{}/butler/infrastructure-harvester", registry.addr);
    let repo = repository("infrastructure-harvester", &url, &options);
    let versions: Vec<String> = repo.versions().await.unwrap().iter().map(|v| v.to_string()).collect();
    assert_eq!(versions, [EMBEDDED_VERSION, "v0.0.1-rc.1"]);
    let latest = repo.resolve(None).await.unwrap();
    assert_eq!(latest.to_string(), EMBEDDED_VERSION);
    let files = harvester_files();
    assert_eq!(repo.components(&latest).await.unwrap(), files["infrastructure-components.yaml"]);
    assert_eq!(repo.metadata(&latest).await.unwrap(), repo.metadata(&latest).await.unwrap());
    assert_eq!(repo.file(&latest, "cluster-template.yaml").await.unwrap(), files["cluster-template.yaml"]);

    // A new process with the same cache: the manifest is asked for again (tags move), its one
    // layer is not.
    let before = registry.requests();
    let (manifests, blobs) = (registry.requests_to("/manifests/"), registry.requests_to("/blobs/"));
    let again = repository("infrastructure-harvester", &format!("{url}:{EMBEDDED_VERSION}"), &options);
    let v = again.resolve(None).await.unwrap();
    assert_eq!(again.components(&v).await.unwrap(), files["infrastructure-components.yaml"]);
    assert_eq!(again.file(&v, "metadata.yaml").await.unwrap(), files["metadata.yaml"]);
    let made = registry.requests() - before;
    assert_eq!(registry.requests_to("/manifests/") - manifests, 1, "{}", registry.log_tail(made));
    assert_eq!(registry.requests_to("/blobs/"), blobs, "no layer again: {}", registry.log_tail(made));
    assert!(made <= 2, "the manifest and the client's /v2/ probe: {}", registry.log_tail(made));

    // Offline, from the cache alone.
    let mut offline = options.clone();
    offline.http.offline = true;
    let cached = repository("infrastructure-harvester", &url, &offline);
    let v = cached.resolve(None).await.unwrap();
    assert_eq!(cached.components(&v).await.unwrap(), files["infrastructure-components.yaml"]);
    assert_eq!(registry.requests() - before, made, "offline touches nothing");
    let empty = tempfile::tempdir().unwrap();
    let mut cold = offline.clone();
    cold.http.cache = Some(butler_repository::Cache::new(empty.path(), Duration::from_secs(60)));
    let err = repository("infrastructure-harvester", &url, &cold).versions().await.unwrap_err();
    assert!(matches!(err, RepositoryError::NotCached { .. }), "{err}");
}

#[tokio::test]
async fn one_layer_per_file_as_cluster_api_operator_publishes() {
    let registry = Registry::start(None);
    let cache = tempfile::tempdir().unwrap();
    let options = options(&cache, &registry);
    let client = Client::new(ClientConfig { protocol: ClientProtocol::Http, ..Default::default() });
    let layer = |title: &str, data: &str| {
        let annotations = BTreeMap::from([(oci::TITLE_ANNOTATION.to_string(), title.to_string())]);
        ImageLayer::new(
            data.as_bytes().to_vec(),
            "application/vnd.oci.image.layer.v1.tar".into(),
            Some(annotations),
        )
    };
    let layers = [
        layer("metadata.yaml", METADATA),
        layer("infrastructure-aws-v1.2.0-components.yaml", "kind: Namespace\n"),
        layer("components.yaml", "generic: true\n"),
    ];
    let reference = Reference::with_tag(registry.addr.clone(), "capi/aws".into(), "v1.2.0".into());
    client
        .push(
            &reference,
            &layers,
            Config::oci_v1(b"{}".to_vec(), None),
            &oci_client::secrets::RegistryAuth::Anonymous,
            None,
        )
        .await
        .unwrap();

    let repo =
        repository("infrastructure-aws", &format!("oci://{}/capi/aws:v1.2.0", registry.addr), &options);
    let v = repo.resolve(None).await.unwrap();
    assert_eq!(repo.contract_of(&v).await.unwrap(), "v1beta2");
    assert_eq!(repo.components(&v).await.unwrap(), b"kind: Namespace\n", "the full name wins");
    let err = repo.file(&v, "cluster-template.yaml").await.unwrap_err();
    assert!(matches!(err, RepositoryError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("cluster-template.yaml was not found in version v1.2.0"), "{err}");
}

#[tokio::test]
async fn credentials_from_variables_or_a_docker_config() {
    // Credentials travel over HTTPS only: the registry serves TLS with its own CA.
    let registry = Registry::start_tls(Some(("robot", "s3cret-pass")));
    let cache = tempfile::tempdir().unwrap();
    let mut options = options(&cache, &registry);
    options.oci.insecure.clear();
    options.oci.ca_certificates = vec![registry.ca_pem.clone().expect("a CA")];
    options.oci.credentials =
        OciCredentials::Basic { username: "robot".into(), password: "s3cret-pass".into() };
    publish(
        &registry,
        "p/infrastructure-harvester",
        "infrastructure-harvester",
        EMBEDDED_VERSION,
        &options.oci,
    )
    .await;
    let url = format!("oci://{}/p/infrastructure-harvester", registry.addr);

    let mut anonymous = options.clone();
    anonymous.oci.credentials = OciCredentials::Anonymous;
    anonymous.http.cache = None;
    let err =
        repository("infrastructure-harvester", &url, &anonymous).versions().await.unwrap_err().to_string();
    assert!(err.contains("set OCI_USERNAME and OCI_PASSWORD, or OCI_ACCESS_TOKEN"), "{err}");
    assert!(!err.contains("s3cret"), "{err}");

    let mut docker = anonymous.clone();
    let config = format!(
        r#"{{"auths": {{"{}": {{"username": "robot", "password": "s3cret-pass"}}}}}}"#,
        registry.addr
    );
    docker.oci.docker_config = Some(DockerConfig::parse(config.as_bytes()).unwrap());
    let repo = repository("infrastructure-harvester", &url, &docker);
    let v = repo.resolve(None).await.unwrap();
    assert_eq!(repo.components(&v).await.unwrap(), harvester_files()["infrastructure-components.yaml"]);
}

#[tokio::test]
async fn a_digest_pins_the_content_and_the_provider_must_match() {
    let registry = Registry::start(None);
    let cache = tempfile::tempdir().unwrap();
    let options = options(&cache, &registry);
    let release =
        publish(&registry, "b/harvester", "infrastructure-harvester", EMBEDDED_VERSION, &options.oci).await;
    let candidate =
        publish(&registry, "b/harvester", "infrastructure-harvester", "v0.0.1-rc.1", &options.oci).await;
    assert_ne!(release.digest, candidate.digest, "the version is part of the manifest");
    let base = format!("oci://{}/b/harvester", registry.addr);

    // The digest alone: its manifest states the version.
    let pinned = repository("infrastructure-harvester", &format!("{base}@{}", release.digest), &options);
    let v = pinned.resolve(None).await.unwrap();
    assert_eq!(v.to_string(), EMBEDDED_VERSION);
    assert!(pinned.components(&v).await.is_ok());

    // A tag that now names other content than the pin: refused.
    let wrong = repository(
        "infrastructure-harvester",
        &format!("{base}:{EMBEDDED_VERSION}@{}", candidate.digest),
        &options,
    );
    let err = wrong.components(&version(EMBEDDED_VERSION)).await.unwrap_err().to_string();
    assert!(err.contains("the digest pins version v0.0.1-rc.1"), "{err}");

    // Another provider's artifact under this provider's name.
    let err = repository("infrastructure-nutanix", &format!("{base}:{EMBEDDED_VERSION}"), &options)
        .contract_of(&version(EMBEDDED_VERSION))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("the artifact is not infrastructure-nutanix's"), "{err}");
}

#[tokio::test]
async fn https_by_default_with_the_registrys_ca_and_the_core_contract() {
    let registry = Registry::start_tls(None);
    let cache = tempfile::tempdir().unwrap();
    let mut options = options(&cache, &registry);
    options.oci.insecure.clear();
    options.http.cache = None;
    let url = format!("oci://{}/b/infrastructure-harvester", registry.addr);

    // The system's roots do not know this registry's CA: refused, and nothing falls back to HTTP.
    let err = repository("infrastructure-harvester", &url, &options).versions().await.unwrap_err();
    assert!(matches!(err, RepositoryError::Network { .. }), "{err}");
    assert_eq!(registry.requests(), 0, "no request reached the registry");

    let ca = registry.ca_pem.clone().expect("a CA");
    options.oci.apply_variables(|key| (key == oci::CA_VARIABLE).then(|| ca.clone()));
    for at in [EMBEDDED_VERSION, "v0.0.1-rc.1"] {
        publish(&registry, "b/infrastructure-harvester", "infrastructure-harvester", at, &options.oci).await;
    }
    let repo = repository("infrastructure-harvester", &url, &options);
    assert_eq!(repo.latest_for_contract("v1beta1").await.unwrap().to_string(), EMBEDDED_VERSION);
    let err = repo.latest_for_contract("v1beta2").await.unwrap_err().to_string();
    assert!(err.contains("has no version for contract v1beta2"), "{err}");
}
