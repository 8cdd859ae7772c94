//! The credentials Secret of a ProviderConfig checked against what its platform needs
//! (spec/000, "Credential Secret Format"). Messages name keys, never values.

use std::collections::BTreeMap;

use butler_core::api::Platform;
use kube::config::Kubeconfig;

/// What the Harvester kubeconfig says about reaching the cluster, for the probe.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeconfigServer {
    pub server: String,
    /// PEM of the cluster's CA, when the kubeconfig carries one.
    pub ca_pem: Option<String>,
    pub insecure: bool,
}

/// What a valid Secret gives the probe.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Credentials {
    /// Harvester: the cluster its kubeconfig points at.
    pub kubeconfig: Option<KubeconfigServer>,
    /// Proxmox: the API token, sent as `PVEAPIToken`.
    pub proxmox_token: Option<String>,
}

/// Why the credentials cannot be used: a message that names the Secret's keys.
pub type Invalid = String;

/// The namespace of a ProviderConfig's credentials Secret. `spec.credentialsRef.namespace`
/// names another namespace only for a platform-scoped ProviderConfig outside every team's
/// namespace (written by the platform's administrators): a team's ProviderConfig reads the
/// Secrets of its own namespace only, or its team would send the platform's credentials to an
/// endpoint of its choosing. A refusal is decided before anything is read, so that it tells
/// nothing of the other namespace.
pub fn secret_namespace(
    config_namespace: &str,
    reference: Option<&str>,
    team_scoped: bool,
    in_team_namespace: bool,
) -> Result<String, Invalid> {
    let Some(other) = reference.filter(|n| !n.is_empty() && *n != config_namespace) else {
        return Ok(config_namespace.to_string());
    };
    let whose = match (team_scoped, in_team_namespace) {
        (false, false) => return Ok(other.to_string()),
        (true, _) => "a team-scoped ProviderConfig",
        (false, true) => "a ProviderConfig in a team's namespace",
    };
    Err(format!(
        "spec.credentialsRef.namespace {other:?} is refused: {whose} reads Secrets of its own namespace ({config_namespace}) only; put the Secret in {config_namespace} and leave spec.credentialsRef.namespace out"
    ))
}

fn text<'a>(data: &'a BTreeMap<String, Vec<u8>>, key: &str) -> Option<&'a str> {
    data.get(key).and_then(|v| std::str::from_utf8(v).ok()).map(str::trim).filter(|v| !v.is_empty())
}

fn required<'a>(
    data: &'a BTreeMap<String, Vec<u8>>,
    keys: &[&str],
    platform: Platform,
) -> Result<Vec<&'a str>, Invalid> {
    let missing: Vec<&str> = keys.iter().copied().filter(|k| text(data, k).is_none()).collect();
    match missing.as_slice() {
        [] => Ok(keys.iter().filter_map(|k| text(data, k)).collect()),
        [one] => Err(format!("the key {one} is missing or empty; {platform} needs {}", keys.join(", "))),
        many => Err(format!(
            "the keys {} are missing or empty; {platform} needs {}",
            many.join(", "),
            keys.join(", ")
        )),
    }
}

/// Checks a Secret's data for a platform. `key` (`credentialsRef.key`) names the key of the
/// Harvester kubeconfig or the GCP service account key when it is not the usual one.
pub fn validate(
    platform: Platform,
    data: &BTreeMap<String, Vec<u8>>,
    key: Option<&str>,
) -> Result<Credentials, Invalid> {
    let mut credentials = Credentials::default();
    match platform {
        Platform::Harvester => {
            let key = key.unwrap_or("kubeconfig");
            let text = required(data, &[key], platform)?[0];
            credentials.kubeconfig = Some(
                kubeconfig_server(text)
                    .map_err(|why| format!("the key {key} is not a usable kubeconfig: {why}"))?,
            );
        }
        Platform::Nutanix => {
            required(data, &["username", "password"], platform)?;
        }
        Platform::Proxmox => {
            if let Some(token) = text(data, "token") {
                credentials.proxmox_token = Some(token.to_string());
            } else {
                required(data, &["username", "password"], platform)
                    .map_err(|e| format!("{e} (or a token in the key token)"))?;
            }
        }
        Platform::Azure => {
            required(data, &["tenantID", "clientID", "clientSecret", "subscriptionID"], platform)?;
        }
        Platform::Aws => {
            required(data, &["accessKeyID", "secretAccessKey"], platform)?;
        }
        Platform::Gcp => {
            let key = key.unwrap_or("serviceAccountKey");
            let text = required(data, &[key], platform)?[0];
            service_account(text)
                .map_err(|why| format!("the key {key} is not a GCP service account key: {why}"))?;
        }
    }
    Ok(credentials)
}

/// The server of a kubeconfig's current context (or its only cluster), and how to trust it.
fn kubeconfig_server(text: &str) -> Result<KubeconfigServer, String> {
    // Parse errors can quote the text; say where, never what.
    let config = Kubeconfig::from_yaml(text).map_err(|_| "it does not parse as a kubeconfig".to_string())?;
    let cluster_name = config
        .current_context
        .as_ref()
        .and_then(|current| config.contexts.iter().find(|c| &c.name == current))
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone());
    let named = config.clusters.iter().find(|c| Some(&c.name) == cluster_name.as_ref());
    let cluster = named
        .or_else(|| (config.clusters.len() == 1).then(|| &config.clusters[0]))
        .and_then(|c| c.cluster.as_ref())
        .ok_or("it names no cluster (set current-context, or give it one cluster)")?;
    let server = cluster.server.clone().filter(|s| !s.is_empty()).ok_or("its cluster has no server")?;
    let ca_pem = match &cluster.certificate_authority_data {
        Some(data) => Some(decode_base64(data).ok_or("its certificate-authority-data is not base64")?),
        None => None,
    };
    Ok(KubeconfigServer { server, ca_pem, insecure: cluster.insecure_skip_tls_verify.unwrap_or(false) })
}

/// Standard base64 (with or without padding, as kubeconfigs are found) to text.
fn decode_base64(text: &str) -> Option<String> {
    use base64::Engine;
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    let lenient = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
    );
    let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
    String::from_utf8(lenient.decode(compact).ok()?).ok()
}

fn service_account(text: &str) -> Result<(), String> {
    let json: serde_json::Value = serde_json::from_str(text).map_err(|_| "it is not JSON".to_string())?;
    if json["type"] != "service_account" {
        return Err("its type is not service_account".into());
    }
    for field in ["client_email", "private_key"] {
        if json[field].as_str().is_none_or(str::is_empty) {
            return Err(format!("it has no {field}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_platforms_own_provider_configs_read_secrets_of_other_namespaces() {
        assert_eq!(secret_namespace("team-a", None, true, true), Ok("team-a".into()));
        assert_eq!(secret_namespace("team-a", Some(""), false, true), Ok("team-a".into()));
        assert_eq!(secret_namespace("team-a", Some("team-a"), true, true), Ok("team-a".into()));
        assert_eq!(secret_namespace("butler-system", Some("vault"), false, false), Ok("vault".into()));
        for (team_scoped, in_team, whose) in [
            (true, true, "a team-scoped ProviderConfig"),
            (true, false, "a team-scoped ProviderConfig"),
            (false, true, "a ProviderConfig in a team's namespace"),
        ] {
            let refused =
                secret_namespace("team-a", Some("butler-system"), team_scoped, in_team).unwrap_err();
            assert_eq!(
                refused,
                format!(
                    "spec.credentialsRef.namespace \"butler-system\" is refused: {whose} reads Secrets of its own namespace (team-a) only; put the Secret in team-a and leave spec.credentialsRef.namespace out"
                )
            );
        }
    }

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.as_bytes().to_vec())).collect()
    }

    const KUBECONFIG: &str = "apiVersion: v1\nkind: Config\nclusters:\n- name: harvester\n  cluster:\n    server: https://harvester.example.com:6443\n    certificate-authority-data: LS0tLS1CRUdJTg==\ncontexts:\n- name: h\n  context: {cluster: harvester, user: u}\ncurrent-context: h\nusers:\n- name: u\n  user: {token: secret-token-value}\n";

    #[test]
    fn each_platform_needs_its_keys() {
        type Case<'a> = (Platform, &'a [(&'a str, &'a str)], Result<(), &'a str>);
        let cases: &[Case] = &[
            (Platform::Nutanix, &[("username", "admin"), ("password", "pw")], Ok(())),
            (
                Platform::Nutanix,
                &[("username", "admin")],
                Err("the key password is missing or empty; nutanix needs username, password"),
            ),
            (Platform::Proxmox, &[("token", "root@pam!t=abc")], Ok(())),
            (Platform::Proxmox, &[("username", "root@pam"), ("password", "pw")], Ok(())),
            (
                Platform::Proxmox,
                &[("username", "root@pam")],
                Err(
                    "the key password is missing or empty; proxmox needs username, password (or a token in the key token)",
                ),
            ),
            (
                Platform::Azure,
                &[("tenantID", "t"), ("clientID", "c"), ("clientSecret", "s"), ("subscriptionID", "s")],
                Ok(()),
            ),
            (
                Platform::Azure,
                &[("tenantID", "t"), ("clientID", "c")],
                Err(
                    "the keys clientSecret, subscriptionID are missing or empty; azure needs tenantID, clientID, clientSecret, subscriptionID",
                ),
            ),
            (
                Platform::Aws,
                &[("accessKeyID", "AKIA"), ("secretAccessKey", "  ")],
                Err("the key secretAccessKey is missing or empty; aws needs accessKeyID, secretAccessKey"),
            ),
            (
                Platform::Gcp,
                &[(
                    "serviceAccountKey",
                    r#"{"type": "service_account", "client_email": "a@b.iam", "private_key": "-----BEGIN"}"#,
                )],
                Ok(()),
            ),
            (
                Platform::Gcp,
                &[("serviceAccountKey", r#"{"type": "user", "client_email": "a", "private_key": "k"}"#)],
                Err(
                    "the key serviceAccountKey is not a GCP service account key: its type is not service_account",
                ),
            ),
            (
                Platform::Gcp,
                &[("serviceAccountKey", r#"{"type": "service_account", "client_email": "a"}"#)],
                Err("the key serviceAccountKey is not a GCP service account key: it has no private_key"),
            ),
            (
                Platform::Gcp,
                &[("serviceAccountKey", "not json secret-value")],
                Err("the key serviceAccountKey is not a GCP service account key: it is not JSON"),
            ),
            (
                Platform::Harvester,
                &[("kubeconfig", "{{{ not: yaml secret-value")],
                Err("the key kubeconfig is not a usable kubeconfig: it does not parse as a kubeconfig"),
            ),
            (
                Platform::Harvester,
                &[],
                Err("the key kubeconfig is missing or empty; harvester needs kubeconfig"),
            ),
        ];
        for (platform, pairs, expected) in cases {
            let got = validate(*platform, &data(pairs), None).map(|_| ());
            assert_eq!(got.as_ref().map(|_| ()).map_err(String::as_str), *expected, "{platform} {pairs:?}");
            if let Err(message) = got {
                assert!(!message.contains("secret-value"), "values never show: {message}");
            }
        }
    }

    #[test]
    fn a_harvester_kubeconfig_gives_the_server_and_its_ca() {
        let credentials = validate(Platform::Harvester, &data(&[("kubeconfig", KUBECONFIG)]), None).unwrap();
        let server = credentials.kubeconfig.unwrap();
        assert_eq!(server.server, "https://harvester.example.com:6443");
        assert_eq!(server.ca_pem.as_deref(), Some("-----BEGIN"));
        let other_key = validate(Platform::Harvester, &data(&[("config", KUBECONFIG)]), Some("config"));
        assert!(other_key.is_ok());
        let no_server = KUBECONFIG.replace("    server: https://harvester.example.com:6443\n", "");
        assert_eq!(
            validate(Platform::Harvester, &data(&[("kubeconfig", &no_server)]), None).unwrap_err(),
            "the key kubeconfig is not a usable kubeconfig: its cluster has no server"
        );
        assert_eq!(decode_base64("aGVsbG8="), Some("hello".into()));
        assert_eq!(decode_base64("aGVsbG8"), Some("hello".into()));
        assert_eq!(decode_base64("a*"), None);
    }
}
