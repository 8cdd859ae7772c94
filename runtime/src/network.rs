//! Which addresses a client that follows what users write may reach. The operator fetches what
//! provider objects name, and butler-controller probes the endpoints a team's ProviderConfig
//! names, so a URL (or a redirect, or a name that resolves to one) must not turn them against
//! the cluster's own network: loopback, private, link-local (where the clouds' metadata
//! services answer, 169.254.169.254), shared and unspecified addresses are refused unless their
//! configuration allows the network. The command line allows every address, as clusterctl
//! does: whoever runs it is the one who names the URL.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

/// The addresses remote fetches may reach.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NetworkPolicy {
    /// Refuse addresses of the local network (see [`local_kind`]) outside `allowed`.
    pub refuse_local: bool,
    /// Networks reachable even so (`10.20.0.0/16` for an in-house GitLab).
    pub allowed: Vec<IpNet>,
    /// Who refuses, and the flag that allows a network, for messages.
    pub voice: (&'static str, &'static str),
}

/// What makes an address local, or `None` for a public one.
pub fn local_kind(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => local_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped().or_else(|| embedded_v4(v6)) {
            Some(v4) => local_v4(v4),
            None => local_v6(v6),
        },
    }
}

/// The IPv4 address an IPv6 one carries to the network: IPv4-compatible `::a.b.c.d`, NAT64
/// `64:ff9b::/96` (and the local-use `64:ff9b:1::/48`), 6to4 `2002::/16`. Each reaches that IPv4
/// address through a translator or relay, so it is as local as it is.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let last = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // `::` and `::1` are IPv6's own unspecified and loopback addresses.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => None,
        [0, 0, 0, 0, 0, 0, _, _] => Some(last),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(last),
        [0x64, 0xff9b, 1, ..] => Some(last),
        [0x2002, high, low, ..] => {
            Some(Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8))
        }
        _ => None,
    }
}

fn local_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    match () {
        _ if ip.is_loopback() => Some("loopback"),
        _ if ip.is_private() => Some("private"),
        _ if ip.is_link_local() => Some("link-local"),
        _ if ip.is_unspecified() || a == 0 => Some("unspecified"),
        _ if a == 100 && (64..128).contains(&b) => Some("shared (carrier-grade NAT)"),
        _ if ip.is_broadcast() || ip.is_multicast() => Some("broadcast or multicast"),
        _ => None,
    }
}

fn local_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    match () {
        _ if ip.is_loopback() => Some("loopback"),
        _ if ip.is_unspecified() => Some("unspecified"),
        _ if first & 0xfe00 == 0xfc00 => Some("private (unique local)"),
        _ if first & 0xffc0 == 0xfe80 => Some("link-local"),
        _ if ip.is_multicast() => Some("multicast"),
        _ => None,
    }
}

impl NetworkPolicy {
    /// The operator's: local networks refused, but those given.
    pub fn refusing_local(allowed: Vec<IpNet>) -> NetworkPolicy {
        NetworkPolicy::refusing_local_as("the operator", "--allow-network", allowed)
    }

    /// Local networks refused but those given, by `who`, whose `flag` allows a network.
    pub fn refusing_local_as(who: &'static str, flag: &'static str, allowed: Vec<IpNet>) -> NetworkPolicy {
        NetworkPolicy { refuse_local: true, allowed, voice: (who, flag) }
    }

    /// Why `ip` may not be reached, if it may not.
    pub fn refusal(&self, ip: IpAddr) -> Option<String> {
        if !self.refuse_local || self.allowed.iter().any(|net| net.contains(&ip)) {
            return None;
        }
        let (who, flag) = self.voice;
        local_kind(ip).map(|kind| {
            format!(
                "{ip} is a {kind} address, which {who} does not reach unless its network is allowed ({flag} {})",
                IpNet::from(ip).trunc()
            )
        })
    }

    /// Why the host of `url` may not be reached, when it is an address written in the URL (a
    /// name is checked when it resolves).
    pub fn refusal_of_url(&self, url: &reqwest::Url) -> Option<String> {
        let host = url.host_str()?;
        let ip: IpAddr = host.trim_start_matches('[').trim_end_matches(']').parse().ok()?;
        self.refusal(ip)
    }
}

/// A response's body, or `None` once it holds more than `limit` bytes (read no further):
/// whatever a server that users name sends, at most `limit` of it is held.
pub async fn read_within(
    mut response: reqwest::Response,
    limit: u64,
) -> Result<Option<Vec<u8>>, reqwest::Error> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() as u64 + chunk.len() as u64 > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The resolver's refusal, found again among the causes of the HTTP client's error.
#[derive(Debug)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// A resolver that keeps the addresses the policy permits: a name that resolves only to refused
/// ones fails, naming them. Checking resolved addresses (not the name) also holds when a name
/// is made to resolve elsewhere between two requests.
pub struct PolicyResolver(pub Arc<NetworkPolicy>);

impl reqwest::dns::Resolve for PolicyResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let policy = self.0.clone();
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let (kept, refused): (Vec<SocketAddr>, Vec<SocketAddr>) =
                found.into_iter().partition(|a| policy.refusal(a.ip()).is_none());
            match (kept.is_empty(), refused.first()) {
                (true, Some(first)) => {
                    let why = policy.refusal(first.ip()).unwrap_or_default();
                    Err(Box::new(Refusal(format!("{host} resolves to {why}"))) as _)
                }
                _ => Ok(Box::new(kept.into_iter()) as reqwest::dns::Addrs),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_addresses_that_carry_a_local_ipv4_one_are_local() {
        let kind = |text: &str| local_kind(text.parse().unwrap());
        assert_eq!(kind("64:ff9b::a9fe:a9fe"), Some("link-local"), "NAT64 of 169.254.169.254");
        assert_eq!(kind("64:ff9b::7f00:1"), Some("loopback"), "NAT64 of 127.0.0.1");
        assert_eq!(kind("64:ff9b:1::a00:1"), Some("private"), "local-use NAT64 of 10.0.0.1");
        assert_eq!(kind("::169.254.169.254"), Some("link-local"), "IPv4-compatible");
        assert_eq!(kind("2002:a9fe:a9fe::1"), Some("link-local"), "6to4 of 169.254.169.254");
        assert_eq!(kind("2002:c0a8:0101::"), Some("private"), "6to4 of 192.168.1.1");
        assert_eq!(kind("64:ff9b::808:808"), None, "NAT64 of a public address");
        assert_eq!(kind("2002:808:808::1"), None, "6to4 of a public address");
        assert_eq!(kind("::1"), Some("loopback"));
        assert_eq!(kind("::"), Some("unspecified"));
        assert_eq!(kind("2606:4700::1111"), None);
    }

    #[test]
    fn local_addresses_are_refused_unless_their_network_is_allowed() {
        let policy = NetworkPolicy::refusing_local(vec!["10.20.0.0/16".parse().unwrap()]);
        for (ip, kind) in [
            ("127.0.0.1", "loopback"),
            ("10.0.0.5", "private"),
            ("192.168.1.1", "private"),
            ("169.254.169.254", "link-local"),
            ("100.64.0.1", "shared"),
            ("0.0.0.0", "unspecified"),
            ("::1", "loopback"),
            ("fd00::1", "private"),
            ("fe80::1", "link-local"),
            ("::ffff:127.0.0.1", "loopback"),
        ] {
            let why = policy.refusal(ip.parse().unwrap()).unwrap_or_else(|| panic!("{ip} refused"));
            assert!(why.contains(kind), "{ip}: {why}");
        }
        assert_eq!(policy.refusal("10.20.3.4".parse().unwrap()), None, "an allowed network");
        assert_eq!(policy.refusal("140.82.112.3".parse().unwrap()), None, "a public address");
        assert_eq!(policy.refusal("2606:4700::1".parse().unwrap()), None);
        let why = policy.refusal("169.254.169.254".parse().unwrap()).unwrap();
        assert!(why.contains("--allow-network 169.254.169.254/32"), "{why}");
        assert_eq!(NetworkPolicy::default().refusal("127.0.0.1".parse().unwrap()), None, "the CLI's");
        let url = reqwest::Url::parse("http://[::1]:8080/x").unwrap();
        assert!(policy.refusal_of_url(&url).is_some());
        assert!(
            policy.refusal_of_url(&reqwest::Url::parse("https://gitlab.example.com/x").unwrap()).is_none()
        );
    }
}
