//! The GitLab source against a server that answers like GitLab (wiremock on 127.0.0.1, over
//! plain HTTP, which only these tests can reach): generic package files with the bearer token,
//! and a hostile server whose own words never come back in errors (which reach conditions: a
//! tenant who points a provider at an internal service must not read its answers).

use std::time::Duration;

use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use super::GitLabSource;
use crate::{AnySource, Cache, Http, HttpOptions, Repository, Source, Version};

const METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: 1\n  minor: 0\n  contract: v1beta1\n- major: 1\n  minor: 1\n  contract: v1beta1\n- major: 1\n  minor: 2\n  contract: v1beta2\n- major: 0\n  minor: 9\n  contract: v1alpha4\n";

fn http_options(cache: &tempfile::TempDir) -> HttpOptions {
    let _ = rustls::crypto::ring::default_provider().install_default();
    HttpOptions {
        cache: Some(Cache::new(cache.path(), Duration::from_secs(3600))),
        offline: false,
        max_download: 1 << 20,
        retries: 2,
        backoff: Duration::from_millis(5),
        timeout: Duration::from_millis(500),
        network: Default::default(),
        proxy: Default::default(),
    }
}

#[tokio::test]
async fn generic_package_files_are_fetched_with_the_bearer_token() {
    let gitlab = MockServer::start().await;
    let base = "/api/v4/projects/group%2Fproject/packages/generic/cluster-api/v1.0.0";
    Mock::given(method("GET"))
        .and(path(format!("{base}/metadata.yaml")))
        .and(header("authorization", "Bearer glpat-x"))
        .respond_with(ResponseTemplate::new(200).set_body_string(METADATA))
        .mount(&gitlab)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let host = gitlab.uri().trim_start_matches("http://").to_string();
    let source = GitLabSource::new(
        &host,
        "group%2Fproject",
        "cluster-api",
        Some("glpat-x".into()),
        Http::new(http_options(&cache)),
    )
    .over_plain_http();
    let repo = Repository::new("cluster-api", source, "core-components.yaml");
    let version = repo.resolve(Some("v1.0.0")).await.unwrap();
    assert_eq!(repo.metadata(&version).await.unwrap().release_series.len(), 4);
    let requested = gitlab.received_requests().await.unwrap();
    assert_eq!(requested[0].url.path(), format!("{base}/metadata.yaml"), "the project slug stays escaped");

    let error = repo.components(&version).await.unwrap_err().to_string();
    assert!(
        error.starts_with(
            "core-components.yaml was not found in version v1.0.0 of the GitLab package cluster-api"
        ),
        "{error}"
    );
    let error = repo.source().latest().await.unwrap_err().to_string();
    assert!(
        error.contains(
            "cannot list its versions, so \"latest\" cannot be resolved; set the version explicitly"
        ),
        "{error}"
    );
}

/// The error of reading a release's metadata from a server that answers `answer` to anything.
async fn metadata_error(answer: ResponseTemplate) -> String {
    let server = MockServer::start().await;
    Mock::given(method("GET")).respond_with(answer).mount(&server).await;
    let cache = tempfile::tempdir().unwrap();
    let version = Version::parse("v1.0.0", "test").unwrap();
    source(&server, &cache).await.metadata(&version).await.unwrap_err().to_string()
}

async fn source(server: &MockServer, cache: &tempfile::TempDir) -> Repository {
    let host = server.uri().trim_start_matches("http://").to_string();
    let source =
        GitLabSource::new(&host, "group%2Fproject", "cluster-api", None, Http::new(http_options(cache)))
            .over_plain_http();
    Repository::new("cluster-api", AnySource::GitLab(source), "core-components.yaml")
}

#[tokio::test]
async fn an_error_body_is_not_repeated() {
    let answer = ResponseTemplate::new(403).set_body_string(r#"{"message": "db-password=INTERNAL-SECRET"}"#);
    let error = metadata_error(answer).await;
    assert!(error.contains("HTTP 403: Forbidden"), "{error}");
    assert!(!error.contains("INTERNAL-SECRET"), "{error}");
}

#[tokio::test]
async fn a_document_that_is_not_yaml_is_not_quoted() {
    let answer = ResponseTemplate::new(200).set_body_string(format!("{METADATA}: [\nkey: INTERNAL-SECRET\n"));
    let error = metadata_error(answer).await;
    assert!(error.contains("it is not metadata YAML: line"), "{error}");
    assert!(!error.contains("INTERNAL-SECRET"), "{error}");
}
