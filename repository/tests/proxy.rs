//! The proxy of remote fetches: the command line's come from the environment, as clusterctl's
//! do; the operator's only from its own configuration, never from `HTTP_PROXY`/`HTTPS_PROXY`
//! (a proxy resolves the names it is asked for, so the operator's address checks would not
//! hold). One test in a binary of its own: it sets the environment before any thread starts.

use butler_repository::{Http, HttpOptions, ProxySetting};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, ResponseTemplate};

#[test]
fn the_environments_proxy_is_used_only_where_asked_for() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (proxy, target) = runtime.block_on(async {
        let proxy = MockServer::start().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(200).set_body_string("proxied"))
            .mount(&proxy)
            .await;
        let target = MockServer::start().await;
        Mock::given(any())
            .respond_with(ResponseTemplate::new(200).set_body_string("direct"))
            .mount(&target)
            .await;
        (proxy, target)
    });
    // SAFETY: the only test of this binary, before any thread of its own reads the environment
    // (the runtime above is single-threaded and idle).
    unsafe {
        std::env::set_var("HTTP_PROXY", proxy.uri());
        std::env::set_var("http_proxy", proxy.uri());
        std::env::remove_var("NO_PROXY");
        std::env::remove_var("no_proxy");
    }
    let fetch = |setting: ProxySetting| {
        let options = HttpOptions { cache: None, retries: 0, proxy: setting, ..Default::default() };
        let http = Http::new(options);
        let url = format!("{}/file", target.uri());
        runtime.block_on(async move {
            let fetched = http.get(&url, &Default::default(), None).await.unwrap();
            String::from_utf8(fetched.body.clone()).unwrap()
        })
    };
    assert_eq!(fetch(ProxySetting::Environment), "proxied", "the command line follows the environment");
    assert_eq!(fetch(ProxySetting::Off), "direct", "the operator does not");
    assert_eq!(fetch(ProxySetting::Url(proxy.uri())), "proxied", "unless it is configured");
}
