//! A GitHub (API and downloads) on 127.0.0.1 that answers as the real one does, for the GitHub
//! source's scenarios.

use butler_repository::{GitHubOptions, GitHubSource, GoProxy, Http, Repository, sha256_hex};
use serde_json::json;
use wiremock::matchers::{header, method, path, query_param};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

use crate::support::{METADATA, http_options};

pub const COMPONENTS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capx-system\n";

/// A GitHub (API and downloads) and a storage host that downloads redirect to.
pub struct FakeGitHub {
    pub github: MockServer,
    pub storage: MockServer,
}

pub fn release(github: &MockServer, tag: &str, draft: bool, prerelease: bool) -> serde_json::Value {
    let asset = |name: &str, id: u64| {
        json!({"name": name, "url": format!("{}/repos/o/r/releases/assets/{id}", github.uri()),
               "browser_download_url": format!("{}/o/r/releases/download/{tag}/{name}", github.uri())})
    };
    json!({"tag_name": tag, "draft": draft, "prerelease": prerelease,
           "assets": [asset("metadata.yaml", 1), asset("infrastructure-components.yaml", 2)]})
}

impl FakeGitHub {
    pub async fn start() -> FakeGitHub {
        let github = MockServer::start().await;
        let storage = MockServer::start().await;
        // Page 1 of 2 of the releases, with the Link header GitHub sends.
        let page1 = json!([
            release(&github, "v1.1.0", false, false),
            release(&github, "v2.0.0", true, false),
            release(&github, "not-a-version", false, false)
        ]);
        let page2 =
            json!([release(&github, "v1.2.0-rc.1", false, true), release(&github, "v1.0.0", false, false)]);
        let next = format!(
            "<{}/repos/o/r/releases?per_page=100&page=2>; rel=\"next\", <{}/repos/o/r/releases?per_page=100&page=2>; rel=\"last\"",
            github.uri(),
            github.uri()
        );
        Mock::given(method("GET"))
            .and(path("/repos/o/r/releases"))
            .and(query_param("page", "2"))
            .respond_with(ResponseTemplate::new(200).set_body_json(page2).insert_header("etag", "\"p2\""))
            .mount(&github)
            .await;
        Mock::given(method("GET"))
            .and(path("/repos/o/r/releases"))
            .and(header("if-none-match", "\"p1\""))
            .respond_with(ResponseTemplate::new(304).insert_header("etag", "\"p1\""))
            .with_priority(1)
            .mount(&github)
            .await;
        Mock::given(method("GET"))
            .and(path("/repos/o/r/releases"))
            .respond_with(
                ResponseTemplate::new(200)
                    .set_body_json(page1)
                    .insert_header("etag", "\"p1\"")
                    .insert_header("link", next.as_str()),
            )
            .with_priority(5)
            .mount(&github)
            .await;
        for (tag, file, body) in [
            ("v1.1.0", "metadata.yaml", METADATA),
            ("v1.1.0", "infrastructure-components.yaml", COMPONENTS),
            ("v1.0.0", "metadata.yaml", METADATA),
            ("v1.2.0-rc.1", "metadata.yaml", METADATA),
            ("nightly", "metadata.yaml", METADATA),
            ("nightly", "infrastructure-components.yaml", COMPONENTS),
        ] {
            let asset = format!("/assets/{tag}/{file}");
            Mock::given(method("GET"))
                .and(path(format!("/o/r/releases/download/{tag}/{file}")))
                .respond_with(
                    ResponseTemplate::new(302)
                        .insert_header("location", format!("{}{asset}", storage.uri()).as_str()),
                )
                .mount(&github)
                .await;
            let etag = format!("\"{}\"", sha256_hex(body.as_bytes()));
            Mock::given(method("GET"))
                .and(path(asset.as_str()))
                .and(header("if-none-match", etag.as_str()))
                .respond_with(ResponseTemplate::new(304).insert_header("etag", etag.as_str()))
                .with_priority(1)
                .mount(&storage)
                .await;
            Mock::given(method("GET"))
                .and(path(asset.as_str()))
                .respond_with(
                    ResponseTemplate::new(200).set_body_string(body).insert_header("etag", etag.as_str()),
                )
                .with_priority(5)
                .mount(&storage)
                .await;
        }
        FakeGitHub { github, storage }
    }

    pub fn options(&self, token: Option<&str>, goproxy: GoProxy) -> GitHubOptions {
        GitHubOptions {
            api_base: self.github.uri(),
            web_base: self.github.uri(),
            token: token.map(String::from),
            goproxy,
        }
    }

    pub fn repository(&self, cache: &tempfile::TempDir) -> Repository<GitHubSource> {
        let source = GitHubSource::new(
            "o",
            "r",
            self.options(None, GoProxy::Disabled),
            Http::new(http_options(cache)),
        )
        .unwrap();
        Repository::new("infrastructure-x", source, "infrastructure-components.yaml")
    }
}

pub fn is_api(request: &Request) -> bool {
    request.url.path().starts_with("/repos/")
}
