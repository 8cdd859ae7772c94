//! A server's own words never come back in errors (which reach conditions): a tenant who points
//! a provider at an internal service must not read that service's answers in its status.

use butler_repository::{GitLabSource, Http, Repository, Version};
use wiremock::matchers::method;
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{METADATA, http_options};

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
            .insecure_for_tests();
    Repository::new("cluster-api", butler_repository::AnySource::GitLab(source), "core-components.yaml")
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
