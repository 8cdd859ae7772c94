//! A real kubectl and helm, as users run them, against the scenario's cluster (the in-memory
//! server, or a real one under `make e2e`). Each command is one a user types first; each
//! failed here before the server answered as kube-apiserver does.

use butler_e2e::Cluster;
use butler_e2e::clients::Client;

/// A ConfigMap and a Deployment, as a user writes them in a file.
fn manifest(namespace: &str) -> String {
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n  namespace: {namespace}\ndata:\n  mode: fast\n---\n\
         apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n  namespace: {namespace}\nspec:\n  replicas: 1\n  \
         selector:\n    matchLabels: {{app: web}}\n  template:\n    metadata:\n      labels: {{app: web}}\n    spec:\n      \
         containers:\n      - name: web\n        image: registry.k8s.io/pause:3.10\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_apply_validates_on_the_server_and_explain_reads_the_schemas() {
    let cluster = Cluster::connect().await;
    let Some(kubectl) = Client::new("kubectl", &cluster).await else { return };
    let ns = cluster.namespace("kubectl").await;
    let file = kubectl.home().join("app.yaml");
    std::fs::write(&file, manifest(&ns)).unwrap();
    let file = file.to_string_lossy().to_string();
    // The first thing a user types: validation on, as kubectl's default is.
    let out = kubectl.ok(&["apply", "-f", &file], None);
    assert!(out.contains("configmap/settings created"), "{out}");
    assert!(out.contains("deployment.apps/web created"), "{out}");
    let out = kubectl.ok(&["apply", "-f", &file], None);
    assert!(out.contains("configmap/settings unchanged"), "{out}");
    let out = kubectl.ok(&["apply", "--server-side", "-f", &file], None);
    assert!(out.contains("serverside-applied"), "{out}");
    // The `all` category of discovery.
    let out = kubectl.ok(&["get", "all", "-n", &ns], None);
    assert!(out.contains("deployment.apps/web"), "{out}");
    // A field the kind does not have is refused by the server, in kubectl's words.
    let typo = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: typo\n  namespace: {ns}\ndatta:\n  mode: slow\n"
    );
    let run = kubectl.run(&["apply", "-f", "-"], Some(&typo));
    assert!(!run.success, "a misspelt field is refused: {run:?}");
    assert!(run.stderr.contains("unknown field \"datta\""), "{}", run.stderr);
    // explain reads the server's OpenAPI v3.
    let out = kubectl.ok(&["explain", "configmap.data"], None);
    assert!(out.contains("KIND:") && out.contains("ConfigMap"), "{out}");
    assert!(out.contains("FIELD:") && out.contains("data"), "{out}");
    let out = kubectl.ok(&["explain", "deployment.spec.replicas"], None);
    assert!(out.contains("replicas"), "{out}");
    // scale through the scale subresource.
    let out = kubectl.ok(&["scale", "deployment/web", "-n", &ns, "--replicas=3"], None);
    assert!(out.contains("deployment.apps/web scaled"), "{out}");
    let out = kubectl.ok(&["get", "deployment/web", "-n", &ns, "-o", "jsonpath={.spec.replicas}"], None);
    assert_eq!(out.trim(), "3");
    kubectl.ok(&["delete", "-f", &file, "--wait=false"], None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_auth_and_tokens_answer_as_rbac_decides() {
    let cluster = Cluster::connect().await;
    let Some(kubectl) = Client::new("kubectl", &cluster).await else { return };
    let ns = cluster.namespace("auth").await;
    // The cluster's administrator (the in-memory server's, or the real kubeconfig's user).
    assert_eq!(kubectl.ok(&["auth", "can-i", "create", "configmaps", "-n", &ns], None).trim(), "yes");
    let out = kubectl.ok(&["auth", "can-i", "--list", "-n", &ns], None);
    assert!(out.contains("selfsubjectaccessreviews.authorization.k8s.io"), "{out}");
    let out = kubectl.ok(&["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"], None);
    assert!(!out.trim().is_empty(), "whoami names the user: {out}");
    // A ServiceAccount's token, accepted by the server as that account and allowed only what
    // its Role allows.
    kubectl.ok(&["create", "serviceaccount", "reader", "-n", &ns], None);
    kubectl.ok(&["create", "role", "reader", "-n", &ns, "--verb=get,list", "--resource=configmaps"], None);
    kubectl.ok(
        &[
            "create",
            "rolebinding",
            "reader",
            "-n",
            &ns,
            "--role=reader",
            &format!("--serviceaccount={ns}:reader"),
        ],
        None,
    );
    let token = kubectl.ok(&["create", "token", "reader", "-n", &ns, "--duration=10m"], None);
    let token = token.trim();
    assert!(!token.is_empty());
    let as_reader = ["--token", token, "-n", ns.as_str()];
    let can = |verb: &str, resource: &str| {
        let mut args = vec!["auth", "can-i", verb, resource];
        args.extend(as_reader);
        kubectl.run(&args, None).stdout.trim().to_string()
    };
    // RoleBindings take a moment to reach a real server's authorizer.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while can("list", "configmaps") != "yes" {
        assert!(std::time::Instant::now() < deadline, "the bound ServiceAccount may never list ConfigMaps");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert_eq!(can("create", "configmaps"), "no");
    assert_eq!(can("list", "secrets"), "no");
    let mut whoami = vec!["auth", "whoami", "-o", "jsonpath={.status.userInfo.username}"];
    whoami.extend(as_reader);
    assert_eq!(kubectl.ok(&whoami, None).trim(), format!("system:serviceaccount:{ns}:reader"));
    let run = kubectl.run(&["create", "token", "reader", "-n", &ns, "--duration=1m"], None);
    assert!(
        !run.success && run.stderr.contains("may not specify a duration less than 10 minutes"),
        "{run:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_reads_custom_resources_schemas_as_they_come() {
    let cluster = Cluster::connect().await;
    let Some(kubectl) = Client::new("kubectl", &cluster).await else { return };
    let group = format!("{}.clients.butlerlabs.dev", cluster.unique("g").replace('-', ""));
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gadgets.{group}\n\
         spec:\n  group: {group}\n  scope: Namespaced\n  names: {{plural: gadgets, singular: gadget, kind: Gadget}}\n  \
         versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        \
         type: object\n        properties:\n          spec:\n            type: object\n            description: What the gadget does.\n            \
         properties:\n              size: {{type: integer, description: How big it is.}}\n"
    );
    let crd_doc: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_saphyr::from_str(&crd).unwrap();
    cluster.install_own_crd(&crd_doc).await;
    let ns = cluster.namespace("gadgets").await;
    let gadget = format!(
        "apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: g1\n  namespace: {ns}\nspec:\n  size: 3\n"
    );
    // kube-apiserver publishes a new CRD's schema within seconds.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let api_version = format!("--api-version={group}/v1");
        let run = kubectl.run(&["explain", "gadgets.spec.size", &api_version], None);
        if run.success {
            assert!(run.stdout.contains("How big it is."), "{}", run.stdout);
            break;
        }
        assert!(std::time::Instant::now() < deadline, "explain never read the CRD's schema: {}", run.stderr);
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    }
    let out = kubectl.ok(&["apply", "-f", "-"], Some(&gadget));
    assert!(out.contains("created"), "{out}");
    let wrong = gadget.replace("size: 3", "size: 3\n  colour: red");
    let run = kubectl.run(&["apply", "-f", "-"], Some(&wrong.replace("g1", "g2")));
    assert!(!run.success && run.stderr.contains("unknown field \"spec.colour\""), "{run:?}");
}

/// Plays the Deployment controller where no kubelet runs, until `stop` (a real cluster rolls
/// its Deployments out itself).
fn roll_out_meanwhile(cluster: &Cluster, namespace: &str) -> Option<tokio::task::JoinHandle<()>> {
    cluster.server()?;
    let client = cluster.client();
    let namespace = namespace.to_string();
    Some(tokio::spawn(async move {
        loop {
            let _ = butler_apiserver::stand_ins::roll_out_deployments(
                &client,
                &namespace,
                "app.kubernetes.io/instance",
            )
            .await;
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_upgrades_rolls_back_and_uninstalls_a_chart() {
    let cluster = Cluster::connect().await;
    let Some(helm) = Client::new("helm", &cluster).await else { return };
    let ns = cluster.namespace("helm").await;
    let rolling = roll_out_meanwhile(&cluster, &ns);
    // The chart every helm user starts from.
    helm.ok(&["create", "demo"], None);
    let chart = helm.home().join("demo").to_string_lossy().to_string();
    helm.ok(&["lint", &chart], None);
    let out = helm.ok(&["install", "demo", &chart, "-n", &ns, "--wait", "--timeout", "60s"], None);
    assert!(out.contains("STATUS: deployed"), "{out}");
    let out = helm.ok(&["list", "-n", &ns], None);
    assert!(out.contains("demo") && out.contains("deployed"), "{out}");
    // As users skip the chart's own schema: the server's OpenAPI still answers.
    let out = helm.ok(&["install", "other", &chart, "-n", &ns, "--skip-schema-validation"], None);
    assert!(out.contains("STATUS: deployed"), "{out}");
    helm.ok(&["uninstall", "other", "-n", &ns], None);
    let out = helm.ok(
        &["upgrade", "demo", &chart, "-n", &ns, "--set", "replicaCount=2", "--wait", "--timeout", "60s"],
        None,
    );
    assert!(out.contains("REVISION: 2"), "{out}");
    let out = helm.ok(&["status", "demo", "-n", &ns], None);
    assert!(out.contains("REVISION: 2") && out.contains("STATUS: deployed"), "{out}");
    helm.ok(&["rollback", "demo", "1", "-n", &ns, "--wait", "--timeout", "60s"], None);
    let out = helm.ok(&["history", "demo", "-n", &ns], None);
    assert!(out.contains("Rollback to 1"), "{out}");
    let out = helm.ok(&["uninstall", "demo", "-n", &ns, "--wait", "--timeout", "60s"], None);
    assert!(out.contains("uninstalled"), "{out}");
    let out = helm.ok(&["list", "-n", &ns], None);
    assert!(!out.contains("demo"), "{out}");
    if let Some(rolling) = rolling {
        rolling.abort();
    }
}
