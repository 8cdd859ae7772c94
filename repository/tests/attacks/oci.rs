//! A registry that never stops paging its tags, and one that sends a layer larger than its
//! manifest declares.

use butler_repository::oci::OciOptions;
use butler_repository::{ProviderUrl, RemoteOptions, Repository, Version};
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
    let options = RemoteOptions {
        http: http_options(cache),
        oci: OciOptions { insecure: vec![server.address().to_string()], ..Default::default() },
        ..Default::default()
    };
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
    use butler_repository::oci::OciCredentials;
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/v2/"))
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
            insecure: vec![server.address().to_string()],
            credentials: OciCredentials::Basic { username: "robot".into(), password: "s3cret".into() },
            ..Default::default()
        },
        ..Default::default()
    };
    let url = ProviderUrl::parse(&format!("oci://{}/{REPOSITORY}", server.address())).unwrap();
    let repo = Repository::from_url("infrastructure-harvester", &url, &options).unwrap();
    let refused = repo.versions().await.unwrap_err().to_string();
    assert!(refused.contains("is not on the registry's host"), "{refused}");
    assert!(!refused.contains("s3cret"), "{refused}");
    let asked: Vec<String> =
        server.received_requests().await.unwrap().iter().map(|r| r.url.path().to_string()).collect();
    assert_eq!(asked, ["/v2/"], "nothing but the challenge was asked");
}
