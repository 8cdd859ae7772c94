use std::time::{SystemTime, UNIX_EPOCH};

use butler_repository::{
    GitHubOptions, GitHubSource, GoProxy, Http, Repository, RepositoryError, Source, sha256_hex,
};
use serde_json::json;
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

use crate::support::{METADATA, http_options};

use crate::fake_github::{COMPONENTS, FakeGitHub, is_api, release};

#[tokio::test]
async fn latest_skips_drafts_non_semver_tags_and_prereleases() {
    let fake = FakeGitHub::start().await;
    let cache = tempfile::tempdir().unwrap();
    let repo = fake.repository(&cache);
    let mut versions: Vec<String> = repo.versions().await.unwrap().iter().map(|v| v.to_string()).collect();
    versions.sort();
    assert_eq!(
        versions,
        ["v1.0.0", "v1.1.0", "v1.2.0-rc.1"],
        "both pages read, the draft and the bad tag dropped"
    );
    assert_eq!(repo.resolve(None).await.unwrap().to_string(), "v1.1.0");
    assert_eq!(repo.latest_for_contract("v1beta1").await.unwrap().to_string(), "v1.1.0");
    assert_eq!(repo.latest_for_contract("v1beta2").await.unwrap().to_string(), "v1.2.0-rc.1");
}

#[tokio::test]
async fn latest_metadata_and_components_cost_three_requests_then_304s() {
    let fake = FakeGitHub::start().await;
    // One page of releases, as most repositories have.
    let one_page = MockServer::start().await;
    let page =
        json!([release(&fake.github, "v1.1.0", false, false), release(&fake.github, "v1.0.0", false, false)]);
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases"))
        .and(header("if-none-match", "\"one\""))
        .respond_with(ResponseTemplate::new(304).insert_header("etag", "\"one\""))
        .with_priority(1)
        .mount(&one_page)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases"))
        .respond_with(ResponseTemplate::new(200).set_body_json(page).insert_header("etag", "\"one\""))
        .with_priority(5)
        .mount(&one_page)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let fetch = || async {
        let options = GitHubOptions {
            api_base: one_page.uri(),
            web_base: fake.github.uri(),
            token: None,
            goproxy: GoProxy::Disabled,
        };
        let repo = Repository::new(
            "infrastructure-x",
            GitHubSource::new("o", "r", options, Http::new(http_options(&cache))).unwrap(),
            "infrastructure-components.yaml",
        );
        let version = repo.resolve(None).await.unwrap();
        let metadata = repo.metadata(&version).await.unwrap();
        let components = repo.components(&version).await.unwrap();
        (version, metadata, components)
    };
    let (version, metadata, components) = fetch().await;
    assert_eq!(version.to_string(), "v1.1.0");
    assert_eq!(metadata.release_series.len(), 4);
    assert_eq!(components, COMPONENTS.as_bytes());
    let api = one_page.received_requests().await.unwrap();
    let downloads = fake.github.received_requests().await.unwrap();
    assert_eq!(api.len(), 1, "one rate-limited API call");
    assert_eq!(api.len() + downloads.len(), 3, "three requests to GitHub in all");

    // Again, within the cache lifetime: conditional requests, answered 304.
    fetch().await;
    let api = one_page.received_requests().await.unwrap();
    assert_eq!(api.len(), 2);
    assert!(api[1].headers.get("if-none-match").is_some());
    let storage = fake.storage.received_requests().await.unwrap();
    assert_eq!(storage.len(), 4);
    assert!(
        storage[2..].iter().all(|r| r.headers.get("if-none-match").is_some()),
        "repeat downloads are conditional"
    );
}

#[tokio::test]
async fn a_url_may_name_any_tag_which_installs_no_contract() {
    let fake = FakeGitHub::start().await;
    let cache = tempfile::tempdir().unwrap();
    let url = butler_repository::ProviderUrl::parse(
        "https://github.com/o/r/releases/nightly/infrastructure-components.yaml",
    )
    .unwrap();
    let repo = fake.repository(&cache).with_default_version(url.version);
    let tag = repo.resolve(None).await.unwrap();
    assert_eq!(tag.to_string(), "nightly");
    assert!(
        !repo.components(&tag).await.unwrap().is_empty(),
        "its files are fetched as clusterctl fetches them"
    );
    let err = repo.contract_of(&tag).await.unwrap_err().to_string();
    assert!(err.contains("nightly: the tag is no semantic version"), "{err}");
}

#[tokio::test]
async fn an_explicit_version_makes_no_api_call() {
    let fake = FakeGitHub::start().await;
    let cache = tempfile::tempdir().unwrap();
    let repo = fake.repository(&cache);
    let version = repo.resolve(Some("v1.0.0")).await.unwrap();
    repo.metadata(&version).await.unwrap();
    let requests = fake.github.received_requests().await.unwrap();
    assert!(
        !requests.iter().any(is_api),
        "{:?}",
        requests.iter().map(|r| r.url.path().to_string()).collect::<Vec<_>>()
    );
}

#[tokio::test]
async fn a_version_without_the_v_is_fetched_by_the_tag_as_written() {
    let fake = FakeGitHub::start().await;
    Mock::given(method("GET"))
        .and(path("/o/r/releases/download/1.0.0/metadata.yaml"))
        .respond_with(ResponseTemplate::new(200).set_body_string(METADATA))
        .mount(&fake.github)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let repo = fake.repository(&cache);
    let version = repo.resolve(Some("1.0.0")).await.unwrap();
    assert_eq!(version.to_string(), "1.0.0");
    repo.metadata(&version).await.unwrap();
    let paths: Vec<String> =
        fake.github.received_requests().await.unwrap().iter().map(|r| r.url.path().to_string()).collect();
    assert_eq!(paths, ["/o/r/releases/download/1.0.0/metadata.yaml"]);
}

#[tokio::test]
async fn the_rate_limit_answer_says_when_it_resets_and_what_to_do() {
    let github = MockServer::start().await;
    let reset = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs() + 600;
    Mock::given(method("GET")).and(path("/repos/o/r/releases"))
        .respond_with(ResponseTemplate::new(403)
            .insert_header("x-ratelimit-limit", "60")
            .insert_header("x-ratelimit-remaining", "0")
            .insert_header("x-ratelimit-reset", reset.to_string().as_str())
            .set_body_json(json!({"message": "API rate limit exceeded for 127.0.0.1. (But here's the good news: Authenticated requests get a higher rate limit.)", "documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"})))
        .mount(&github).await;
    let cache = tempfile::tempdir().unwrap();
    let options = GitHubOptions {
        api_base: github.uri(),
        web_base: github.uri(),
        token: None,
        goproxy: GoProxy::Disabled,
    };
    let source = GitHubSource::new("o", "r", options, Http::new(http_options(&cache))).unwrap();
    let error = source.latest().await.unwrap_err();
    assert!(matches!(error, RepositoryError::RateLimited { minutes: 10, .. }), "{error:?}");
    let text = error.to_string();
    assert!(
        text.contains("rate limit is exhausted; it resets at")
            && text.contains("(in 10 min)")
            && text.contains("Set GITHUB_TOKEN"),
        "{text}"
    );
    assert_eq!(github.received_requests().await.unwrap().len(), 1, "a rate-limit answer is not retried");
}

#[tokio::test]
async fn server_errors_and_timeouts_are_retried() {
    let fake = FakeGitHub::start().await;
    let flaky = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases"))
        .respond_with(ResponseTemplate::new(502))
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&flaky)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!([])).set_delay(std::time::Duration::from_secs(2)),
        )
        .up_to_n_times(1)
        .with_priority(2)
        .mount(&flaky)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([release(
            &fake.github,
            "v1.0.0",
            false,
            false
        )])))
        .with_priority(3)
        .mount(&flaky)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let options = GitHubOptions {
        api_base: flaky.uri(),
        web_base: fake.github.uri(),
        token: None,
        goproxy: GoProxy::Disabled,
    };
    let source = GitHubSource::new("o", "r", options, Http::new(http_options(&cache))).unwrap();
    assert_eq!(source.latest().await.unwrap().to_string(), "v1.0.0");
    assert_eq!(flaky.received_requests().await.unwrap().len(), 3, "a 502, a timeout, then the answer");
}

#[tokio::test]
async fn the_go_proxy_lists_versions_and_tags_without_a_release_are_skipped() {
    let fake = FakeGitHub::start().await;
    let proxy = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/github.com/o/r/@v/list"))
        .respond_with(ResponseTemplate::new(200).set_body_string("v1.0.0\nv1.1.0\nv0.9.0+incompatible\n"))
        .mount(&proxy)
        .await;
    Mock::given(method("GET"))
        .and(path("/github.com/o/r/v2/@v/list"))
        .respond_with(ResponseTemplate::new(200).set_body_string("v2.1.0\n"))
        .mount(&proxy)
        .await;
    Mock::given(method("GET"))
        .and(path("/github.com/o/r/v3/@v/list"))
        .respond_with(ResponseTemplate::new(410))
        .mount(&proxy)
        .await;
    // v2.1.0 is a tag without a release; v1.1.0 has one.
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases/tags/v2.1.0"))
        .respond_with(ResponseTemplate::new(404).set_body_json(json!({"message": "Not Found"})))
        .mount(&fake.github)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases/tags/v1.1.0"))
        .respond_with(ResponseTemplate::new(200).set_body_json(release(&fake.github, "v1.1.0", false, false)))
        .mount(&fake.github)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let source = through_proxy(&fake, &proxy, &cache);
    let versions = sorted_versions(&source).await;
    assert_eq!(versions, ["v1.0.0", "v1.1.0", "v2.1.0"]);
    assert_eq!(source.latest().await.unwrap().to_string(), "v1.1.0");
    let api: Vec<String> = fake
        .github
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| is_api(r))
        .map(|r| r.url.path().to_string())
        .collect();
    assert_eq!(api, ["/repos/o/r/releases/tags/v2.1.0", "/repos/o/r/releases/tags/v1.1.0"]);
}

#[tokio::test]
async fn private_downloads_go_through_the_api_with_the_token() {
    let github = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/o/r/releases/download/v1.0.0/metadata.yaml"))
        .respond_with(ResponseTemplate::new(404))
        .mount(&github)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases/tags/v1.0.0"))
        .and(header("authorization", "Bearer secret"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(release(&github, "v1.0.0", false, false))
                .insert_header("etag", "\"r1\""),
        )
        .mount(&github)
        .await;
    Mock::given(method("GET"))
        .and(path("/repos/o/r/releases/assets/1"))
        .and(header("authorization", "Bearer secret"))
        .and(header("accept", "application/octet-stream"))
        .respond_with(ResponseTemplate::new(200).set_body_string(METADATA).insert_header("etag", "\"m1\""))
        .mount(&github)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let source = |token: Option<&str>, offline: bool| {
        let options = GitHubOptions {
            api_base: github.uri(),
            web_base: github.uri(),
            token: token.map(String::from),
            goproxy: GoProxy::Disabled,
        };
        let mut http = http_options(&cache);
        http.offline = offline;
        Repository::new(
            "infrastructure-x",
            GitHubSource::new("o", "r", options, Http::new(http)).unwrap(),
            "c.yaml",
        )
    };
    let repo = source(Some("secret"), false);
    let metadata = repo.metadata(&"v1.0.0".parse().unwrap()).await.unwrap();
    // What the token read is cached apart: offline, a reader without it (or with another
    // token) is not served it; one with it is.
    let v1 = "v1.0.0".parse().unwrap();
    for other in [None, Some("another")] {
        let refused = source(other, true).metadata(&v1).await.unwrap_err().to_string();
        assert!(refused.starts_with("offline: "), "{other:?}: {refused}");
    }
    assert_eq!(
        source(Some("secret"), true).metadata(&v1).await.unwrap().release_series[0].contract,
        "v1beta1"
    );
    assert_eq!(metadata.release_series[0].contract, "v1beta1");
    let downloads = github.received_requests().await.unwrap();
    assert!(
        downloads.iter().filter(|r| !is_api(r)).all(|r| r.headers.get("authorization").is_none()),
        "the token goes to the API only"
    );
}

#[tokio::test]
async fn pins_limits_offline_mode_and_missing_files() {
    let fake = FakeGitHub::start().await;
    let cache = tempfile::tempdir().unwrap();
    let version = "v1.1.0".parse().unwrap();

    let pinned = fake.repository(&cache).with_pin("metadata.yaml", &sha256_hex(b"something else"));
    let error = pinned.metadata(&version).await.unwrap_err().to_string();
    assert!(
        error.starts_with("metadata.yaml of infrastructure-x v1.1.0: its sha256 is ")
            && error.contains("is pinned"),
        "{error}"
    );
    let right = fake.repository(&cache).with_pin("metadata.yaml", &sha256_hex(METADATA.as_bytes()));
    right.metadata(&version).await.unwrap();

    let mut small = http_options(&cache);
    small.max_download = 10;
    small.cache = None;
    let tiny = GitHubSource::new("o", "r", fake.options(None, GoProxy::Disabled), Http::new(small)).unwrap();
    let error = tiny.file(&version, "metadata.yaml").await.unwrap_err();
    assert!(matches!(error, RepositoryError::TooLarge { limit: 10, .. }), "{error:?}");

    let before = fake.storage.received_requests().await.unwrap().len();
    let mut offline = http_options(&cache);
    offline.offline = true;
    let from_cache =
        GitHubSource::new("o", "r", fake.options(None, GoProxy::Disabled), Http::new(offline)).unwrap();
    assert_eq!(from_cache.file(&version, "metadata.yaml").await.unwrap(), METADATA.as_bytes());
    assert_eq!(
        fake.storage.received_requests().await.unwrap().len(),
        before,
        "offline never touches the network"
    );
    let error = from_cache.file(&version, "cluster-template.yaml").await.unwrap_err().to_string();
    assert!(error.starts_with("offline: ") && error.contains("is not in the cache at"), "{error}");

    let error =
        fake.repository(&cache).file(&version, "cluster-template-nope.yaml").await.unwrap_err().to_string();
    assert_eq!(error, "cluster-template-nope.yaml was not found in the GitHub release v1.1.0 of o/r");
}

#[tokio::test]
async fn a_go_proxy_that_cannot_list_the_module_makes_way_for_the_github_api() {
    let fake = FakeGitHub::start().await;
    let proxy = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/github.com/o/r/@v/list"))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_string("not found: module github.com/o/r: git ls-remote failed"),
        )
        .mount(&proxy)
        .await;
    let cache = tempfile::tempdir().unwrap();
    let source = through_proxy(&fake, &proxy, &cache);
    let versions = sorted_versions(&source).await;
    assert_eq!(
        versions,
        ["v1.0.0", "v1.1.0", "v1.2.0-rc.1"],
        "from the releases (drafts and non-versions left out)"
    );
}

/// The fake repository `o/r` with versions listed through `proxy`.
fn through_proxy(fake: &FakeGitHub, proxy: &MockServer, cache: &tempfile::TempDir) -> GitHubSource {
    GitHubSource::new("o", "r", fake.options(None, GoProxy::Url(proxy.uri())), Http::new(http_options(cache)))
        .unwrap()
}

async fn sorted_versions(source: &GitHubSource) -> Vec<String> {
    let mut versions: Vec<String> = source.versions().await.unwrap().iter().map(|v| v.to_string()).collect();
    versions.sort();
    versions
}
