//! The Helm chart, installed with a real helm (v4.1.4) as a user installs it: the operator runs
//! under the chart's ServiceAccount and RBAC, the providers the values declare become Ready,
//! `helm upgrade` moves one, and `helm uninstall` removes the providers (every other kind before
//! the core, through the chart's pre-delete Job) before the operator, keeping the CRDs.

use std::sync::{Arc, Mutex};

use butler_e2e::clients::Client as Helm;
use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRole;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::cli::keep_marking_available;
use crate::fixtures::selector;
use crate::support::{OPERATOR_AGENT, Scenario, is};
use crate::upgrade::{installed, publish_releases};

/// Who runs the release's Jobs (their `spec.managedBy`): the scenario, in place of
/// kube-controller-manager and a kubelet (on a real cluster Kubernetes' Job controller leaves
/// them alone).
const JOB_RUNNER: &str = "butler-e2e.butlerlabs.dev/job-runner";

/// The scenario's `clusterRoleName`.
fn cluster_role_name(namespace: &str) -> String {
    format!("butler-operator-{namespace}")
}

/// The scenario's release: named after its namespace, so that its cluster-wide objects
/// (labelled `app.kubernetes.io/instance` with it) are its own to take away.
fn release_name(s: &Scenario) -> String {
    s.namespace.clone()
}

/// The values of the scenario's release: Butler's core and the test provider `widget`, from the
/// scenario's ConfigMaps, in the scenario's namespace (which the chart does not create).
fn values(namespace: &str, widget: &str) -> String {
    values_keeping(namespace, widget, false)
}

/// [`values`], with `uninstall.deleteProviders` false when `keep`.
fn values_keeping(namespace: &str, widget: &str, keep: bool) -> String {
    let provider = |label: &str, version: &str| {
        let mut spec: serde_json::Value = serde_json::from_str(&selector(label)).unwrap();
        spec["version"] = json!(version);
        spec["namespace"] = json!(namespace);
        spec["createNamespace"] = json!(false);
        spec
    };
    let values = json!({
        "core": {"butler": provider("butler", "v1.0.0")},
        "infrastructure": {"widget": provider("infrastructure-widget", widget)},
        // No kubelet here: the scenario runs the operator itself, as the chart's account.
        "replicaCount": 0,
        "uninstall": {"timeout": 60, "deleteProviders": !keep, "managedBy": JOB_RUNNER},
        // Cluster-wide names of the scenario's own, beside other releases of a shared cluster.
        "clusterRoleName": cluster_role_name(namespace),
    });
    serde_json::to_string_pretty(&values).unwrap()
}

/// Plays kube-controller-manager and the kubelet for the release's Jobs (none run here): each
/// new Job's container runs as the operator's binary with the Job's arguments, under the Job's
/// ServiceAccount, and the Job is marked Complete or Failed by how it ended. What each run
/// printed is kept.
fn run_jobs(s: &Scenario) -> (tokio::task::JoinHandle<()>, Arc<Mutex<Vec<String>>>) {
    let (namespace, client) = (s.namespace.clone(), s.client.clone());
    let account = JobAccount::of(s, "butler-operator-uninstall");
    let printed = Arc::new(Mutex::new(Vec::new()));
    let kept = Arc::clone(&printed);
    let task = tokio::spawn(async move {
        let jobs: Api<Job> = Api::namespaced(client, &namespace);
        loop {
            for job in jobs.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default() {
                let ours = job.spec.as_ref().and_then(|s| s.managed_by.as_deref()) == Some(JOB_RUNNER);
                if !ours || job.status.as_ref().and_then(|s| s.conditions.as_ref()).is_some() {
                    continue;
                }
                let spec = job.spec.as_ref().and_then(|s| s.template.spec.clone()).expect("a pod spec");
                assert_eq!(spec.service_account_name.as_deref(), Some("butler-operator-uninstall"));
                let args = spec.containers[0].args.clone().unwrap_or_default();
                let kubeconfig = account.kubeconfig().await;
                let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_butler-operator"))
                    .args(&args)
                    .env("KUBECONFIG", &kubeconfig)
                    .output()
                    .await
                    .expect("the operator's binary runs");
                let text =
                    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
                kept.lock().unwrap().push(text);
                let now = "2026-01-01T00:00:00Z";
                let conditions = match out.status.success() {
                    true => json!([
                        {"type": "SuccessCriteriaMet", "status": "True", "lastTransitionTime": now},
                        {"type": "Complete", "status": "True", "lastTransitionTime": now},
                    ]),
                    false => {
                        json!([
                            {"type": "FailureTarget", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": now},
                            {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded", "lastTransitionTime": now},
                        ])
                    }
                };
                let counts =
                    if out.status.success() { json!({"succeeded": 1}) } else { json!({"failed": 1}) };
                let mut status = json!({"startTime": now, "conditions": conditions});
                status.as_object_mut().unwrap().extend(counts.as_object().unwrap().clone());
                if out.status.success() {
                    status["completionTime"] = json!(now);
                }
                let name = job.metadata.name.clone().unwrap();
                let _ = jobs
                    .patch_status(&name, &PatchParams::default(), &Patch::Merge(json!({"status": status})))
                    .await;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    });
    (task, printed)
}

/// Where a Job's pod would reach the cluster from, as the ServiceAccount `name` of the
/// scenario's namespace: the in-memory server's URL and a token it issued, or the real
/// cluster's kubeconfig (a token is asked for once the account exists: helm makes the hook's
/// account only when it uninstalls).
struct JobAccount {
    name: String,
    namespace: String,
    client: kube::Client,
    memory: Option<(String, String)>,
    admin: Option<std::path::PathBuf>,
}

impl JobAccount {
    fn of(s: &Scenario, name: &str) -> JobAccount {
        JobAccount {
            name: name.into(),
            namespace: s.namespace.clone(),
            client: s.client.clone(),
            memory: s
                .cluster
                .server()
                .map(|server| (server.url().to_string(), server.service_account_token(&s.namespace, name))),
            admin: (!s.cluster.is_in_memory()).then(|| s.cluster.kubeconfig()),
        }
    }

    /// A kubeconfig file with the account's token.
    async fn kubeconfig(&self) -> std::path::PathBuf {
        let path = std::env::temp_dir().join(format!("{}-{}.kubeconfig", self.namespace, self.name));
        let (server, token, authority) = match (&self.memory, &self.admin) {
            (Some((url, token)), _) => (url.clone(), token.clone(), String::new()),
            (None, Some(admin)) => {
                use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
                let request = TokenRequest {
                    spec: TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() },
                    ..Default::default()
                };
                let issued = Api::<ServiceAccount>::namespaced(self.client.clone(), &self.namespace)
                    .create_token_request(&self.name, &Default::default(), &request)
                    .await
                    .unwrap_or_else(|e| panic!("a token for {}: {e}", self.name));
                let admin = kube::config::Kubeconfig::read_from(admin).unwrap();
                let context = admin.current_context.clone().unwrap_or_default();
                let cluster_name = admin
                    .contexts
                    .iter()
                    .find(|c| c.name == context)
                    .and_then(|c| c.context.clone())
                    .unwrap()
                    .cluster;
                let cluster = admin
                    .clusters
                    .iter()
                    .find(|c| c.name == cluster_name)
                    .and_then(|c| c.cluster.clone())
                    .unwrap();
                let authority = match (cluster.certificate_authority_data, cluster.certificate_authority) {
                    (Some(data), _) => format!(", certificate-authority-data: '{data}'"),
                    (None, Some(file)) => format!(", certificate-authority: '{file}'"),
                    (None, None) => String::new(),
                };
                (cluster.server.unwrap_or_default(), issued.status.unwrap().token, authority)
            }
            (None, None) => unreachable!("a cluster is in memory or read from a kubeconfig"),
        };
        std::fs::write(
            &path,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: '{server}'{authority}}}\ncontexts:\n- name: c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\nusers:\n- name: u\n  user: {{token: '{token}'}}\n"
            ),
        )
        .unwrap();
        path
    }
}

/// `helm uninstall` of the scenario's release, its pre-delete Job run as a cluster would run it:
/// what the Job printed.
async fn uninstall(s: &Scenario, helm: &Helm) -> String {
    let (jobs, printed) = run_jobs(s);
    let release = release_name(s);
    let out = tokio::task::block_in_place(|| {
        helm.ok(&["uninstall", &release, "-n", &s.namespace, "--timeout", "120s"], None)
    });
    assert!(out.contains("uninstalled"), "{out}");
    jobs.abort();
    printed.lock().unwrap().join("\n")
}

/// The scenario's release installed with the real helm (`keep`: `uninstall.deleteProviders`
/// false) and the operator running as the chart's ServiceAccount, both providers Ready; `None`
/// where the scenario cannot run (a real cluster, no helm). The helm client, the chart's path,
/// the values file, helm's output and the task that marks Deployments available.
async fn installed_release(
    s: &mut Scenario,
    keep: bool,
) -> Option<(Helm, String, std::path::PathBuf, String, tokio::task::JoinHandle<()>)> {
    let helm = Helm::new("helm", &s.cluster).await?;
    s.cluster.remove_cluster_objects_labelled(&format!("app.kubernetes.io/instance={}", release_name(s)));
    publish_releases(s).await;
    let chart = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(butler_operator::chart::DIR);
    let chart = chart.to_str().unwrap().to_string();
    let file = helm.home().join("values.yaml");
    std::fs::write(&file, values_keeping(&s.namespace, "v1.0.0", keep)).unwrap();
    let namespace = s.namespace.clone();
    // The scenario's cluster has the provider CRDs already (every scenario installs them).
    let release = ["-n", &namespace, "-f", file.to_str().unwrap(), "--skip-crds"];
    let name = release_name(s);
    let out = tokio::task::block_in_place(|| {
        helm.ok(&[&["install", name.as_str(), chart.as_str()][..], &release[..]].concat(), None)
    });
    assert!(out.contains("STATUS: deployed") && out.contains("CoreProvider"), "{out}");
    // The operator as the chart runs it: its ServiceAccount, its RBAC.
    let account = s.cluster.service_account_config(OPERATOR_AGENT, &s.namespace, "butler-operator").await;
    s.start_operator_as(kube::Client::try_from(account).unwrap());
    let marker = keep_marking_available(s);
    s.wait_for::<CoreProvider>("butler", "Ready", |p| is(p, "Ready", "True")).await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| is(p, "Ready", "True")).await;
    Some((helm, chart, file, out, marker))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_the_operator_and_its_providers_upgrades_one_and_uninstalls_them_in_order() {
    let mut s = Scenario::new("chart").await;
    let Some((helm, chart, file, _, marker)) = installed_release(&mut s, false).await else { return };
    let chart = chart.as_str();
    let namespace = s.namespace.clone();
    let release = ["-n", &namespace, "-f", file.to_str().unwrap(), "--skip-crds"];
    assert!(!s.deployments("InfrastructureProvider", "widget").await.is_empty(), "the widget runs");
    // butlerctl finds the chart's operator by its ClusterRole of the release's own name.
    let operators = butler_operator::cli::honoured::operators(&s.client).await.expect("readable");
    let own = format!("{namespace}/butler-operator");
    assert!(operators.found.iter().any(|o| o.name == own), "{:?}", operators.found);

    // helm upgrade with a new provider version upgrades through the operator.
    std::fs::write(&file, values(&s.namespace, "v1.1.0")).unwrap();
    let out = tokio::task::block_in_place(|| {
        helm.ok(&[&["upgrade", release_name(&s).as_str(), chart][..], &release[..]].concat(), None)
    });
    assert!(out.contains("REVISION: 2"), "{out}");
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;

    // Every object the release holds, to find none of them after the uninstall.
    let manifest = tokio::task::block_in_place(|| {
        helm.ok(&["get", "manifest", &release_name(&s), "-n", &namespace], None)
    });
    let made: Vec<serde_json::Value> = serde_saphyr::from_multiple(&manifest).unwrap();
    let made: Vec<serde_json::Value> = made.into_iter().filter(|o| !o.is_null()).collect();
    assert!(made.len() > 10, "{manifest}");

    // helm uninstall: the providers go first, the core last, each waited for.
    let printed = uninstall(&s, &helm).await;
    let widget = printed.find(&format!("Deleting InfrastructureProvider {}/widget", s.namespace));
    let core = printed.find(&format!("Deleting CoreProvider {}/butler", s.namespace));
    assert!(
        matches!((widget, core), (Some(w), Some(c)) if w < c),
        "infrastructure first, core last:\n{printed}"
    );
    assert!(s.api::<CoreProvider>().list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(s.api::<InfrastructureProvider>().list(&ListParams::default()).await.unwrap().items.is_empty());
    assert!(s.deployments("InfrastructureProvider", "widget").await.is_empty(), "components removed");
    assert!(s.deployments("CoreProvider", "butler").await.is_empty(), "components removed");
    // What stays is what the page says stays: the CRDs; the chart's RBAC and hook are gone.
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    assert!(crds.get_opt("coreproviders.operator.butlerlabs.dev").await.unwrap().is_some(), "CRDs kept");
    let roles: Api<ClusterRole> = Api::all(s.client.clone());
    let own = cluster_role_name(&s.namespace);
    for name in
        [own.clone(), format!("{own}-upstream"), format!("{own}-uninstall"), format!("{own}-metrics-reader")]
    {
        assert!(roles.get_opt(&name).await.unwrap().is_none(), "ClusterRole {name} is left");
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(
        accounts.get_opt("butler-operator-uninstall").await.unwrap().is_none(),
        "the hook's account is left"
    );
    let discovery = kube::discovery::Discovery::new(s.client.clone()).run().await.unwrap();
    for object in &made {
        let (kind, name) = (object["kind"].as_str().unwrap(), object["metadata"]["name"].as_str().unwrap());
        let (group, version) = match object["apiVersion"].as_str().unwrap().split_once('/') {
            Some((g, v)) => (g, v),
            None => ("", object["apiVersion"].as_str().unwrap()),
        };
        let (resource, caps) = discovery
            .resolve_gvk(&kube::api::GroupVersionKind::gvk(group, version, kind))
            .unwrap_or_else(|| panic!("{kind} is served"));
        let api: Api<kube::api::DynamicObject> = match caps.scope {
            kube::discovery::Scope::Namespaced => {
                let ns = object["metadata"]["namespace"].as_str().unwrap_or(&namespace);
                Api::namespaced_with(s.client.clone(), ns, &resource)
            }
            kube::discovery::Scope::Cluster => Api::all_with(s.client.clone(), &resource),
        };
        assert!(api.get_opt(name).await.unwrap().is_none(), "{kind} {name} of the release is left");
    }
    marker.abort();
    s.stop_operator().await;
}

/// `uninstall.deleteProviders=false`: helm uninstall keeps the providers and their components,
/// and leaves none with a finalizer nothing would remove (the operator stopped first, its
/// finalizer taken off); a provider deleted afterwards goes at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_uninstall_keeping_the_providers_leaves_none_with_the_operators_finalizer() {
    let mut s = Scenario::new("chart-keep").await;
    let Some((helm, _, _, out, marker)) = installed_release(&mut s, true).await else { return };
    assert!(out.contains("helm uninstall keeps them"), "{out}");
    // The chart's Deployment runs no pod here (the scenario runs the operator): stopping it is
    // what the hook's scale-down does on a cluster.
    s.stop_operator().await;

    let printed = uninstall(&s, &helm).await;
    assert!(printed.contains(&format!("Kept InfrastructureProvider {}/widget", s.namespace)), "{printed}");
    let widget = s.api::<InfrastructureProvider>().get("widget").await.unwrap();
    let core = s.api::<CoreProvider>().get("butler").await.unwrap();
    for finalizers in [&widget.metadata.finalizers, &core.metadata.finalizers] {
        let finalizers = finalizers.clone().unwrap_or_default();
        assert!(!finalizers.iter().any(|f| f == butler_operator::api::PROVIDER_FINALIZER), "{finalizers:?}");
    }
    assert!(!s.deployments("InfrastructureProvider", "widget").await.is_empty(), "its components run on");
    // Deleted later, with no operator, a kept provider goes at once.
    s.api::<InfrastructureProvider>().delete("widget", &Default::default()).await.unwrap();
    s.api::<CoreProvider>().delete("butler", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("widget").await;
    s.wait_gone::<CoreProvider>("butler").await;
    marker.abort();
}
