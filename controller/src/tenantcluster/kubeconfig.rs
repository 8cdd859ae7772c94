//! What a tenant kubeconfig may hold. A team writes its cluster's kubeconfig Secret, and the
//! controller connects with it: every feature that runs a command or reads a file of the
//! controller's (`exec`, `auth-provider`, `tokenFile`, `client-certificate`, `client-key`,
//! `certificate-authority`) would let the team have the controller run its program or send the
//! controller's own token to a server of the team's, and `proxy-url` would route the
//! controller through a host of the team's. Only inline credentials are accepted; anything
//! else is refused by its path, before the kubeconfig is loaded.

use serde_json::Value;

/// The keys each part may hold; any other key is refused.
const TOP: &[&str] =
    &["apiVersion", "kind", "clusters", "users", "contexts", "current-context", "preferences"];
const CLUSTER: &[&str] = &[
    "server",
    "certificate-authority-data",
    "insecure-skip-tls-verify",
    "tls-server-name",
    "disable-compression",
];
const USER: &[&str] = &["token", "client-certificate-data", "client-key-data", "username", "password"];
const CONTEXT: &[&str] = &["cluster", "user", "namespace"];

const INLINE: &str = "a tenant kubeconfig carries its credentials inline: token (or username and password), client-certificate-data and client-key-data, certificate-authority-data";

/// Checks a tenant kubeconfig (already parsed, as JSON) and returns the first path that is not
/// accepted, with what to write instead.
pub fn check(kubeconfig: &Value) -> Result<(), String> {
    let Some(top) = kubeconfig.as_object() else { return Err("it is not a kubeconfig (a mapping)".into()) };
    refuse_other(top.keys(), TOP, "")?;
    for (list, inner, allowed) in
        [("clusters", "cluster", CLUSTER), ("users", "user", USER), ("contexts", "context", CONTEXT)]
    {
        for (i, entry) in top.get(list).and_then(Value::as_array).into_iter().flatten().enumerate() {
            let Some(entry) = entry.as_object() else { return Err(format!("{list}[{i}] is not a mapping")) };
            refuse_other(entry.keys(), &["name", inner], &format!("{list}[{i}]."))?;
            match entry.get(inner) {
                Some(Value::Object(fields)) => {
                    refuse_other(fields.keys(), allowed, &format!("{list}[{i}].{inner}."))?;
                    if let Some(server) = fields.get("server").and_then(Value::as_str) {
                        server_allowed(server).map_err(|why| format!("{list}[{i}].{inner}.server: {why}"))?;
                    }
                }
                None | Some(Value::Null) => {}
                Some(_) => return Err(format!("{list}[{i}].{inner} is not a mapping")),
            }
        }
    }
    Ok(())
}

/// Host names of the clouds' instance metadata services, which answer any process of the node
/// (the controller's credentials on some clouds) and are never a tenant's API server.
const METADATA_HOSTS: &[&str] = &[
    "metadata",
    "metadata.google.internal",
    "metadata.azure.internal",
    "instance-data",
    "instance-data.ec2.internal",
];

/// A tenant's API server may not be a link-local address (169.254.0.0/16, fe80::/10, where the
/// clouds' metadata services answer: 169.254.169.254, fd00:ec2::254) or a metadata host name.
fn server_allowed(server: &str) -> Result<(), String> {
    let host = server
        .split_once("://")
        .map_or(server, |(_, rest)| rest)
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    let host = host.rsplit_once('@').map_or(host, |(_, h)| h);
    let host = match host.strip_prefix('[') {
        // A zone (`fe80::1%25eth0`) is no part of the address.
        Some(v6) => v6.split([']', '%']).next().unwrap_or_default(),
        None => host
            .rsplit_once(':')
            .filter(|(h, p)| !h.contains(':') && p.parse::<u16>().is_ok())
            .map_or(host, |(h, _)| h),
    };
    let refused = match host.parse::<std::net::IpAddr>() {
        Ok(ip) => link_local(ip),
        Err(_) => METADATA_HOSTS.contains(&host.trim_end_matches('.').to_ascii_lowercase().as_str()),
    };
    match refused {
        true => Err(format!("{host} is a link-local or metadata address, never a tenant's API server")),
        false => Ok(()),
    }
}

/// Whether `ip` is link-local (169.254.0.0/16, fe80::/10, or such an IPv4 address mapped) or
/// a cloud's metadata address (fd00:ec2::254): never a tenant's API server, however its name
/// resolves.
pub fn link_local(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => v4.is_link_local(),
        std::net::IpAddr::V6(v6) => {
            (v6.segments()[0] & 0xffc0) == 0xfe80
                || v6 == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_link_local())
        }
    }
}

fn refuse_other<'a>(
    keys: impl Iterator<Item = &'a String>,
    allowed: &[&str],
    at: &str,
) -> Result<(), String> {
    match keys.into_iter().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(key) => Err(format!("{at}{key} is not accepted: {INLINE}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_local_and_metadata_servers_are_refused() {
        for server in [
            "https://169.254.169.254",
            "https://169.254.169.254:443/api",
            "http://[fd00:ec2::254]",
            "https://[fe80::1%25eth0]:6443",
            "https://metadata.google.internal.",
            "https://user@Metadata.Azure.Internal:443",
            "https://[::ffff:169.254.1.1]",
        ] {
            assert!(server_allowed(server).is_err(), "{server} passed");
        }
        for server in [
            "https://10.0.0.5:6443",
            "https://127.0.0.1:6443",
            "https://api.tenant.example",
            "https://[2001:db8::1]:6443",
        ] {
            assert!(server_allowed(server).is_ok(), "{server} was refused");
        }
        let config: Value = serde_json::json!({"clusters": [{"name": "c", "cluster": {"server": "https://169.254.169.254"}}]});
        assert_eq!(
            check(&config).unwrap_err(),
            "clusters[0].cluster.server: 169.254.169.254 is a link-local or metadata address, never a tenant's API server"
        );
    }

    fn kubeconfig(cluster: &str, user: &str) -> Value {
        let text = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u, namespace: default}}\ncurrent-context: x\nusers:\n- name: u\n  user:\n{user}\n"
        );
        serde_saphyr::from_str(&text).unwrap()
    }

    #[test]
    fn inline_credentials_are_accepted() {
        for user in [
            "    token: abc",
            "    client-certificate-data: Zm9v\n    client-key-data: YmFy",
            "    username: admin\n    password: secret",
        ] {
            let config = kubeconfig(
                "    server: https://10.0.0.1:6443\n    certificate-authority-data: Zm9v\n    tls-server-name: api",
                user,
            );
            assert_eq!(check(&config), Ok(()), "{user}");
        }
    }

    #[test]
    fn what_runs_a_command_reads_a_file_or_picks_a_proxy_is_refused_by_its_path() {
        let server = "    server: https://10.0.0.1:6443";
        for (cluster, user, path) in [
            (
                server,
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token",
                "users[0].user.tokenFile",
            ),
            (
                server,
                "    exec: {command: sh, apiVersion: client.authentication.k8s.io/v1}",
                "users[0].user.exec",
            ),
            (server, "    auth-provider: {name: gcp}", "users[0].user.auth-provider"),
            (server, "    client-certificate: /etc/ssl/c.pem", "users[0].user.client-certificate"),
            (server, "    client-key: /etc/ssl/k.pem", "users[0].user.client-key"),
            (server, "    as: system:admin", "users[0].user.as"),
            (
                "    server: https://x\n    certificate-authority: /etc/ca.pem",
                "    token: t",
                "clusters[0].cluster.certificate-authority",
            ),
            (
                "    server: https://x\n    proxy-url: http://evil:3128",
                "    token: t",
                "clusters[0].cluster.proxy-url",
            ),
        ] {
            let refused = check(&kubeconfig(cluster, user)).unwrap_err();
            assert!(refused.starts_with(&format!("{path} is not accepted: ")), "{refused}");
            assert!(refused.contains("inline"), "{refused}");
        }
    }

    #[test]
    fn extensions_and_unknown_keys_are_refused_too() {
        let mut config = kubeconfig("    server: https://x", "    token: t");
        config["users"][0]["user"]["token-file"] = Value::from("/x");
        assert!(check(&config).unwrap_err().starts_with("users[0].user.token-file is not accepted"));
        let mut config = kubeconfig("    server: https://x", "    token: t");
        config["extensions"] = Value::from(Vec::<Value>::new());
        assert!(check(&config).unwrap_err().starts_with("extensions is not accepted"));
        assert!(check(&Value::from("text")).is_err());
    }
}
