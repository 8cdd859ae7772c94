use butler_repository::{GitLabSource, Http, Repository, Source};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{METADATA, http_options};

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
    .insecure_for_tests();
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
