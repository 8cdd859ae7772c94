//! butlerctl's cluster commands against a cluster with the operator running: the library
//! calls, and the binary as a user runs it (with --kubeconfig).

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use butler_operator::cli::describe;
use butler_operator::cli::plan::{Next, upgrade_plan};
use butler_operator::upgrade::providers;
use butler_repository::{ClusterctlConfig, HttpOptions, RemoteOptions};

use crate::support::Scenario;
use crate::upgrade::{installed, publish_releases, spec};

fn remote() -> RemoteOptions {
    RemoteOptions { http: HttpOptions { cache: None, ..Default::default() }, ..Default::default() }
}

/// The kubeconfig of the scenario's cluster, for the binary.
fn kubeconfig(s: &Scenario) -> std::path::PathBuf {
    match s.cluster.server() {
        Some(server) => server.kubeconfig().to_path_buf(),
        None => std::env::var_os(butler_e2e::cluster::KUBECONFIG_VARIABLE)
            .expect("a real cluster's kubeconfig")
            .into(),
    }
}

async fn butlerctl(args: &[&str]) -> (i32, String, String) {
    let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_butlerctl"))
        .args(args)
        .env("NO_COLOR", "1")
        .env("GOPROXY", "off")
        // No clusterctl config, kubeconfig or cache of the person running the tests.
        .env("HOME", "/nonexistent-home")
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("KUBECONFIG")
        .env("BUTLER_CACHE_DIR", std::env::temp_dir().join("butlerctl-scenario-cache"))
        .output()
        .await
        .expect("butlerctl runs");
    (
        output.status.code().unwrap_or(-1),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn describe_and_upgrade_plan_read_the_providers_and_their_repositories() {
    let mut s = Scenario::new("cli-plan").await;
    publish_releases(&s).await;
    s.start_operator();
    let marker = keep_marking_available(&s);
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<CoreProvider>("butler", "v1.0.0 installed", installed("v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;

    let plans = upgrade_plan(&s.client, Some(&s.namespace), &ClusterctlConfig::default(), &remote(), true)
        .await
        .unwrap();
    // --diff: v1.1.0 of the widget drops its settings ConfigMap and its CRD (which stays).
    let step =
        plans[0].rows.iter().find(|r| r.label == "infrastructure-widget").unwrap().diff.clone().unwrap();
    let ns = &s.namespace;
    assert_eq!(step.deleted, [format!("ConfigMap {ns}/widget-settings")], "{step:?}");
    assert_eq!(step.kept, ["CustomResourceDefinition gadgets.widget.test.io"], "{step:?}");
    assert!(step.changed.iter().any(|o| o.starts_with("Deployment ")), "the image moves: {step:?}");
    assert!(step.added.is_empty(), "{step:?}");
    let summary: Vec<(String, Vec<(String, Next)>)> = plans
        .iter()
        .map(|p| (p.contract.clone(), p.rows.iter().map(|r| (r.label.clone(), r.next.clone())).collect()))
        .collect();
    assert_eq!(
        summary,
        [
            (
                "v1beta1".to_string(),
                vec![
                    ("butler".to_string(), Next::UpToDate),
                    ("infrastructure-widget".to_string(), Next::To("v1.1.0".into()))
                ]
            ),
            (
                "v1beta2".to_string(),
                vec![
                    ("butler".to_string(), Next::To("v2.0.0".into())),
                    ("infrastructure-widget".to_string(), Next::To("v2.0.0".into()))
                ]
            ),
        ]
    );

    let rows = providers::list(&s.client, Some(&s.namespace)).await.unwrap();
    let tree = describe::render(&rows, describe::Format::Tree, jiff::Timestamp::now(), false, &[]);
    assert!(
        tree.contains("├─CoreProvider/butler") && tree.contains("└─InfrastructureProvider/widget"),
        "{tree}"
    );
    assert!(tree.contains("ProviderInstalled"), "{tree}");

    // The binary, with kubectl's flags.
    let config = kubeconfig(&s);
    let config = config.to_str().unwrap();
    let (code, stdout, stderr) =
        butlerctl(&["describe", "providers", "-n", &s.namespace, "--kubeconfig", config]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("NAME "), "{stdout}");
    assert!(stdout.contains(&format!("Namespace/{}", s.namespace)), "{stdout}");
    let (code, stdout, _) =
        butlerctl(&["describe", "providers", "-n", &s.namespace, "-o", "json", "--kubeconfig", config]).await;
    assert_eq!(code, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(json[1]["name"], "widget");
    let (code, stdout, stderr) =
        butlerctl(&["upgrade", "plan", "-n", &s.namespace, "--diff", "--kubeconfig", config]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("Checking new release availability..."), "progress on stderr: {stderr}");
    assert!(stdout.contains("butlerctl upgrade apply --contract v1beta1"), "{stdout}");
    assert!(stdout.contains("Latest release available for the v1beta2 contract:"), "{stdout}");
    assert!(stdout.contains(&format!("  - ConfigMap {}/widget-settings", s.namespace)), "{stdout}");

    let (code, _, stderr) = butlerctl(&["describe", "providers", "-o", "xml", "--kubeconfig", config]).await;
    assert_eq!(code, 2, "a usage error: {stderr}");
    let (code, _, stderr) = butlerctl(&["upgrade", "apply", "--kubeconfig", config]).await;
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("give --contract CONTRACT, or the providers to upgrade"), "{stderr}");
    // Within the contract, by name and version, as a user runs it.
    let (code, stdout, stderr) = butlerctl(&[
        "upgrade",
        "apply",
        "-n",
        &s.namespace,
        "-i",
        "widget:v1.1.0",
        "--timeout",
        "30",
        "--kubeconfig",
        config,
    ])
    .await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("v1.0.0 -> v1.1.0"), "{stdout}");
    assert!(stderr.contains("Upgrading within the contract"), "{stderr}");
    let (code, _, stderr) =
        butlerctl(&["describe", "providers", "--kubeconfig", "/nonexistent/kubeconfig"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot read the kubeconfig /nonexistent/kubeconfig"), "{stderr}");
    marker.abort();
    s.stop_operator().await;
}

/// `upgrade apply` for the providers of `namespace`, as the scenarios run it.
async fn upgrade(
    client: &kube::Client,
    namespace: &str,
    wanted: butler_operator::upgrade::moves::Wanted,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    butler_operator::cli::follow::upgrade_apply(client, Some(namespace), &wanted, waits(), progress).await
}

fn waits() -> butler_operator::cli::apply::Waits {
    butler_operator::cli::apply::Waits {
        timeout: std::time::Duration::from_secs(30),
        poll: std::time::Duration::from_millis(50),
    }
}

/// Marks the scenario's Deployments Available while the scenario runs (no kubelet here).
pub(crate) fn keep_marking_available(s: &Scenario) -> tokio::task::JoinHandle<()> {
    keep_marking_available_where(s, butler_operator::controller::vocabulary::LABEL_NAME.to_string())
}

/// Marks the scenario's Deployments Available while the scenario runs, as a cluster whose
/// nodes run every pod they can take: those of [`crate::fixtures::broken_components`] no node
/// takes, and they never become Available.
fn keep_marking_available_where(s: &Scenario, selector: String) -> tokio::task::JoinHandle<()> {
    let (client, namespace, in_memory) = (s.client.clone(), s.namespace.clone(), s.cluster.is_in_memory());
    tokio::spawn(async move {
        if !in_memory {
            return;
        }
        loop {
            let _ = butler_apiserver::stand_ins::roll_out_deployments(&client, &namespace, &selector).await;
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upgrade_apply_within_and_across_contracts_and_again_after_an_interruption() {
    use butler_operator::controller::upgrades::engine::PAUSED_BY;
    use butler_operator::upgrade::moves::Wanted;
    let mut s = Scenario::new("cli-apply").await;
    publish_releases(&s).await;
    s.start_operator();
    let marker = keep_marking_available(&s);
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;
    let quiet = |_: &str| {};

    // Planned first: the operator's plan, waiting for approval; nothing moves.
    let planned = butler_operator::cli::follow::upgrade_plan(
        &s.client,
        Some(&s.namespace),
        &Wanted::Contract("v1beta1".into()),
        waits(),
    )
    .await
    .unwrap();
    assert!(planned.contains("within the contract"), "{planned}");
    assert!(planned.contains("InfrastructureProvider widget v1.0.0 -> v1.1.0: "), "{planned}");
    assert!(planned.contains("Steps:\n  1. Upgrade InfrastructureProvider widget to v1.1.0\n"), "{planned}");
    assert!(planned.contains("It waits for approval: butlerctl upgrade approve butlerctl-"), "{planned}");
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let widget = s.api::<InfrastructureProvider>().get("widget").await.unwrap();
    assert_eq!(widget.spec.version.as_deref(), Some("v1.0.0"), "a plan moves nothing");

    // Within the contract, the same request applied: the plan approved and run; versions
    // bumped, nothing paused.
    let done = upgrade(&s.client, &s.namespace, Wanted::Contract("v1beta1".into()), &quiet).await.unwrap();
    assert!(done.contains("InfrastructureProvider") && done.contains("v1.0.0 -> v1.1.0"), "{done}");
    let widget = s.api::<InfrastructureProvider>().get("widget").await.unwrap();
    assert_eq!(widget.status.as_ref().unwrap().installed_version.as_deref(), Some("v1.1.0"));
    assert_eq!(widget.spec.paused, None, "never paused within a contract");

    // Across contracts, interrupted once every provider is held at 0.
    let (client, namespace) = (s.client.clone(), s.namespace.clone());
    let first = tokio::spawn(async move {
        let lines = std::sync::Mutex::new(Vec::new());
        let _ = upgrade(&client, &namespace, Wanted::Contract("v1beta2".into()), &|l| {
            lines.lock().unwrap().push(l.to_string())
        })
        .await;
    });
    s.wait_for::<CoreProvider>("butler", "paused", |p| crate::support::is(p, "Paused", "True")).await;
    s.wait_for::<InfrastructureProvider>("widget", "paused", |p| crate::support::is(p, "Paused", "True"))
        .await;
    first.abort();
    let _ = first.await;
    let core = s.api::<CoreProvider>().get("butler").await.unwrap();
    let paused_by = core.metadata.annotations.as_ref().unwrap()[PAUSED_BY].clone();
    assert!(paused_by.starts_with("butlerctl-"), "the cluster shows the upgrade in progress: {paused_by}");

    // Another upgrade is refused while this one is unfinished.
    let err = upgrade(&s.client, &s.namespace, Wanted::Contract("v1beta1".into()), &quiet).await.unwrap_err();
    assert!(
        err.contains(&format!(
            "ProviderUpgrade {}/{paused_by} (to contract v1beta2) is in progress",
            s.namespace
        )),
        "{err}"
    );

    // Run again: it goes on from what the cluster shows.
    let lines = std::sync::Mutex::new(Vec::new());
    upgrade(&s.client, &s.namespace, Wanted::Contract("v1beta2".into()), &|l| {
        lines.lock().unwrap().push(l.to_string())
    })
    .await
    .unwrap();
    let lines = lines.into_inner().unwrap();
    assert!(lines.iter().any(|l| l.starts_with("Upgrading across contracts, to v1beta2")), "{lines:?}");
    for p in [
        serde_json::to_value(s.api::<CoreProvider>().get("butler").await.unwrap()).unwrap(),
        serde_json::to_value(s.api::<InfrastructureProvider>().get("widget").await.unwrap()).unwrap(),
    ] {
        assert_eq!(p["status"]["installedVersion"], "v2.0.0", "{p}");
        assert_eq!(p["status"]["contract"], "v1beta2");
        assert_eq!(p["spec"]["paused"], false, "unpaused");
        assert!(p["metadata"]["annotations"].get(PAUSED_BY).is_none(), "the mark is gone");
    }
    // No kubelet here: the Deployments are marked Available again and again, so Ready is
    // waited for rather than read once.
    s.wait_for::<CoreProvider>("butler", "Ready", |p| crate::support::is(p, "Ready", "True")).await;
    s.wait_for::<InfrastructureProvider>("widget", "Ready", |p| crate::support::is(p, "Ready", "True")).await;
    // A step the operator refuses stops the command with the operator's message.
    let back = Wanted::Versions(vec![("infrastructure-widget".into(), "v1.1.0".into())]);
    let err = upgrade(&s.client, &s.namespace, back, &quiet).await.unwrap_err();
    assert!(
        err.contains("the operator refused: InfrastructureProvider") && err.contains("DowngradeRefused"),
        "{err}"
    );
    marker.abort();
    s.stop_operator().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_goes_in_the_safe_order_and_shows_what_blocks() {
    use butler_operator::cli::delete::{Which, delete};
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut s = Scenario::new("cli-delete").await;
    publish_releases(&s).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(s.client.clone());
    assert!(crds.get_opt("gadgets.widget.test.io").await.unwrap().is_some());
    let short = butler_operator::cli::apply::Waits {
        timeout: std::time::Duration::from_secs(2),
        poll: std::time::Duration::from_millis(50),
    };

    // The core alone waits for the others, and says so.
    let lines = std::sync::Mutex::new(Vec::new());
    let err =
        delete(&s.client, Some(&s.namespace), &Which::Labels(vec!["butler".into()]), false, short, &|l| {
            lines.lock().unwrap().push(l.to_string())
        })
        .await
        .unwrap_err();
    assert!(err.contains("is not gone after") && err.contains("widget"), "{err}");
    assert!(
        lines.lock().unwrap().iter().any(|l| l.starts_with("  waiting: ")),
        "{:?}",
        lines.lock().unwrap()
    );

    // --include-namespace keeps a namespace where a provider stays, naming it.
    let ns = [s.namespace.clone()];
    let kept = butler_operator::cli::delete::delete_namespaces(&s.client, &ns, &|_| {}).await.unwrap();
    assert!(kept.contains("kept") && kept.contains("InfrastructureProvider widget"), "{kept}");

    // Everything, CRDs included: the infrastructure provider first, then the core.
    let lines = std::sync::Mutex::new(Vec::new());
    let done = delete(&s.client, Some(&s.namespace), &Which::All, true, waits(), &|l| {
        lines.lock().unwrap().push(l.to_string())
    })
    .await
    .unwrap();
    let order: Vec<&str> = done.lines().collect();
    assert_eq!(order.len(), 2, "{done}");
    assert!(order[0].starts_with("InfrastructureProvider") && order[1].starts_with("CoreProvider"), "{done}");
    assert!(crds.get_opt("gadgets.widget.test.io").await.unwrap().is_none(), "--include-crd");
    let err = delete(&s.client, Some(&s.namespace), &Which::All, false, waits(), &|_| {}).await.unwrap_err();
    assert_eq!(err, "no providers to delete");
    // Once they are gone, --include-namespace deletes their namespace, as clusterctl does.
    let gone = butler_operator::cli::delete::delete_namespaces(&s.client, &ns, &|_| {}).await.unwrap();
    assert_eq!(gone, format!("Namespace {} deleted\n", s.namespace));
    let namespaces: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(s.client.clone());
    let left = namespaces.get_opt(&s.namespace).await.unwrap();
    assert!(left.is_none_or(|n| n.metadata.deletion_timestamp.is_some()), "the namespace goes");
    s.stop_operator().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_airgap_bundle_packed_once_installs_providers_from_configmaps() {
    let mut s = Scenario::new("cli-airgap").await;
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle.tar.gz");
    let bundle = bundle.to_str().unwrap();
    let (code, stdout, stderr) =
        butlerctl(&["airgap", "pack", "--core", "butler", "-i", "harvester:v0.1.0", "-o", bundle]).await;
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.trim(), bundle);
    let folder = dir.path().join("bundle");
    let (code, stdout, stderr) =
        butlerctl(&["airgap", "pack", "--core", "butler", "-i", "harvester", "-o", folder.to_str().unwrap()])
            .await;
    assert_eq!(code, 0, "{stderr}");
    for file in [
        "operator/butler-operator.yaml",
        "configmaps/butler-v0.1.0.yaml",
        "configmaps/infrastructure-harvester-v0.1.0.yaml",
    ] {
        assert!(stdout.contains(file), "{file}: {stdout}");
    }
    let (code, _, stderr) = butlerctl(&["airgap", "pack", "-o", bundle]).await;
    assert_eq!(code, 2, "{stderr}");

    // The air-gapped side: the operator only on our own server (on a shared cluster it is
    // installed once for everyone), the ConfigMaps in the providers' namespace.
    let config = kubeconfig(&s);
    let mut load =
        vec!["airgap", "load", "-f", bundle, "-n", &s.namespace, "--kubeconfig", config.to_str().unwrap()];
    if !s.cluster.is_in_memory() {
        load.push("--skip-operator");
    }
    let (code, stdout, stderr) = butlerctl(&load).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains(&format!("ConfigMap {}/infrastructure-harvester-v0.1.0 applied", s.namespace)),
        "{stdout}"
    );
    if s.cluster.is_in_memory() {
        assert!(stdout.contains("operator/butler-operator.yaml applied"), "{stdout}");
    }

    s.start_operator();
    let select = |label: &str| {
        format!(
            "version: v0.1.0\nfetchConfig: {{selector: {{matchLabels: {{butler.butlerlabs.dev/provider: {label}}}}}}}"
        )
    };
    s.create::<CoreProvider>("butler", &select("butler")).await;
    s.create::<InfrastructureProvider>("harvester", &select("infrastructure-harvester")).await;
    s.wait_for::<InfrastructureProvider>("harvester", "installed from the bundle", installed("v0.1.0")).await;
    s.stop_operator().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_makes_providers_and_their_secrets_and_a_second_run_changes_nothing() {
    use butler_operator::cli::init::{InitArgs, apply, operator_present, plan};
    use butler_repository::ProviderType;
    use k8s_openapi::api::core::v1::Secret;
    let mut s = Scenario::new("cli-init").await;
    s.start_operator();
    let marker = keep_marking_available(&s);
    let config = ClusterctlConfig::default();
    assert!(operator_present(&s.client).await.unwrap(), "the scenario's cluster has the provider CRDs");
    let mut args = InitArgs {
        providers: vec![(ProviderType::Infrastructure, "aws".into())],
        target_namespace: Some(s.namespace.clone()),
        ..Default::default()
    };

    // A variable the components need and nobody set: refused before anything is applied.
    if std::env::var_os("AWS_REGION").is_none() {
        let err = plan(&args, &config, true).await.unwrap_err().to_string();
        assert!(err.contains("AWS_REGION (infrastructure-aws)"), "{err}");
    }
    args.explicit.insert("AWS_REGION".into(), "eu-west-1".into());
    let planned = plan(&args, &config, true).await.unwrap();
    assert!(planned.operator.is_empty());
    let shown = planned.to_yaml();
    assert!(shown.contains("AWS_REGION: <redacted>") && !shown.contains("eu-west-1"), "{shown}");

    let quiet = |_: &str| {};
    let done = apply(&s.client, &planned, Some(waits()), &quiet).await.unwrap();
    assert!(done.contains(&format!("InfrastructureProvider {}/aws applied", s.namespace)), "{done}");
    let secrets: kube::Api<Secret> = kube::Api::namespaced(s.client.clone(), &s.namespace);
    let secret = secrets.get("infrastructure-aws-variables").await.unwrap();
    assert_eq!(secret.data.unwrap()["AWS_REGION"].0, b"eu-west-1");
    let aws = s.api::<InfrastructureProvider>().get("aws").await.unwrap();
    assert_eq!(aws.spec.config_secret.as_ref().unwrap().name, "infrastructure-aws-variables");
    assert!(aws.spec.fetch_config.is_none(), "the operator knows Butler's providers");
    s.wait_for::<CoreProvider>("butler", "Ready", |p| crate::support::is(p, "Ready", "True")).await;

    // Twice: nothing changes (the provider's generation, since the operator writes its status).
    let before = (
        s.api::<InfrastructureProvider>().get("aws").await.unwrap().metadata.generation,
        secrets.get("infrastructure-aws-variables").await.unwrap().metadata.resource_version,
    );
    apply(&s.client, &plan(&args, &config, true).await.unwrap(), None, &quiet).await.unwrap();
    let after = (
        s.api::<InfrastructureProvider>().get("aws").await.unwrap().metadata.generation,
        secrets.get("infrastructure-aws-variables").await.unwrap().metadata.resource_version,
    );
    assert_eq!(before, after, "a second init changes nothing");

    // A core runs now: a later init adds none, and naming one is refused (a cluster runs one).
    let cores = butler_operator::cli::init::existing_cores(&s.client).await.unwrap();
    assert!(cores.contains(&format!("{}/butler", s.namespace)), "{cores:?}");
    let joining = InitArgs { existing_cores: cores.clone(), ..args.clone() };
    let planned = plan(&joining, &config, true).await.unwrap();
    assert!(!planned.objects.iter().any(|o| o["kind"] == "CoreProvider"), "no second core");
    let mut second = joining.clone();
    second.providers.push((ProviderType::Core, "cluster-api".into()));
    let refused = plan(&second, &config, true).await.unwrap_err().to_string();
    assert!(
        refused.contains("the cluster has a core provider already")
            && refused.contains("leave --core cluster-api out"),
        "{refused}"
    );
    marker.abort();
    s.stop_operator().await;
}

#[tokio::test]
async fn init_installs_the_operator_where_it_is_missing() {
    use butler_operator::cli::init::{InitArgs, apply, operator_present, plan};
    // A cluster of our own: installing the operator is cluster-wide.
    if std::env::var_os(butler_e2e::cluster::KUBECONFIG_VARIABLE).is_some() {
        return;
    }
    let cluster = butler_e2e::Cluster::connect().await;
    let client = cluster.client();
    assert!(!operator_present(&client).await.unwrap());
    let args = InitArgs {
        target_namespace: None,
        operator_image: Some("mirror.local/butler-operator:v0.1.0".into()),
        ..Default::default()
    };
    let planned = plan(&args, &ClusterctlConfig::default(), false).await.unwrap();
    let deployment = planned.operator.iter().find(|o| o["kind"] == "Deployment").unwrap();
    assert_eq!(
        deployment["spec"]["template"]["spec"]["containers"][0]["image"],
        "mirror.local/butler-operator:v0.1.0"
    );
    // Without --operator-image, the config's image overrides move it as they move providers'.
    let mirrored = ClusterctlConfig::parse(
        "images:\n  all:\n    repository: registry.internal/butler\n",
        std::path::Path::new("c.yaml"),
    )
    .unwrap();
    let by_config = plan(&InitArgs { operator_image: None, ..args.clone() }, &mirrored, false).await.unwrap();
    let deployment = by_config.operator.iter().find(|o| o["kind"] == "Deployment").unwrap();
    let image = deployment["spec"]["template"]["spec"]["containers"][0]["image"].as_str().unwrap();
    assert!(image.starts_with("registry.internal/butler/butler-operator:"), "{image}");
    apply(&client, &planned, None, &|_| {}).await.unwrap();
    assert!(operator_present(&client).await.unwrap());
    let core: kube::Api<CoreProvider> = kube::Api::namespaced(client.clone(), "butler-system");
    assert!(core.get_opt("butler").await.unwrap().is_some(), "the core provider by default");
}
