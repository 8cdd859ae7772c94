//! What the lifecycle scenarios share: a cluster with the provider CRDs, the operator running
//! in this process (stopped, killed and started again at will), provider objects made from
//! YAML, and waiting on conditions.

use std::sync::Arc;
use std::time::{Duration, Instant};

use butler_e2e::Cluster;
use butler_operator::api::KindNames;
use butler_operator::controller::{self, Operator, Options, ProviderObject};
use butler_operator::metrics::Metrics;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Client;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The User-Agent product of the operator's client, to count its requests.
pub const OPERATOR_AGENT: &str = "butler-operator";

/// A scenario: a cluster, a namespace for the providers, and the operator.
pub struct Scenario {
    pub cluster: Cluster,
    pub client: Client,
    pub namespace: String,
    operator: Option<(watch::Sender<bool>, JoinHandle<()>, Arc<controller::context::Context>)>,
}

pub fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("fixture does not parse: {e}\n{text}"))
}

/// The stand-in cert-manager CRDs, unless the cluster serves cert-manager already; they go
/// with the scenario (scenarios take turns on a real cluster, so none loses them to another).
async fn install_cert_manager_crds(cluster: &Cluster) {
    for crd in butler_apiserver::stand_ins::cert_manager_crds() {
        cluster.install_stand_in_crd(&crd).await;
    }
}

/// Logs of the operator, captured per test; `RUST_LOG` sets the filter (default: warnings).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter(filter).try_init();
}

impl Scenario {
    /// A cluster with the provider CRDs, a namespace of this scenario's own, and the operator
    /// not yet running.
    pub async fn new(base: &str) -> Scenario {
        init_logging();
        let cluster = Cluster::connect().await;
        for crd in butler_operator::crds::operator() {
            cluster.install_crd(&crd).await;
        }
        // Providers' ClusterRoles and CRDs have one name per cluster: on a real cluster the
        // scenarios that install them take turns (they still run at once with every other).
        cluster.exclusive("operator-providers").await;
        install_cert_manager_crds(&cluster).await;
        let namespace = cluster.namespace(base).await;
        // What the operator makes cluster-wide for this scenario's providers goes with it.
        cluster.remove_cluster_objects_labelled(&format!(
            "operator.butlerlabs.dev/provider-namespace={namespace}"
        ));
        let client = cluster.client();
        Scenario { cluster, client, namespace, operator: None }
    }

    /// The operator's client: on the in-memory server one whose requests can be counted.
    fn operator_client(&self) -> Client {
        match self.cluster.server() {
            Some(server) => server.client_as(OPERATOR_AGENT),
            None => self.cluster.client(),
        }
    }

    /// Starts the operator in this process.
    pub fn start_operator(&mut self) {
        self.start_operator_with(None);
    }

    /// Starts the operator in this process with a config file (`--config`).
    /// The operator sees only the scenario's namespace, so scenarios running at once on one
    /// real cluster never reconcile each other's providers.
    pub fn start_operator_with(&mut self, config: Option<std::path::PathBuf>) {
        self.start_operator_with_options(|o| o.config = config);
    }

    /// Starts the operator in this process with options of the scenario's (`edit` changes the
    /// defaults: the scenario's namespace, no cache).
    pub fn start_operator_with_options(&mut self, edit: impl FnOnce(&mut Options)) {
        let mut options =
            Options { namespace: Some(self.namespace.clone()), ..Options::in_process("scenario") };
        edit(&mut options);
        self.start_operator_from(self.operator_client(), options);
    }

    /// Starts the operator in this process watching every namespace, as it runs by default.
    pub fn start_operator_everywhere(&mut self) {
        self.start_operator_from(self.operator_client(), Options::in_process("scenario"));
    }

    /// The install manifest applied as an administrator applies it, and a client of the
    /// operator's ServiceAccount under its shipped RBAC; `None` on a real cluster, where it
    /// would install the operator for everyone.
    pub async fn shipped_account(&self) -> Option<Client> {
        let server = self.cluster.server()?;
        let account = server.client_as_service_account(
            OPERATOR_AGENT,
            butler_operator::manifest::NAMESPACE,
            butler_operator::api::FIELD_MANAGER,
        );
        let applier = butler_runtime::apply::Applier::new(self.client.clone(), "butler-operator");
        for object in butler_operator::manifest::objects("v0.1.0") {
            applier.apply(&object, false).await.unwrap_or_else(|e| panic!("{e}"));
        }
        Some(account)
    }

    /// Starts the operator with `edit`ed options under its shipped RBAC where the scenario can
    /// install it (in memory), else as [`Scenario::start_operator_with_options`] does: the
    /// attacks that were first seen on a real server run as the operator runs there.
    pub async fn start_operator_shipped(&mut self, edit: impl FnOnce(&mut Options)) {
        let mut options =
            Options { namespace: Some(self.namespace.clone()), ..Options::in_process("scenario") };
        let shipped = self.shipped_account().await;
        // As the manifest runs it: releases' roles held to the shipped ceiling.
        if shipped.is_some() {
            options.policy.role_ceiling = Some(butler_operator::manifest::ROLE_CEILING.into());
        }
        edit(&mut options);
        let client = match shipped {
            Some(account) => account,
            None => self.operator_client(),
        };
        self.start_operator_from(client, options);
    }

    /// Starts the operator in this process with a client of its own (a ServiceAccount's).
    pub fn start_operator_as(&mut self, client: Client) {
        let options = Options { namespace: Some(self.namespace.clone()), ..Options::in_process("scenario") };
        self.start_operator_from(client, options);
    }

    fn start_operator_from(&mut self, client: Client, options: Options) {
        assert!(self.operator.is_none(), "the operator runs already");
        let (stop, shutdown) = controller::shutdown_switch();
        let Operator { run, context } =
            controller::start(client, Arc::new(Metrics::new()), options, shutdown);
        self.operator = Some((stop, tokio::spawn(run), context));
    }

    /// The running operator's context: what it keeps.
    pub fn context(&self) -> &Arc<controller::context::Context> {
        &self.operator.as_ref().expect("the operator runs").2
    }

    /// Where the running operator's decided unpauses and contract changes wait before their
    /// writes while a scenario holds it.
    pub fn decided(&self) -> &tokio::sync::RwLock<()> {
        &self.context().decided
    }

    /// Stops the operator the way SIGTERM does: reconciles under way finish.
    pub async fn stop_operator(&mut self) {
        let (stop, task, _) = self.operator.take().expect("the operator runs");
        let _ = stop.send(true);
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the operator stops within 30s")
            .expect("the operator task");
    }

    /// Kills the operator where it stands, mid-reconcile or not.
    pub async fn kill_operator(&mut self) {
        let (_, task, context) = self.operator.take().expect("the operator runs");
        task.abort();
        context.watches.stop();
        let _ = task.await;
    }

    /// Creates a provider object of kind `K` from the YAML of its spec.
    pub async fn create<K: ProviderObject>(&self, name: &str, spec: &str) -> K {
        let spec: Value = if spec.trim().is_empty() { json!({}) } else { from_yaml(spec) };
        let object: K = serde_json::from_value(json!({
            "apiVersion": "operator.butlerlabs.dev/v1alpha1",
            "kind": K::KIND.kind(),
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": spec,
        }))
        .expect("a provider object");
        self.api::<K>()
            .create(&PostParams::default(), &object)
            .await
            .unwrap_or_else(|e| panic!("create {} {name}: {e}", K::KIND))
    }

    pub fn api<K: ProviderObject>(&self) -> Api<K> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Merge-patches a provider's spec.
    pub async fn patch_spec<K: ProviderObject>(&self, name: &str, spec: Value) {
        self.api::<K>()
            .patch(name, &PatchParams::default(), &Patch::Merge(json!({ "spec": spec })))
            .await
            .unwrap_or_else(|e| panic!("patch {} {name}: {e}", K::KIND));
    }

    /// Creates or replaces a Secret of string data in the scenario's namespace.
    pub async fn secret(&self, name: &str, data: &[(&str, &str)]) {
        let data: serde_json::Map<String, Value> =
            data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
        let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": self.namespace}, "stringData": data});
        Api::<Secret>::namespaced(self.client.clone(), &self.namespace)
            .patch(name, &PatchParams::apply("scenario").force(), &Patch::Apply(secret))
            .await
            .unwrap_or_else(|e| panic!("apply Secret {name}: {e}"));
    }

    /// Waits until `check` holds for the provider; panics after 30 s with its last status.
    pub async fn wait_for<K: ProviderObject>(&self, name: &str, what: &str, check: impl Fn(&K) -> bool) -> K {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.api::<K>().get_opt(name).await.expect("reading a provider");
            match found {
                Some(object) if check(&object) => return object,
                last if Instant::now() > deadline => {
                    let status = last.map(|o| {
                        serde_json::to_string_pretty(&json!(o.provider_status())).unwrap_or_default()
                    });
                    panic!(
                        "{} {name}: {what} did not happen within 30s; last status: {}",
                        K::KIND,
                        status.unwrap_or_else(|| "gone".into())
                    )
                }
                _ => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        }
    }

    /// Waits until the provider object is gone.
    pub async fn wait_gone<K: ProviderObject>(&self, name: &str) {
        self.wait_for_opt::<K>(name, "deletion", |o| o.is_none()).await;
    }

    async fn wait_for_opt<K: ProviderObject>(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(Option<&K>) -> bool,
    ) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let found = self.api::<K>().get_opt(name).await.expect("reading a provider");
            if check(found.as_ref()) {
                return;
            }
            if Instant::now() > deadline {
                let status = found
                    .map(|o| serde_json::to_string_pretty(&json!(o.provider_status())).unwrap_or_default());
                panic!(
                    "{} {name}: {what} did not happen within 30s; last status: {}",
                    K::KIND,
                    status.unwrap_or_default()
                );
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The provider's Deployments, by their labels.
    pub async fn deployments(&self, kind: &str, name: &str) -> Vec<Deployment> {
        let selector = format!(
            "operator.butlerlabs.dev/provider-kind={kind},operator.butlerlabs.dev/provider-name={name},operator.butlerlabs.dev/provider-namespace={}",
            self.namespace
        );
        Api::<Deployment>::all(self.client.clone())
            .list(&ListParams::default().labels(&selector))
            .await
            .expect("listing Deployments")
            .items
    }

    /// Where no kubelet runs, plays the Deployment controller: every provider Deployment of
    /// the scenario whose pods could run rolls out its current generation (the two steps of a
    /// rolling update: new pods beside the old, then the new alone). A real cluster does it
    /// itself.
    pub async fn mark_available(&self) {
        if self.cluster.is_in_memory() {
            for _ in 0..2 {
                butler_apiserver::stand_ins::roll_out_deployments(
                    &self.client,
                    &self.namespace,
                    butler_operator::controller::vocabulary::LABEL_NAME,
                )
                .await
                .expect("rolling Deployments out");
            }
        }
    }
}

/// The operator stops before the cluster's clean-up starts (fields drop in order, the cluster
/// first): an operator still running would put back the finalizers the clean-up takes off.
impl Drop for Scenario {
    fn drop(&mut self) {
        if let Some((_, task, context)) = self.operator.take() {
            task.abort();
            context.watches.stop();
        }
    }
}

/// Stands in for a Butler controller whose webhooks the API server has not reached: the core
/// components' webhook configurations fail closed until their controller first ran, and no
/// controller runs in the operator's scenarios, so their failure policy is set to Ignore here
/// as the controller would set it (its field manager, only that field).
pub async fn webhooks_failing_open(s: &Scenario) {
    let names = [
        (
            "ValidatingWebhookConfiguration",
            "validatingwebhookconfigurations",
            "butler-validating-webhook-configuration",
        ),
        (
            "MutatingWebhookConfiguration",
            "mutatingwebhookconfigurations",
            "butler-mutating-webhook-configuration",
        ),
    ];
    for (kind, plural, name) in names {
        let gvk = kube::api::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", kind);
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, plural);
        let api: Api<kube::api::DynamicObject> = Api::all_with(s.client.clone(), &resource);
        let current = api.get(name).await.unwrap_or_else(|e| panic!("the core's {kind} {name}: {e}"));
        let hooks: Vec<Value> = current.data["webhooks"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|h| json!({"name": h["name"], "failurePolicy": "Ignore"}))
            .collect();
        let patch = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name}, "webhooks": hooks});
        api.patch(name, &PatchParams::apply("butler-controller").force(), &Patch::Apply(patch))
            .await
            .unwrap();
    }
}

/// A condition of a provider.
pub fn condition<'a, K: ProviderObject>(object: &'a K, type_: &str) -> Option<&'a Condition> {
    object.provider_status()?.conditions.iter().find(|c| c.type_ == type_)
}

/// Whether a condition has this status.
pub fn is<K: ProviderObject>(object: &K, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c.status == status)
}

/// Whether a condition has this status and reason.
pub fn reason<K: ProviderObject>(object: &K, type_: &str, reason: &str) -> bool {
    condition(object, type_).is_some_and(|c| c.reason == reason)
}
