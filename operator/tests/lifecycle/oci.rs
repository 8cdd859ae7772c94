//! A provider installed from a real OCI registry (Debian's docker-registry on 127.0.0.1, over
//! HTTPS with its own CA: credentials never travel over plain HTTP) that asks for credentials:
//! refused with what to set, then installed once the config Secret holds a Docker config.json.

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
        ca_certificates: vec![registry.ca_pem.clone().expect("a CA")],
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
    let registry = Registry::start_tls(Some((USER, PASSWORD)));
    let ca = registry.ca_pem.clone().expect("a CA");
    publish_harvester(&registry).await;
    let mut s = Scenario::new("oci").await;
    // The registry's CA comes with the provider's config Secret.
    s.secret("harvester-registry", &[("HARVESTER_NAMESPACE", "harvester-system"), (oci::CA_VARIABLE, &ca)])
        .await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    let spec = format!(
        "fetchConfig: {{oci: '{}/butler/infrastructure-harvester:{EMBEDDED_VERSION}'}}\nconfigSecret: {{name: harvester-registry}}",
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
        &[
            ("HARVESTER_NAMESPACE", "harvester-system"),
            (oci::CA_VARIABLE, &ca),
            (oci::DOCKER_CONFIG_KEY, &docker),
        ],
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
