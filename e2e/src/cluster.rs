//! [`Cluster`]: where a scenario runs. A fresh in-memory API server, unless
//! `BUTLER_E2E_KUBECONFIG` names a kubeconfig: then the real cluster it points at. The ambient
//! `KUBECONFIG` is never used, so nobody runs the scenarios against a production cluster by
//! accident.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config};

use butler_apiserver::{MemoryApiServer, ServerOptions, install_crypto_provider};

/// The variable that names a real cluster's kubeconfig.
pub const KUBECONFIG_VARIABLE: &str = "BUTLER_E2E_KUBECONFIG";

/// The field manager the runner's own writes use.
pub const FIELD_MANAGER: &str = "butler-e2e";

/// The label of the stand-in CRDs a scenario installs and takes away.
pub const STAND_IN_LABEL: &str = "butler-e2e.butlerlabs.dev/stand-in";

/// A cluster for one scenario: its client, and the namespaces and CRDs the scenario made, which
/// are deleted when the `Cluster` is dropped, passed or failed (a dropped in-memory server takes
/// everything along). Scenarios run in parallel on one real cluster: CRDs that they share are
/// installed by whoever comes first and never deleted; only a scenario's own go with it.
pub struct Cluster {
    client: Client,
    /// How to reach a real cluster again: the clean-up runs on a runtime of its own, and a
    /// client's connection is driven by the runtime that made it.
    config: Option<Config>,
    server: Option<MemoryApiServer>,
    run: String,
    namespaces: Mutex<Vec<String>>,
    crds: Mutex<Vec<String>>,
    /// Label selectors of cluster-scoped objects that the scenario's controllers made.
    cluster_objects: Mutex<Vec<String>>,
    /// Cluster-wide locks this scenario holds.
    locks: Mutex<Vec<String>>,
    /// The kubeconfig file of a real cluster, for clients run as processes.
    kubeconfig: Option<std::path::PathBuf>,
}

fn run_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or_default();
    let mixed = (nanos ^ (u64::from(std::process::id()) << 32))
        .wrapping_add(COUNTER.fetch_add(1, Ordering::Relaxed) * 0x9E37_79B9);
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..6).map(|i| ALPHABET[((mixed >> (i * 5)) % ALPHABET.len() as u64) as usize] as char).collect()
}

impl Cluster {
    /// A fresh in-memory server, or the cluster of `BUTLER_E2E_KUBECONFIG`.
    pub async fn connect() -> Cluster {
        install_crypto_provider();
        match std::env::var_os(KUBECONFIG_VARIABLE) {
            Some(path) => Cluster::connect_to(std::path::Path::new(&path)).await,
            None => {
                // Beside kube-root-ca.crt, a neighbour publishes its CA in every namespace, as
                // OpenShift or a service mesh does on the clusters users run.
                let options = ServerOptions {
                    neighbour_ca: Some("openshift-service-ca.crt".into()),
                    ..ServerOptions::named("butler-e2e")
                };
                let server = MemoryApiServer::start_with(options).await;
                Cluster::new(server.client(), None, Some(server))
            }
        }
    }

    /// The cluster of a kubeconfig file, as a real one.
    pub async fn connect_to(path: &std::path::Path) -> Cluster {
        install_crypto_provider();
        let kubeconfig = Kubeconfig::read_from(path)
            .unwrap_or_else(|e| panic!("{KUBECONFIG_VARIABLE}={}: cannot read it: {e}", path.display()));
        let config =
            Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await.unwrap_or_else(
                |e| panic!("{KUBECONFIG_VARIABLE}={}: not a usable kubeconfig: {e}", path.display()),
            );
        let client = Client::try_from(config.clone()).expect("a client from the kubeconfig");
        let mut cluster = Cluster::new(client, Some(config), None);
        cluster.kubeconfig = Some(path.to_path_buf());
        cluster
    }

    fn new(client: Client, config: Option<Config>, server: Option<MemoryApiServer>) -> Cluster {
        Cluster {
            client,
            config,
            server,
            run: run_id(),
            namespaces: Mutex::new(Vec::new()),
            crds: Mutex::new(Vec::new()),
            cluster_objects: Mutex::new(Vec::new()),
            locks: Mutex::new(Vec::new()),
            kubeconfig: None,
        }
    }

    /// A kubeconfig file for this cluster, for clients run as separate processes (kubectl,
    /// helm): the in-memory server's, or the real cluster's.
    pub fn kubeconfig(&self) -> std::path::PathBuf {
        match (&self.server, &self.kubeconfig) {
            (Some(server), _) => server.kubeconfig().to_path_buf(),
            (None, Some(path)) => path.clone(),
            (None, None) => unreachable!("a cluster is in memory or read from a kubeconfig"),
        }
    }

    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The in-memory server, when the scenario runs on one.
    pub fn server(&self) -> Option<&MemoryApiServer> {
        self.server.as_ref()
    }

    /// Whether this is the in-memory server (some checks only hold there, such as an
    /// expired resourceVersion on demand).
    pub fn is_in_memory(&self) -> bool {
        self.server.is_some()
    }

    /// The configuration of a client authenticated as the ServiceAccount `namespace/name`
    /// (User-Agent `agent`), allowed only what its Roles allow: on the in-memory server a token
    /// it issues, on a real cluster one from the TokenRequest API (an hour long). The client is
    /// made by the caller, on the runtime that will drive it.
    pub async fn service_account_config(&self, agent: &str, namespace: &str, name: &str) -> Config {
        if let Some(server) = &self.server {
            return server.config_as_service_account(agent, namespace, name);
        }
        use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
        use k8s_openapi::api::core::v1::ServiceAccount;
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() },
            ..Default::default()
        };
        let issued = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .unwrap_or_else(|e| panic!("a token for the ServiceAccount {namespace}/{name}: {e}"));
        let token = issued.status.map(|s| s.token).unwrap_or_default();
        let mut config = self.config.clone().expect("a real cluster has its configuration");
        config.auth_info = kube::config::AuthInfo { token: Some(token.into()), ..Default::default() };
        config.headers.push((http::header::USER_AGENT, agent.parse().expect("an agent is a header value")));
        config
    }

    /// A client that acts as the user `user` in `groups` (and `system:authenticated`), allowed
    /// only what RBAC grants them: the administrator's client impersonating them, as
    /// `kubectl --as --as-group` does.
    pub fn client_as_user(&self, user: &str, groups: &[&str]) -> Client {
        let mut config = match (&self.server, &self.config) {
            (Some(server), _) => Config::new(server.url().parse().expect("a URL of 127.0.0.1 parses")),
            (None, Some(config)) => config.clone(),
            (None, None) => unreachable!("a cluster is in memory or has a configuration"),
        };
        config.auth_info.impersonate = Some(user.into());
        config.auth_info.impersonate_groups = Some(groups.iter().map(|g| g.to_string()).collect());
        Client::try_from(config).expect("a client for the impersonated user")
    }

    /// A name of this scenario's own: `{base}-{run}`.
    pub fn unique(&self, base: &str) -> String {
        format!("{base}-{}", self.run)
    }

    /// A fresh namespace of this scenario, deleted afterwards.
    pub async fn namespace(&self, base: &str) -> String {
        let name = self.unique(base);
        let api: Api<Namespace> = Api::all(self.client.clone());
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta { name: Some(name.clone()), ..Default::default() },
            ..Default::default()
        };
        api.create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("create namespace {name}: {e}"));
        self.namespaces.lock().expect("not poisoned").push(name.clone());
        name
    }

    /// Waits for this scenario's turn at the cluster-wide lock `name` and holds it until the
    /// scenario ends: scenarios that make cluster-wide objects of one name (a provider's
    /// ClusterRoles and CRDs) take turns on a real cluster. An in-memory server is the
    /// scenario's own, so there is nothing to wait for.
    pub async fn exclusive(&self, name: &str) {
        if self.is_in_memory() {
            return;
        }
        crate::lock::acquire(&self.client, name, &self.run).await;
        self.locks.lock().expect("not poisoned").push(name.to_string());
    }

    /// Cluster-scoped objects matching `selector` (`key=value`) are the scenario's: a
    /// controller under test made them (a provider's ClusterRoles and CRDs, say), and they go
    /// with the scenario's namespaces, finalizers and all (their controller stops with the
    /// scenario).
    /// Deletes the namespace `name`, which a controller of the scenario makes, with the
    /// scenario's own (its objects' finalizers released), passed or failed: a controller that
    /// stopped before deleting it would leave it behind.
    pub fn clean_up_namespace(&self, name: &str) {
        let mut namespaces = self.namespaces.lock().expect("not poisoned");
        if !namespaces.iter().any(|n| n == name) {
            namespaces.push(name.to_string());
        }
    }

    pub fn remove_cluster_objects_labelled(&self, selector: &str) {
        self.cluster_objects.lock().expect("not poisoned").push(selector.to_string());
    }

    /// Installs a CRD that scenarios share (server-side apply) and waits until it is
    /// Established. It stays: another scenario on the same cluster may be using it.
    pub async fn install_crd(&self, crd: &CustomResourceDefinition) {
        let name = crd.metadata.name.clone().expect("a CRD has a name");
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("install CRD {name}: {e}"));
        self.established(&name).await;
    }

    /// Installs a CRD of this scenario's own (a group named after its run) and waits until it
    /// is Established; deleted with the scenario.
    pub async fn install_own_crd(&self, crd: &CustomResourceDefinition) {
        let name = crd.metadata.name.clone().expect("a CRD has a name");
        assert!(
            name.contains(&self.run),
            "{name}: a scenario's own CRD has its run ({}) in its group",
            self.run
        );
        self.crds.lock().expect("not poisoned").push(name.clone());
        self.install_crd(crd).await;
    }

    /// Installs a stand-in for a CRD that a real cluster may serve already (cert-manager's,
    /// say), for this scenario alone: one the cluster has that is no stand-in is the real thing
    /// and stays as it is; otherwise the stand-in (labelled [`STAND_IN_LABEL`]) is made, after
    /// an earlier stand-in still terminating is gone, and deleted with the scenario. Scenarios
    /// that use stand-ins take turns ([`Cluster::exclusive`]) on a real cluster, or one would
    /// delete what another uses.
    pub async fn install_stand_in_crd(&self, crd: &CustomResourceDefinition) {
        let name = crd.metadata.name.clone().expect("a CRD has a name");
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let stand_in = |c: &CustomResourceDefinition| {
            c.metadata.labels.as_ref().is_some_and(|l| l.contains_key(STAND_IN_LABEL))
        };
        for _ in 0..600 {
            match api.get_opt(&name).await.unwrap_or_else(|e| panic!("reading CRD {name}: {e}")) {
                Some(existing) if !stand_in(&existing) => return,
                Some(existing) if existing.metadata.deletion_timestamp.is_some() => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                _ => break,
            }
        }
        let mut crd = crd.clone();
        crd.metadata.labels.get_or_insert_with(Default::default).insert(STAND_IN_LABEL.into(), "true".into());
        self.crds.lock().expect("not poisoned").push(name);
        self.install_crd(&crd).await;
    }

    async fn established(&self, name: &str) {
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(api, name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("CRD {name} was not Established within 30s"))
        .unwrap_or_else(|e| panic!("waiting for CRD {name}: {e}"));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // An in-memory server takes everything along.
        let Some(config) = self.config.clone() else { return };
        let namespaces = std::mem::take(&mut *self.namespaces.lock().expect("not poisoned"));
        let crds = std::mem::take(&mut *self.crds.lock().expect("not poisoned"));
        let selectors = std::mem::take(&mut *self.cluster_objects.lock().expect("not poisoned"));
        let locks = std::mem::take(&mut *self.locks.lock().expect("not poisoned"));
        let run = self.run.clone();
        if namespaces.is_empty() && crds.is_empty() && selectors.is_empty() && locks.is_empty() {
            return;
        }
        // Drop cannot await, and may run inside the scenario's runtime, which this thread
        // blocks: the clean-up runs on a runtime of its own with a client of its own (the
        // scenario's client is driven by the blocked runtime and would never answer).
        let cleanup = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let Ok(client) = Client::try_from(config) else { return };
                let left = clean_up(&client, &namespaces, &crds, &selectors).await;
                if !left.is_empty() {
                    eprintln!(
                        "the scenario's clean-up gave up after {CLEAN_UP_PATIENCE:?}; left: {}",
                        left.join(", ")
                    );
                }
                // The turn ends once what the scenario made is on its way out.
                for lock in &locks {
                    crate::lock::release(&client, lock, &run).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}

/// How long a clean-up keeps at it before it says what it left.
const CLEAN_UP_PATIENCE: Duration = Duration::from_secs(60);

/// Deletes the scenario's namespaces, CRDs and labelled cluster-scoped objects, releasing the
/// finalizers that hold them, and keeps at it until all of it is gone: a controller of the
/// scenario may still run for a moment (it re-adds its finalizer until the object is marked
/// for deletion), and the namespace controller deletes a namespace's objects a moment after
/// the namespace. Returns what is still there after [`CLEAN_UP_PATIENCE`].
async fn clean_up(
    client: &Client,
    namespaces: &[String],
    crds: &[String],
    selectors: &[String],
) -> Vec<String> {
    let ns_api: Api<Namespace> = Api::all(client.clone());
    let crd_api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in namespaces {
        let _ = ns_api.delete(name, &DeleteParams::background()).await;
    }
    let deadline = tokio::time::Instant::now() + CLEAN_UP_PATIENCE;
    let resources = resources(client).await;
    let mut pause = Duration::from_millis(100);
    loop {
        release_finalizers(client, &resources, namespaces).await;
        let mut left = remove_labelled(client, &resources, selectors).await;
        for name in crds {
            match crd_api.get_opt(name).await {
                Ok(None) => {}
                _ => {
                    let _ = crd_api.delete(name, &DeleteParams::background()).await;
                    left.push(format!("CustomResourceDefinition {name}"));
                }
            }
        }
        for name in namespaces {
            if !matches!(ns_api.get_opt(name).await, Ok(None)) {
                left.push(format!("Namespace {name}"));
            }
        }
        if left.is_empty() || tokio::time::Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_secs(2));
    }
}

/// Every kind the cluster serves, at its preferred version. A group that fails to answer (an
/// aggregated API that is down, a CRD another scenario is deleting) is skipped, not the
/// whole clean-up.
async fn resources(client: &Client) -> Vec<(kube::api::ApiResource, kube::discovery::ApiCapabilities)> {
    use kube::discovery::{self, ApiGroup};
    let mut found = Vec::new();
    if let Ok(core) = discovery::group(client, ApiGroup::CORE_GROUP).await {
        found.extend(core.recommended_resources());
    }
    let Ok(groups) = client.list_api_groups().await else { return found };
    for group in groups.groups {
        let version = group.preferred_version.or_else(|| group.versions.first().cloned());
        let Some(version) = version else { continue };
        let Ok(gv) = version.group_version.parse() else { continue };
        if let Ok(served) = discovery::pinned_group(client, &gv).await {
            found.extend(served.recommended_resources());
        }
    }
    found
}

/// Deletes the cluster-scoped objects that match any of the selectors; returns those that
/// are still there.
async fn remove_labelled(
    client: &Client,
    resources: &[(kube::api::ApiResource, kube::discovery::ApiCapabilities)],
    selectors: &[String],
) -> Vec<String> {
    use kube::discovery::{Scope, verbs};
    let mut left = Vec::new();
    if selectors.is_empty() {
        return left;
    }
    for (resource, capabilities) in resources {
        if capabilities.scope != Scope::Cluster || !capabilities.supports_operation(verbs::DELETE) {
            continue;
        }
        let api: Api<kube::api::DynamicObject> = Api::all_with(client.clone(), resource);
        for selector in selectors {
            let params = kube::api::ListParams::default().labels(selector);
            let Ok(list) = api.list_metadata(&params).await else { continue };
            for object in &list.items {
                let name = object.metadata.name.clone().unwrap_or_default();
                left.push(format!("{} {name}", resource.kind));
                // Their controller stopped with the scenario: a finalizer would keep them.
                if object.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()) {
                    let patch = serde_json::json!({"metadata": {"finalizers": null}});
                    let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await;
                }
                if object.metadata.deletion_timestamp.is_none() {
                    let _ = api.delete(&name, &DeleteParams::background()).await;
                }
            }
        }
    }
    left
}

/// Removes the finalizers of every object in the namespaces (which are the scenario's own).
async fn release_finalizers(
    client: &Client,
    resources: &[(kube::api::ApiResource, kube::discovery::ApiCapabilities)],
    namespaces: &[String],
) {
    use kube::discovery::{Scope, verbs};
    for (resource, capabilities) in resources {
        if capabilities.scope != Scope::Namespaced || !capabilities.supports_operation(verbs::PATCH) {
            continue;
        }
        for ns in namespaces {
            let api: Api<kube::api::DynamicObject> = Api::namespaced_with(client.clone(), ns, resource);
            let Ok(list) = api.list_metadata(&Default::default()).await else { continue };
            for object in
                list.items.iter().filter(|o| o.metadata.finalizers.as_ref().is_some_and(|f| !f.is_empty()))
            {
                let name = object.metadata.name.clone().unwrap_or_default();
                let patch = serde_json::json!({"metadata": {"finalizers": null}});
                let _ = api.patch(&name, &PatchParams::default(), &Patch::Merge(patch)).await;
            }
        }
    }
}
