//! Where a URL and its redirects may lead: under the operator's network policy a repository
//! cannot send the client to the cluster's own network (a loopback or metadata address, written
//! or resolved), and the credentials of a request stay with the host they were meant for.

use butler_repository::{Http, NetworkPolicy, RepositoryError};
use http::{HeaderMap, HeaderValue};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::http_options;

fn http(cache: &tempfile::TempDir, policy: NetworkPolicy) -> Http {
    Http::new(butler_repository::HttpOptions { network: policy, ..http_options(cache) })
}

/// The policy of the tests: local networks refused, loopback allowed (where the stand-ins run).
fn loopback_allowed() -> NetworkPolicy {
    NetworkPolicy::refusing_local(vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()])
}

fn refusal(result: Result<butler_repository::Fetched, RepositoryError>) -> String {
    match result {
        Err(RepositoryError::Refused { why, .. }) => why,
        other => panic!("not refused: {other:?}"),
    }
}

#[tokio::test]
async fn a_loopback_repository_is_refused_before_any_request_unless_allowed() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_string("x"))
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let url = format!("{}/components.yaml", server.uri());
    let why = refusal(
        http(&cache, NetworkPolicy::refusing_local(Vec::new())).get(&url, &HeaderMap::new(), None).await,
    );
    assert!(why.contains("loopback") && why.contains("--allow-network 127.0.0.1/32"), "{why}");
    assert_eq!(server.received_requests().await.unwrap().len(), 0, "nothing was sent");
    // A name that resolves there is refused as well.
    let by_name = url.replace("127.0.0.1", "localhost");
    let why = refusal(
        http(&cache, NetworkPolicy::refusing_local(Vec::new())).get(&by_name, &HeaderMap::new(), None).await,
    );
    assert!(why.contains("localhost resolves to") && why.contains("loopback"), "{why}");
    let fetched = http(&cache, loopback_allowed()).get(&url, &HeaderMap::new(), None).await.unwrap();
    assert_eq!(fetched.body, b"x");
}

#[tokio::test]
async fn a_redirect_to_the_metadata_service_is_refused() {
    let server = MockServer::start().await;
    Mock::given(path("/components.yaml"))
        .respond_with(
            ResponseTemplate::new(302).insert_header("Location", "http://169.254.169.254/latest/meta-data/"),
        )
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let url = format!("{}/components.yaml", server.uri());
    let why = refusal(http(&cache, loopback_allowed()).get(&url, &HeaderMap::new(), None).await);
    assert!(why.contains("169.254.169.254 is a link-local"), "{why}");
}

#[tokio::test]
async fn credentials_stay_with_their_host_across_a_redirect() {
    let (first, second) = (MockServer::start().await, MockServer::start().await);
    // The second server is named `localhost`: another host, though the same machine.
    let elsewhere = format!("{}/object", second.uri().replace("127.0.0.1", "localhost"));
    Mock::given(path("/package"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", elsewhere.as_str()))
        .mount(&first)
        .await;
    Mock::given(path("/object"))
        .respond_with(ResponseTemplate::new(200).set_body_string("bytes"))
        .mount(&second)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("PRIVATE-TOKEN", HeaderValue::from_static("glpat-secret"));
    let url = format!("{}/package", first.uri());
    let fetched = http(&cache, loopback_allowed()).get(&url, &headers, Some("secret")).await.unwrap();
    assert_eq!(fetched.body, b"bytes");
    let sent = first.received_requests().await.unwrap();
    assert!(sent[0].headers.get("private-token").is_some(), "the first host gets the token");
    let followed = second.received_requests().await.unwrap();
    assert_eq!(followed.len(), 1);
    assert!(followed[0].headers.get("private-token").is_none(), "the other host does not");
}

#[tokio::test]
async fn a_redirect_loop_ends() {
    let server = MockServer::start().await;
    Mock::given(path("/a"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", "/a"))
        .mount(&server)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let why = refusal(
        http(&cache, loopback_allowed()).get(&format!("{}/a", server.uri()), &HeaderMap::new(), None).await,
    );
    assert!(why.contains("more than 10 redirects"), "{why}");
}
