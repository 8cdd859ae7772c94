//! `butler-controller` as a process with 100 Teams and 1,000 TenantClusters (ten a team) on
//! the in-memory API server, its webhooks registered and called: its resident memory (VmRSS)
//! and peak (VmHWM) once everything is reconciled (the goal: under 40 MiB). Then the largest
//! objects one more team may make: 100 TenantClusters and 100 ProviderConfigs (its quota) of
//! about 1.2 MiB each (16,000 labels apiece), and the memory again.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use butler_core::api::{Team, TeamPhase, TenantCluster};
use kube::api::{Api, ListParams, PostParams};

mod support;

const TEAMS: usize = 100;
const CLUSTERS_PER_TEAM: usize = 10;

fn yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
    serde_saphyr::from_str(text).expect("fixture parses")
}

async fn wait_until(what: &str, within: Duration, mut check: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + within;
    while !check().await {
        assert!(Instant::now() < deadline, "{what} did not happen within {within:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// TenantClusters and ProviderConfigs of the largest team: its object quota of each.
const LARGEST: usize = 100;

/// One more team's quota of TenantClusters and ProviderConfigs, each as large as the API server
/// takes (16,000 labels of 63 characters), reconciled: the size of one object, in bytes.
async fn largest_objects(client: &kube::Client) -> usize {
    use butler_core::api::ProviderConfig;
    let teams: Api<Team> = Api::all(client.clone());
    let team: Team = yaml(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {name: huge}\nspec:\n  access: {users: [{name: huge@example.com, role: admin}]}\n",
    );
    teams.create(&PostParams::default(), &team).await.unwrap();
    wait_until("the Team huge Ready", Duration::from_secs(120), async || {
        let team = teams.get("huge").await.unwrap();
        team.status.as_ref().and_then(|s| s.phase) == Some(TeamPhase::Ready)
    })
    .await;
    let labels: serde_json::Map<String, serde_json::Value> =
        (0..16_000).map(|i| (format!("label-{i}"), serde_json::Value::String("v".repeat(63)))).collect();
    let namespace = "team-huge";
    let (clusters, configs): (Api<TenantCluster>, Api<ProviderConfig>) =
        (Api::namespaced(client.clone(), namespace), Api::namespaced(client.clone(), namespace));
    let mut size = 0;
    for i in 0..LARGEST {
        let config: ProviderConfig = serde_json::from_value(serde_json::json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
            "metadata": {"name": format!("pc{i}"), "namespace": namespace, "labels": labels},
            "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"}},
        }))
        .unwrap();
        configs.create(&PostParams::default(), &config).await.unwrap();
        let cluster: TenantCluster = serde_json::from_value(serde_json::json!({
            "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "TenantCluster",
            "metadata": {"name": format!("c{i}"), "namespace": namespace, "labels": labels},
            "spec": {"kubernetesVersion": "1.30.4", "providerConfigRef": {"name": format!("pc{i}")}},
        }))
        .unwrap();
        size = serde_json::to_vec(&cluster).unwrap().len();
        clusters.create(&PostParams::default(), &cluster).await.unwrap();
    }
    wait_until("the Team huge counting its clusters", Duration::from_secs(300), async || {
        let team = teams.get("huge").await.unwrap();
        team.status.as_ref().and_then(|s| s.cluster_count) == Some(LARGEST as i32)
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    size
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async {
        let server = support::cluster().await;
        let client = server.client();
        let teams: Api<Team> = Api::all(client.clone());
        for i in 0..TEAMS {
            let team: Team = yaml(&format!(
                "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: team{i}}}\nspec:\n  access:\n    users: [{{name: admin{i}@example.com, role: admin}}, {{name: dev{i}@example.com, role: operator}}]\n    groups: [{{name: viewers{i}}}]\n  resourceLimits: {{maxClusters: 20, maxCPUCores: '400', maxMemory: 2Ti}}\n"
            ));
            teams.create(&PostParams::default(), &team).await.unwrap();
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_butler-controller"))
            .args(["run", "--health-probe-bind-address", "127.0.0.1:0", "--metrics-bind-address", "0", "--leader-elect=false"])
            .args(["--namespace", "default", "--webhook-port", &port.to_string()])
            .args(["--webhook-url", &format!("https://127.0.0.1:{port}")])
            .env("KUBECONFIG", server.kubeconfig())
            .env("RUST_LOG", "error")
            .stdout(Stdio::null())
            .spawn()
            .expect("the butler-controller binary runs");
        let started = Instant::now();
        wait_until("every Team Ready", Duration::from_secs(120), async || {
            let list = teams.list(&ListParams::default()).await.unwrap();
            list.items.iter().filter(|t| t.status.as_ref().and_then(|s| s.phase) == Some(TeamPhase::Ready)).count() == TEAMS
        })
        .await;
        let teams_ready = started.elapsed();
        for i in 0..TEAMS {
            let clusters: Api<TenantCluster> = Api::namespaced(client.clone(), &format!("team-team{i}"));
            for j in 0..CLUSTERS_PER_TEAM {
                let cluster: TenantCluster = yaml(&format!(
                    "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: c{j}, namespace: team-team{i}}}\nspec:\n  kubernetesVersion: 1.30.4\n  workers: {{replicas: 3, machineTemplate: {{cpu: '4', memory: 16Gi, diskSize: 100Gi}}}}\n"
                ));
                clusters.create(&PostParams::default(), &cluster).await.unwrap();
            }
        }
        wait_until("every Team counting its clusters", Duration::from_secs(120), async || {
            let list = teams.list(&ListParams::default()).await.unwrap();
            list.items.iter().filter(|t| t.status.as_ref().and_then(|s| s.cluster_count) == Some(CLUSTERS_PER_TEAM as i32)).count() == TEAMS
        })
        .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).ok();
        let field = |status: &Option<String>, name: &str| -> Option<u64> {
            let line = status.as_ref()?.lines().find(|l| l.starts_with(name))?.to_string();
            line.split_whitespace().nth(1)?.parse().ok()
        };
        println!("{TEAMS} Teams Ready {:.1} s after the controller started", teams_ready.as_secs_f64());
        let largest = largest_objects(&client).await;
        let after = std::fs::read_to_string(format!("/proc/{}/status", child.id())).ok();
        let _ = child.kill();
        let _ = child.wait();
        if let (Some(rss), Some(peak)) = (field(&after, "VmRSS:"), field(&after, "VmHWM:")) {
            println!(
                "then one more team's {LARGEST} TenantClusters and {LARGEST} ProviderConfigs of {:.1} MiB each: resident {:.1} MiB (peak {:.1} MiB)",
                largest as f64 / (1024.0 * 1024.0),
                rss as f64 / 1024.0,
                peak as f64 / 1024.0
            );
        }
        let field = |name: &str| field(&status, name);
        match (field("VmRSS:"), field("VmHWM:")) {
            (Some(rss), Some(peak)) => println!(
                "butler-controller resident memory with {TEAMS} Teams and {} TenantClusters: {:.1} MiB (peak {:.1} MiB; goal: under 40 MiB: {})",
                TEAMS * CLUSTERS_PER_TEAM,
                rss as f64 / 1024.0,
                peak as f64 / 1024.0,
                if rss < 40 * 1024 { "met" } else { "NOT met" }
            ),
            _ => println!("butler-controller resident memory: not measured (no /proc on this system)"),
        }
    });
}
