//! Where a provider object may have the operator fetch from.

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use serde_json::json;

use crate::fixtures::{METADATA, Part, components, publish, selector};
use crate::support::{Scenario, condition, is, reason};

/// A provider object that names the operator's own files as its repository learns nothing of
/// them: the URL is refused before anything is read, the same whether the file exists or not.
#[tokio::test]
async fn a_local_folder_is_refused_before_the_operators_filesystem_is_read() {
    let mut s = Scenario::new("attack-local").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    s.start_operator();
    let mut core: serde_json::Value = serde_json::from_str(&selector("butler")).unwrap();
    core["version"] = json!("v1.0.0");
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    let mut messages = Vec::new();
    for (name, folder) in [("probe", "/etc"), ("nothing", "/no/such/folder")] {
        let url = format!("file://{folder}/infrastructure-{name}/v1.0.0/infrastructure-components.yaml");
        s.create::<InfrastructureProvider>(name, &json!({"fetchConfig": {"url": url}}).to_string()).await;
        let refused = s
            .wait_for::<InfrastructureProvider>(name, "refused", |p| {
                condition(p, "ProviderInstalled").is_some_and(|c| c.status == "False")
            })
            .await;
        assert!(reason(&refused, "ProviderInstalled", "FetchFailed"), "{:?}", refused.status);
        messages.push(condition(&refused, "ProviderInstalled").unwrap().message.clone());
    }
    assert_eq!(messages[0], messages[1], "an existing folder reads as a missing one");
    assert!(
        messages[0].starts_with(
            "cannot fetch the provider's release: spec.fetchConfig.url: a local folder is not a repository a provider object may name"
        ),
        "{}",
        messages[0]
    );
    s.stop_operator().await;
}

/// A provider object cannot move a fetch off TLS: neither with `http://` nor with
/// `OCI_INSECURE_REGISTRIES` in its config Secret.
#[tokio::test]
async fn a_provider_object_cannot_switch_a_registry_to_plain_http() {
    let mut s = Scenario::new("attack-plain").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    s.secret("plain", &[("OCI_INSECURE_REGISTRIES", "registry.attacker.test:5000, mirror.attacker.test")])
        .await;
    s.start_operator();
    let mut core: serde_json::Value = serde_json::from_str(&selector("butler")).unwrap();
    core["version"] = json!("v1.0.0");
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    let spec = json!({"fetchConfig": {"oci": "http://registry.attacker.test:5000/p/infrastructure-plain:v1.0.0"},
        "configSecret": {"name": "plain"}});
    s.create::<InfrastructureProvider>("plain", &spec.to_string()).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("plain", "refused", |p| {
            reason(p, "ProviderInstalled", "FetchFailed")
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("spec.fetchConfig.oci: plain HTTP to registry.attacker.test:5000 is refused"),
        "{message}"
    );
    s.stop_operator().await;
}

/// A provider object that names a repository of its choice gets the operator's own GitHub
/// token only where the operator's configuration sends it.
#[tokio::test]
async fn the_operators_token_does_not_follow_a_provider_objects_url() {
    let github = github_of_nothing().await;
    let mut s = Scenario::new("attack-token").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let base = github.uri();
    s.start_operator_with_options(|o| {
        o.remote.github.api_base = base.clone();
        o.remote.github.web_base = base.clone();
        o.remote.github.token = Some("ghp_operators_own".into());
    });
    let mut core: serde_json::Value = serde_json::from_str(&selector("butler")).unwrap();
    core["version"] = json!("v1.0.0");
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    let url = "https://github.com/attacker/private-reader/releases/v1.0.0/infrastructure-components.yaml";
    s.create::<InfrastructureProvider>("reader", &json!({"fetchConfig": {"url": url}}).to_string()).await;
    s.wait_for::<InfrastructureProvider>("reader", "the fetch failed", |p| {
        reason(p, "ProviderInstalled", "FetchFailed")
    })
    .await;
    let requests = github.received_requests().await.unwrap();
    assert!(!requests.is_empty(), "the provider's repository was asked");
    for request in &requests {
        let authorization =
            request.headers.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or_default();
        assert!(!authorization.contains("ghp_operators_own"), "the operator's token went to {}", request.url);
    }
    s.stop_operator().await;
}

/// A provider object cannot point the operator at the cluster's own network: a registry on a
/// metadata address, or a repository that redirects there, is refused before anything is sent
/// there. The stand-in repository itself runs on 127.0.0.1, which the scenario's operator is
/// allowed to reach (`--allow-network 127.0.0.0/8`); every other local network stays refused.
#[tokio::test]
async fn a_provider_object_cannot_reach_the_clusters_own_network() {
    use butler_repository::NetworkPolicy;
    use wiremock::matchers::any;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let repository = MockServer::start().await;
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(302).insert_header("Location", "http://169.254.169.254/latest/meta-data/"),
        )
        .mount(&repository)
        .await;
    let mut s = Scenario::new("attack-network").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let base = repository.uri();
    s.start_operator_with_options(|o| {
        o.remote.github.api_base = base.clone();
        o.remote.github.web_base = base.clone();
        o.remote.http.network =
            NetworkPolicy::refusing_local(vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()]);
    });
    let mut core: serde_json::Value = serde_json::from_str(&selector("butler")).unwrap();
    core["version"] = json!("v1.0.0");
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    let github = "https://github.com/attacker/inside/releases/v1.0.0/infrastructure-components.yaml";
    for (name, spec) in [
        ("redirected", json!({"fetchConfig": {"url": github}})),
        (
            "registry",
            json!({"fetchConfig": {"oci": "169.254.169.254:5000/p/infrastructure-registry:v1.0.0"}}),
        ),
    ] {
        s.create::<InfrastructureProvider>(name, &spec.to_string()).await;
        let refused = s
            .wait_for::<InfrastructureProvider>(name, "refused", |p| {
                reason(p, "ProviderInstalled", "FetchFailed")
            })
            .await;
        let message = &condition(&refused, "ProviderInstalled").unwrap().message;
        assert!(message.contains("refused: 169.254.169.254 is a link-local address"), "{name}: {message}");
    }
    s.stop_operator().await;
}

/// Whoever may rewrite a provider's repository (here its labelled ConfigMaps, as a registry or
/// a release page could be) cannot change what a pinned provider installs: a file whose sha256
/// is not the pinned one is refused, naming the field, and nothing of the release is applied.
#[tokio::test]
async fn a_release_that_is_not_the_pinned_one_is_refused_and_nothing_of_it_applied() {
    use butler_repository::sha256_hex;
    let mut s = Scenario::new("attack-pin").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let genuine = components("pinned", "v1.0.0", &[]);
    let tampered = components("pinned", "v1.0.0", &[Part::Settings]);
    let file = "infrastructure-components.yaml";
    publish(&s, "infrastructure-pinned", file, "v1.0.0", &tampered).await;
    s.start_operator();
    let mut core: serde_json::Value = serde_json::from_str(&selector("butler")).unwrap();
    core["version"] = json!("v1.0.0");
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    let mut spec: serde_json::Value = serde_json::from_str(&selector("infrastructure-pinned")).unwrap();
    spec["version"] = json!("v1.0.0");
    spec["fetchConfig"]["sha256"] = json!({ file: sha256_hex(genuine.as_bytes()) });
    s.create::<InfrastructureProvider>("pinned", &spec.to_string()).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("pinned", "refused", |p| {
            reason(p, "ProviderInstalled", "FetchFailed")
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains(&format!(
            "spec.fetchConfig.sha256: {file} of infrastructure-pinned v1.0.0: its sha256 is {}",
            sha256_hex(tampered.as_bytes())
        )),
        "{message}"
    );
    assert!(s.deployments("InfrastructureProvider", "pinned").await.is_empty(), "nothing applied");

    // The genuine release back, and the metadata pinned as well: installed.
    publish(&s, "infrastructure-pinned", file, "v1.0.0", &genuine).await;
    let pins =
        json!({ file: sha256_hex(genuine.as_bytes()), "metadata.yaml": sha256_hex(METADATA.as_bytes()) });
    s.patch_spec::<InfrastructureProvider>("pinned", json!({"fetchConfig": {"sha256": pins}})).await;
    s.wait_for::<InfrastructureProvider>("pinned", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    assert_eq!(s.deployments("InfrastructureProvider", "pinned").await.len(), 1);

    // A pin of a file the operator never reads, or without a version, is refused as such.
    s.patch_spec::<InfrastructureProvider>(
        "pinned",
        json!({"fetchConfig": {"sha256": {"cluster-template.yaml": sha256_hex(b"x")}}}),
    )
    .await;
    let refused = s
        .wait_for::<InfrastructureProvider>("pinned", "refused", |p| {
            condition(p, "ProviderInstalled").is_some_and(|c| c.message.contains("cluster-template.yaml"))
        })
        .await;
    let message = &condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(message.contains("is not a file the operator reads from this repository; pin metadata.yaml or infrastructure-components.yaml"), "{message}");
    s.stop_operator().await;
}

/// A repository that answers each request just within its timeout, slowly enough that the
/// fetch as a whole never ends (endless pages, a trickle of answers), holds the reconcile no
/// longer than the whole fetch's deadline.
#[tokio::test]
async fn a_repository_that_answers_slowly_meets_the_whole_fetchs_deadline() {
    use wiremock::matchers::any;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let slow = MockServer::start().await;
    let metadata = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- {major: 1, minor: 0, contract: v1beta1}\n";
    Mock::given(any())
        .respond_with(
            ResponseTemplate::new(200).set_body_string(metadata).set_delay(std::time::Duration::from_secs(2)),
        )
        .mount(&slow)
        .await;
    let mut s = Scenario::new("attack-slow").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let base = slow.uri();
    s.start_operator_with_options(|o| {
        o.remote.github.api_base = base.clone();
        o.remote.github.web_base = base.clone();
        o.fetch_deadline = std::time::Duration::from_secs(3);
    });
    let mut core: serde_json::Value = serde_json::from_str(&selector("butler")).unwrap();
    core["version"] = json!("v1.0.0");
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    let url = "https://github.com/slow/trickle/releases/v1.0.0/infrastructure-components.yaml";
    s.create::<InfrastructureProvider>("trickle", &json!({"fetchConfig": {"url": url}}).to_string()).await;
    let failed = s
        .wait_for::<InfrastructureProvider>("trickle", "the fetch given up", |p| {
            reason(p, "ProviderInstalled", "FetchFailed")
        })
        .await;
    let message = &condition(&failed, "ProviderInstalled").unwrap().message;
    assert!(message.contains("did not finish within 3 s (--fetch-deadline"), "{message}");
    s.stop_operator().await;
}

/// cluster-api-operator's docs put a provider's GitHub token in its config Secret as
/// `github-token` (clusterctl's name): it is sent to that provider's repository, as
/// `GITHUB_TOKEN` is, instead of falling back to 60 anonymous requests an hour.
#[tokio::test]
async fn a_config_secrets_github_token_under_clusterctls_name_is_used() {
    use k8s_openapi::api::core::v1::Secret;
    use kube::api::{Api, PostParams};
    let github = github_of_nothing().await;
    let mut s = Scenario::new("capi-operator-token").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "reader-variables"}, "stringData": {"github-token": "ghp_providers_own"},
    }))
    .unwrap();
    Api::<Secret>::namespaced(s.client.clone(), &s.namespace)
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let base = github.uri();
    s.start_operator_with_options(|o| {
        o.remote.github.api_base = base.clone();
        o.remote.github.web_base = base.clone();
        o.remote.github.token = None;
    });
    let mut core: serde_json::Value = serde_json::from_str(&selector("butler")).unwrap();
    core["version"] = json!("v1.0.0");
    s.create::<CoreProvider>("butler", &core.to_string()).await;
    let url = "https://github.com/someone/private-reader/releases/latest/infrastructure-components.yaml";
    let spec = json!({"fetchConfig": {"url": url}, "configSecret": {"name": "reader-variables"}});
    s.create::<InfrastructureProvider>("reader", &spec.to_string()).await;
    s.wait_for::<InfrastructureProvider>("reader", "the fetch failed", |p| {
        reason(p, "ProviderInstalled", "FetchFailed")
    })
    .await;
    let requests = github.received_requests().await.unwrap();
    let authorized = requests.iter().any(|r| {
        r.headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer ghp_providers_own")
    });
    assert!(
        authorized,
        "the token was never sent: {:?}",
        requests.iter().map(|r| r.url.to_string()).collect::<Vec<_>>()
    );
    s.stop_operator().await;
}

/// A stand-in GitHub on 127.0.0.1 that has nothing (every request 404), to see what is sent.
async fn github_of_nothing() -> wiremock::MockServer {
    use wiremock::matchers::any;
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let github = MockServer::start().await;
    Mock::given(any()).respond_with(ResponseTemplate::new(404)).mount(&github).await;
    github
}
