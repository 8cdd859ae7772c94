//! The webhook server as a cluster would use it: its own CA and certificate kept in a Secret,
//! the webhook configurations registered with that CA and failing closed once the server
//! answers, and AdmissionReviews answered over verified HTTPS from the caches.

use butler_controller::webhooks::registration::{Endpoint, MUTATING, VALIDATING};
use butler_controller::webhooks::serving::{ServingOptions, start};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams};
use serde_json::{Value, json};

use butler_core::api::{ProviderConfig, Team, TenantCluster};
use kube::api::PostParams;

use crate::support::{
    Scenario, Served, api_message, from_yaml, install_shipped_webhooks, remove_webhook_configurations,
    serve_webhooks, start_serving, wait_for,
};

/// Retries until `attempt` gives something (the webhook's caches see new objects a moment
/// after the API server has them).
async fn eventually<T, F: std::future::Future<Output = Option<T>>>(attempt: impl Fn() -> F) -> T {
    for _ in 0..200 {
        if let Some(value) = attempt().await {
            return value;
        }
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    panic!("did not happen within 5 s")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn review(kind: &str, resource: &str, operation: &str, object: Value) -> Value {
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "u-1",
        "kind": {"group": "butler.butlerlabs.dev", "version": "v1alpha1", "kind": kind},
        "resource": {"group": "butler.butlerlabs.dev", "version": "v1alpha1", "resource": resource},
        "name": object["metadata"]["name"], "namespace": object["metadata"]["namespace"],
        "operation": operation, "userInfo": {"username": "someone"}, "object": object, "dryRun": false,
    }})
}

#[tokio::test]
async fn the_controller_serves_its_webhooks_with_its_own_certificates() {
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let ns = s.namespace("hooks").await;
    let Served { url, ca: registered_ca, options, stop, running } = serve_webhooks(&s, &ns).await;

    // The certificates are kept, the configurations carry their CA and fail closed.
    let secret = Api::<Secret>::namespaced(s.client.clone(), &ns).get("butler-webhook-certs").await.unwrap();
    let ca = String::from_utf8(secret.data.as_ref().unwrap()["ca.crt"].0.clone()).unwrap();
    assert_eq!(registered_ca, ca, "the CA the configurations carry is the one kept");
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(s.client.clone());
    let registered = validating.get(VALIDATING).await.unwrap();
    let hook = &registered.webhooks.unwrap()[0];
    assert_eq!(hook.client_config.ca_bundle.as_ref().unwrap().0, ca.as_bytes());
    assert_eq!(
        hook.client_config.url.as_deref(),
        Some(format!("{url}/validate-butler-butlerlabs-dev-v1alpha1-providerconfig").as_str())
    );
    let mutating = Api::<MutatingWebhookConfiguration>::all(s.client.clone()).get(MUTATING).await.unwrap();
    assert_eq!(mutating.webhooks.unwrap().len(), 1);

    // A review over HTTPS that trusts only that CA.
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.as_bytes()).unwrap())
        .build()
        .unwrap();
    let bad = json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
        "metadata": {"name": "aws", "namespace": ns}, "spec": {"provider": "aws", "credentialsRef": {"name": "c"}}});
    let answer: Value = client
        .post(format!("{url}/validate-butler-butlerlabs-dev-v1alpha1-providerconfig"))
        .json(&review("ProviderConfig", "providerconfigs", "CREATE", bad))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["response"]["allowed"], false);
    assert_eq!(
        answer["response"]["status"]["message"],
        "spec.aws is required when spec.provider is aws: add the aws settings"
    );

    // Through the API server, which calls the webhooks: a ProviderConfig without its section
    // is refused, a TenantCluster over its team's quota too, and one that leaves its size
    // empty gets the team's defaults.
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    let refused = configs
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: aws, namespace: {ns}}}\nspec: {{provider: aws, credentialsRef: {{name: c}}}}\n")))
        .await
        .unwrap_err();
    assert_eq!(
        api_message(&refused),
        "admission webhook \"validation.providerconfig.butler.butlerlabs.dev\" denied the request: spec.aws is required when spec.provider is aws: add the aws settings"
    );
    let team = s.cluster.unique("hooks");
    let team_ns = format!("team-{team}");
    Api::<Team>::all(s.client.clone())
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {team}}}\nspec:\n  access: {{}}\n  resourceLimits: {{maxCPUCores: '8', defaultNodeCount: 2}}\n  clusterDefaults: {{kubernetesVersion: 1.30.4, workerCPU: '2'}}\n")))
        .await
        .unwrap();
    wait_for(&Api::<Team>::all(s.client.clone()), &team, "its namespace", |t| {
        t.and_then(|t| t.status.as_ref()).is_some_and(|s| s.phase == Some(butler_core::api::TeamPhase::Ready))
    })
    .await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team_ns);
    let defaulted = eventually(|| async {
        let created: TenantCluster = clusters.create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: small, namespace: {team_ns}}}\nspec: {{}}\n"))).await.unwrap();
        if created.spec.workers.is_some() {
            return Some(created);
        }
        // The webhook's cache had not seen the Team yet: try again.
        clusters.delete("small", &DeleteParams::default()).await.unwrap();
        None
    })
    .await;
    let workers = defaulted.spec.workers.unwrap();
    assert_eq!(
        (workers.replicas, defaulted.spec.kubernetes_version.as_deref()),
        (Some(2), Some("1.30.4")),
        "the team's defaults"
    );
    assert_eq!(workers.machine_template.unwrap().cpu.unwrap().0, "2");
    let over = clusters
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: big, namespace: {team_ns}}}\nspec: {{workers: {{replicas: 3, machineTemplate: {{cpu: '2'}}}}}}\n")))
        .await
        .unwrap_err();
    assert_eq!(
        api_message(&over),
        format!(
            "admission webhook \"validation.tenantcluster.butler.butlerlabs.dev\" denied the request: TenantCluster {team_ns}/big would exceed the Team's maxCPUCores: 4 in use, 6 requested, limit 8; lower the request, remove a cluster, or raise the limit"
        )
    );
    Api::<Team>::all(s.client.clone()).delete(&team, &DeleteParams::default()).await.unwrap();

    // A second start (another replica, a restart) keeps the certificates.
    let _ = stop.send(true);
    let _ = running.await;
    let (stop, shutdown) = butler_runtime::shutdown::shutdown_switch();
    let again = start(
        s.client.clone(),
        ServingOptions { address: ([127, 0, 0, 1], free_port()).into(), ..options },
        shutdown,
    )
    .await
    .unwrap();
    let secret_after =
        Api::<Secret>::namespaced(s.client.clone(), &ns).get("butler-webhook-certs").await.unwrap();
    assert_eq!(secret_after.metadata.resource_version, secret.metadata.resource_version, "nothing renewed");
    let _ = stop.send(true);
    drop(again);
    remove_webhook_configurations(&s).await;
}

#[tokio::test]
async fn mounted_certificates_are_served_and_a_renewal_is_picked_up() {
    use butler_runtime::webhook::certificates::{issue, new_ca};
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    // cert-manager's layout: tls.crt, tls.key and ca.crt in a folder.
    let dir = tempfile::tempdir().unwrap();
    let write = |ca: &butler_runtime::webhook::certificates::Pem| {
        let serving = issue(ca, &["127.0.0.1".into()], jiff::Timestamp::now(), 30).unwrap();
        std::fs::write(dir.path().join("tls.crt"), &serving.cert).unwrap();
        std::fs::write(dir.path().join("tls.key"), &serving.key).unwrap();
        std::fs::write(dir.path().join("ca.crt"), &ca.cert).unwrap();
    };
    let first = new_ca("first-ca", jiff::Timestamp::now(), 30).unwrap();
    write(&first);
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let url = format!("https://127.0.0.1:{port}");
    let options = ServingOptions {
        address: ([127, 0, 0, 1], port).into(),
        cert_dir: Some(dir.path().to_path_buf()),
        endpoint: Endpoint::Url(url.clone()),
        namespace: "default".into(),
        secret: "unused".into(),
        owner: None,
        recheck: std::time::Duration::from_millis(100),
    };
    let (stop, shutdown) = butler_runtime::shutdown::shutdown_switch();
    let serving = start(s.client.clone(), options, shutdown).await.unwrap();
    let running = tokio::spawn(serving.run);
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(s.client.clone());
    let bundle = |v: Option<&ValidatingWebhookConfiguration>| -> Option<Vec<u8>> {
        Some(v?.webhooks.as_ref()?[0].client_config.ca_bundle.as_ref()?.0.clone())
    };
    wait_for(&validating, VALIDATING, "the first CA registered", |v| {
        bundle(v) == Some(first.cert.clone().into_bytes())
    })
    .await;
    assert!(
        Api::<Secret>::namespaced(s.client.clone(), "default").get_opt("unused").await.unwrap().is_none(),
        "no Secret of its own"
    );

    // cert-manager renews with another CA: the new certificate is served, its CA registered.
    let second = new_ca("second-ca", jiff::Timestamp::now(), 30).unwrap();
    write(&second);
    wait_for(&validating, VALIDATING, "the second CA registered", |v| {
        bundle(v) == Some(second.cert.clone().into_bytes())
    })
    .await;
    let trusting_second = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(second.cert.as_bytes()).unwrap())
        .build()
        .unwrap();
    let answered = trusting_second.get(format!("{url}/")).send().await;
    assert!(answered.is_ok(), "the renewed certificate is served: {answered:?}");
    let _ = stop.send(true);
    let _ = running.await;
    remove_webhook_configurations(&s).await;
}

#[tokio::test]
async fn a_pool_change_that_would_strand_a_live_block_is_refused() {
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    use butler_core::api::{IPAllocation, IPAllocationPhase, NetworkPool};
    use kube::api::{Patch, PatchParams};
    let ns = s.namespace("hooks-pool").await;
    let served = serve_webhooks(&s, &ns).await;
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    let refused = pools
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: NetworkPool\nmetadata: {{name: bad, namespace: {ns}}}\nspec: {{cidr: 10.0.0.0}}\n")))
        .await
        .unwrap_err();
    assert!(
        api_message(&refused).contains("spec.cidr \"10.0.0.0\" is not a CIDR"),
        "{}",
        api_message(&refused)
    );
    pools
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: NetworkPool\nmetadata: {{name: lab, namespace: {ns}}}\nspec: {{cidr: 10.9.0.0/24}}\n")))
        .await
        .unwrap();
    let tenant: TenantCluster = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: t, namespace: {ns}}}\nspec: {{}}\n"
    ));
    Api::<TenantCluster>::namespaced(s.client.clone(), &ns)
        .create(&PostParams::default(), &tenant)
        .await
        .unwrap();
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &ns);
    let allocation: IPAllocation = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: IPAllocation\nmetadata: {{name: held, namespace: {ns}}}\nspec: {{poolRef: {{name: lab}}, tenantClusterRef: {{name: t, namespace: {ns}}}, type: loadbalancer, count: 4}}\n"
    ));
    allocations.create(&PostParams::default(), &allocation).await.unwrap();
    wait_for(&allocations, "held", "Allocated", |a| {
        a.and_then(|a| a.status.as_ref()).and_then(|s| s.phase) == Some(IPAllocationPhase::Allocated)
    })
    .await;
    // (Each attempt changes the spec: one that got in before the webhook's cache saw the block
    // leaves the next still a change to judge.)
    let attempt = std::sync::atomic::AtomicU32::new(0);
    let message =
        eventually(|| {
            let n = attempt.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let strand = Patch::Merge(
                json!({"spec": {"reserved": [{"cidr": "10.9.0.0/28", "description": format!("try {n}")}]}}),
            );
            let pools = pools.clone();
            async move {
                pools.patch("lab", &PatchParams::default(), &strand).await.err().map(|e| api_message(&e))
            }
        })
        .await;
    assert!(
        message.contains("this change would strand 1 IPAllocations of the pool: held (10.9.0.0-10.9.0.3 conflicts with reserved range 10.9.0.0/28"),
        "{message}"
    );
    // One that leaves the block alone is fine.
    let fine = Patch::Merge(json!({"spec": {"reserved": [{"cidr": "10.9.0.128/28"}]}}));
    pools.patch("lab", &PatchParams::default(), &fine).await.unwrap();
    let _ = served.stop.send(true);
    served.running.abort();
}

#[tokio::test]
async fn a_stopped_controller_leaves_finalizers_labels_and_deletions_free() {
    use butler_core::api::NetworkPool;
    use kube::api::{Patch, PatchParams};
    let mut s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let ns = s.namespace("hooks-stopped").await;
    let Served { stop, running, .. } = serve_webhooks(&s, &ns).await;
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    pools
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: NetworkPool\nmetadata: {{name: lab, namespace: {ns}}}\nspec: {{cidr: 10.62.0.0/24}}\n")))
        .await
        .unwrap();
    wait_for(&pools, "lab", "its finalizer", |p| {
        p.is_some_and(|p| !p.metadata.finalizers.clone().unwrap_or_default().is_empty())
    })
    .await;

    // The controller stops (crashed, scaled to 0) and its configurations stay, failing closed.
    s.kill_controllers();
    let _ = stop.send(true);
    let _ = running.await;
    let refused = pools
        .patch("lab", &PatchParams::default(), &Patch::Merge(json!({"spec": {"cidr": "10.63.0.0/24"}})))
        .await
        .unwrap_err();
    assert!(
        api_message(&refused).contains("failed calling webhook"),
        "a spec change still needs admission: {refused}"
    );
    // What it never checks goes through: labels, and the deletion of the pool to its end.
    pools
        .patch(
            "lab",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"owner": "ops"}}})),
        )
        .await
        .expect("a label change is not the webhook's");
    pools.delete("lab", &DeleteParams::default()).await.unwrap();
    pools
        .patch("lab", &PatchParams::default(), &Patch::Merge(json!({"metadata": {"finalizers": null}})))
        .await
        .expect("a finalizer goes without the webhook");
    wait_for(&pools, "lab", "gone", |p| p.is_none()).await;
    remove_webhook_configurations(&s).await;
}

/// A ProviderConfig in use is refused deletion at admission; with the controller down (its
/// configurations failing closed) a namespace holding ProviderConfigs still goes: they carry
/// no finalizer, and the namespace controller's deletions are not the webhook's.
#[tokio::test]
async fn a_namespace_with_provider_configs_goes_while_the_controller_is_down() {
    use k8s_openapi::api::core::v1::Namespace;
    let mut s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let ns = s.namespace("hooks-pc-down").await;
    let platform = s.namespace("hooks-pc-platform").await;
    let Served { stop, running, .. } = serve_webhooks(&s, &ns).await;
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &platform);
    configs
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: shared, namespace: {platform}}}\nspec: {{provider: aws, credentialsRef: {{name: c}}, aws: {{region: eu-west-1}}}}\n")))
        .await
        .unwrap();
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &ns);
    clusters
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: web, namespace: {ns}}}\nspec:\n  providerConfigRef: {{name: shared, namespace: {platform}}}\n")))
        .await
        .unwrap();
    // (A dry run: until the webhook's cache shows the cluster, the deletion would go through.)
    let message = eventually(|| {
        let configs = configs.clone();
        let dry = DeleteParams { dry_run: true, ..DeleteParams::default() };
        async move { configs.delete("shared", &dry).await.err().map(|e| api_message(&e)) }
    })
    .await;
    assert!(
        message.contains(&format!("TenantClusters use this ProviderConfig: {ns}/web; delete them or point them at another ProviderConfig first")),
        "{message}"
    );
    // The controller has seen it (its status written) and never put a finalizer on it.
    let seen =
        wait_for(&configs, "shared", "its status", |c| c.is_some_and(|c| c.status.is_some())).await.unwrap();
    assert!(seen.metadata.finalizers.unwrap_or_default().is_empty());

    s.kill_controllers();
    let _ = stop.send(true);
    let _ = running.await;
    Api::<Namespace>::all(s.client.clone()).delete(&platform, &DeleteParams::default()).await.unwrap();
    wait_for(&Api::<Namespace>::all(s.client.clone()), &platform, "gone", |n| n.is_none()).await;
    remove_webhook_configurations(&s).await;
}

#[tokio::test]
async fn lowered_limits_never_lock_a_team_out_of_its_clusters() {
    use kube::api::{Patch, PatchParams};
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let ns = s.namespace("hooks-lowered").await;
    let Served { stop, .. } = serve_webhooks(&s, &ns).await;
    let team = s.cluster.unique("lowered");
    let team_ns = format!("team-{team}");
    let teams = Api::<Team>::all(s.client.clone());
    teams
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {team}}}\nspec:\n  access: {{}}\n  resourceLimits: {{maxTotalNodes: 8}}\n")))
        .await
        .unwrap();
    wait_for(&teams, &team, "Ready", |t| {
        t.and_then(|t| t.status.as_ref()).is_some_and(|s| s.phase == Some(butler_core::api::TeamPhase::Ready))
    })
    .await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team_ns);
    eventually(|| async {
        let made = clusters.create(&PostParams::default(), &from_yaml::<TenantCluster>(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: web, namespace: {team_ns}}}\nspec: {{workers: {{replicas: 6, machineTemplate: {{cpu: '2'}}}}}}\n"))).await;
        made.ok()
    })
    .await;
    // The platform lowers the limit under the team's use.
    teams
        .patch(
            &team,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resourceLimits": {"maxTotalNodes": 2}}})),
        )
        .await
        .unwrap();
    let grow = json!({"spec": {"workers": {"replicas": 7}}});
    let refused = eventually(|| async {
        clusters.patch("web", &PatchParams::default(), &Patch::Merge(grow.clone())).await.err()
    })
    .await;
    assert!(api_message(&refused).contains("maxTotalNodes: 0 in use, 7 requested, limit 2"), "{refused}");
    let shrink = json!({"spec": {"workers": {"replicas": 4}}});
    clusters
        .patch("web", &PatchParams::default(), &Patch::Merge(shrink))
        .await
        .expect("scaling down is allowed");
    clusters
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"tier": "gold"}}})),
        )
        .await
        .expect("a label is not a limit's");
    clusters.delete("web", &DeleteParams::default()).await.unwrap();
    wait_for(&clusters, "web", "gone", |c| c.is_none()).await;
    teams.delete(&team, &DeleteParams::default()).await.unwrap();
    let _ = stop.send(true);
}

#[tokio::test]
async fn a_pool_that_overlaps_another_is_refused_at_admission() {
    use butler_core::api::NetworkPool;
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let ns = s.namespace("hooks-overlap").await;
    let Served { stop, .. } = serve_webhooks(&s, &ns).await;
    let pools: Api<NetworkPool> = Api::namespaced(s.client.clone(), &ns);
    let make = |name: &str, cidr: &str| -> NetworkPool {
        from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: NetworkPool\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{cidr: {cidr}}}\n"
        ))
    };
    pools.create(&PostParams::default(), &make("first", "10.72.0.0/24")).await.unwrap();
    let refused = eventually(|| async {
        match pools.create(&PostParams::default(), &make("second", "10.72.0.64/26")).await {
            Err(e) => Some(e),
            // The webhook's cache had not seen the first pool yet: try again.
            Ok(_) => {
                pools.delete("second", &DeleteParams::default()).await.unwrap();
                wait_for(&pools, "second", "gone", |p| p.is_none()).await;
                None
            }
        }
    })
    .await;
    assert_eq!(
        api_message(&refused),
        format!(
            "admission webhook \"validation.networkpool.butler.butlerlabs.dev\" denied the request: spec.cidr 10.72.0.64/26 overlaps NetworkPool {ns}/first (10.72.0.0/24); pools hand out the same addresses only when both set spec.allowOverlap"
        )
    );
    pools.create(&PostParams::default(), &make("apart", "10.72.1.0/24")).await.expect("no overlap");
    let _ = stop.send(true);
    remove_webhook_configurations(&s).await;
}

/// The components' webhook configurations name a Service the API server cannot reach: the
/// controller must not let them fail closed, or every write of Butler's kinds would fail.
#[tokio::test]
async fn webhooks_the_api_server_cannot_reach_stay_failing_open() {
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let ns = s.namespace("hooks-unreached").await;
    install_shipped_webhooks(&s, &s.home).await;
    let endpoint = Endpoint::Service { namespace: s.home.clone(), name: "butler-webhook-service".into() };
    let (_, stop, running) = start_serving(&s, &s.home, free_port(), endpoint).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(s.client.clone());
    wait_for(&validating, VALIDATING, "filled in", |v| ca_of(v).is_some()).await;
    // Writes go on, and the configurations stay open past the controller's checks.
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    configs
        .create(&PostParams::default(), &from_yaml(&format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: aws, namespace: {ns}}}\nspec: {{provider: aws, credentialsRef: {{name: c}}, aws: {{region: r}}}}\n")))
        .await
        .expect("a write while the webhooks are out of reach");
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let hooks = validating.get(VALIDATING).await.unwrap().webhooks.unwrap();
    assert!(hooks.iter().all(|h| h.failure_policy.as_deref() == Some("Ignore")), "{hooks:?}");
    let _ = stop.send(true);
    let _ = running.await;
    remove_webhook_configurations(&s).await;
}

/// The CA bundle of the first webhook of a configuration, if it has one.
fn ca_of(v: Option<&ValidatingWebhookConfiguration>) -> Option<String> {
    let hooks = v?.webhooks.as_ref()?;
    let ca = hooks.first()?.client_config.ca_bundle.as_ref()?;
    Some(String::from_utf8_lossy(&ca.0).into_owned())
}

/// In a cluster the core components ship the webhook configurations and the controller, under
/// its own RBAC (get and patch of those two by name), fills in only their CA bundle and failure
/// policy: failing closed before it ever ran, open until the API server reached it, closed from
/// then on and across a restart; the components' owner applying them again changes none of it.
#[tokio::test]
async fn the_controller_fills_in_the_shipped_configurations_under_its_own_rbac() {
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let server = s.cluster.server().expect("in memory");
    let ns = s.namespace("hooks-shipped").await;
    install_shipped_webhooks(&s, &s.home).await;
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &ns);
    let config = |name: &str| -> ProviderConfig {
        from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{provider: aws, credentialsRef: {{name: c}}, aws: {{region: r}}}}\n"
        ))
    };
    let refused = configs.create(&PostParams::default(), &config("early")).await;
    assert!(refused.is_err(), "before the controller first ran nothing is admitted unchecked");

    let port = free_port();
    server.route_service(&s.home, "butler-webhook-service", ([127, 0, 0, 1], port).into());
    let endpoint = Endpoint::Service { namespace: s.home.clone(), name: "butler-webhook-service".into() };
    let (_, stop, running) = start_serving(&s, &s.home, port, endpoint.clone()).await;
    let validating: Api<ValidatingWebhookConfiguration> = Api::all(s.client.clone());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let reached = loop {
        // A dry run sends a review through the API server, whatever the webhook answers.
        let _ = configs.create(&PostParams { dry_run: true, ..Default::default() }, &config("probe")).await;
        let current = validating.get(VALIDATING).await.unwrap();
        let closed = current.webhooks.iter().flatten().all(|h| h.failure_policy.as_deref() == Some("Fail"));
        if ca_of(Some(&current)).is_some() && closed {
            break current;
        }
        assert!(std::time::Instant::now() < deadline, "the configurations were never filled in and closed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(
        reached
            .metadata
            .annotations
            .clone()
            .unwrap_or_default()
            .get("butler.butlerlabs.dev/webhooks-reached")
            .map(String::as_str),
        Some("true")
    );
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(s.client.clone());
    let hooks = mutating.get(MUTATING).await.unwrap().webhooks.unwrap();
    assert!(hooks[0].client_config.ca_bundle.is_some() && hooks[0].failure_policy.as_deref() == Some("Fail"));
    // The webhooks answer through the Service: an invalid spec is refused by them.
    let bad: ProviderConfig = from_yaml(&format!(
        "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: bad, namespace: {ns}}}\nspec: {{provider: aws, credentialsRef: {{name: c}}, aws: {{region: r}}, network: {{mode: ipam, poolRefs: [{{name: p}}]}}}}\n"
    ));
    let invalid = configs.create(&PostParams::default(), &bad).await.unwrap_err();
    assert!(api_message(&invalid).contains("admission webhook"), "{}", api_message(&invalid));
    // The components' owner applies them again: the CA and the policy stay.
    install_shipped_webhooks(&s, &s.home).await;
    assert_eq!(ca_of(Some(&validating.get(VALIDATING).await.unwrap())), ca_of(Some(&reached)));
    let _ = stop.send(true);
    let _ = running.await;

    // A restart that the API server cannot reach yet keeps them closed.
    let (_, stop, running) = start_serving(&s, &s.home, free_port(), endpoint).await;
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    let hooks = validating.get(VALIDATING).await.unwrap().webhooks.unwrap();
    assert!(hooks.iter().all(|h| h.failure_policy.as_deref() == Some("Fail")), "{hooks:?}");
    let _ = stop.send(true);
    let _ = running.await;
    remove_webhook_configurations(&s).await;
}
