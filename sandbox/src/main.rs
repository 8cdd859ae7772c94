//! `butler-sandbox`: Butler at work with no cluster at all. An in-memory Kubernetes API server,
//! the operator running against it, and Butler's seven providers (the core provider `butler`
//! and the infrastructure providers of the embedded repository) installed from the repository
//! compiled in; then the core provider's controller (`butler-controller`), its webhooks called
//! by the API server through the core components' Service, sets up a first Team and a
//! ProviderConfig, and gives a first TenantCluster its load-balancer addresses from a
//! NetworkPool, projected to its tenant's MetalLB (a second in-memory server).
//! Prints what `kubectl get` would show, then stops; with `--serve` it keeps running and prints
//! a kubeconfig for kubectl. No kubelet runs here: the stand-ins report the
//! providers' Deployments Available, as a cluster's Deployment controller would.
//!
//! `make run` runs it (`make sandbox` with `--serve`).

mod ipam;

use std::sync::Arc;
use std::time::{Duration, Instant};

use butler_apiserver::stand_ins::{cert_manager_crds, roll_out_deployments};
use butler_apiserver::{MemoryApiServer, ServerOptions};
use butler_controller::webhooks::registration::Endpoint;
use butler_controller::webhooks::serving::ServingOptions;
use butler_core::api::{ProviderConfig, Team, TeamPhase};
use butler_operator::api::{CoreProvider, InfrastructureProvider, KindNames, ProviderStatus};
use butler_operator::controller::vocabulary::LABEL_NAME;
use butler_operator::controller::{self, Options, ProviderObject};
use butler_operator::metrics::Metrics;
use butler_repository::butler_infrastructure;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use serde_json::json;

const NAMESPACE: &str = "butler-system";

/// Each of Butler's providers in the namespace its components declare, as `butlerctl init` lays
/// them out (`butler-system` for the core, `butler-harvester-system` for Harvester, ...): no
/// provider shares a namespace, and with it its ServiceAccounts, with another.
fn namespace_of(name: &str) -> String {
    butler_repository::embedded_providers()
        .iter()
        .find(|p| p.name == name)
        .and_then(|p| butler_repository::declared_namespace(&p.components()))
        .unwrap_or_else(|| NAMESPACE.to_string())
}

type Failure = Box<dyn std::error::Error>;

async fn setup(client: &kube::Client) -> Result<(), Failure> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut all = butler_operator::crds::operator();
    all.extend(cert_manager_crds());
    for crd in all {
        let name = crd.name_any();
        crds.patch(&name, &PatchParams::apply("sandbox").force(), &Patch::Apply(&crd)).await?;
        await_condition(crds.clone(), &name, conditions::is_crd_established()).await?;
    }
    let mut names = vec!["butler"];
    names.extend(butler_infrastructure());
    for name in names {
        let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": namespace_of(name)}}))?;
        Api::<Namespace>::all(client.clone()).create(&PostParams::default(), &namespace).await?;
    }
    // The aws provider's components need a region: it comes from the provider's config Secret.
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-variables"}, "stringData": {"AWS_REGION": "eu-west-1"}});
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &namespace_of("aws"))
        .patch("aws-variables", &PatchParams::apply("sandbox"), &Patch::Apply(secret))
        .await?;
    Ok(())
}

async fn create<K: ProviderObject>(
    client: &kube::Client,
    name: &str,
    spec: serde_json::Value,
) -> Result<(), Failure> {
    let namespace = namespace_of(name);
    let object: K = serde_json::from_value(json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": K::KIND.kind(),
        "metadata": {"name": name, "namespace": namespace}, "spec": spec,
    }))?;
    Api::<K>::namespaced(client.clone(), &namespace).create(&PostParams::default(), &object).await?;
    Ok(())
}

fn condition(status: Option<&ProviderStatus>, type_: &str) -> String {
    status
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .map(|c| c.status.clone())
        .unwrap_or_default()
}

/// The providers as rows of (kind, name, status), once every one is Ready.
async fn wait_ready(
    client: &kube::Client,
    within: Duration,
) -> Result<Vec<(String, String, Option<ProviderStatus>)>, Failure> {
    let deadline = Instant::now() + within;
    loop {
        let mut rows = Vec::new();
        let mut namespaces = std::collections::BTreeSet::new();
        for p in Api::<CoreProvider>::all(client.clone()).list(&Default::default()).await? {
            namespaces.insert(p.namespace().unwrap_or_default());
            rows.push(("CoreProvider".to_string(), p.name_any(), p.status));
        }
        for p in Api::<InfrastructureProvider>::all(client.clone()).list(&Default::default()).await? {
            namespaces.insert(p.namespace().unwrap_or_default());
            rows.push(("InfrastructureProvider".to_string(), p.name_any(), p.status));
        }
        if rows.len() == 1 + butler_infrastructure().len()
            && rows.iter().all(|(_, _, s)| condition(s.as_ref(), "Ready") == "True")
        {
            return Ok(rows);
        }
        if Instant::now() > deadline {
            return Err(format!("the providers were not Ready within {within:?}").into());
        }
        // No kubelet runs here: play the Deployment controller for what was applied.
        for namespace in &namespaces {
            roll_out_deployments(client, namespace, LABEL_NAME).await?;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the Team `platform` and waits until the Team controller has set it up.
async fn first_team(client: &kube::Client, within: Duration) -> Result<Team, Failure> {
    let teams: Api<Team> = Api::all(client.clone());
    let team: Team = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "Team",
        "metadata": {"name": "platform"},
        "spec": {"displayName": "Platform Engineering",
                 "access": {"users": [{"name": "admin@example.com", "role": "admin"}],
                            "groups": [{"name": "platform-engineers", "role": "operator"}]},
                 "resourceLimits": {"maxClusters": 5, "maxCPUCores": "120", "maxMemory": "480Gi"}},
    }))?;
    teams.create(&PostParams::default(), &team).await?;
    let deadline = Instant::now() + within;
    loop {
        let team = teams.get("platform").await?;
        if team.status.as_ref().is_some_and(|s| s.phase == Some(TeamPhase::Ready)) {
            return Ok(team);
        }
        if Instant::now() > deadline {
            return Err(format!("the Team platform was not Ready within {within:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Creates the ProviderConfig `aws-us-east` and its credentials, and waits until it is Ready.
async fn first_provider_config(client: &kube::Client, within: Duration) -> Result<ProviderConfig, Failure> {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws-credentials", "namespace": NAMESPACE},
        "stringData": {"accessKeyID": "AKIASANDBOX", "secretAccessKey": "sandbox-secret"}});
    Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), NAMESPACE)
        .patch("aws-credentials", &PatchParams::apply("sandbox"), &Patch::Apply(secret))
        .await?;
    let configs: Api<ProviderConfig> = Api::namespaced(client.clone(), NAMESPACE);
    let config: ProviderConfig = serde_json::from_value(json!({
        "apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "aws-us-east", "namespace": NAMESPACE},
        "spec": {"provider": "aws", "credentialsRef": {"name": "aws-credentials"}, "aws": {"region": "us-east-1"},
                 "limits": {"maxClustersPerTeam": 10, "maxNodesPerTeam": 100}},
    }))?;
    configs.create(&PostParams::default(), &config).await?;
    let deadline = Instant::now() + within;
    loop {
        let config = configs.get("aws-us-east").await?;
        if config.status.as_ref().and_then(|s| s.ready) == Some(true) {
            return Ok(config);
        }
        if Instant::now() > deadline {
            return Err(format!("the ProviderConfig aws-us-east was not Ready within {within:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[derive(clap::Parser)]
#[command(
    name = "butler-sandbox",
    version,
    about = "Butler's controllers on an in-memory Kubernetes API server"
)]
struct Cli {
    /// Keep the API server running once the providers are Ready, for kubectl (Ctrl-C stops it).
    #[arg(long)]
    serve: bool,
}

#[tokio::main]
async fn main() -> Result<(), Failure> {
    let serve = <Cli as clap::Parser>::parse().serve;
    let server = MemoryApiServer::start_with(ServerOptions::named("butler-sandbox")).await;
    let client = server.client();
    setup(&client).await?;

    let (stop, shutdown) = controller::shutdown_switch();
    let operator_shutdown = shutdown.clone();
    let webhook_shutdown = shutdown.clone();
    let mut options = Options::in_process("sandbox");
    // The embedded repository needs no network; nothing else may reach for it.
    options.remote.http.offline = true;
    let operator = controller::start(
        server.client_as("butler-operator"),
        Arc::new(Metrics::new()),
        options,
        operator_shutdown,
    );
    let running = tokio::spawn(operator.run);

    let started = Instant::now();
    create::<CoreProvider>(&client, "butler", json!({})).await?;
    for name in butler_infrastructure() {
        let spec = if name == "aws" { json!({"configSecret": {"name": "aws-variables"}}) } else { json!({}) };
        create::<InfrastructureProvider>(&client, name, spec).await?;
    }
    let rows = wait_ready(&client, Duration::from_secs(60)).await?;
    let elapsed = started.elapsed();

    println!("{:<24} {:<10} {:<10} {:<9} READY", "KIND", "NAME", "INSTALLED", "CONTRACT");
    for (kind, name, status) in &rows {
        let installed = status.as_ref().and_then(|s| s.installed_version.clone()).unwrap_or_default();
        let contract = status.as_ref().and_then(|s| s.contract.clone()).unwrap_or_default();
        println!(
            "{kind:<24} {name:<10} {installed:<10} {contract:<9} {}",
            condition(status.as_ref(), "Ready")
        );
    }
    println!(
        "\n{} providers installed and Ready in {} ms, with {} requests of the operator to the API server",
        rows.len(),
        elapsed.as_millis(),
        server.requests_from("butler-operator").len()
    );

    // The core provider's controller, as its Deployment would run it, and a first Team.
    let controllers = butler_controller::start(
        server.client_as("butler-controller"),
        Arc::new(butler_runtime::metrics::Metrics::new("butler_controller", |_| {})),
        butler_controller::Options::in_process("sandbox"),
        shutdown,
    );
    let controllers_running = tokio::spawn(controllers.run);
    // Its webhooks, reached through the Service the core components define.
    let serving = butler_controller::webhooks::serving::start(
        server.client_as("butler-controller"),
        ServingOptions {
            address: ([127, 0, 0, 1], 0).into(),
            cert_dir: None,
            endpoint: Endpoint::Service {
                namespace: NAMESPACE.into(),
                name: "butler-webhook-service".into(),
            },
            namespace: NAMESPACE.into(),
            secret: "butler-webhook-certs".into(),
            owner: Some("butler-controller".into()),
            recheck: ServingOptions::default_recheck(None),
        },
        webhook_shutdown,
    )
    .await?;
    server.route_service(NAMESPACE, "butler-webhook-service", serving.address);
    let webhooks_running = tokio::spawn(serving.run);
    let team = first_team(&client, Duration::from_secs(30)).await?;
    let config = first_provider_config(&client, Duration::from_secs(30)).await?;
    let status = team.status.unwrap_or_default();
    println!("\n{:<10} {:<8} {:<16} {:<8} QUOTA", "TEAM", "PHASE", "NAMESPACE", "MEMBERS");
    println!(
        "{:<10} {:<8} {:<16} {:<8} {}",
        team.metadata.name.unwrap_or_default(),
        status.phase.map(|p| format!("{p:?}")).unwrap_or_default(),
        status.namespace.unwrap_or_default(),
        status.member_count.unwrap_or_default(),
        status.quota_status.map(|q| format!("{q:?}").to_uppercase()).unwrap_or_default(),
    );
    let status = config.status.unwrap_or_default();
    println!("\n{:<14} {:<9} {:<10} READY", "PROVIDERCONFIG", "PROVIDER", "VALIDATED");
    println!(
        "{:<14} {:<9} {:<10} {}",
        config.metadata.name.unwrap_or_default(),
        config.spec.provider.as_str(),
        status.validated.unwrap_or_default(),
        status.ready.unwrap_or_default()
    );

    // IPAM: a pool, a ProviderConfig in IPAM mode, a TenantCluster and its tenant's MetalLB.
    let (_tenant, metallb) = ipam::first_tenant_cluster(&client, Duration::from_secs(30)).await?;

    if serve {
        println!(
            "\nThe API server keeps running; its kubeconfig is {path}. In another shell:\n  export KUBECONFIG={path}\n  kubectl get coreproviders,infrastructureproviders -A\nCtrl-C (or SIGTERM, as a process manager sends) stops it.",
            path = server.kubeconfig().display()
        );
        stopped().await?;
    }
    let _ = stop.send(true);
    let _ = running.await;
    let _ = controllers_running.await;
    let _ = webhooks_running.await;
    metallb.abort();
    Ok(())
}

/// Waits for Ctrl-C (SIGINT) or SIGTERM, the signal process managers and `kill` send.
async fn stopped() -> std::io::Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        interrupted = tokio::signal::ctrl_c() => interrupted,
        _ = term.recv() => Ok(()),
    }
}
