//! A provider installed from a real OCI registry (Debian's docker-registry on 127.0.0.1) that
//! asks for credentials: refused with what to set, then installed once the config Secret
//! holds a Docker config.json.

use std::collections::BTreeMap;

use butler_e2e::registry::Registry;
use butler_operator::api::{CoreProvider, InfrastructureProvider, Provider};
use butler_repository::oci::{self, OciCredentials, OciOptions};
use butler_repository::{EMBEDDED_VERSION, Version, embedded_provider};

use crate::support::{Scenario, is};

const USER: &str = "robot";
const PASSWORD: &str = "registry-pass-1";

async fn publish_harvester(registry: &Registry) {
    let files: BTreeMap<String, Vec<u8>> = embedded_provider("infrastructure-harvester")
        .expect("embedded")
        .files()
        .into_iter()
        .map(|(name, text)| (name, text.into_bytes()))
        .collect();
    let options = OciOptions {
        credentials: OciCredentials::Basic { username: USER.into(), password: PASSWORD.into() },
        insecure: vec![registry.addr.clone()],
        ..Default::default()
    };
    let version = Version::parse(EMBEDDED_VERSION, "the embedded repository").unwrap();
    oci::publish(
        &registry.addr,
        "butler/infrastructure-harvester",
        false,
        "infrastructure-harvester",
        &version,
        &files,
        &options,
    )
    .await
    .expect("published");
}

fn conditions_say(p: &InfrastructureProvider, text: &str) -> bool {
    p.provider_status().is_some_and(|s| s.conditions.iter().any(|c| c.message.contains(text)))
}

#[tokio::test]
async fn a_provider_installs_from_an_oci_registry_with_the_credentials_of_its_config_secret() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = Registry::start(Some((USER, PASSWORD)));
    publish_harvester(&registry).await;
    let mut s = Scenario::new("oci").await;
    s.secret("harvester-registry", &[("HARVESTER_NAMESPACE", "harvester-system")]).await;
    // The operator's own configuration says which registries it reaches over plain HTTP.
    s.start_operator_with_plain_http(&[&registry.addr]);
    s.create::<CoreProvider>("butler", "").await;
    let spec = format!(
        "fetchConfig: {{oci: 'http://{}/butler/infrastructure-harvester:{EMBEDDED_VERSION}'}}\nconfigSecret: {{name: harvester-registry}}",
        registry.addr
    );
    s.create::<InfrastructureProvider>("harvester", &spec).await;
    s.wait_for::<InfrastructureProvider>("harvester", "the registry's refusal", |p| {
        conditions_say(p, "set OCI_USERNAME and OCI_PASSWORD, or OCI_ACCESS_TOKEN")
    })
    .await;

    // A pull Secret's config.json in the config Secret: the next reconcile reads with it.
    let docker = format!(
        r#"{{"auths": {{"{}": {{"username": "{USER}", "password": "{PASSWORD}"}}}}}}"#,
        registry.addr
    );
    s.secret(
        "harvester-registry",
        &[("HARVESTER_NAMESPACE", "harvester-system"), (oci::DOCKER_CONFIG_KEY, &docker)],
    )
    .await;
    let p = s
        .wait_for::<InfrastructureProvider>("harvester", "ProviderInstalled", |p| {
            is(p, "ProviderInstalled", "True")
        })
        .await;
    let status = p.provider_status().expect("a status");
    assert_eq!(status.installed_version.as_deref(), Some(EMBEDDED_VERSION));
    assert_eq!(status.contract.as_deref(), Some("v1beta1"));
    assert!(!conditions_say(&p, PASSWORD), "the password is never shown");
    assert!(registry.requests_to("/blobs/") >= 1, "the components came from the registry");
    s.stop_operator().await;
}
