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

/// A cluster for one scenario: its client, and the namespaces and CRDs the scenario made, which
/// are deleted when the `Cluster` is dropped (a dropped in-memory server takes everything along).
pub struct Cluster {
    client: Client,
    server: Option<MemoryApiServer>,
    run: String,
    namespaces: Mutex<Vec<String>>,
    crds: Mutex<Vec<String>>,
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
        let (client, server) = match std::env::var_os(KUBECONFIG_VARIABLE) {
            Some(path) => {
                let kubeconfig = Kubeconfig::read_from(&path).unwrap_or_else(|e| {
                    panic!("{KUBECONFIG_VARIABLE}={}: cannot read it: {e}", path.to_string_lossy())
                });
                let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "{KUBECONFIG_VARIABLE}={}: not a usable kubeconfig: {e}",
                            path.to_string_lossy()
                        )
                    });
                (Client::try_from(config).expect("a client from the kubeconfig"), None)
            }
            None => {
                let server = MemoryApiServer::start_with(ServerOptions::named("butler-e2e")).await;
                (server.client(), Some(server))
            }
        };
        Cluster {
            client,
            server,
            run: run_id(),
            namespaces: Mutex::new(Vec::new()),
            crds: Mutex::new(Vec::new()),
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

    /// Installs a CRD (server-side apply) and waits until it is Established; deleted afterwards.
    pub async fn install_crd(&self, crd: &CustomResourceDefinition) {
        let name = crd.metadata.name.clone().expect("a CRD has a name");
        let api: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        api.patch(&name, &PatchParams::apply(FIELD_MANAGER).force(), &Patch::Apply(crd))
            .await
            .unwrap_or_else(|e| panic!("install CRD {name}: {e}"));
        self.crds.lock().expect("not poisoned").push(name.clone());
        tokio::time::timeout(
            Duration::from_secs(30),
            await_condition(api, &name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("CRD {name} was not Established within 30s"))
        .unwrap_or_else(|e| panic!("waiting for CRD {name}: {e}"));
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.server.is_some() {
            return;
        }
        let namespaces = std::mem::take(&mut *self.namespaces.lock().expect("not poisoned"));
        let crds = std::mem::take(&mut *self.crds.lock().expect("not poisoned"));
        if namespaces.is_empty() && crds.is_empty() {
            return;
        }
        // Drop cannot await, and may run inside a runtime: clean up from a thread of its own.
        let client = self.client.clone();
        let cleanup = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
            runtime.block_on(async move {
                let ns_api: Api<Namespace> = Api::all(client.clone());
                for name in namespaces {
                    let _ = ns_api.delete(&name, &DeleteParams::background()).await;
                }
                let crd_api: Api<CustomResourceDefinition> = Api::all(client);
                for name in crds {
                    let _ = crd_api.delete(&name, &DeleteParams::background()).await;
                }
            });
        });
        let _ = cleanup.join();
    }
}
