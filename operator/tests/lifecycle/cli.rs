//! butlerctl's cluster commands against a cluster with the operator running: the library
//! calls, and the binary as a user runs it (with --kubeconfig).

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use butler_operator::cli::plan::{Next, upgrade_plan};
use butler_operator::cli::{describe, providers};
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
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<CoreProvider>("butler", "v1.0.0 installed", installed("v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;

    let plans =
        upgrade_plan(&s.client, Some(&s.namespace), &ClusterctlConfig::default(), &remote()).await.unwrap();
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
    let tree = describe::render(&rows, describe::Format::Tree, jiff::Timestamp::now(), false);
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
        butlerctl(&["upgrade", "plan", "-n", &s.namespace, "--kubeconfig", config]).await;
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains("Checking new release availability..."), "progress on stderr: {stderr}");
    assert!(stdout.contains("butlerctl upgrade apply --contract v1beta1"), "{stdout}");
    assert!(stdout.contains("Latest release available for the v1beta2 contract:"), "{stdout}");

    let (code, _, stderr) = butlerctl(&["describe", "providers", "-o", "xml", "--kubeconfig", config]).await;
    assert_eq!(code, 2, "a usage error: {stderr}");
    let (code, _, stderr) =
        butlerctl(&["describe", "providers", "--kubeconfig", "/nonexistent/kubeconfig"]).await;
    assert_eq!(code, 1);
    assert!(stderr.contains("cannot read the kubeconfig /nonexistent/kubeconfig"), "{stderr}");
    s.stop_operator().await;
}
