//! `butler-apiserver`: the Kubernetes API server in memory: the cluster of the sandbox
//! (`make run`) and of the tests.
//!
//! [`MemoryApiServer::start`] serves the Kubernetes HTTP API on a free port of 127.0.0.1 (plain
//! HTTP) and hands out a [`kube::Client`] and a kubeconfig file for it. kube-runtime
//! controllers run against it unchanged. [`stand_ins`] plays the parts of a cluster that it does
//! not run (the Deployment controller's rollouts, cert-manager's CRDs).
//!
//! # Supported
//! - Discovery (legacy form): `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}`,
//!   `/apis/{group}/{version}`, for Namespace, ConfigMap, Secret, ResourceQuota (object counts
//!   held at creation), Service, ServiceAccount, Pod, Event
//!   (core and `events.k8s.io`), Deployment, DaemonSet, ReplicaSet, StatefulSet, Job (stored,
//!   never run), Role, RoleBinding, ClusterRole,
//!   ClusterRoleBinding, Validating/MutatingWebhookConfiguration, Lease and
//!   CustomResourceDefinition, and every kind a CRD registers (all served versions, scope,
//!   names, status subresource) while it exists.
//! - get; list with label selectors (equality and set-based), field selectors
//!   (`metadata.name`, `metadata.namespace`, and the event fields) and paging
//!   (`limit`/`continue`); watch from a resourceVersion with ADDED/MODIFIED/DELETED, BOOKMARK
//!   and initial events (`sendInitialEvents`, the streaming-list form), with objects entering or
//!   leaving a selector seen as ADDED or DELETED, and 410 Expired for a resourceVersion older
//!   than the last 20,000 changes.
//! - create (generateName, uid, creationTimestamp, resourceVersion, generation 1), update (409
//!   on a stale resourceVersion; no-op writes keep the resourceVersion), patch: JSON merge, JSON
//!   patch, strategic merge (see below) and server-side apply with per-manager ownership in
//!   `managedFields` (conflicts are 409 unless forced; a field a manager stops applying is
//!   removed unless someone else owns it; other writes take the fields they change), dry run.
//! - delete and deletecollection with finalizers and deletionTimestamp, preconditions,
//!   propagation Background, Foreground and Orphan, garbage collection by ownerReferences,
//!   namespace deletion (content first), CRD deletion (its objects first).
//! - The status subresource: `/status` writes change only status, main-resource writes leave
//!   status alone; generation grows only when the spec changes (and at deletion).
//! - Custom resources checked against their CRD: unknown fields pruned, nulls dropped, defaults
//!   applied, type, required, enum, minimum/maximum, length, items and pattern checks, and the
//!   CEL rules (`x-kubernetes-validations`); failures are 422 Invalid with one cause per field.
//!   A CRD whose schema is not structural is refused.
//! - Secrets fold `stringData` into `data`; namespaces get their phase and `kubernetes`
//!   finalizer; creating into a missing namespace is 404, into a terminating one 403.
//! - Errors are `Status` objects with the real codes and reasons.
//! - Metadata-only answers (`Accept: ...;as=PartialObjectMetadata`) for get, list and watch,
//!   as kube's `Api<PartialObjectMeta<K>>` asks for them.
//! - Built-in kinds stored as kube-apiserver stores them: empty lists and maps of `omitempty`
//!   fields dropped, Role and ClusterRole `rules` null when empty, the registry's defaults of
//!   Deployments, DaemonSets and admission policies; a policy's type-check status a tick later.
//! - OpenAPI: `/openapi/v3` (one document per group-version, built-in kinds and CRD versions)
//!   and `/openapi/v2` (JSON), for kubectl's server-side validation check and `explain`.
//! - The reviews kubectl makes of its user (SelfSubjectAccessReview, SelfSubjectRulesReview,
//!   SelfSubjectReview), TokenRequest (a token the server then takes as the ServiceAccount's),
//!   the scale subresource of Deployments, ReplicaSets, StatefulSets and CRDs that declare one,
//!   and the `all` category.
//! - Request bodies in Kubernetes' protobuf for the kinds kubectl's and helm's typed clients
//!   write (`protobuf.rs`); answers are JSON.
//! - Table output (`Accept: ...;as=Table`, what `kubectl get` asks for): custom resources print
//!   their `additionalPrinterColumns` (or Age); Deployment, Event, ConfigMap, Secret and
//!   Namespace print kubectl's usual columns; other kinds print Name and Age. Watches are not
//!   printed (`kubectl get -w` shows objects without the columns).
//! - Events have one store behind `v1` and `events.k8s.io/v1`, converted field by field, so
//!   events that the operator records show in `kubectl get events` and `kubectl describe`.
//! - A log of requests by client ([`MemoryApiServer::client_as`] names one with its
//!   User-Agent, [`MemoryApiServer::requests_from`] lists its requests), to count them.
//! - Admission webhooks: the registered Mutating- and ValidatingWebhookConfigurations are
//!   called for the writes their rules and object selectors match, with AdmissionReview v1 over
//!   HTTPS trusting their `caBundle`, within `timeoutSeconds`, by URL or by Service (routed with
//!   [`MemoryApiServer::route_service`]); mutating first, their JSON patches applied, then
//!   validating; denials and, with `failurePolicy: Fail`, calls that fail, refuse the write with
//!   Kubernetes' wording. A mutated patch is written as a replacement of the admitted object.
//! - ValidatingAdmissionPolicies and their bindings: the CEL of a bound policy (match
//!   conditions, validations) over `object`, `oldObject`, `request` with the authenticated user
//!   and groups, and `namespaceObject`, refusing as the API server does (see `policies.rs`).
//!
//! # Deliberately not supported
//! Authentication beyond the ServiceAccount tokens it issues (a client without a token is an
//! administrator), RBAC's check that a role writer holds what it grants (`escalate` and `bind`
//! are required instead), namespace selectors and match
//! conditions of webhooks, protobuf answers (OpenAPI v2 is served as JSON only), aggregated discovery, CRD
//! conversion webhooks (versions differ only in apiVersion), selectable fields of CRDs, pods
//! and every controller but the garbage collector and the namespace and CRD finalizers (no
//! Deployment rolls out by itself: [`stand_ins::roll_out_deployments`] plays that part). Strategic merge patch is approximated: a merge
//! patch whose keyed lists (containers, env, ports, volumes, volume mounts, conditions, and
//! list-map lists of CRD schemas) merge by key, with `$patch: delete` and `$patch: replace`;
//! other directives are ignored. Server-side apply knows the list types that CRD schemas
//! declare and those listed above for built-in kinds; every other list is atomic.

mod admission;
mod apply;
mod builtin_schemas;
mod cel;
mod conversion;
mod discovery;
mod errors;
mod fields;
mod fieldset;
mod http;
mod openapi;
mod outage;
mod patch;
mod policies;
mod protobuf;
mod rbac;
mod registry;
mod request;
mod reviews;
mod scale;
mod schema;
mod selectors;
mod store;
mod table;
mod watch;

pub mod stand_ins;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use tokio::sync::oneshot;

pub use outage::Outage;
use store::Store;

/// How a [`MemoryApiServer`] is set up.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Changes kept for watches to replay; a watch from an older resourceVersion gets 410.
    pub watch_history: usize,
    /// The name of the cluster, context and user in the kubeconfig, and the start of the
    /// kubeconfig file's name: what `kubectl config current-context` shows.
    pub name: String,
    /// A ConfigMap that a distribution or a service mesh publishes in every namespace beside
    /// `kube-root-ca.crt` (OpenShift's `openshift-service-ca.crt`, say), so that scenarios meet
    /// namespaces holding what other controllers put there.
    pub neighbour_ca: Option<String>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            watch_history: store::DEFAULT_WATCH_HISTORY,
            name: "butler-sandbox".into(),
            neighbour_ca: None,
        }
    }
}

impl ServerOptions {
    /// The default options with the kubeconfig named after the caller.
    pub fn named(name: &str) -> ServerOptions {
        ServerOptions { name: name.into(), ..Default::default() }
    }
}

/// What every request handler shares.
struct Shared {
    store: Arc<Mutex<Store>>,
    address: String,
    requests: AtomicU64,
    /// Each request as (client, method, path), the client named by its User-Agent.
    log: Mutex<Vec<(String, String, String)>>,
    /// Where the Services that webhooks name are reached: `(namespace, name)` to `host:port`.
    services: Mutex<std::collections::HashMap<(String, String), String>>,
    /// False while watches are interrupted: running ones end and new ones wait.
    watches_open: tokio::sync::watch::Sender<bool>,
    /// ServiceAccount tokens this server issued: their requests go through RBAC.
    tokens: Mutex<std::collections::HashMap<String, rbac::Account>>,
    /// How late the watches of a client (by the product of its User-Agent, or that and an API
    /// group) deliver events.
    watch_delays: Mutex<std::collections::HashMap<String, std::time::Duration>>,
    /// Where a restart ([`MemoryApiServer::restart`]) stands.
    faults: Arc<outage::Faults>,
}

/// An API server in this process, serving plain HTTP on a free port of 127.0.0.1. Dropping it
/// stops it and removes its kubeconfig file.
pub struct MemoryApiServer {
    address: SocketAddr,
    shared: Arc<Shared>,
    client: kube::Client,
    kubeconfig: PathBuf,
    shutdown: Option<oneshot::Sender<()>>,
}

/// Installs the ring crypto provider once per process: kube's client needs one even over HTTP.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl MemoryApiServer {
    /// Starts a server with the built-in kinds and the namespaces `default`, `kube-system`,
    /// `kube-public` and `kube-node-lease`.
    pub async fn start() -> MemoryApiServer {
        MemoryApiServer::start_with(ServerOptions::default()).await
    }

    /// Starts a server set up by `options`.
    pub async fn start_with(options: ServerOptions) -> MemoryApiServer {
        install_crypto_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port on 127.0.0.1");
        let address = listener.local_addr().expect("a bound listener has an address");
        let url = format!("http://{address}");
        let shared = Arc::new(Shared {
            store: Arc::new(Mutex::new(Store::new(options.watch_history, options.neighbour_ca.clone()))),
            address: address.to_string(),
            requests: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
            services: Mutex::new(std::collections::HashMap::new()),
            watches_open: tokio::sync::watch::Sender::new(true),
            tokens: Mutex::new(std::collections::HashMap::new()),
            watch_delays: Mutex::new(std::collections::HashMap::new()),
            faults: Arc::default(),
        });
        let app = Router::new()
            .fallback(http::handle)
            // Past the API server's own limit, so that it answers in its words (http::handle).
            .layer(DefaultBodyLimit::max(2 * http::MAX_REQUEST_BYTES))
            .with_state(shared.clone());
        // What controllers of a real control plane do a moment later: kube-controller-manager's
        // root-CA publisher (new namespaces get their `kube-root-ca.crt`), apiextensions' CRD
        // finalizer (a deleted CRD's objects go, then the CRD), the namespace controller (a
        // deleted namespace's objects go, then the namespace) and the garbage collector's
        // orphan and foreground deletions. It ends with the server.
        let weak = Arc::downgrade(&shared);
        tokio::spawn(async move {
            // Ticks until the namespace controller tries again after a refused deletion (it
            // backs off, as kube-controller-manager's does, rather than call a webhook 20 times
            // a second).
            let mut namespaces_wait = 0u32;
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(50));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(shared) = weak.upgrade() else { return };
                {
                    let mut store = shared.store.lock().unwrap_or_else(|e| e.into_inner());
                    if !store.root_ca_due.is_empty() {
                        store.publish_root_ca(None);
                    }
                    store.finish_crd_deletions();
                    store.finish_propagations();
                    store.check_policy_types();
                }
                // The namespace controller deletes through the API (admission sees it).
                if namespaces_wait > 0 {
                    namespaces_wait -= 1;
                } else if !http::empty_terminating_namespaces(&shared).await {
                    namespaces_wait = 20;
                }
                shared.store.lock().unwrap_or_else(|e| e.into_inner()).finish_namespace_deletions();
            }
        });
        let (shutdown, stopped) = oneshot::channel::<()>();
        let listener = outage::FaultyListener { inner: listener, faults: shared.faults.clone() };
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        let kubeconfig = std::env::temp_dir().join(format!(
            "{}-{}-{}.kubeconfig",
            options.name,
            std::process::id(),
            address.port()
        ));
        std::fs::write(&kubeconfig, kubeconfig_text(&options.name, &url))
            .expect("the temp folder is writable");
        let config = kube::Config::new(url.parse().expect("a URL of 127.0.0.1 parses"));
        let client = kube::Client::try_from(config).expect("a client for a plain HTTP server");
        MemoryApiServer { address, shared, client, kubeconfig, shutdown: Some(shutdown) }
    }

    /// A client of this server (default namespace `default`).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// `http://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// A kubeconfig file that points at this server, for binaries run as separate processes.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// Requests served so far.
    pub fn request_count(&self) -> u64 {
        self.shared.requests.load(Ordering::Relaxed)
    }

    /// A client whose requests carry `User-Agent: {agent}`, so that
    /// [`MemoryApiServer::requests_from`] can tell them apart.
    pub fn client_as(&self, agent: &str) -> kube::Client {
        let mut config = kube::Config::new(self.url().parse().expect("a URL of 127.0.0.1 parses"));
        let value = agent.parse().expect("an agent name is a header value");
        config.headers.push((axum::http::header::USER_AGENT, value));
        kube::Client::try_from(config).expect("a client for a plain HTTP server")
    }

    /// Routes the Service `namespace/name` to `address` (`127.0.0.1:9443`): a webhook that names
    /// the Service is called there, with the Service's DNS name for TLS, as a cluster's network
    /// would carry it.
    pub fn route_service(&self, namespace: &str, name: &str, address: std::net::SocketAddr) {
        let mut services = self.shared.services.lock().unwrap_or_else(|e| e.into_inner());
        services.insert((namespace.to_string(), name.to_string()), address.to_string());
    }

    /// A client authenticated as the ServiceAccount `namespace/name` (User-Agent `agent`): its
    /// requests are allowed only as far as the Roles and ClusterRoles bound to the account
    /// allow, as Kubernetes' RBAC decides (other clients are administrators).
    pub fn client_as_service_account(&self, agent: &str, namespace: &str, name: &str) -> kube::Client {
        let config = self.config_as_service_account(agent, namespace, name);
        kube::Client::try_from(config).expect("a client for a plain HTTP server")
    }

    /// The configuration of [`MemoryApiServer::client_as_service_account`], for a client made
    /// elsewhere (on the runtime that will drive it).
    pub fn config_as_service_account(&self, agent: &str, namespace: &str, name: &str) -> kube::Config {
        let token = self.service_account_token(namespace, name);
        let mut config = kube::Config::new(self.url().parse().expect("a URL of 127.0.0.1 parses"));
        config
            .headers
            .push((axum::http::header::USER_AGENT, agent.parse().expect("an agent is a header value")));
        config.auth_info.token = Some(token.into());
        config
    }

    /// Serves `plural.group` at `version` as an aggregated API is served (an APIService's
    /// backend, through the API server): in discovery, with no CustomResourceDefinition, its
    /// objects kept as a built-in kind's. What a cluster serves besides CRDs, for scenarios.
    pub fn serve_aggregated(&self, group: &str, version: &str, kind: &str, plural: &str, namespaced: bool) {
        let served = registry::ResourceType {
            group: group.into(),
            version: version.into(),
            kind: kind.into(),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            namespaced,
            short_names: Vec::new(),
            categories: Vec::new(),
            status: false,
            generation: false,
            custom: None,
            scale: None,
        };
        let mut store = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        store.registry.register(group, plural, vec![served]);
    }

    /// A bearer token of the ServiceAccount `namespace/name`, as a kubeconfig written for the
    /// account holds it.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> String {
        let token = format!("{namespace}.{name}.{}", self.shared.requests.load(Ordering::Relaxed));
        let account = rbac::Account::service_account(namespace, name);
        self.shared.tokens.lock().unwrap_or_else(|e| e.into_inner()).insert(token.clone(), account);
        token
    }

    /// A bearer token of the cluster's administrator (`kubernetes-admin` in `system:masters`),
    /// for a client that must send credentials (kubectl sends none to a server without them
    /// over HTTPS, and asks for a password instead).
    pub fn administrator_token(&self) -> String {
        let token = format!("admin.{}.{}", self.address.port(), self.shared.requests.load(Ordering::Relaxed));
        let account = rbac::Account::user("kubernetes-admin", vec!["system:masters".into()]);
        self.shared.tokens.lock().unwrap_or_else(|e| e.into_inner()).insert(token.clone(), account);
        token
    }

    /// Ends every running watch and holds new ones until [`MemoryApiServer::resume_watches`],
    /// as a control-plane restart does: what changes meanwhile is missed by the watchers, and
    /// with a small `watch_history` they come back to 410 Expired and must list again.
    pub fn interrupt_watches(&self) {
        self.shared.watches_open.send_replace(false);
    }

    /// Restarts the control plane as its clients meet it, and returns once it serves again:
    /// every connection drops (running watches end, requests under way fail), new connections
    /// are dropped for `outage.refused`, then every request is 503 for `outage.unavailable`,
    /// then watches are 403 for `outage.watches_forbidden` while the authorizer warms up.
    /// Every object stays.
    pub async fn restart(&self, outage: Outage) {
        use outage::Phase;
        let faults = &self.shared.faults;
        faults.phase.send_replace(Phase::Refusing);
        self.interrupt_watches();
        faults.sever();
        tokio::time::sleep(outage.refused).await;
        faults.phase.send_replace(Phase::Unavailable);
        self.resume_watches();
        tokio::time::sleep(outage.unavailable).await;
        faults.phase.send_replace(Phase::WatchesForbidden);
        tokio::time::sleep(outage.watches_forbidden).await;
        faults.phase.send_replace(Phase::Up);
    }

    /// Lets the watches held by [`MemoryApiServer::interrupt_watches`] open.
    pub fn resume_watches(&self) {
        self.shared.watches_open.send_replace(true);
    }

    /// Makes the watches that one client (by the product of its User-Agent) opens from now on
    /// deliver each change `by` late, as a cache behind a busy or distant API server is: what
    /// that client's controllers read from their caches lags what the server holds.
    pub fn delay_watches_of(&self, agent: &str, by: std::time::Duration) {
        self.shared.watch_delays.lock().unwrap_or_else(|e| e.into_inner()).insert(agent.into(), by);
    }

    /// As [`MemoryApiServer::delay_watches_of`], for the watches of one API group only: two
    /// streams of one client then arrive in an order the server did not make them in (a
    /// Deployment's deletion seen before its owner's), as they may behind a real server.
    pub fn delay_watches_of_group(&self, agent: &str, group: &str, by: std::time::Duration) {
        let key = format!("{agent} {group}");
        self.shared.watch_delays.lock().unwrap_or_else(|e| e.into_inner()).insert(key, by);
    }

    /// The requests of one client (by the product of its User-Agent) so far, as
    /// `(method, path)`.
    pub fn requests_from(&self, agent: &str) -> Vec<(String, String)> {
        let log = self.shared.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().filter(|(a, _, _)| a == agent).map(|(_, m, p)| (m.clone(), p.clone())).collect()
    }
}

impl Drop for MemoryApiServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

fn kubeconfig_text(name: &str, url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n    server: {url}\ncontexts:\n- name: {name}\n  context:\n    cluster: {name}\n    user: {name}\n    namespace: default\ncurrent-context: {name}\nusers:\n- name: {name}\n  user: {{}}\n"
    )
}
