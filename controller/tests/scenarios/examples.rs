//! The seed examples of spec/000 and spec/001 through an API server that calls the controller's
//! webhooks: each is accepted, and each rule of the documents refuses the object that breaks
//! it, with a message that says what to do. The IPAM examples of spec/002 allocate as the
//! document says.

use std::path::Path;

use butler_core::api::{ProviderConfig, Team, TeamPhase, TenantCluster};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::{Value, json};

use crate::support::{Scenario, api_message, from_yaml, serve_webhooks, wait_for};

/// The documents of the fixtures `{prefix}*.yaml`, in file order.
fn fixtures(prefix: &str) -> Vec<(String, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../butler-core/tests/fixtures");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    files
        .into_iter()
        .filter(|f| f.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .flat_map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().to_string();
            let text = std::fs::read_to_string(&f).unwrap();
            serde_saphyr::from_multiple::<Value>(&text)
                .unwrap()
                .into_iter()
                .filter(|d| !d.is_null())
                .map(move |d| (name.clone(), d))
        })
        .collect()
}

async fn create(s: &Scenario, namespace: &str, mut object: Value) -> Result<(), kube::Error> {
    let (group, version) = object["apiVersion"].as_str().unwrap().split_once('/').unwrap_or(("", "v1"));
    let kind = object["kind"].as_str().unwrap().to_string();
    let plural = format!("{}s", kind.to_lowercase());
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, &kind), &plural);
    let api: Api<DynamicObject> = if kind == "Team" {
        Api::all_with(s.client.clone(), &resource)
    } else {
        object["metadata"]["namespace"] = json!(namespace);
        if object["spec"]["credentialsRef"]["namespace"].is_string() {
            object["spec"]["credentialsRef"]["namespace"] = json!(namespace);
        }
        Api::namespaced_with(s.client.clone(), namespace, &resource)
    };
    api.create(&PostParams::default(), &serde_json::from_value(object).unwrap()).await.map(|_| ())
}

fn config(namespace: &str, spec: Value) -> ProviderConfig {
    serde_json::from_value(json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "refused", "namespace": namespace}, "spec": spec}))
    .unwrap()
}

#[tokio::test]
async fn every_seed_example_is_admitted_and_every_rule_refuses_what_breaks_it() {
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let ns = s.namespace("examples").await;
    let _served = serve_webhooks(&s, &ns).await;

    for (file, document) in fixtures("000-").into_iter().chain(fixtures("001-")) {
        create(&s, &ns, document).await.unwrap_or_else(|e| panic!("{file}: refused: {}", api_message(&e)));
    }

    // spec/000, "Webhook Validation".
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    let refusals = [
        (
            json!({"provider": "aws", "credentialsRef": {"name": "c"}}),
            "spec.aws is required when spec.provider is aws",
        ),
        (
            json!({"provider": "gcp", "credentialsRef": {"name": "c"}, "gcp": {"projectID": "p", "region": ""}}),
            "spec.gcp.region",
        ),
        (
            json!({"provider": "aws", "credentialsRef": {"name": "c"}, "aws": {"region": "r"}, "network": {"mode": "ipam", "poolRefs": [{"name": "p"}]}}),
            "spec.network.mode ipam is for the on-premises platforms",
        ),
        (
            json!({"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"}, "network": {"mode": "ipam"}}),
            "poolRefs",
        ),
        (
            json!({"provider": "aws", "credentialsRef": {"name": "c"}, "aws": {"region": "r"}, "scope": {"type": "team"}}),
            "teamRef",
        ),
    ];
    for (spec, expected) in refusals {
        let error = configs.create(&PostParams::default(), &config(&ns, spec.clone())).await.unwrap_err();
        let message = api_message(&error);
        assert!(message.contains(expected), "{spec}: {message}");
    }

    // spec/001 feature restrictions, on the team "sandbox" of the examples.
    let teams: Api<Team> = Api::all(s.client.clone());
    wait_for(&teams, "sandbox", "Ready", |t| {
        t.and_then(|t| t.status.as_ref()).is_some_and(|s| s.phase == Some(TeamPhase::Ready))
    })
    .await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), "team-sandbox");
    let cluster = |name: &str, spec: &str| -> TenantCluster {
        from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: team-sandbox}}\nspec:\n{spec}"
        ))
    };
    let refused = |spec: &'static str, expected: &'static str| {
        let clusters = clusters.clone();
        async move {
            // The webhook's cache sees the Team a moment after the API server has it.
            for _ in 0..200 {
                match clusters.create(&PostParams::default(), &cluster("refused", spec)).await {
                    Err(e) if api_message(&e).contains(expected) => return,
                    Err(e) => panic!("{spec}: {}", api_message(&e)),
                    Ok(_) => {
                        clusters.delete("refused", &DeleteParams::default()).await.unwrap();
                        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
                    }
                }
            }
            panic!("{spec}: admitted, where {expected:?} was expected");
        }
    };
    refused(
        "  kubernetesVersion: 1.29.8\n",
        "Kubernetes \"1.29.8\" is not allowed in this team; allowed: 1.30.4",
    )
    .await;
    refused(
        "  kubernetesVersion: 1.30.4\n  addons: [{name: longhorn}]\n",
        "the addon longhorn is denied in this team",
    )
    .await;
    refused(
        "  kubernetesVersion: 1.30.4\n  workers: {replicas: 4}\n",
        "maxNodesPerCluster: 0 in use, 4 requested, limit 3",
    )
    .await;
    let web = "  kubernetesVersion: 1.30.4\n  workers: {replicas: 2, machineTemplate: {cpu: '4', memory: 16Gi}}\n  addons: [{name: cilium}]\n";
    // The team's default ProviderConfig must exist for its provider to be checked.
    refused(
        web,
        "the ProviderConfig team-sandbox/harvester-sandbox of spec.providerConfigRef does not exist (yet)",
    )
    .await;
    let sandbox_configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), "team-sandbox");
    sandbox_configs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
                "metadata": {"name": "harvester-sandbox", "namespace": "team-sandbox"},
                "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let mut admitted = false;
    for _ in 0..200 {
        // The webhook's cache sees the ProviderConfig a moment later.
        if clusters.create(&PostParams::default(), &cluster("web", web)).await.is_ok() {
            admitted = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert!(admitted, "the cluster on the team's harvester ProviderConfig is admitted");

    // A ProviderConfig in use cannot be deleted.
    let users: Api<TenantCluster> = Api::namespaced(s.client.clone(), &ns);
    users
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: on-aws, namespace: {ns}}}\nspec: {{providerConfigRef: {{name: aws-us-east}}}}\n")))
        .await
        .unwrap();
    // Dry runs until the webhook's cache has the cluster (a dry run is admitted like a delete).
    for _ in 0..200 {
        if configs.delete("aws-us-east", &DeleteParams { dry_run: true, ..Default::default() }).await.is_err()
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let refusal = api_message(&configs.delete("aws-us-east", &DeleteParams::default()).await.unwrap_err());
    assert!(refusal.contains(&format!("TenantClusters use this ProviderConfig: {ns}/on-aws")), "{refusal}");
    assert!(configs.get("aws-us-east").await.unwrap().metadata.deletion_timestamp.is_none(), "not deleted");
}

#[tokio::test]
async fn the_ipam_seed_examples_allocate_as_the_document_says() {
    use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool};
    let s = Scenario::start().await;
    let system = s.namespace("seed-ipam").await;
    let team = s.namespace("seed-ipam-team").await;
    for (_, document) in fixtures("002-example-single-pool-static") {
        create(&s, &system, document).await.unwrap();
    }
    // The pinned example, for a cluster of this scenario's team.
    let (_, mut pinned) = fixtures("002-example-pinned-range").remove(0);
    pinned["spec"]["tenantClusterRef"]["namespace"] = json!(team);
    pinned["metadata"]["labels"]["butler.butlerlabs.dev/team"] = json!(team);
    create(&s, &system, pinned).await.unwrap();
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let cluster: TenantCluster = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: api-prod, namespace: {team}}}\nspec:\n  providerConfigRef: {{name: harvester-lab, namespace: {system}}}\n"
    ));
    clusters.create(&PostParams::default(), &cluster).await.unwrap();
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &system);
    let allocated = |name: String| {
        let allocations = allocations.clone();
        async move {
            wait_for(&allocations, &name, "Allocated", |a| {
                a.and_then(|a| a.status.as_ref()).and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated)
            })
            .await
            .unwrap()
            .status
            .unwrap()
            .cidr
            .unwrap()
        }
    };
    assert_eq!(allocated("team-platform-api-lb".into()).await, "10.40.2.0/29", "the pinned range, exactly");
    assert_eq!(allocated(format!("{team}.api-prod-lb")).await, "10.40.1.0/29", "defaultPoolSize 8, best fit");
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &system);
    let pool = wait_for(&pools, "lab-pool", "both counted", |p| {
        p.and_then(|p| p.status.as_ref()).and_then(|s| s.allocation_count) == Some(2)
    })
    .await
    .unwrap();
    let status = pool.status.unwrap();
    // 10.40.1.0-10.40.3.254 holds 767 addresses (the document's "766" is a slip).
    assert_eq!(
        (status.total_ips, status.allocated_ips, status.available_ips),
        (Some(767), Some(16), Some(751))
    );
    let tiers: Vec<(String, String)> =
        status.conditions.iter().map(|c| (c.type_.clone(), c.status.clone())).collect();
    assert_eq!(
        tiers,
        [
            ("CapacityWarning".to_string(), "False".to_string()),
            ("CapacityCritical".to_string(), "False".to_string()),
            ("CapacityExhausted".to_string(), "False".to_string()),
            ("Ready".to_string(), "True".to_string())
        ]
    );
    clusters.delete("api-prod", &DeleteParams::default()).await.unwrap();
    // Both go with the cluster: the one its status names, and the pinned one labelled for it.
    wait_for(&allocations, &format!("{team}.api-prod-lb"), "released with its cluster", |a| a.is_none())
        .await;
    wait_for(&allocations, "team-platform-api-lb", "released with its cluster", |a| a.is_none()).await;
}
