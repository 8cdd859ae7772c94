//! The tenant cluster's side: its API reached through the Secret `{name}-kubeconfig` (key
//! `value`, the Cluster API convention), its LoadBalancer Services, and MetalLB's
//! `metallb-system/default-pool`, projected from the management cluster's allocations by
//! server-side apply with the field manager `butler-controller/ipam` and force (an edit on the
//! tenant is reverted; other pools are never touched).

use std::collections::HashMap;
use std::sync::Mutex;

use butler_core::api::TenantCluster;
use butler_core::api::labels::FIELD_MANAGER_IPAM;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Resource, ResourceExt};
use serde_json::json;

use super::answers::{self, MetalLbPool};
use super::elastic::Service;

pub const METALLB_NAMESPACE: &str = "metallb-system";
pub const METALLB_POOL: &str = "default-pool";

/// How long a tenant's API server may take to accept a connection, and to answer.
const TENANT_CONNECT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
const TENANT_READ_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest one call to a tenant may take as a whole: a server that sends a byte now and
/// then never meets a read timeout, and would hold a reconcile (and a turn) for ever.
pub const CALL_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The most of one answer of a tenant that is read (a list of its Services, its MetalLB pool):
/// a tenant sending more, however fast, is one that does not answer.
pub const MAX_ANSWER: usize = 8 * 1024 * 1024;

/// A call to a tenant, given up after `deadline` as a whole.
pub async fn within<T>(
    deadline: std::time::Duration,
    call: impl std::future::Future<Output = Result<T, kube::Error>>,
) -> Result<T, kube::Error> {
    match tokio::time::timeout(deadline, call).await {
        Ok(answer) => answer,
        Err(_) => Err(kube::Error::Service(Box::new(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            late(deadline),
        )))),
    }
}

/// What a tenant call given up on after `deadline` says.
pub fn late(deadline: std::time::Duration) -> String {
    format!("no whole answer within {}s", deadline.as_secs_f64())
}

/// Clients of tenant clusters, by TenantCluster UID, made from the Secret's resourceVersion
/// they name; and the tenants that did not answer.
#[derive(Default)]
pub struct TenantClients(Mutex<HashMap<String, Reached>>, Mutex<HashMap<String, Silence>>);

/// A tenant as its kubeconfig Secret names it.
#[derive(Clone)]
pub struct Reached {
    pub client: Client,
    /// The Secret's resourceVersion the client was made from.
    pub version: String,
    /// Which API server it is (see [`server_id`]).
    pub server: String,
}

/// The digest that names a tenant API server in a TenantCluster's status (`tenantServers`):
/// its URL and the CA it is trusted by, so that a Secret pointed elsewhere, or at a server
/// that only takes the name, is not the same tenant.
pub fn server_id(url: &str, certificates: &[Vec<u8>]) -> String {
    use sha2::Digest;
    let mut hash = sha2::Sha256::new();
    hash.update(url.as_bytes());
    for certificate in certificates {
        hash.update([0u8]);
        hash.update(certificate);
    }
    let digest = hash.finalize();
    format!("sha256:{}", digest.iter().take(16).map(|b| format!("{b:02x}")).collect::<String>())
}

/// A tenant that did not answer: how often in a row, when it is tried again, and what its
/// cluster reports until then.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Silence {
    pub failures: u32,
    pub until: jiff::Timestamp,
    pub message: String,
}

/// How long after `failures` failures in a row a tenant is left alone: 5 s, doubling to 10
/// minutes.
pub fn backoff(failures: u32) -> std::time::Duration {
    std::time::Duration::from_secs(5u64.saturating_mul(1 << failures.min(7)).min(600))
}

/// Whether a tenant is left alone at `now`, and then what its cluster reports and for how long.
/// Until its next try a reconcile does not call it: a tenant that hangs holds one reconcile
/// (for the call time limits) per backoff, never each reconcile of its cluster, so a few such
/// tenants cannot take every reconcile worker from the other teams' clusters.
pub fn held(silence: Option<&Silence>, now: jiff::Timestamp) -> Option<(String, std::time::Duration)> {
    let silence = silence?;
    let left = silence.until.duration_since(now).unsigned_abs();
    (silence.until > now).then(|| (silence.message.clone(), left))
}

impl TenantClients {
    /// The tenant of a cluster as its kubeconfig Secret names it; `Ok(None)` while the Secret
    /// does not exist.
    pub async fn get(
        &self,
        management: &Client,
        reader: &crate::secrets::SecretReader,
        cluster: &TenantCluster,
    ) -> Result<Option<Reached>, String> {
        let namespace = cluster.namespace().unwrap_or_default();
        let name = crate::secrets::kubeconfig_name(&cluster.name_any());
        let secrets: Api<Secret> = Api::namespaced(management.clone(), &namespace);
        let what = format!("the Secret {namespace}/{name}");
        let Some(secret) = secrets
            .get_opt(&name)
            .await
            .map_err(|e| format!("cannot read {what}: {}", reader.cannot_read(&namespace, &e)))?
        else {
            return Ok(None);
        };
        if !crate::secrets::owns_kubeconfig(&secret, &cluster.name_any()) {
            return Err(format!(
                "{what} is not the kubeconfig Cluster API made for this cluster (type {}, label {}={}): a TenantCluster reaches only its own cluster",
                crate::secrets::CLUSTER_SECRET_TYPE,
                crate::secrets::CLUSTER_NAME_LABEL,
                cluster.name_any()
            ));
        }
        let uid = cluster.meta().uid.clone().unwrap_or_default();
        let version = secret.metadata.resource_version.clone().unwrap_or_default();
        if let Some(reached) = self.0.lock().expect("not poisoned").get(&uid)
            && reached.version == version
        {
            return Ok(Some(reached.clone()));
        }
        let value =
            secret.data.as_ref().and_then(|d| d.get("value")).ok_or(format!("{what} has no key value"))?;
        let text =
            String::from_utf8(value.0.clone()).map_err(|_| format!("{what}: the key value is not text"))?;
        let raw: serde_json::Value = serde_saphyr::from_str(&text)
            .map_err(|_| format!("{what}: the key value is not a kubeconfig (not YAML)"))?;
        super::kubeconfig::check(&raw).map_err(|why| format!("{what}: {why}"))?;
        let kubeconfig = Kubeconfig::from_yaml(&text)
            .map_err(|e| format!("{what}: the key value is not a kubeconfig: {e}"))?;
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| format!("{what}: {e}"))?;
        let server =
            server_id(&config.cluster_url.to_string(), config.root_cert.as_deref().unwrap_or_default());
        let attempt = self.1.lock().expect("not poisoned").get(&uid).map_or(0, |s| s.failures);
        pin(&mut config, attempt).await.map_err(|e| format!("{what}: clusters[0].cluster.server: {e}"))?;
        // A tenant that never answers must not hold a reconcile.
        config.connect_timeout = Some(TENANT_CONNECT_TIMEOUT);
        config.read_timeout = Some(TENANT_READ_TIMEOUT);
        config.write_timeout = Some(TENANT_READ_TIMEOUT);
        // However much a tenant sends, at most MAX_ANSWER of it is read.
        let limit = tower::util::MapResponseLayer::new(|answer: http::Response<_>| {
            answer.map(|body| http_body_util::Limited::new(body, MAX_ANSWER))
        });
        let client = kube::client::ClientBuilder::try_from(config)
            .map_err(|e| format!("{what}: {e}"))?
            .with_layer(&limit)
            .build();
        let reached = Reached { client, version, server };
        self.0.lock().expect("not poisoned").insert(uid, reached.clone());
        Ok(Some(reached))
    }

    /// Forgets the client of a cluster that is gone (by UID), and its tenant's silence.
    pub fn forget(&self, uid: &str) {
        self.0.lock().expect("not poisoned").remove(uid);
        self.1.lock().expect("not poisoned").remove(uid);
    }

    /// Whether the cluster of UID `uid` has a client or a silence kept.
    pub fn keeps(&self, uid: &str) -> bool {
        self.0.lock().expect("not poisoned").contains_key(uid)
            || self.1.lock().expect("not poisoned").contains_key(uid)
    }

    /// Whether the cluster's tenant is left alone now (see [`held`]).
    pub fn silent(
        &self,
        cluster: &TenantCluster,
        now: jiff::Timestamp,
    ) -> Option<(String, std::time::Duration)> {
        let uid = cluster.meta().uid.clone().unwrap_or_default();
        held(self.1.lock().expect("not poisoned").get(&uid), now)
    }

    /// Records that the cluster's tenant did not answer; `message` says so, given the failures
    /// in a row and the wait before the next try. Returns the message and the wait.
    pub fn failed(
        &self,
        cluster: &TenantCluster,
        now: jiff::Timestamp,
        message: impl Fn(u32, std::time::Duration) -> String,
    ) -> (String, std::time::Duration) {
        let uid = cluster.meta().uid.clone().unwrap_or_default();
        // The next try resolves the server's name again (a load balancer's addresses change).
        self.0.lock().expect("not poisoned").remove(&uid);
        let mut silences = self.1.lock().expect("not poisoned");
        let failures = silences.get(&uid).map_or(0, |s| s.failures).saturating_add(1);
        let again = backoff(failures);
        let until = now.checked_add(again).unwrap_or(now);
        let text = message(failures, again);
        silences.insert(uid, Silence { failures, until, message: text.clone() });
        (text, again)
    }

    /// Records that the cluster's tenant answered.
    pub fn answered(&self, cluster: &TenantCluster) {
        self.1.lock().expect("not poisoned").remove(&cluster.meta().uid.clone().unwrap_or_default());
    }
}

/// A server named by a host name is resolved here, once, and reached at an address found,
/// its certificate still checked against the name (`tls_server_name`): a name that resolves
/// only to link-local or metadata addresses is refused, and none can be made to resolve there
/// between the check and the connection. Nothing is sent to the tenant here (its calls wait for
/// its turn): of the addresses allowed, IPv4 first, the one kept is the `attempt`-th (the
/// failures so far), so that a tenant that stops answering at one is tried at the next.
async fn pin(config: &mut kube::Config, attempt: u32) -> Result<(), String> {
    let url = config.cluster_url.clone();
    let Some(host) = url.host().map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string()) else {
        return Ok(());
    };
    if host.parse::<std::net::IpAddr>().is_ok() {
        // An address written out was checked as written.
        return Ok(());
    }
    let port = url.port_u16().unwrap_or(if url.scheme_str() == Some("http") { 80 } else { 443 });
    let found = tokio::time::timeout(TENANT_CONNECT_TIMEOUT, tokio::net::lookup_host((host.as_str(), port)))
        .await
        .map_err(|_| format!("{host} did not resolve within {TENANT_CONNECT_TIMEOUT:?}"))?
        .map_err(|e| format!("{host} does not resolve: {e}"))?;
    let addresses: Vec<std::net::IpAddr> = found.map(|a| a.ip()).collect();
    let allowed = allowed_addresses(&host, &addresses)?;
    let ip = allowed[attempt as usize % allowed.len()];
    let authority = std::net::SocketAddr::new(ip, port).to_string();
    let mut parts = url.into_parts();
    parts.authority = Some(authority.parse().map_err(|e| format!("{authority}: {e}"))?);
    config.cluster_url = http::Uri::from_parts(parts).map_err(|e| e.to_string())?;
    if config.tls_server_name.is_none() {
        config.tls_server_name = Some(host);
    }
    Ok(())
}

/// Of the addresses `host` resolved to, those that may be a tenant's API server; refused when
/// none is (all link-local or metadata addresses).
pub fn allowed_addresses(
    host: &str,
    addresses: &[std::net::IpAddr],
) -> Result<Vec<std::net::IpAddr>, String> {
    let allowed: Vec<std::net::IpAddr> =
        addresses.iter().copied().filter(|ip| !super::kubeconfig::link_local(*ip)).collect();
    let mut allowed = allowed;
    allowed.sort_by_key(|ip| ip.is_ipv6());
    match (allowed.is_empty(), addresses.first()) {
        (true, Some(first)) => Err(format!(
            "{host} resolves to {first}, a link-local or metadata address, never a tenant's API server"
        )),
        (true, None) => Err(format!("{host} resolves to no address")),
        (false, _) => Ok(allowed),
    }
}

/// The tenant's LoadBalancer Services that its MetalLB serves (those of no
/// `loadBalancerClass`: a Service of another class waits for another load balancer, and no
/// address of Butler's would ever reach it), read a page at a time into the fields used (see
/// [`answers`]), and the list's resourceVersion (where a watch of changes starts).
pub async fn services(tenant: &Client) -> Result<(Vec<Service>, String), kube::Error> {
    let mut services = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..answers::MAX_PAGES {
        let mut params = ListParams::default().limit(answers::PAGE as u32);
        if let Some(token) = &token {
            params = params.continue_token(token);
        }
        let request =
            kube::core::Request::new("/api/v1/services").list(&params).map_err(kube::Error::BuildRequest)?;
        // Decoded here, not by the client, which would log the whole answer when it does not read.
        let text = tenant.request_text(request).await?;
        let page: answers::ServicePage = serde_json::from_str(&text).map_err(kube::Error::SerdeError)?;
        services.extend(page.services);
        match page.next {
            Some(next) => token = Some(next),
            None => return Ok((services, page.version.unwrap_or_default())),
        }
    }
    Err(kube::Error::Service(Box::new(std::io::Error::other(format!(
        "it lists more than {} Services",
        answers::PAGE * answers::MAX_PAGES
    )))))
}

/// The tenant's `metallb-system/default-pool`, read and written by plain requests: what the
/// tenant answers is decoded here into the fields used (see [`answers`]), never by the client,
/// which logs an answer whole when it does not read.
pub struct Pool<'a>(pub &'a Client);

const POOLS: &str = "/apis/metallb.io/v1beta1/namespaces/metallb-system/ipaddresspools";

impl Pool<'_> {
    /// The pool, `None` when it (or its kind) is not there.
    pub async fn get(&self) -> Result<Option<MetalLbPool>, kube::Error> {
        let request = kube::core::Request::new(POOLS)
            .get(METALLB_POOL, &kube::api::GetParams::default())
            .map_err(kube::Error::BuildRequest)?;
        match self.0.request_text(request).await {
            Ok(text) => serde_json::from_str(&text).map(Some).map_err(kube::Error::SerdeError),
            Err(e) if butler_runtime::error::is_not_found(&e) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Patches the pool; its answer is not read.
    pub async fn patch(
        &self,
        params: &PatchParams,
        patch: &Patch<serde_json::Value>,
    ) -> Result<(), kube::Error> {
        let request = kube::core::Request::new(POOLS)
            .patch(METALLB_POOL, params, patch)
            .map_err(kube::Error::BuildRequest)?;
        self.0.request_text(request).await.map(|_| ())
    }

    /// Deletes the pool; its answer is not read.
    pub async fn delete(&self) -> Result<(), kube::Error> {
        let request = kube::core::Request::new(POOLS)
            .delete(METALLB_POOL, &kube::api::DeleteParams::default())
            .map_err(kube::Error::BuildRequest)?;
        self.0.request_text(request).await.map(|_| ())
    }
}

/// Whether MetalLB says `default-pool` has no free address (its status, MetalLB 0.14+).
pub async fn metallb_full(tenant: &Client) -> bool {
    let Ok(Some(pool)) = Pool(tenant).get().await else { return false };
    match (pool.status.available_ipv4, pool.status.available_ipv6) {
        (None, None) => false,
        (v4, v6) => v4.unwrap_or(0) + v6.unwrap_or(0) == 0,
    }
}

/// Applies `default-pool` with exactly `addresses`, unless it has them already (an apply that
/// changes nothing would still wake the watches of the tenant).
pub async fn sync_metallb(tenant: &Client, addresses: &[String]) -> Result<(), kube::Error> {
    if let Some(existing) = Pool(tenant).get().await?
        && existing.spec.addresses.0 == addresses
    {
        return Ok(());
    }
    let pool = json!({
        "apiVersion": "metallb.io/v1beta1",
        "kind": "IPAddressPool",
        "metadata": {"name": METALLB_POOL, "namespace": METALLB_NAMESPACE},
        "spec": {"addresses": addresses},
    });
    Pool(tenant).patch(&PatchParams::apply(FIELD_MANAGER_IPAM).force(), &Patch::Apply(pool)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_resolves_only_to_link_local_addresses_is_refused() {
        let ips = |list: &[&str]| list.iter().map(|a| a.parse().unwrap()).collect::<Vec<std::net::IpAddr>>();
        let refused = allowed_addresses("api.tenant.example", &ips(&["169.254.169.254"])).unwrap_err();
        assert_eq!(
            refused,
            "api.tenant.example resolves to 169.254.169.254, a link-local or metadata address, never a tenant's API server"
        );
        assert!(allowed_addresses("x", &ips(&["fe80::1", "fd00:ec2::254", "::ffff:169.254.1.1"])).is_err());
        // The allowed ones are kept, in the resolver's order.
        assert_eq!(
            allowed_addresses("x", &ips(&["169.254.0.1", "10.0.0.5", "::1"])).unwrap(),
            ips(&["10.0.0.5", "::1"])
        );
        assert!(allowed_addresses("x", &[]).is_err());
    }

    #[tokio::test]
    async fn a_name_is_reached_at_an_address_it_resolves_to_with_its_certificate_checked_against_it() {
        let mut config = kube::Config::new("https://localhost:6443/".parse().unwrap());
        pin(&mut config, 0).await.unwrap();
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert_eq!(config.tls_server_name.as_deref(), Some("localhost"));
        // An address as written is left so (checked as written).
        let mut written = kube::Config::new("https://10.0.0.5:6443/".parse().unwrap());
        pin(&mut written, 3).await.unwrap();
        assert_eq!(written.cluster_url.to_string(), "https://10.0.0.5:6443/");
        assert_eq!(written.tls_server_name, None);
    }

    #[test]
    fn a_silent_tenant_is_left_alone_until_its_next_try() {
        let now: jiff::Timestamp = "2026-11-25T10:00:00Z".parse().unwrap();
        assert_eq!(backoff(1), std::time::Duration::from_secs(10));
        assert_eq!(backoff(30), std::time::Duration::from_secs(600));
        let silence = Silence {
            failures: 1,
            until: now.checked_add(jiff::SignedDuration::from_secs(10)).unwrap(),
            message: "does not answer".into(),
        };
        assert_eq!(
            held(Some(&silence), now),
            Some(("does not answer".into(), std::time::Duration::from_secs(10)))
        );
        let later = now.checked_add(jiff::SignedDuration::from_secs(10)).unwrap();
        assert_eq!(held(Some(&silence), later), None, "tried again once the wait is over");
        assert_eq!(held(None, now), None);
    }
}
