//! Whether the operator that will honour a carried-over object reaches where the object fetches
//! its releases from, as that operator is configured (its Deployment's arguments and
//! environment): a registry over plain HTTP (`http://` in `fetchConfig.oci`) only when its
//! `OCI_INSECURE_REGISTRIES` lists it, a host of the local network (loopback, private,
//! link-local, shared; written as an address, or a name that resolves only to such) only when
//! its `--allow-network` covers it. cluster-api-operator reached both; here the provider would
//! fail to fetch after the move.

use butler_repository::{IpNet, Location, NetworkPolicy, ProviderUrl};
use serde_json::Value;

use crate::cli::honoured::{Found, flag_values};

/// How long a name may take to resolve before it is left unchecked.
const RESOLVE_WITHIN: std::time::Duration = std::time::Duration::from_secs(2);

/// What an operator reaches besides public hosts over TLS.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reach {
    /// Registries it reaches over plain HTTP; `None` when its environment reads them from
    /// elsewhere (a Secret or ConfigMap), so that they cannot be told here.
    pub insecure: Option<Vec<String>>,
    /// Local networks it may reach.
    pub allowed: Vec<IpNet>,
}

impl Reach {
    /// As the operator's Deployment configures it.
    pub fn of(operator: &Found) -> Reach {
        let insecure = match operator.env.get(butler_repository::oci::INSECURE_VARIABLE) {
            None => Some(Vec::new()),
            Some(None) => None,
            Some(Some(list)) => Some(
                list.split(',').map(|r| r.trim().to_ascii_lowercase()).filter(|r| !r.is_empty()).collect(),
            ),
        };
        let allowed = flag_values(&operator.args, "--allow-network")
            .iter()
            .filter_map(|text| {
                text.parse::<IpNet>().ok().or_else(|| text.parse::<std::net::IpAddr>().ok().map(IpNet::from))
            })
            .collect();
        Reach { insecure, allowed }
    }
}

/// Where `spec` fetches from, as (field, host, plain-HTTP registry), when it names a host.
fn host_of(spec: &Value) -> Option<(&'static str, String, bool)> {
    let fetch = &spec["fetchConfig"];
    let (field, url) = match (fetch["url"].as_str(), fetch["oci"].as_str()) {
        (Some(url), _) => ("spec.fetchConfig.url", ProviderUrl::parse(url).ok()?),
        (None, Some(oci)) => ("spec.fetchConfig.oci", ProviderUrl::parse_oci_field(oci).ok()?),
        _ => return None,
    };
    match url.location {
        Location::GitLab { host, .. } => Some((field, host, false)),
        Location::Oci { registry, plain_http, .. } => Some((field, registry, plain_http)),
        _ => None,
    }
}

/// The host without its port (and an IPv6 address without its brackets).
fn bare(host: &str) -> &str {
    if let Some(inner) = host.strip_prefix('[') {
        return inner.split(']').next().unwrap_or(inner);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.chars().all(|c| c.is_ascii_digit()) && !name.contains(':') => name,
        _ => host,
    }
}

/// Why the operator would not reach where `spec` fetches from (`who` names the object); empty
/// when it would, or when that cannot be told from here (a name that does not resolve here).
pub async fn refusals(who: &str, spec: &Value, reach: &Reach) -> Vec<String> {
    let Some((field, host, plain_http)) = host_of(spec) else { return Vec::new() };
    let mut out = Vec::new();
    if plain_http
        && reach.insecure.as_ref().is_some_and(|listed| !listed.contains(&host.to_ascii_lowercase()))
    {
        out.push(format!(
            "{who}: {field} reaches {host} over plain HTTP, which this operator refuses unless {} of its own environment lists it; set that on its Deployment (or serve the registry over TLS) and run migrate again",
            butler_repository::oci::INSECURE_VARIABLE
        ));
    }
    let policy = NetworkPolicy::refusing_local(reach.allowed.clone());
    let name = bare(&host);
    let refused = match name.parse::<std::net::IpAddr>() {
        Ok(ip) => policy.refusal(ip),
        Err(_) => {
            let found = tokio::time::timeout(RESOLVE_WITHIN, tokio::net::lookup_host((name, 443))).await;
            let addresses: Vec<std::net::IpAddr> = match found {
                Ok(Ok(found)) => found.map(|a| a.ip()).collect(),
                _ => Vec::new(),
            };
            match addresses.iter().all(|ip| policy.refusal(*ip).is_some()) {
                true => addresses
                    .first()
                    .and_then(|ip| policy.refusal(*ip))
                    .map(|why| format!("{name} resolves here to {why}")),
                false => None,
            }
        }
    };
    if let Some(why) = refused {
        out.push(format!(
            "{who}: {field} names {host}, and {why}; add --allow-network to the operator's Deployment and run migrate again"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn operator(args: &[&str], env: &[(&str, &str)]) -> Found {
        Found {
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env.iter().map(|(k, v)| (k.to_string(), Some(v.to_string()))).collect(),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn plain_http_and_local_hosts_are_refused_unless_the_operator_allows_them() {
        let spec = json!({"fetchConfig": {"oci": "http://10.20.0.5:5000/capi/core:v1.10.9"}});
        let none = Reach::of(&operator(&["run"], &[]));
        let refused = refusals("CoreProvider capi-system/cluster-api", &spec, &none).await;
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(
            refused[0].contains("spec.fetchConfig.oci reaches 10.20.0.5:5000 over plain HTTP")
                && refused[0].contains("OCI_INSECURE_REGISTRIES"),
            "{refused:?}"
        );
        assert!(
            refused[1].contains("10.20.0.5 is a private address")
                && refused[1].contains("--allow-network 10.20.0.5/32"),
            "{refused:?}"
        );
        let allowed = Reach::of(&operator(
            &["run", "--allow-network", "10.20.0.0/16"],
            &[("OCI_INSECURE_REGISTRIES", "registry.local, 10.20.0.5:5000")],
        ));
        assert_eq!(allowed.allowed.len(), 1);
        assert!(refusals("x", &spec, &allowed).await.is_empty());
        // Read from a Secret: not known here, so not refused for it.
        let mut hidden = operator(&["--allow-network=10.0.0.0/8"], &[]);
        hidden.env.insert("OCI_INSECURE_REGISTRIES".into(), None);
        assert!(refusals("x", &spec, &Reach::of(&hidden)).await.is_empty());
        let tls = json!({"fetchConfig": {"oci": "[fd12::5]:5000/capi/core:v1.10.9"}});
        let refused = refusals("x", &tls, &Reach::of(&operator(&["--allow-network=10.0.0.0/8"], &[]))).await;
        assert_eq!(refused.len(), 1, "{refused:?}");
        assert!(
            refused[0].contains(
                "spec.fetchConfig.oci names [fd12::5]:5000, and fd12::5 is a private (unique local) address"
            ),
            "{refused:?}"
        );
        // Public hosts and ConfigMaps pass.
        assert!(refusals("x", &json!({"fetchConfig": {"url": "https://github.com/kubernetes-sigs/cluster-api/releases/latest/core-components.yaml"}}), &none).await.is_empty());
        assert!(refusals("x", &json!({"fetchConfig": {"selector": {}}}), &none).await.is_empty());
    }
}
