//! Registries that attack: one that never stops paging its tags, one that sends a layer larger
//! than its manifest declares or a manifest larger than the specification allows, one that
//! names a token service elsewhere, one that redirects a blob to the metadata service or to
//! another host; and credentials are never offered over plain HTTP.

use butler_e2e::tls::TlsFront;
use butler_repository::oci::{OciCredentials, OciOptions};
use butler_repository::{NetworkPolicy, ProviderUrl, RemoteOptions, Repository, RepositoryError, Version};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::http_options;

const REPOSITORY: &str = "evil/infrastructure-harvester";

async fn registry() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;
    server
}

fn repository(server: &MockServer, cache: &tempfile::TempDir) -> Repository {
    repository_with(server, cache, |_| {})
}

/// [`repository`] with options `edit`ed.
fn repository_with(
    server: &MockServer,
    cache: &tempfile::TempDir,
    edit: impl FnOnce(&mut RemoteOptions),
) -> Repository {
    let mut options = RemoteOptions {
        http: http_options(cache),
        oci: OciOptions { insecure: vec![server.address().to_string()], ..Default::default() },
        ..Default::default()
    };
    edit(&mut options);
    let url = ProviderUrl::parse(&format!("oci://{}/{REPOSITORY}", server.address())).unwrap();
    Repository::from_url("infrastructure-harvester", &url, &options).unwrap()
}

#[tokio::test]
async fn a_registry_that_answers_the_same_full_page_for_ever_is_read_once_more_and_left() {
    let server = registry().await;
    let tags: Vec<String> = (0..1000).map(|i| format!("v1.0.{i}")).collect();
    Mock::given(method("GET"))
        .and(path(format!("/v2/{REPOSITORY}/tags/list")))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(serde_json::json!({"name": REPOSITORY, "tags": tags})),
        )
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let repo = repository(&server, &cache);
    let versions = tokio::time::timeout(std::time::Duration::from_secs(20), repo.versions())
        .await
        .expect("the tag list ends")
        .unwrap();
    assert_eq!(versions.len(), 1000, "the repeated page adds nothing");
    let pages = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path().ends_with("/tags/list"))
        .count();
    assert_eq!(pages, 2, "the second page did not move on: no third");
}

#[tokio::test]
async fn a_layer_larger_than_its_manifest_declares_is_refused_at_the_declared_size() {
    let server = registry().await;
    let declared = 64;
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
            "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": declared,
            "digest": format!("sha256:{}", "0".repeat(64)),
            "annotations": {"org.opencontainers.image.title": "metadata.yaml"}}],
    });
    Mock::given(method("GET"))
        .and(path_regex(format!("^/v2/{REPOSITORY}/manifests/.*$")))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
                .set_body_json(&manifest),
        )
        .mount(&server)
        .await;
    // Far more than declared (and than the limit of downloads).
    Mock::given(method("GET"))
        .and(path_regex(format!("^/v2/{REPOSITORY}/blobs/.*$")))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![b'x'; 4 << 20]))
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let version = Version::parse("v1.0.0", "test").unwrap();
    let refused = repository(&server, &cache).metadata(&version).await.unwrap_err().to_string();
    assert!(refused.contains("more than its declared size"), "{refused}");
}

#[tokio::test]
async fn a_registry_that_names_a_token_service_elsewhere_gets_no_password() {
    let server = MockServer::start().await;
    let front = TlsFront::start(*server.address()).await;
    Mock::given(method("GET"))
        .and(path_regex("^/v2/.*$"))
        .respond_with(ResponseTemplate::new(401).insert_header(
            "WWW-Authenticate",
            r#"Bearer realm="https://collector.attacker.test/token",service="x""#,
        ))
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let options = RemoteOptions {
        http: http_options(&cache),
        oci: OciOptions {
            ca_certificates: vec![front.ca_pem.clone()],
            credentials: OciCredentials::Basic { username: "robot".into(), password: "s3cret".into() },
            ..Default::default()
        },
        ..Default::default()
    };
    let url = ProviderUrl::parse(&format!("oci://{}/{REPOSITORY}", front.addr)).unwrap();
    let repo = Repository::from_url("infrastructure-harvester", &url, &options).unwrap();
    let refused = repo.versions().await.unwrap_err().to_string();
    assert!(refused.contains("is not on the registry's host"), "{refused}");
    assert!(!refused.contains("s3cret"), "{refused}");
    let asked = server.received_requests().await.unwrap();
    assert_eq!(asked.len(), 1, "nothing but the first read was asked");
    assert!(!asked[0].headers.contains_key("authorization"), "no credentials before the challenge");
}

#[tokio::test]
async fn credentials_are_never_sent_over_plain_http() {
    let server = registry().await;
    let cache = tempfile::tempdir().unwrap();
    let options = RemoteOptions {
        http: http_options(&cache),
        oci: OciOptions {
            insecure: vec![server.address().to_string()],
            credentials: OciCredentials::Basic { username: "robot".into(), password: "s3cret".into() },
            ..Default::default()
        },
        ..Default::default()
    };
    let url = ProviderUrl::parse(&format!("oci://{}/{REPOSITORY}", server.address())).unwrap();
    let repo = Repository::from_url("infrastructure-harvester", &url, &options).unwrap();
    let refused = repo.versions().await.unwrap_err().to_string();
    assert!(refused.contains("over plain HTTP, where credentials are never sent"), "{refused}");
    assert_eq!(server.received_requests().await.unwrap().len(), 0, "nothing was sent");
}

/// A manifest with one file, `metadata.yaml`, whose content is `content`.
fn one_file_manifest(content: &[u8]) -> serde_json::Value {
    serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
            "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "size": content.len(),
            "digest": format!("sha256:{}", butler_repository::sha256_hex(content)),
            "annotations": {"org.opencontainers.image.title": "metadata.yaml"}}],
    })
}

async fn serve_manifest(server: &MockServer, manifest: &serde_json::Value) {
    Mock::given(method("GET"))
        .and(path_regex(format!("^/v2/{REPOSITORY}/manifests/.*$")))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
                .set_body_json(manifest),
        )
        .mount(server)
        .await;
}

#[tokio::test]
async fn a_blob_redirected_to_the_metadata_service_is_refused() {
    let server = registry().await;
    serve_manifest(&server, &one_file_manifest(b"metadata")).await;
    Mock::given(method("GET"))
        .and(path_regex(format!("^/v2/{REPOSITORY}/blobs/.*$")))
        .respond_with(
            ResponseTemplate::new(307).insert_header("Location", "http://169.254.169.254/latest/meta-data/"),
        )
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let repo = repository_with(&server, &cache, |options| {
        // The operator's policy, with the loopback address the stand-in runs on allowed.
        options.http.network = NetworkPolicy::refusing_local(vec!["127.0.0.0/8".parse().unwrap()]);
    });
    let version = Version::parse("v1.0.0", "test").unwrap();
    match repo.metadata(&version).await {
        Err(RepositoryError::Refused { why, .. }) => {
            assert!(why.contains("169.254.169.254 is a link-local"), "{why}")
        }
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_blob_redirected_to_another_host_goes_there_without_the_credentials() {
    // The registry (behind TLS, asking for Basic credentials) sends its blob to an object store
    // on another host, as registries do.
    let (server, store) = (MockServer::start().await, MockServer::start().await);
    let (front, store_front) =
        (TlsFront::start(*server.address()).await, TlsFront::start(*store.address()).await);
    let content = b"apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: 1\n  minor: 0\n  contract: v1beta1\n";
    Mock::given(method("GET"))
        .and(wiremock::matchers::header_exists("authorization"))
        .and(path_regex(format!("^/v2/{REPOSITORY}/manifests/.*$")))
        .respond_with(ResponseTemplate::new(200).set_body_json(one_file_manifest(content)))
        .mount(&server)
        .await;
    // The object store's name is `localhost`: another host, though the same machine.
    let elsewhere =
        format!("https://{}/objects/metadata", store_front.addr.replace("127.0.0.1", "localhost"));
    Mock::given(method("GET"))
        .and(wiremock::matchers::header_exists("authorization"))
        .and(path_regex(format!("^/v2/{REPOSITORY}/blobs/.*$")))
        .respond_with(ResponseTemplate::new(307).insert_header("Location", elsewhere.as_str()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(
            ResponseTemplate::new(401).insert_header("WWW-Authenticate", r#"Basic realm="registry""#),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/objects/metadata"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(content.to_vec()))
        .mount(&store)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let options = RemoteOptions {
        http: http_options(&cache),
        oci: OciOptions {
            ca_certificates: vec![front.ca_pem.clone(), store_front.ca_pem.clone()],
            credentials: OciCredentials::Basic { username: "robot".into(), password: "s3cret".into() },
            ..Default::default()
        },
        ..Default::default()
    };
    let url = ProviderUrl::parse(&format!("oci://{}/{REPOSITORY}", front.addr)).unwrap();
    let repo = Repository::from_url("infrastructure-harvester", &url, &options).unwrap();
    let version = Version::parse("v1.0.0", "test").unwrap();
    let metadata = repo.metadata(&version).await.unwrap();
    assert_eq!(metadata.release_series.len(), 1);
    let fetched = store.received_requests().await.unwrap();
    assert_eq!(fetched.len(), 1);
    assert!(!fetched[0].headers.contains_key("authorization"), "the credentials stayed with the registry");
}

#[tokio::test]
async fn a_manifest_larger_than_the_specifications_limit_is_not_read_whole() {
    let server = registry().await;
    let mut manifest = one_file_manifest(b"x");
    manifest["annotations"] = serde_json::json!({"padding": "x".repeat(5 << 20)});
    serve_manifest(&server, &manifest).await;
    let cache = tempfile::tempdir().unwrap();
    let repo = repository_with(&server, &cache, |options| {
        options.http.max_download = 64 << 20;
        options.http.timeout = std::time::Duration::from_secs(10);
    });
    let version = Version::parse("v1.0.0", "test").unwrap();
    match repo.metadata(&version).await {
        Err(RepositoryError::TooLarge { what, limit }) => {
            assert!(what.starts_with("the manifest of"), "{what}");
            assert_eq!(limit, 4 << 20);
        }
        other => panic!("not refused: {other:?}"),
    }
}

/// A tar+gzip layer holding one file, the name its own.
fn packed_layer(name: &str, size: usize) -> Vec<u8> {
    use std::io::Read;
    let mut builder =
        tar::Builder::new(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best()));
    let mut header = tar::Header::new_ustar();
    header.set_size(size as u64);
    header.set_mode(0o644);
    header.set_cksum();
    builder.append_data(&mut header, name, std::io::repeat(b'x').take(size as u64)).unwrap();
    builder.into_inner().unwrap().finish().unwrap()
}

/// Many archive layers, each within the most a download may hold, together far more: the
/// artifact's layers have one total (each once had the whole limit to itself).
#[tokio::test]
async fn archive_layers_unpack_within_one_total() {
    let server = registry().await;
    let layers: Vec<Vec<u8>> = (0..3).map(|i| packed_layer(&format!("part-{i}.yaml"), 600 << 10)).collect();
    let manifest = serde_json::json!({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "size": 2,
            "digest": "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
        "layers": layers.iter().map(|l| serde_json::json!({
            "mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "size": l.len(),
            "digest": format!("sha256:{}", butler_repository::sha256_hex(l))})).collect::<Vec<_>>(),
    });
    serve_manifest(&server, &manifest).await;
    for layer in &layers {
        Mock::given(method("GET"))
            .and(path(format!("/v2/{REPOSITORY}/blobs/sha256:{}", butler_repository::sha256_hex(layer))))
            .respond_with(ResponseTemplate::new(200).set_body_bytes(layer.clone()))
            .mount(&server)
            .await;
    }
    let cache = tempfile::tempdir().unwrap();
    let repo = repository_with(&server, &cache, |options| {
        options.http.max_download = 1 << 20;
    });
    let version = Version::parse("v1.0.0", "test").unwrap();
    let refused = repo.metadata(&version).await.unwrap_err().to_string();
    assert!(refused.contains("the artifact's layers hold at most 1048576 bytes"), "{refused}");
}
