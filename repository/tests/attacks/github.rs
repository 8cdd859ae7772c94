//! A GitHub stand-in that never stops paging its releases, and one that sends more than any
//! release list holds.

use butler_repository::{GitHubOptions, GitHubSource, GoProxy, Http, Source};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::http_options;

fn source(server: &MockServer, cache: &tempfile::TempDir) -> GitHubSource {
    let options = GitHubOptions {
        api_base: server.uri(),
        web_base: server.uri(),
        token: None,
        goproxy: GoProxy::Disabled,
    };
    GitHubSource::new("o", "r", options, Http::new(http_options(cache))).unwrap()
}

/// Every page says there is a next one.
struct Endless(String);

impl Respond for Endless {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let page: u64 = request
            .url
            .query_pairs()
            .find(|(k, _)| k == "page")
            .and_then(|(_, v)| v.parse().ok())
            .unwrap_or(1);
        let next = format!("<{}/repos/o/r/releases?per_page=100&page={}>; rel=\"next\"", self.0, page + 1);
        ResponseTemplate::new(200).insert_header("Link", next.as_str()).set_body_json(serde_json::json!([]))
    }
}

#[tokio::test]
async fn release_pages_end_at_the_limit() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases"))
        .respond_with(Endless(server.uri()))
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let error = source(&server, &cache).versions().await.unwrap_err().to_string();
    assert!(error.contains("lists more than 2000 releases"), "{error}");
    assert_eq!(server.received_requests().await.unwrap().len(), 20);
}

#[tokio::test]
async fn an_answer_larger_than_the_download_limit_is_refused() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![b' '; 2 << 20]))
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let error = source(&server, &cache).versions().await.unwrap_err().to_string();
    assert!(error.contains("1048576"), "the limit of the test options: {error}");
}
