//! Refresh tokens against a registry that answers like Azure Container Registry (wiremock on
//! 127.0.0.1 behind a TLS front: credentials travel over HTTPS only): the bearer challenge, the refresh_token grant at its token service, the access
//! token on every request, kept while it lives; a refused refresh token says what to renew.

use butler_e2e::tls::TlsFront;
use butler_repository::oci::{DockerConfig, OciCredentials, OciOptions};
use butler_repository::{ProviderUrl, RemoteOptions, Repository};
use wiremock::matchers::{body_string_contains, header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::http_options;

const REPOSITORY: &str = "butler/infrastructure-harvester";

/// A registry that wants bearer tokens from its own token service and trades `refresh` for
/// `access`, once; reached through its TLS front.
async fn registry(refresh: &str, access: &str) -> (MockServer, TlsFront) {
    let server = MockServer::start().await;
    let front = TlsFront::start(*server.address()).await;
    let realm = format!("https://{}/oauth2/token", front.addr);
    Mock::given(method("GET"))
        .and(path("/v2/"))
        .respond_with(ResponseTemplate::new(401).insert_header(
            "WWW-Authenticate",
            format!(r#"Bearer realm="{realm}",service="{}""#, front.addr).as_str(),
        ))
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/oauth2/token"))
        .and(body_string_contains("grant_type=refresh_token"))
        .and(body_string_contains(format!("refresh_token={refresh}")))
        .and(body_string_contains("scope=repository%3Abutler%2Finfrastructure-harvester%3Apull&"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(serde_json::json!({"access_token": access, "expires_in": 3600})),
        )
        .expect(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/oauth2/token"))
        .respond_with(ResponseTemplate::new(401).set_body_string(r#"{"error":"invalid_grant"}"#))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path(format!("/v2/{REPOSITORY}/tags/list")))
        .and(header("Authorization", format!("Bearer {access}").as_str()))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(
                serde_json::json!({"name": REPOSITORY, "tags": ["v0.1.0", "v0.2.0", "latest"]}),
            ),
        )
        .mount(&server)
        .await;
    (server, front)
}

fn options(cache: &tempfile::TempDir, front: &TlsFront, credentials: OciCredentials) -> RemoteOptions {
    RemoteOptions {
        http: http_options(cache),
        oci: OciOptions { credentials, ca_certificates: vec![front.ca_pem.clone()], ..Default::default() },
        ..Default::default()
    }
}

async fn versions(front: &TlsFront, options: &RemoteOptions) -> Result<Vec<String>, String> {
    let url = ProviderUrl::parse(&format!("oci://{}/{REPOSITORY}", front.addr)).unwrap();
    let repo = Repository::from_url("infrastructure-harvester", &url, options).unwrap();
    repo.versions().await.map(|v| v.iter().map(|v| v.to_string()).collect()).map_err(|e| e.to_string())
}

#[tokio::test]
async fn a_refresh_token_is_traded_once_for_an_access_token() {
    let (_server, front) = registry("good-refresh", "access-1").await;
    let cache = tempfile::tempdir().unwrap();
    let options = options(&cache, &front, OciCredentials::Refresh("good-refresh".into()));
    assert_eq!(versions(&front, &options).await.unwrap(), ["v0.2.0", "v0.1.0"], "newest first");
    // A second source (the next reconcile) uses the access token while it lives; the token
    // service's mock expects exactly one trade.
    assert_eq!(versions(&front, &options).await.unwrap(), ["v0.2.0", "v0.1.0"], "newest first");
}

#[tokio::test]
async fn a_docker_config_identitytoken_is_a_refresh_token() {
    let (_server, front) = registry("from-docker-login", "access-2").await;
    let cache = tempfile::tempdir().unwrap();
    let mut options = options(&cache, &front, OciCredentials::Anonymous);
    let config = format!(
        r#"{{"auths": {{"{}": {{"auth": "MDAwMDAwMDAtMDAwMC0wMDAwLTAwMDAtMDAwMDAwMDAwMDAwOg==", "identitytoken": "from-docker-login"}}}}}}"#,
        front.addr
    );
    options.oci.docker_config = Some(DockerConfig::parse(config.as_bytes()).unwrap());
    assert_eq!(versions(&front, &options).await.unwrap(), ["v0.2.0", "v0.1.0"], "newest first");
}

#[tokio::test]
async fn a_refused_refresh_token_says_what_to_renew() {
    let (server, front) = registry("good-refresh", "access-3").await;
    let cache = tempfile::tempdir().unwrap();
    let options = options(&cache, &front, OciCredentials::Refresh("expired".into()));
    let err = versions(&front, &options).await.unwrap_err();
    assert!(err.contains("refused the refresh token") && err.contains("HTTP 401"), "{err}");
    assert!(err.contains("renew OCI_REFRESH_TOKEN"), "{err}");
    assert!(!err.contains("expired\""), "the token is never printed: {err}");
    // The mock that trades the good token must not count this as its one call.
    server.reset().await;
}
