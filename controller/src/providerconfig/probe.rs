//! Whether an on-premises platform answers: an HTTPS request to its endpoint, with a timeout,
//! trusting what the ProviderConfig says to trust. Any HTTP answer below 500 means reachable
//! (a 401 answers too: the credentials are checked elsewhere); the platform's version is read
//! where the endpoint tells it. Probes run at most once a minute per ProviderConfig and back
//! off while they fail.
//!
//! The endpoint of a ProviderConfig in a team's namespace is the team's to choose: its probe
//! reaches no local address (loopback, private, link-local, ...) outside the networks the
//! controller allows (`--allow-probe-network`), checked on every address a name resolves to;
//! no probe follows a redirect; an endpoint's own query or fragment is dropped, never made the
//! probe's (`http://10.0.0.5/admin?x=` does not turn `/version` into a query); at most
//! [`MAX_ANSWER`] of an answer is read, and none of its text reaches a status.

use std::sync::Arc;
use std::time::Duration;

use butler_core::api::{Platform, ProviderConfigSpec};
use butler_runtime::network::{NetworkPolicy, PolicyResolver, read_within};

use super::credentials::Credentials;

/// The shortest time between two probes of one ProviderConfig.
pub const MIN_INTERVAL: Duration = Duration::from_secs(60);
/// Between probes of a platform that answers.
pub const HEALTHY_INTERVAL: Duration = Duration::from_secs(300);
/// The longest wait between probes of a platform that does not answer.
pub const MAX_BACKOFF: Duration = Duration::from_secs(600);
/// How long a probe waits for an answer.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// The most of an answer a probe reads (a version is a few hundred bytes).
pub const MAX_ANSWER: u64 = 64 * 1024;

/// Where and how to probe a platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub url: String,
    /// PEM of a CA to trust besides the system's.
    pub ca_pem: Option<String>,
    /// Accept any certificate (the ProviderConfig's `insecure`, or the kubeconfig's).
    pub insecure: bool,
    /// An `Authorization` header.
    pub authorization: Option<String>,
    /// Where the answer tells the version.
    pub version: VersionAt,
    /// The addresses the probe may reach, for an endpoint a team chose; `None`: any.
    pub policy: Option<Arc<NetworkPolicy>>,
}

/// Where an answer carries the platform's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VersionAt {
    /// Kubernetes `/version`: `gitVersion`.
    GitVersion,
    /// Proxmox `/api2/json/version`: `data.version`.
    ProxmoxData,
    Nowhere,
}

/// The endpoint's URL with `path` after its own path, and no query or fragment; an endpoint
/// that is no URL is kept as written (the probe refuses it).
fn join(base: &str, path: &str) -> String {
    match reqwest::Url::parse(base) {
        Ok(mut url) => {
            let joined = format!("{}{path}", url.path().trim_end_matches('/'));
            url.set_path(&joined);
            url.set_query(None);
            url.set_fragment(None);
            url.to_string()
        }
        Err(_) => format!("{}{path}", base.trim_end_matches('/')),
    }
}

/// The probe of a ProviderConfig's platform; `None` for the cloud platforms (and for an
/// on-premises one whose settings are missing: validation says so).
pub fn target(spec: &ProviderConfigSpec, credentials: &Credentials) -> Option<Target> {
    match spec.provider {
        Platform::Harvester => {
            let kubeconfig = credentials.kubeconfig.clone().unwrap_or_default();
            let endpoint = spec.harvester.as_ref().and_then(|h| h.endpoint.clone()).filter(|e| !e.is_empty());
            let (base, ca_pem, insecure) = match endpoint {
                // The kubeconfig's trust goes with its own server only.
                Some(e) if e != kubeconfig.server => (e, None, false),
                _ => (kubeconfig.server, kubeconfig.ca_pem, kubeconfig.insecure),
            };
            (!base.is_empty()).then(|| Target {
                url: join(&base, "/version"),
                ca_pem,
                insecure,
                authorization: None,
                version: VersionAt::GitVersion,
                policy: None,
            })
        }
        Platform::Nutanix => spec.nutanix.as_ref().map(|n| {
            let port = n.port.unwrap_or(9440);
            let host = n.endpoint.trim_end_matches('/');
            let has_port = host.rsplit_once(':').is_some_and(|(_, p)| p.chars().all(|c| c.is_ascii_digit()));
            let base = if has_port { host.to_string() } else { format!("{host}:{port}") };
            Target {
                url: join(&base, "/api/nutanix/v3/versions"),
                ca_pem: None,
                insecure: n.insecure.unwrap_or(false),
                authorization: None,
                version: VersionAt::Nowhere,
                policy: None,
            }
        }),
        Platform::Proxmox => spec.proxmox.as_ref().map(|p| Target {
            url: join(&p.endpoint, "/api2/json/version"),
            ca_pem: None,
            insecure: p.insecure.unwrap_or(false),
            authorization: credentials.proxmox_token.as_ref().map(|t| format!("PVEAPIToken={t}")),
            version: VersionAt::ProxmoxData,
            policy: None,
        }),
        Platform::Azure | Platform::Aws | Platform::Gcp => None,
    }
}

/// What a probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probed {
    Reachable { version: Option<String> },
    Unreachable(String),
}

/// The version an answer tells, if it tells one.
pub fn version_of(body: &[u8], at: VersionAt) -> Option<String> {
    let json: serde_json::Value = serde_json::from_slice(body).ok()?;
    let version = match at {
        VersionAt::GitVersion => json["gitVersion"].as_str(),
        VersionAt::ProxmoxData => json["data"]["version"].as_str(),
        VersionAt::Nowhere => None,
    }?;
    // A version is a short word; anything else is no version (status fields are bounded, and a
    // status that cannot be written would be refused for ever).
    let word = |v: &str| v.len() <= MAX_VERSION && v.chars().all(|c| c.is_ascii_graphic());
    Some(version.to_string()).filter(|v| !v.is_empty() && word(v))
}

/// The longest version text a probe reports.
const MAX_VERSION: usize = 64;

/// Probes a target.
pub async fn probe(target: &Target) -> Probed {
    let url = match reqwest::Url::parse(&target.url) {
        Ok(url)
            if matches!(url.scheme(), "http" | "https")
                && url.username().is_empty()
                && url.password().is_none() =>
        {
            url
        }
        _ => {
            return Probed::Unreachable(format!(
                "{} is no http or https URL without a user name or password; write the endpoint as https://host:port",
                target.url
            ));
        }
    };
    // No proxy from the environment (HTTP(S)_PROXY): a proxy would reach what the probe's
    // network policy refuses, on its own side.
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .timeout(TIMEOUT)
        .redirect(reqwest::redirect::Policy::none())
        .danger_accept_invalid_certs(target.insecure);
    if let Some(policy) = &target.policy {
        if let Some(why) = policy.refusal_of_url(&url) {
            return Probed::Unreachable(why);
        }
        builder = builder.dns_resolver(Arc::new(PolicyResolver(policy.clone())));
    }
    if let Some(pem) = &target.ca_pem {
        match reqwest::Certificate::from_pem_bundle(pem.as_bytes()) {
            Ok(certs) => {
                for cert in certs {
                    builder = builder.add_root_certificate(cert);
                }
            }
            Err(_) => return Probed::Unreachable("the CA of the kubeconfig is not a PEM certificate".into()),
        }
    }
    let client = match builder.build() {
        Ok(c) => c,
        Err(e) => return Probed::Unreachable(format!("no HTTPS client: {e}")),
    };
    let mut request = client.get(url);
    if let Some(auth) = &target.authorization {
        request = request.header(reqwest::header::AUTHORIZATION, auth);
    }
    match request.send().await {
        Ok(answer) if answer.status().is_server_error() => {
            Probed::Unreachable(format!("{} answered {}", target.url, answer.status()))
        }
        Ok(answer) => {
            let ok = answer.status().is_success();
            // An answer over the bound tells no version (and is read no further).
            let body = read_within(answer, MAX_ANSWER).await.ok().flatten().unwrap_or_default();
            Probed::Reachable { version: ok.then(|| version_of(&body, target.version)).flatten() }
        }
        Err(e) => Probed::Unreachable(format!("{}: {}", target.url, describe(&e))),
    }
}

/// A reqwest error with its causes, which say what went wrong (refused, timed out, a
/// certificate not trusted).
fn describe(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        format!("no answer within {}s", TIMEOUT.as_secs())
    } else {
        error.to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// How long after the last probe the next one is due: a healthy platform every
/// [`HEALTHY_INTERVAL`], a failing one after a backoff that doubles from a minute to
/// [`MAX_BACKOFF`]; never sooner than [`MIN_INTERVAL`].
pub fn next_probe_after(failures: u32) -> Duration {
    if failures == 0 {
        return HEALTHY_INTERVAL;
    }
    let backoff = MIN_INTERVAL.saturating_mul(2u32.saturating_pow(failures.saturating_sub(1).min(10)));
    backoff.clamp(MIN_INTERVAL, MAX_BACKOFF)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providerconfig::credentials::KubeconfigServer;

    fn spec(yaml: &str) -> ProviderConfigSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn each_on_premises_platform_has_its_probe() {
        let credentials = Credentials {
            kubeconfig: Some(KubeconfigServer {
                server: "https://10.0.0.1:6443".into(),
                ca_pem: Some("PEM".into()),
                insecure: false,
            }),
            proxmox_token: Some("root@pam!t=abc".into()),
        };
        let harvester =
            target(&spec("provider: harvester\ncredentialsRef: {name: c}\n"), &credentials).unwrap();
        assert_eq!(
            (harvester.url.as_str(), harvester.ca_pem.as_deref()),
            ("https://10.0.0.1:6443/version", Some("PEM"))
        );
        let elsewhere = target(
            &spec("provider: harvester\ncredentialsRef: {name: c}\nharvester: {endpoint: 'https://h.example.com/', networkName: a/b}\n"),
            &credentials,
        )
        .unwrap();
        assert_eq!((elsewhere.url.as_str(), elsewhere.ca_pem), ("https://h.example.com/version", None));
        let nutanix = target(
            &spec("provider: nutanix\ncredentialsRef: {name: c}\nnutanix: {endpoint: 'https://prism.example.com', clusterUUID: a, subnetUUID: b, insecure: true}\n"),
            &credentials,
        )
        .unwrap();
        assert_eq!(
            (nutanix.url.as_str(), nutanix.insecure),
            ("https://prism.example.com:9440/api/nutanix/v3/versions", true)
        );
        let proxmox = target(
            &spec("provider: proxmox\ncredentialsRef: {name: c}\nproxmox: {endpoint: 'https://pve:8006', nodes: [a], storage: s}\n"),
            &credentials,
        )
        .unwrap();
        assert_eq!(proxmox.url, "https://pve:8006/api2/json/version");
        let sneaky = target(
            &spec("provider: proxmox\ncredentialsRef: {name: c}\nproxmox: {endpoint: 'http://10.0.0.5:8080/admin?x=', nodes: [a], storage: s}\n"),
            &credentials,
        )
        .unwrap();
        assert_eq!(
            sneaky.url, "http://10.0.0.5:8080/admin/api2/json/version",
            "the endpoint's query is dropped"
        );
        assert_eq!(proxmox.authorization.as_deref(), Some("PVEAPIToken=root@pam!t=abc"));
        assert!(target(&spec("provider: aws\ncredentialsRef: {name: c}\n"), &credentials).is_none());
    }

    #[test]
    fn versions_and_the_probe_schedule() {
        assert_eq!(
            version_of(br#"{"gitVersion": "v1.29.9+rke2r1"}"#, VersionAt::GitVersion).as_deref(),
            Some("v1.29.9+rke2r1")
        );
        assert_eq!(
            version_of(br#"{"data": {"version": "8.1.4"}}"#, VersionAt::ProxmoxData).as_deref(),
            Some("8.1.4")
        );
        assert_eq!(version_of(b"<html>", VersionAt::GitVersion), None);
        let long = format!(r#"{{"gitVersion": "v{}"}}"#, "1".repeat(5000));
        assert_eq!(version_of(long.as_bytes(), VersionAt::GitVersion), None, "no version that long");
        assert_eq!(version_of(br#"{"gitVersion": "v1 <b>"}"#, VersionAt::GitVersion), None);
        assert_eq!(next_probe_after(0), HEALTHY_INTERVAL);
        assert_eq!(next_probe_after(1), MIN_INTERVAL);
        assert_eq!(next_probe_after(2), Duration::from_secs(120));
        assert_eq!(next_probe_after(30), MAX_BACKOFF);
    }
}
