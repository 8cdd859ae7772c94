//! [`TestApiServer`]: the Kubernetes HTTP API in memory, on 127.0.0.1.

mod apply;
mod conversion;
mod discovery;
mod errors;
mod fieldset;
mod http;
mod patch;
mod registry;
mod schema;
mod selectors;
mod store;
mod table;
mod watch;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::DefaultBodyLimit;
use tokio::sync::oneshot;

use store::Store;

/// How a [`TestApiServer`] is set up.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Changes kept for watches to replay; a watch from an older resourceVersion gets 410.
    pub watch_history: usize,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions { watch_history: store::DEFAULT_WATCH_HISTORY }
    }
}

/// What every request handler shares.
struct Shared {
    store: Arc<Mutex<Store>>,
    address: String,
    requests: AtomicU64,
    /// Each request as (client, method, path), the client named by its User-Agent.
    log: Mutex<Vec<(String, String, String)>>,
}

/// An API server in this process, serving plain HTTP on a free port of 127.0.0.1. Dropping it
/// stops it and removes its kubeconfig file.
pub struct TestApiServer {
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

impl TestApiServer {
    /// Starts a server with the built-in kinds and the namespaces `default`, `kube-system`,
    /// `kube-public` and `kube-node-lease`.
    pub async fn start() -> TestApiServer {
        TestApiServer::start_with(ServerOptions::default()).await
    }

    /// Starts a server set up by `options`.
    pub async fn start_with(options: ServerOptions) -> TestApiServer {
        install_crypto_provider();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("a free port on 127.0.0.1");
        let address = listener.local_addr().expect("a bound listener has an address");
        let url = format!("http://{address}");
        let shared = Arc::new(Shared {
            store: Arc::new(Mutex::new(Store::new(options.watch_history))),
            address: address.to_string(),
            requests: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
        });
        let app = Router::new()
            .fallback(http::handle)
            .layer(DefaultBodyLimit::max(64 * 1024 * 1024))
            .with_state(shared.clone());
        let (shutdown, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        let kubeconfig = std::env::temp_dir().join(format!(
            "butler-e2e-{}-{}.kubeconfig",
            std::process::id(),
            address.port()
        ));
        std::fs::write(&kubeconfig, kubeconfig_text(&url)).expect("the temp folder is writable");
        let config = kube::Config::new(url.parse().expect("a URL of 127.0.0.1 parses"));
        let client = kube::Client::try_from(config).expect("a client for a plain HTTP server");
        TestApiServer { address, shared, client, kubeconfig, shutdown: Some(shutdown) }
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

    /// A client whose requests carry `User-Agent: {agent}/test`, so that
    /// [`TestApiServer::requests_from`] can tell them apart.
    pub fn client_as(&self, agent: &str) -> kube::Client {
        let mut config = kube::Config::new(self.url().parse().expect("a URL of 127.0.0.1 parses"));
        let value = format!("{agent}/test").parse().expect("an agent name is a header value");
        config.headers.push((axum::http::header::USER_AGENT, value));
        kube::Client::try_from(config).expect("a client for a plain HTTP server")
    }

    /// The requests of one client (by the product of its User-Agent) so far, as
    /// `(method, path)`.
    pub fn requests_from(&self, agent: &str) -> Vec<(String, String)> {
        let log = self.shared.log.lock().unwrap_or_else(|e| e.into_inner());
        log.iter().filter(|(a, _, _)| a == agent).map(|(_, m, p)| (m.clone(), p.clone())).collect()
    }
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        let _ = std::fs::remove_file(&self.kubeconfig);
    }
}

fn kubeconfig_text(url: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: butler-e2e\n  cluster:\n    server: {url}\ncontexts:\n- name: butler-e2e\n  context:\n    cluster: butler-e2e\n    user: butler-e2e\n    namespace: default\ncurrent-context: butler-e2e\nusers:\n- name: butler-e2e\n  user: {{}}\n"
    )
}
