//! What the scenarios share: a cluster with Butler's CRDs, the controllers running in this
//! process, objects made from YAML, and waiting.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, Instant};

use butler_controller::clock::Clock;
use butler_controller::context::{Context, Scope};
use butler_controller::secrets::SecretReader;
use butler_controller::{Options, start};
use butler_e2e::Cluster;
use butler_runtime::metrics::Metrics;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, PostParams};
use kube::{Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The User-Agent of the controllers' client, to count their requests.
pub const AGENT: &str = "butler-controller";

/// A scenario: a cluster with Butler's CRDs, and the controllers.
pub struct Scenario {
    pub cluster: Cluster,
    pub client: Client,
    /// The controllers' clock, which the scenario moves.
    pub clock: Arc<Clock>,
    controllers: Option<(watch::Sender<bool>, JoinHandle<()>)>,
    /// What the controllers (the first replica) share: what they keep of the objects.
    pub context: Option<Arc<Context>>,
    replicas: Vec<(watch::Sender<bool>, JoinHandle<()>)>,
    /// The namespace of the controllers' ServiceAccount (`butler-system` of an install).
    pub home: String,
    /// The suffix of the cluster-wide objects of the components' RBAC.
    pub rbac: String,
}

pub fn from_yaml<T: DeserializeOwned>(text: &str) -> T {
    serde_saphyr::from_str(text).unwrap_or_else(|e| panic!("fixture does not parse: {e}\n{text}"))
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into());
    let _ = tracing_subscriber::fmt().with_test_writer().with_env_filter(filter).try_init();
}

impl Scenario {
    /// A cluster with Butler's CRDs and the controllers running.
    pub async fn start() -> Scenario {
        init_logging();
        let cluster = Cluster::connect().await;
        for crd in butler_core::api::crds() {
            cluster.install_crd(&butler_runtime::crds::tidy(crd)).await;
        }
        let client = cluster.client();
        // The controllers run as the core components' ServiceAccount, with their RBAC only.
        let home = cluster.namespace("butler").await;
        let rbac = crate::shipped::install(&cluster, &home).await;
        let mut scenario = Scenario {
            cluster,
            client,
            clock: Arc::default(),
            controllers: None,
            context: None,
            replicas: Vec::new(),
            home,
            rbac,
        };
        scenario.start_controllers().await;
        scenario
    }

    /// A namespace where the controllers may read Secrets, as a platform binds one for its
    /// ProviderConfigs' credentials or its TenantClusters' kubeconfigs (a Team's namespace has
    /// the binding from the Team controller; other namespaces keep their Secrets from the
    /// controllers).
    pub async fn namespace(&self, base: &str) -> String {
        let ns = self.cluster.namespace(base).await;
        let reader = crate::shipped::secret_reader(&self.home, &self.rbac);
        let binding: RoleBinding = serde_json::from_value(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": SecretReader::BINDING, "namespace": ns},
            "roleRef": reader.role_ref(),
            "subjects": reader.subjects(),
        }))
        .expect("a RoleBinding");
        Api::<RoleBinding>::namespaced(self.client.clone(), &ns)
            .create(&PostParams::default(), &binding)
            .await
            .unwrap_or_else(|e| panic!("binding the controllers' Secret reading in {ns}: {e}"));
        ns
    }

    /// A client of the controllers' ServiceAccount (User-Agent `agent`, so that the in-memory
    /// server can count its requests).
    pub async fn controller_client_as(&self, agent: &str) -> Client {
        let config = self.cluster.service_account_config(agent, &self.home, crate::shipped::ACCOUNT).await;
        Client::try_from(config).expect("a client for the controllers' account")
    }

    async fn controller_client(&self) -> Client {
        self.controller_client_as(AGENT).await
    }

    /// The controllers' options: the scenario's clock and, on a real cluster, its namespaces.
    pub fn options(&self, instance: &str) -> Options {
        let mut options = Options {
            clock: self.clock.clone(),
            team_roles: crate::shipped::team_roles(&self.rbac),
            secret_reader: crate::shipped::secret_reader(&self.home, &self.rbac),
            ..Options::in_process(instance)
        };
        if !self.cluster.is_in_memory() {
            // A real cluster is shared with the other scenarios' controllers: each acts in its
            // scenario's namespaces only (all named `{base}-{run}`), so that a moved clock or a
            // lagging replica of one scenario never acts on another's objects.
            let suffix = self.cluster.unique("");
            options.scope = Scope::only(move |ns| ns.ends_with(&suffix));
        }
        options
    }

    fn spawn(&self, options: Options, client: Client) -> (watch::Sender<bool>, JoinHandle<()>, Arc<Context>) {
        let (stop, shutdown) = butler_runtime::shutdown::shutdown_switch();
        let controllers =
            start(client, Arc::new(Metrics::new("butler_controller", |_| {})), options, shutdown);
        (stop, tokio::spawn(controllers.run), controllers.context)
    }

    /// Runs the scenario's (first) controllers.
    fn run_controllers(&mut self, options: Options, client: Client) {
        let (stop, task, context) = self.spawn(options, client);
        self.controllers = Some((stop, task));
        self.context = Some(context);
    }

    pub async fn start_controllers(&mut self) {
        let client = self.controller_client().await;
        let options = self.options("scenario");
        self.run_controllers(options, client);
    }

    /// The controllers again, acting only in the namespaces `keep` picks.
    pub async fn start_controllers_in(&mut self, keep: impl Fn(&str) -> bool + Send + Sync + 'static) {
        let options = Options { scope: Scope::only(keep), ..self.options("scoped") };
        let client = self.controller_client().await;
        self.run_controllers(options, client);
    }

    /// The controllers again, acting only where the label selector `selector` picks.
    pub async fn start_controllers_selecting(&mut self, selector: &str) {
        let options = Options { scope: Scope::selected(selector), ..self.options("selecting") };
        let client = self.controller_client().await;
        self.run_controllers(options, client);
    }

    /// The controllers again, with `concurrency` reconciles of one kind at once (as a real
    /// install runs them: 4 by default).
    pub async fn restart_controllers_with_concurrency(&mut self, concurrency: u16) {
        self.kill_controllers();
        let options = Options { concurrency, ..self.options("limited") };
        let client = self.controller_client().await;
        self.run_controllers(options, client);
    }

    /// The controllers again, with their options changed by `change`.
    pub async fn restart_controllers_with(&mut self, change: impl FnOnce(&mut Options)) {
        self.kill_controllers();
        let mut options = self.options("changed");
        change(&mut options);
        let client = self.controller_client().await;
        self.run_controllers(options, client);
    }

    /// Kills the controllers wherever they are (no graceful end), as a crash would.
    pub fn kill_controllers(&mut self) {
        if let Some((_, task)) = self.controllers.take() {
            task.abort();
        }
        self.context = None;
    }

    /// Another replica of the controllers, running beside the first (no leader election). On
    /// the in-memory server its watches deliver every change `lag` late, so that its caches
    /// trail what the first replica writes (a real cluster brings its own lag).
    pub async fn start_replica(&mut self, instance: &str, lag: Duration) {
        let agent = format!("{AGENT}-{instance}");
        if let Some(server) = self.cluster.server() {
            server.delay_watches_of(&agent, lag);
        }
        let client = self.controller_client_as(&agent).await;
        let options = self.options(instance);
        let (stop, task, _) = self.spawn(options, client);
        self.replicas.push((stop, task));
    }

    /// Whether the scenario's webhooks can be registered: on the in-memory server only, since on
    /// a real cluster the configurations are cluster-wide and would send the API server's
    /// requests to this test process. Says so when they cannot.
    pub fn webhooks_allowed(&self) -> bool {
        if !self.cluster.is_in_memory() {
            println!("skipped on a real cluster: the webhook configurations would send its requests here");
        }
        self.cluster.is_in_memory()
    }

    /// The requests the controllers made that write (not GET), on the in-memory server.
    pub fn writes(&self) -> Option<Vec<(String, String)>> {
        let server = self.cluster.server()?;
        Some(server.requests_from(AGENT).into_iter().filter(|(method, _)| method != "GET").collect())
    }
}

/// The controllers stop before the cluster's clean-up starts (fields drop in order, the
/// cluster first): a controller still running would put back the finalizers the clean-up
/// takes off.
impl Drop for Scenario {
    fn drop(&mut self) {
        for (stop, task) in self.controllers.take().into_iter().chain(self.replicas.drain(..)) {
            let _ = stop.send(true);
            task.abort();
        }
    }
}

/// Creates an object from YAML.
pub async fn create<K>(api: &Api<K>, yaml: &str) -> K
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let object: K = from_yaml(yaml);
    api.create(&PostParams::default(), &object).await.unwrap_or_else(|e| panic!("create: {e}\n{yaml}"))
}

/// Waits until `check` holds for the object (`None`: it is gone); panics after 30 s with what
/// was seen last.
pub async fn wait_for<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    check: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    wait_within(api, name, what, Duration::from_secs(30), check).await
}

/// As [`wait_for`], with the patience given.
pub async fn wait_within<K>(
    api: &Api<K>,
    name: &str,
    what: &str,
    patience: Duration,
    check: impl Fn(Option<&K>) -> bool,
) -> Option<K>
where
    K: Resource + Clone + DeserializeOwned + Debug,
{
    let deadline = Instant::now() + patience;
    loop {
        let found = api.get_opt(name).await.expect("reading an object");
        if check(found.as_ref()) {
            return found;
        }
        if Instant::now() > deadline {
            panic!("{name}: {what} did not happen within {}s; last seen: {found:#?}", patience.as_secs());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The controller's webhook server running in this process.
pub struct Served {
    pub url: String,
    /// The CA bundle it registered.
    pub ca: String,
    pub options: butler_controller::webhooks::serving::ServingOptions,
    pub stop: watch::Sender<bool>,
    pub running: JoinHandle<()>,
}

/// The controller's webhook server, in this process, registered by URL on the in-memory server,
/// keeping its certificates in `namespace`. Waits until the configurations fail closed, so that
/// every write from here on is admitted by it.
pub async fn serve_webhooks(s: &Scenario, namespace: &str) -> Served {
    use butler_controller::webhooks::registration::{Endpoint, VALIDATING};
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("https://127.0.0.1:{port}");
    let (options, stop, running) = start_serving(s, namespace, port, Endpoint::Url(url.clone())).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(s.client.clone());
    // The configurations fail closed once a review came through the API server: a dry run of
    // a ProviderConfig sends one (whatever the webhook answers).
    let configs: Api<butler_core::api::ProviderConfig> = Api::namespaced(s.client.clone(), namespace);
    let probe: butler_core::api::ProviderConfig = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: probe, namespace: {namespace}}}\nspec: {{provider: aws, credentialsRef: {{name: c}}, aws: {{region: r}}}}\n"
    ));
    let closed = |v: &ValidatingWebhookConfiguration| {
        v.webhooks.as_ref().is_some_and(|w| w.iter().all(|h| h.failure_policy.as_deref() == Some("Fail")))
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let registered = loop {
        let _ = configs.create(&PostParams { dry_run: true, ..Default::default() }, &probe).await;
        if let Some(v) = validating.get_opt(VALIDATING).await.unwrap()
            && closed(&v)
        {
            break v;
        }
        assert!(Instant::now() < deadline, "the webhook configurations never failed closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let ca = registered.webhooks.unwrap()[0].client_config.ca_bundle.clone().unwrap().0;
    Served { url, ca: String::from_utf8(ca).unwrap(), options, stop, running }
}

/// Removes the webhook configurations a scenario's webhook server registered.
pub async fn remove_webhook_configurations(s: &Scenario) {
    use butler_controller::webhooks::registration::{MUTATING, VALIDATING};
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    use kube::api::DeleteParams;
    Api::<ValidatingWebhookConfiguration>::all(s.client.clone())
        .delete(VALIDATING, &DeleteParams::default())
        .await
        .unwrap();
    Api::<MutatingWebhookConfiguration>::all(s.client.clone())
        .delete(MUTATING, &DeleteParams::default())
        .await
        .unwrap();
}

/// The webhook configurations the core components ship, reached through the Service
/// `namespace/butler-webhook-service`, made as the operator makes them (to be removed with
/// [`remove_webhook_configurations`]).
pub async fn install_shipped_webhooks(s: &Scenario, namespace: &str) {
    let applier = butler_runtime::apply::Applier::new(s.client.clone(), "butler-operator");
    for config in butler_controller::webhooks::registration::shipped(namespace, "butler-webhook-service") {
        applier.apply(&config, false).await.unwrap();
    }
}

/// The controller's webhook server on `port` of 127.0.0.1, registered at `endpoint`, keeping
/// its certificates in `namespace`; not waited for. Through a Service it runs as the
/// controller's ServiceAccount (the components' configurations filled in under the shipped
/// RBAC); by URL with the scenario's rights, as a developer runs it outside the cluster.
pub async fn start_serving(
    s: &Scenario,
    namespace: &str,
    port: u16,
    endpoint: butler_controller::webhooks::registration::Endpoint,
) -> (butler_controller::webhooks::serving::ServingOptions, watch::Sender<bool>, JoinHandle<()>) {
    use butler_controller::webhooks::serving::{ServingOptions, start};
    let options = ServingOptions {
        address: ([127, 0, 0, 1], port).into(),
        cert_dir: None,
        endpoint,
        namespace: namespace.into(),
        secret: "butler-webhook-certs".into(),
        owner: None,
        recheck: ServingOptions::default_recheck(None),
    };
    let client = match options.endpoint {
        butler_controller::webhooks::registration::Endpoint::Service { .. } => {
            s.controller_client_as("butler-webhooks").await
        }
        butler_controller::webhooks::registration::Endpoint::Url(_) => s.client.clone(),
    };
    let (stop, shutdown) = butler_runtime::shutdown::shutdown_switch();
    let serving = start(client, options.clone(), shutdown).await.unwrap();
    tokio::spawn(serving.ready);
    (options, stop, tokio::spawn(serving.run))
}

/// The message of an API error.
pub fn api_message(error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) => status.message.clone(),
        other => other.to_string(),
    }
}

/// A Team of the scenario's with one admin and the `limits` given (YAML of `resourceLimits`, or
/// empty), Ready; removed with the scenario. Its name (its namespace is `team-{name}`).
pub async fn team_with_admin(s: &Scenario, base: &str, admin: &str, limits: &str) -> String {
    team_with_members(s, base, &[(admin, "admin")], limits).await
}

/// A Team of the scenario's with these users and roles (`admin`, `operator`, `viewer`) and
/// `limits` (a YAML flow map, or empty), once Ready: its name.
pub async fn team_with_members(s: &Scenario, base: &str, users: &[(&str, &str)], limits: &str) -> String {
    use butler_core::api::{Team, TeamPhase};
    let name = s.cluster.unique(base);
    let teams: Api<Team> = Api::all(s.client.clone());
    s.cluster.remove_cluster_objects_labelled(&format!("scenario.butlerlabs.dev/team={name}"));
    // What the Team controller makes for it goes too, should the controller stop first.
    s.cluster.remove_cluster_objects_labelled(&format!("{}={name}", butler_core::api::labels::LABEL_TEAM));
    s.cluster.clean_up_namespace(&format!("team-{name}"));
    let limits = match limits {
        "" => String::new(),
        some => format!("  resourceLimits: {some}\n"),
    };
    let users: String =
        users.iter().map(|(user, role)| format!("    - {{name: {user}, role: {role}}}\n")).collect();
    create(
        &teams,
        &format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {name}, labels: {{scenario.butlerlabs.dev/team: {name}}}}}\nspec:\n  access:\n    users:\n{users}{limits}"
        ),
    )
    .await;
    wait_for(&teams, &name, "Ready", |t| {
        t.and_then(|t| t.status.as_ref()).is_some_and(|s| s.phase == Some(TeamPhase::Ready))
    })
    .await;
    name
}
