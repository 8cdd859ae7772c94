//! A team admin trying to reach beyond the team through what the controller reads for it: a
//! tenant kubeconfig that would make the controller send its own token to the team's server,
//! and a ProviderConfig that names the platform's credentials Secret.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use butler_core::api::{ProviderConfig, Team, TenantCluster};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{Scenario, create, team_with_admin, wait_for};
use crate::tenants::{cluster, pool, small_ipam};

/// A server of the attacker's on 127.0.0.1 that counts the requests it gets.
async fn attacker() -> (String, Arc<AtomicUsize>) {
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    let app = Router::new().fallback(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        async { "{}" }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}"), seen)
}

/// `app` served over HTTPS on 127.0.0.1 with a certificate of its own: its `https://` URL.
async fn serve_tls(app: Router) -> String {
    use butler_runtime::webhook::certificates::{issue, new_ca};
    let now = jiff::Timestamp::now();
    let ca = new_ca("scenario-ca", now, 1).unwrap();
    let serving = issue(&ca, &["127.0.0.1".into()], now, 1).unwrap();
    let config =
        axum_server::tls_rustls::RustlsConfig::from_pem(serving.cert.into_bytes(), serving.key.into_bytes())
            .await
            .unwrap();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let server = axum_server::from_tcp_rustls(listener, config).unwrap();
    tokio::spawn(async move { server.serve(app.into_make_service()).await });
    format!("https://{address}")
}

fn condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Waits until the object's condition `type_` gives `reason`; returns its conditions then.
async fn once_reason<K>(
    api: &Api<K>,
    name: &str,
    type_: &str,
    reason: &str,
    conditions: impl Fn(&K) -> Option<&Vec<Condition>>,
) -> Vec<Condition>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let seen = wait_for(api, name, &format!("{type_} {reason}"), |o| {
        o.and_then(&conditions).and_then(|all| condition(all, type_)).is_some_and(|c| c.reason == reason)
    })
    .await
    .unwrap();
    conditions(&seen).cloned().unwrap_or_default()
}

fn of_cluster(c: &TenantCluster) -> Option<&Vec<Condition>> {
    c.status.as_ref().map(|s| &s.conditions)
}

/// The Secret `{cluster}-kubeconfig` of a tenant at `server`, its user as the flow mapping `user`.
async fn kubeconfig_secret(s: &Scenario, team: &str, cluster: &str, server: &str, user: &str) {
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: '{server}'}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\nusers:\n- name: u\n  user: {user}\n"
    );
    let secret: Secret = serde_json::from_value(
        json!({"metadata": {"name": format!("{cluster}-kubeconfig"), "namespace": team, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
            "type": "cluster.x-k8s.io/secret", "stringData": {"value": kubeconfig}}),
    )
    .unwrap();
    Api::<Secret>::namespaced(s.client.clone(), team).create(&PostParams::default(), &secret).await.unwrap();
}

#[tokio::test]
async fn a_tenant_kubeconfig_that_reads_the_controllers_files_is_refused_by_its_field() {
    let s = Scenario::start().await;
    let system = s.namespace("iso-kc-system").await;
    let team = s.namespace("iso-kc-team").await;
    let (server, requests) = attacker().await;
    // The controller's own token file, in a pod; here a file of this process.
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "the-controllers-token").unwrap();
    small_ipam(&s, &system, "10.61.0.0/24").await;
    kubeconfig_secret(&s, &team, "web", &server, &format!("{{tokenFile: '{}'}}", token.path().display()))
        .await;
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let conditions = once_reason(&clusters, "web", "MetalLBSynced", "KubeconfigInvalid", of_cluster).await;
    let message = &condition(&conditions, "MetalLBSynced").unwrap().message;
    assert!(
        message.starts_with(&format!(
            "the Secret {team}/web-kubeconfig: users[0].user.tokenFile is not accepted: a tenant kubeconfig carries its credentials inline"
        )),
        "{message}"
    );
    assert_eq!(requests.load(Ordering::Relaxed), 0, "the team's server heard nothing from the controller");
}

#[tokio::test]
async fn a_teams_provider_config_cannot_read_the_platforms_credentials() {
    let s = Scenario::start().await;
    let system = s.namespace("iso-pc-system").await;
    let team = s.namespace("iso-pc-team").await;
    // The team's namespace, as the Team controller labels it.
    let label = json!({"metadata": {"labels": {"butler.butlerlabs.dev/team": "a"}}});
    Api::<Namespace>::all(s.client.clone())
        .patch(&team, &PatchParams::default(), &Patch::Merge(label))
        .await
        .unwrap();
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "platform-aws", "namespace": system},
        "stringData": {"accessKeyID": "AKIAPLATFORM", "secretAccessKey": "platform-secret"}});
    Api::<Secret>::namespaced(s.client.clone(), &system)
        .patch("platform-aws", &PatchParams::apply("scenario"), &Patch::Apply(secret))
        .await
        .unwrap();
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &team);
    for (name, scope) in [("scoped", "\n  scope: {type: team, teamRef: {name: a}}"), ("unscoped", "")] {
        create(
            &configs,
            &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: {name}, namespace: {team}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: platform-aws, namespace: {system}}}\n  aws: {{region: eu-west-1}}{scope}\n"),
        )
        .await;
    }
    for (name, whose) in
        [("scoped", "a team-scoped ProviderConfig"), ("unscoped", "a ProviderConfig in a team's namespace")]
    {
        let conditions =
            once_reason(&configs, name, "Validated", "CredentialsInvalid", |c: &ProviderConfig| {
                c.status.as_ref().map(|s| &s.conditions)
            })
            .await;
        assert_eq!(
            condition(&conditions, "Validated").unwrap().message,
            format!(
                "spec.credentialsRef.namespace \"{system}\" is refused: {whose} reads Secrets of its own namespace ({team}) only; put the Secret in {team} and leave spec.credentialsRef.namespace out"
            )
        );
        let ready = configs.get(name).await.unwrap().status.and_then(|s| s.ready);
        assert_eq!(ready, Some(false));
    }
    // A namespace named as a team's is one, labelled or not (its Team may come later).
    let named = s.namespace("team-iso-pc").await;
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), &named);
    create(
        &configs,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: unlabelled, namespace: {named}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: platform-aws, namespace: {system}}}\n  aws: {{region: eu-west-1}}\n"),
    )
    .await;
    let conditions =
        once_reason(&configs, "unlabelled", "Validated", "CredentialsInvalid", |c: &ProviderConfig| {
            c.status.as_ref().map(|s| &s.conditions)
        })
        .await;
    let message = &condition(&conditions, "Validated").unwrap().message;
    assert!(
        message.contains(
            "is refused: a ProviderConfig in a team's namespace reads Secrets of its own namespace"
        ),
        "{message}"
    );
}

#[tokio::test]
async fn a_team_admin_reads_the_team_but_cannot_raise_its_limits_or_reach_another_namespace() {
    use butler_core::api::Team;
    use k8s_openapi::api::core::v1::ConfigMap;
    let s = Scenario::start().await;
    let name = team_with_admin(&s, "iso-admin", "mallory@example.com", "{maxClusters: 1}").await;
    let ns = format!("team-{name}");
    let other = s.namespace("iso-admin-other").await;
    let mallory = s.cluster.client_as_user("mallory@example.com", &[]);
    fn forbidden<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
        match result {
            Err(kube::Error::Api(e)) if e.code == 403 => {}
            other => panic!("{what}: a team admin was not refused: {other:?}"),
        }
    }
    let theirs: Api<Team> = Api::all(mallory.clone());
    theirs.get(&name).await.expect("a team admin reads the Team");
    let raise = json!({"spec": {"resourceLimits": {"maxClusters": 100}}});
    forbidden(
        theirs.patch(&name, &PatchParams::default(), &Patch::Merge(raise)).await,
        "raising maxClusters",
    );
    let mut team = theirs.get(&name).await.unwrap();
    team.spec.resource_limits = None;
    forbidden(theirs.replace(&name, &PostParams::default(), &team).await, "dropping the limits");
    // Their namespace is theirs; another is not.
    let config_map = |ns: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": "x", "namespace": ns}})).unwrap()
    };
    Api::<ConfigMap>::namespaced(mallory.clone(), &ns)
        .create(&PostParams::default(), &config_map(&ns))
        .await
        .expect("a team admin writes in the team's namespace");
    forbidden(
        Api::<ConfigMap>::namespaced(mallory.clone(), &other)
            .create(&PostParams::default(), &config_map(&other))
            .await,
        "a ConfigMap in another namespace",
    );
    forbidden(
        Api::<Secret>::namespaced(mallory, &s.home).list(&Default::default()).await,
        "the controller's Secrets",
    );
}

#[tokio::test]
async fn another_teams_provider_config_and_its_pools_serve_a_cluster_nothing() {
    use butler_core::api::IPAllocation;
    let s = Scenario::start().await;
    // Team namespaces are `team-{team}`.
    let team_a = s.namespace("team-a").await;
    let team_b = s.namespace("team-b").await;
    let owner = team_a.trim_start_matches("team-").to_string();
    pool(&s, &team_a, "a-pool", "10.66.0.0/24").await;
    crate::tenants::make::<ProviderConfig>(
        &s,
        &team_a,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
            "metadata": {"name": "pc", "namespace": team_a},
            "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"},
                "scope": {"type": "team", "teamRef": {"name": owner}},
                "network": {"mode": "ipam", "poolRefs": [{"name": "a-pool"}], "loadBalancer": {"defaultPoolSize": 4}}}}),
    )
    .await;
    // Team b's cluster names team a's ProviderConfig; team a's own is served.
    cluster(&s, &team_b, "intruder", &team_a).await;
    cluster(&s, &team_a, "own", &team_a).await;
    let clusters_b: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team_b);
    let conditions =
        once_reason(&clusters_b, "intruder", "IPAMReady", "ProviderConfigNotAllowed", of_cluster).await;
    let message = &condition(&conditions, "IPAMReady").unwrap().message;
    assert!(
        message.starts_with(&format!("the ProviderConfig {team_a}/pc is scoped to the team \"{owner}\"")),
        "{message}"
    );
    let clusters_a: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team_a);
    wait_for(&clusters_a, "own", "IPAMReady", crate::tenants::ipam_ready).await;
    let allocations: Api<IPAllocation> = Api::namespaced(s.client.clone(), &team_a);
    let names: Vec<String> = allocations
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|a| a.spec.tenant_cluster_ref.name)
        .collect();
    assert_eq!(names, ["own"], "the intruder got no addresses of team a's pool");
}

#[tokio::test]
async fn a_tenant_api_server_that_never_answers_is_given_up_on_and_holds_no_other_cluster() {
    let s = Scenario::start().await;
    let system = s.namespace("iso-hang-system").await;
    let team = s.namespace("iso-hang-team").await;
    // Accepts connections and never answers.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = calls.clone();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            open.push(socket);
        }
    });
    small_ipam(&s, &system, "10.69.0.0/24").await;
    kubeconfig_secret(&s, &team, "stuck", &format!("http://{address}"), "{token: t}").await;
    cluster(&s, &team, "stuck", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    // Meanwhile another cluster, without a tenant yet, is served as ever.
    cluster(&s, &team, "other", &system).await;
    wait_for(&clusters, "other", "IPAMReady", crate::tenants::ipam_ready).await;
    let conditions = once_reason(&clusters, "stuck", "MetalLBSynced", "TenantUnreachable", of_cluster).await;
    assert!(condition(&conditions, "IPAMReady").is_some_and(|c| c.status == "True"), "it keeps its block");
    // Until its next try (10 s after the first failure) a reconcile of the cluster reports the
    // failure without waiting on the tenant again: changes of the cluster call it no more.
    let before = calls.load(std::sync::atomic::Ordering::SeqCst);
    for touch in 0..3 {
        let patch = json!({"metadata": {"annotations": {"touched": touch.to_string()}}});
        clusters.patch("stuck", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(
        calls.load(std::sync::atomic::Ordering::SeqCst),
        before,
        "a silent tenant is left alone until its next try"
    );
    held.abort();
}

/// With as few reconcile workers as an install may give them, tenants that hang still leave
/// workers to the other clusters: a cluster made while three tenants hang is served before any
/// of them has even timed out.
#[tokio::test]
async fn hanging_tenants_never_take_every_reconcile_worker() {
    let mut s = Scenario::start().await;
    s.restart_controllers_with_concurrency(2).await;
    let system = s.namespace("iso-workers-system").await;
    let team = s.namespace("iso-workers-team").await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            open.push(socket);
        }
    });
    small_ipam(&s, &system, "10.70.0.0/24").await;
    let stuck = ["stuck-a", "stuck-b", "stuck-c"];
    for name in stuck {
        kubeconfig_secret(&s, &team, name, &format!("http://{address}"), "{token: t}").await;
        cluster(&s, &team, name, &system).await;
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while calls.load(Ordering::SeqCst) == 0 {
        assert!(std::time::Instant::now() < deadline, "no tenant was ever called");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    cluster(&s, &team, "served", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    wait_for(&clusters, "served", "IPAMReady", crate::tenants::ipam_ready).await;
    for name in stuck {
        let conditions = clusters.get(name).await.unwrap().status.map(|s| s.conditions).unwrap_or_default();
        assert!(
            !conditions.iter().any(|c| c.reason == "TenantUnreachable"),
            "{name} timed out before the other cluster was served: the hanging tenants held every worker"
        );
    }
    held.abort();
}

/// Two Teams of the scenario's, `a` and `b`, each with an admin: each team's name, namespace
/// and its admin's client.
async fn two_teams(s: &Scenario, base: &str) -> [(String, String, kube::Client); 2] {
    let team = |side: &'static str| async move {
        let admin = format!("{side}-admin@example.com");
        let name = team_with_admin(s, &format!("{base}-{side}"), &admin, "").await;
        (name.clone(), format!("team-{name}"), s.cluster.client_as_user(&admin, &[]))
    };
    [team("a").await, team("b").await]
}

#[tokio::test]
async fn a_provider_config_in_a_teams_namespace_serves_that_team_only_whatever_its_scope() {
    let s = Scenario::start().await;
    let [(a, team_a, alice), (_, team_b, bob)] = two_teams(&s, "iso-unscoped").await;
    // Alice writes a ProviderConfig in her team's namespace and gives it no scope (or the
    // platform's): it is her team's all the same.
    for (name, scope) in [("unscoped", ""), ("platform", "\n  scope: {type: platform}")] {
        create(
            &Api::<ProviderConfig>::namespaced(alice.clone(), &team_a),
            &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: {name}, namespace: {team_a}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: c}}\n  aws: {{region: eu-west-1}}{scope}\n"),
        )
        .await;
    }
    let cluster = |name: &str, config: &str| -> TenantCluster {
        crate::support::from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: {team_b}}}\nspec:\n  providerConfigRef: {{name: {config}, namespace: {team_a}}}\n"
        ))
    };
    let bobs: Api<TenantCluster> = Api::namespaced(bob.clone(), &team_b);
    if s.webhooks_allowed() {
        // Admission refuses Bob's cluster that names Alice's ProviderConfig.
        let home = s.namespace("iso-unscoped-hooks").await;
        let served = crate::support::serve_webhooks(&s, &home).await;
        for config in ["unscoped", "platform"] {
            let mut refused = None;
            for _ in 0..200 {
                match bobs.create(&PostParams::default(), &cluster("intruder", config)).await {
                    Err(e) => {
                        refused = Some(crate::support::api_message(&e));
                        break;
                    }
                    // The webhook's cache had not seen the ProviderConfig yet: try again.
                    Ok(_) => {
                        bobs.delete("intruder", &Default::default()).await.unwrap();
                        wait_for(&bobs, "intruder", "gone", |c| c.is_none()).await;
                    }
                }
            }
            let refused = refused.expect("Bob's cluster naming Alice's ProviderConfig was admitted");
            assert!(
                refused.contains(&format!(
                    "the ProviderConfig {team_a}/{config} is in the namespace of the team \"{a}\", and only that team's clusters may use it"
                )),
                "{refused}"
            );
        }
        let _ = served.stop.send(true);
        crate::support::remove_webhook_configurations(&s).await;
    }
    // Where no webhook stops it (a real cluster here, or one whose webhooks fail open), the
    // controller serves such a cluster nothing.
    bobs.create(&PostParams::default(), &cluster("slipped", "unscoped")).await.expect("no webhook here");
    let all_b: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team_b);
    let conditions =
        once_reason(&all_b, "slipped", "IPAMReady", "ProviderConfigNotAllowed", of_cluster).await;
    let message = &condition(&conditions, "IPAMReady").unwrap().message;
    assert!(message.contains(&format!("is in the namespace of the team \"{a}\"")), "{message}");
    all_b.delete("slipped", &Default::default()).await.unwrap();
    wait_for(&all_b, "slipped", "gone", |c| c.is_none()).await;
}

#[tokio::test]
async fn a_team_cannot_empty_a_shared_pool() {
    let s = Scenario::start().await;
    // The platform's ProviderConfig, shared by every team, over one /24.
    let platform = s.namespace("iso-shared-pool").await;
    pool(&s, &platform, "shared", "10.76.0.0/24").await;
    crate::tenants::make::<ProviderConfig>(
        &s,
        &platform,
        json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
            "metadata": {"name": "pc", "namespace": platform},
            "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"},
                "network": {"mode": "ipam", "poolRefs": [{"name": "shared"}], "loadBalancer": {"defaultPoolSize": 4}}}}),
    )
    .await;
    let name = team_with_admin(&s, "iso-hungry", "hungry@example.com", "{maxIPAddresses: 16}").await;
    let team_ns = format!("team-{name}");
    let hungry = s.cluster.client_as_user("hungry@example.com", &[]);
    let clusters: Api<TenantCluster> = Api::namespaced(hungry, &team_ns);
    let cluster = |name: &str, lb: i64| -> TenantCluster {
        crate::support::from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: {team_ns}}}\nspec:\n  providerConfigRef: {{name: pc, namespace: {platform}}}\n  networking: {{lbPoolSize: {lb}}}\n"
        ))
    };
    // The whole pool in one cluster: beyond what any cluster may ask (the CRD's maximum).
    let refused = clusters.create(&PostParams::default(), &cluster("all", 100_000)).await.unwrap_err();
    let message = crate::support::api_message(&refused);
    assert!(message.contains("spec.networking.lbPoolSize"), "{message}");
    if !s.webhooks_allowed() {
        return;
    }
    let home = s.namespace("iso-shared-pool-hooks").await;
    let served = crate::support::serve_webhooks(&s, &home).await;
    // Within the team's limit, then past it.
    if let Err(e) = clusters.create(&PostParams::default(), &cluster("first", 12)).await {
        panic!("the first cluster is within the limit: {}", crate::support::api_message(&e));
    }
    // The webhook's caches see the Team's limit and the ProviderConfig a moment later.
    let mut refusal = None;
    for _ in 0..200 {
        match clusters.create(&PostParams::default(), &cluster("second", 8)).await {
            Err(e) => {
                refusal = Some(crate::support::api_message(&e));
                break;
            }
            Ok(_) => {
                clusters.delete("second", &Default::default()).await.unwrap();
                wait_for(&clusters, "second", "gone", |c| c.is_none()).await;
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
        }
    }
    let refusal = refusal.expect("a cluster past the team's address limit was admitted");
    assert!(
        refusal.contains("would exceed the Team's maxIPAddresses: 12 in use, 8 requested, limit 16"),
        "{refusal}"
    );
    let _ = served.stop.send(true);
    crate::support::remove_webhook_configurations(&s).await;
}

#[tokio::test]
async fn a_cluster_re_pointed_while_it_is_deleted_holds_no_other_teams_config() {
    let s = Scenario::start().await;
    let [(_, team_a, ann), (_, team_b, ben)] = two_teams(&s, "iso-held").await;
    let anns: Api<ProviderConfig> = Api::namespaced(ann, &team_a);
    create(
        &anns,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc, namespace: {team_a}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: c}}\n  aws: {{region: eu-west-1}}\n"),
    )
    .await;
    // Ben's cluster, held by a finalizer of his own, deleted, then pointed at Ann's config
    // (no webhook looks at an object being deleted).
    let bens: Api<TenantCluster> = Api::namespaced(ben, &team_b);
    create(
        &bens,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: held, namespace: {team_b}, finalizers: [example.com/ben]}}\nspec: {{}}\n"),
    )
    .await;
    bens.delete("held", &Default::default()).await.unwrap();
    let point = json!({"spec": {"providerConfigRef": {"name": "pc", "namespace": team_a}}});
    bens.patch("held", &PatchParams::default(), &Patch::Merge(point)).await.expect("webhooks skip it");
    // Ann can still delete her ProviderConfig: Ben's cluster does not hold it.
    anns.delete("pc", &Default::default()).await.expect("not refused for Ben's cluster");
    wait_for(&anns, "pc", "gone", |c| c.is_none()).await;
    let release = json!({"metadata": {"finalizers": null}});
    bens.patch("held", &PatchParams::default(), &Patch::Merge(release)).await.unwrap();
    wait_for(&bens, "held", "gone", |c| c.is_none()).await;
}

/// A Proxmox ProviderConfig `pve` at `endpoint` (any certificate taken) with its token Secret,
/// written by `client` in `namespace`.
async fn proxmox(client: &kube::Client, namespace: &str, endpoint: &str) -> Api<ProviderConfig> {
    Api::<Secret>::namespaced(client.clone(), namespace)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "pve", "namespace": namespace},
                "stringData": {"token": "root@pam!t=secret"}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let configs: Api<ProviderConfig> = Api::namespaced(client.clone(), namespace);
    create(
        &configs,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pve, namespace: {namespace}}}\nspec:\n  provider: proxmox\n  credentialsRef: {{name: pve}}\n  proxmox: {{endpoint: '{endpoint}', insecure: true, nodes: [pve1], storage: local-lvm}}\n"),
    )
    .await;
    configs
}

#[tokio::test]
async fn a_teams_provider_config_probes_no_local_address() {
    let s = Scenario::start().await;
    let name = team_with_admin(&s, "iso-ssrf", "carol@example.com", "").await;
    let team_ns = format!("team-{name}");
    let carol = s.cluster.client_as_user("carol@example.com", &[]);
    let reached = Arc::new(AtomicUsize::new(0));
    let counter = reached.clone();
    let inside = serve_tls(Router::new().fallback(move || {
        counter.fetch_add(1, Ordering::Relaxed);
        async { "{}" }
    }))
    .await;
    // An endpoint on the cluster's own network, its query meant to swallow the probe's path.
    let configs = proxmox(&carol, &team_ns, &format!("{inside}/admin?x=")).await;
    let conditions = once_reason(&configs, "pve", "Reachable", "Unreachable", |c: &ProviderConfig| {
        c.status.as_ref().map(|s| &s.conditions)
    })
    .await;
    let message = &condition(&conditions, "Reachable").unwrap().message;
    assert!(
        message.contains("is a loopback address, which butler-controller does not reach unless its network is allowed (--allow-probe-network 127.0.0.1/32)"),
        "{message}"
    );
    assert_eq!(reached.load(Ordering::Relaxed), 0, "the probe never reached the address");
}

#[tokio::test]
async fn a_probe_follows_no_redirect() {
    let s = Scenario::start().await;
    let platform = s.namespace("iso-redirect").await;
    let (target, reached) = attacker().await;
    // The platform's endpoint answers with a redirect to another address.
    let location = format!("{target}/steal");
    let app = Router::new().fallback(move || {
        let location = location.clone();
        async move { (axum::http::StatusCode::FOUND, [(axum::http::header::LOCATION, location)]) }
    });
    let redirecting = serve_tls(app).await;
    let configs = proxmox(&s.client, &platform, &redirecting).await;
    // The platform's own ProviderConfig may point anywhere: it answers (a redirect is an
    // answer), and the redirect is not followed.
    once_reason(&configs, "pve", "Reachable", "Reachable", |c: &ProviderConfig| {
        c.status.as_ref().map(|s| &s.conditions)
    })
    .await;
    assert_eq!(reached.load(Ordering::Relaxed), 0, "the redirect was followed");
}

/// The TenantCluster `name` of a team's namespace, whose tenant is the server at `address`,
/// on a platform's ProviderConfig in IPAM mode over `cidr`: the team's clusters.
async fn cluster_with_tenant(
    s: &Scenario,
    base: &str,
    name: &str,
    cidr: &str,
    address: std::net::SocketAddr,
) -> Api<TenantCluster> {
    let system = s.namespace(&format!("{base}-system")).await;
    let team = s.namespace(&format!("{base}-team")).await;
    small_ipam(s, &system, cidr).await;
    kubeconfig_secret(s, &team, name, &format!("http://{address}"), "{token: t}").await;
    cluster(s, &team, name, &system).await;
    Api::namespaced(s.client.clone(), &team)
}

#[tokio::test]
async fn what_a_tenants_server_answers_never_reaches_a_status() {
    let s = Scenario::start().await;
    // The "tenant" a team names: any server of the network, whose error pages say too much.
    let app = Router::new().fallback(|| async {
        let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 500,
            "reason": "InternalError", "message": "db password is hunter2"});
        (axum::http::StatusCode::INTERNAL_SERVER_ERROR, axum::Json(status))
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let clusters = cluster_with_tenant(&s, "iso-echo", "echo", "10.77.0.0/24", address).await;
    let conditions = once_reason(&clusters, "echo", "MetalLBSynced", "TenantUnreachable", of_cluster).await;
    let message = &condition(&conditions, "MetalLBSynced").unwrap().message;
    assert!(message.contains("it answered InternalError (HTTP 500)"), "{message}");
    let all = serde_json::to_string(&clusters.get("echo").await.unwrap().status).unwrap();
    assert!(!all.contains("hunter2"), "the tenant's text is in the status: {all}");
}

#[tokio::test]
async fn a_tenant_that_trickles_its_answer_is_given_up_on_as_a_whole() {
    let s = Scenario::start().await;
    // Answers at once, then sends a byte a second for ever: no read ever times out.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                let mut request = [0u8; 4096];
                let _ = socket.read(&mut request).await;
                let head =
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n";
                if socket.write_all(head.as_bytes()).await.is_err() {
                    return;
                }
                loop {
                    if socket.write_all(b"1\r\n \r\n").await.is_err() {
                        return;
                    }
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                }
            });
        }
    });
    let clusters = cluster_with_tenant(&s, "iso-trickle", "slow", "10.78.0.0/24", address).await;
    let started = std::time::Instant::now();
    let conditions = crate::support::wait_within(
        &clusters,
        "slow",
        "TenantUnreachable",
        std::time::Duration::from_secs(60),
        |c| {
            c.and_then(of_cluster)
                .and_then(|all| condition(all, "MetalLBSynced"))
                .is_some_and(|c| c.reason == "TenantUnreachable")
        },
    )
    .await;
    let conditions = conditions.expect("the cluster");
    let message = &condition(of_cluster(&conditions).unwrap(), "MetalLBSynced").unwrap().message;
    assert!(message.contains("no whole answer within 30s"), "{message}");
    println!("a trickling tenant given up on after {:.1} s", started.elapsed().as_secs_f64());
    held.abort();
}

#[tokio::test]
async fn a_tenant_answering_without_end_is_read_no_further_than_the_cap() {
    let s = Scenario::start().await;
    // A "tenant" that answers every request at once with 20 MiB.
    let flood = format!("{{\"padding\": \"{}\"}}", "a".repeat(20 * 1024 * 1024));
    let app = Router::new().fallback(move || {
        let flood = flood.clone();
        async move { ([(axum::http::header::CONTENT_TYPE, "application/json")], flood) }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let clusters = cluster_with_tenant(&s, "iso-flood", "flood", "10.79.0.0/24", address).await;
    let conditions = once_reason(&clusters, "flood", "MetalLBSynced", "TenantUnreachable", of_cluster).await;
    let message = &condition(&conditions, "MetalLBSynced").unwrap().message;
    assert!(message.contains("length limit exceeded"), "{message}");
}

#[tokio::test]
async fn a_tenant_answering_with_a_flood_of_empty_items_is_refused_past_a_page() {
    let s = Scenario::start().await;
    // A "tenant" whose list of Services is 1 MiB of `{}`: decoded whole, 350,000 Services.
    let items = vec!["{}"; 350_000].join(",");
    let list = format!(
        "{{\"kind\": \"ServiceList\", \"apiVersion\": \"v1\", \"metadata\": {{}}, \"items\": [{items}]}}"
    );
    let app = Router::new()
        .route(
            "/api/v1/services",
            axum::routing::get(move || {
                let list = list.clone();
                async move { ([(axum::http::header::CONTENT_TYPE, "application/json")], list) }
            }),
        )
        .fallback(|| async {
            let status = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 404, "reason": "NotFound"});
            (axum::http::StatusCode::NOT_FOUND, axum::Json(status))
        });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let system = s.namespace("iso-items-system").await;
    let team = s.namespace("iso-items-team").await;
    pool(&s, &system, "lab", "10.85.0.0/24").await;
    crate::tenants::config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"allocationMode": "elastic"}}),
    )
    .await;
    kubeconfig_secret(&s, &team, "many", &format!("http://{address}"), "{token: t}").await;
    cluster(&s, &team, "many", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let conditions = once_reason(&clusters, "many", "MetalLBSynced", "TenantUnreachable", of_cluster).await;
    let message = &condition(&conditions, "MetalLBSynced").unwrap().message;
    assert!(message.contains("a page of more than the 500 Services asked for"), "{message}");
}

/// Every ProviderConfig and TenantCluster is held in both replicas' memory: a team admin who
/// makes them without end meets the team namespace's ResourceQuota, which she cannot change.
#[tokio::test]
async fn a_team_admin_cannot_fill_the_controllers_memory_with_objects() {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let mut s = Scenario::start().await;
    s.restart_controllers_with(|o| o.team_quota = butler_controller::team::quota::TeamQuota { objects: 3 })
        .await;
    let admin = "hoarder@example.com";
    let team = team_with_admin(&s, "iso-hoard", admin, "").await;
    let ns = format!("team-{team}");
    let quotas: Api<ResourceQuota> = Api::namespaced(s.client.clone(), &ns);
    let quota = wait_for(&quotas, "butler-team-objects", "the team's quota", |q| q.is_some()).await.unwrap();
    let hard = quota.spec.unwrap().hard.unwrap();
    assert_eq!(hard["count/providerconfigs.butler.butlerlabs.dev"].0, "3");
    assert_eq!(hard["count/tenantclusters.butler.butlerlabs.dev"].0, "3");

    let hoarder = s.cluster.client_as_user(admin, &[]);
    let configs: Api<ProviderConfig> = Api::namespaced(hoarder.clone(), &ns);
    let config = |i: usize| -> ProviderConfig {
        crate::support::from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc{i}, namespace: {ns}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: c}}\n  aws: {{region: eu-west-1}}\n"
        ))
    };
    let mut made = 0;
    let refused = loop {
        match configs.create(&PostParams::default(), &config(made)).await {
            Ok(_) => made += 1,
            // A real quota controller counts a new quota a moment after it is made.
            Err(e) if crate::support::api_message(&e).contains("status unknown for quota") => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => break crate::support::api_message(&e),
        }
        assert!(made <= 3, "a fourth ProviderConfig was made");
    };
    assert_eq!(made, 3);
    assert!(refused.contains("exceeded quota: butler-team-objects"), "{refused}");
    assert!(refused.contains("limited: count/providerconfigs.butler.butlerlabs.dev=3"), "{refused}");

    // The quota is the platform's: she can neither lift it nor take it away.
    let hers: Api<ResourceQuota> = Api::namespaced(hoarder, &ns);
    let lift =
        Patch::Merge(json!({"spec": {"hard": {"count/providerconfigs.butler.butlerlabs.dev": "1000"}}}));
    let forbidden = |e: kube::Error| matches!(e, kube::Error::Api(s) if s.code == 403);
    assert!(forbidden(hers.patch("butler-team-objects", &PatchParams::default(), &lift).await.unwrap_err()));
    assert!(forbidden(hers.delete("butler-team-objects", &Default::default()).await.unwrap_err()));
}

/// A team operator reaches the team's clusters through their kubeconfig Secrets, and no other
/// Secret of the namespace: not the credentials of the team's ProviderConfigs, not a list.
#[tokio::test]
async fn a_team_operator_reads_its_clusters_kubeconfigs_and_no_other_secret() {
    let s = Scenario::start().await;
    let operator = "op@example.com";
    let team = crate::support::team_with_members(&s, "iso-op", &[(operator, "operator")], "").await;
    let ns = format!("team-{team}");
    let secrets: Api<Secret> = Api::namespaced(s.client.clone(), &ns);
    // web's kubeconfig as Cluster API makes it; a ProviderConfig's credentials; and credentials
    // that merely have a kubeconfig's name (a cluster named harvester would open them by name).
    let capi = |cluster: &str| json!({"labels": {"cluster.x-k8s.io/cluster-name": cluster}});
    for (name, type_, extra) in [
        ("web-kubeconfig", "cluster.x-k8s.io/secret", capi("web")),
        ("aws-credentials", "Opaque", json!({})),
        ("harvester-kubeconfig", "Opaque", json!({})),
        ("api-kubeconfig", "cluster.x-k8s.io/secret", capi("web")),
    ] {
        let mut metadata = json!({"name": name, "namespace": ns});
        metadata.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        let secret: Secret = serde_json::from_value(json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": metadata, "type": type_, "stringData": {"value": "secret"}}))
        .unwrap();
        secrets.create(&PostParams::default(), &secret).await.unwrap();
    }
    let theirs: Api<Secret> = Api::namespaced(s.cluster.client_as_user(operator, &[]), &ns);
    let forbidden = |r: Result<Secret, kube::Error>| matches!(r, Err(kube::Error::Api(s)) if s.code == 403);
    // No cluster yet: no kubeconfig to read (and no rule that would name every Secret).
    assert!(forbidden(theirs.get("web-kubeconfig").await));
    let clusters: Api<TenantCluster> = Api::namespaced(s.cluster.client_as_user(operator, &[]), &ns);
    create(&clusters, &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: web, namespace: {ns}}}\nspec: {{}}\n")).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while theirs.get("web-kubeconfig").await.is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the operator never could read the cluster's kubeconfig"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(forbidden(theirs.get("aws-credentials").await), "a ProviderConfig's credentials are the admins'");
    // Clusters named after Secrets that are not their kubeconfigs open nothing: the controller
    // grants only the Secret Cluster API made for the cluster (its type and cluster-name label).
    for name in ["harvester", "api"] {
        create(&clusters, &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: {ns}}}\nspec: {{}}\n")).await;
    }
    let roles: Api<k8s_openapi::api::rbac::v1::Role> = Api::namespaced(s.client.clone(), &ns);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        // The team's reconcile after the two clusters came: their names are in its status count.
        let team_now: Team = Api::all(s.client.clone()).get(&team).await.unwrap();
        let counted = team_now.status.and_then(|s| s.cluster_count).unwrap_or_default();
        if counted >= 3 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the team never counted the clusters");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let role = roles.get("butler-team-kubeconfigs").await.unwrap();
    let names = role
        .rules
        .unwrap_or_default()
        .into_iter()
        .flat_map(|r| r.resource_names.unwrap_or_default())
        .collect::<Vec<_>>();
    assert_eq!(names, ["web-kubeconfig"], "only the cluster's own kubeconfig is granted");
    assert!(forbidden(theirs.get("harvester-kubeconfig").await), "credentials named like a kubeconfig");
    assert!(forbidden(theirs.get("api-kubeconfig").await), "a kubeconfig labelled for another cluster");
    let listed = theirs.list(&Default::default()).await;
    assert!(matches!(listed, Err(kube::Error::Api(s)) if s.code == 403), "operators list no Secrets");
    // The cluster goes: so does the operator's access to its kubeconfig.
    clusters.delete("web", &Default::default()).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !forbidden(theirs.get("web-kubeconfig").await) {
        assert!(
            std::time::Instant::now() < deadline,
            "the kubeconfig stayed readable after its cluster went"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_cluster_moved_to_a_cloud_config_still_counts_its_block_against_the_teams_limit() {
    let s = Scenario::start().await;
    if !s.webhooks_allowed() {
        return;
    }
    let platform = s.namespace("iso-moved-pool").await;
    pool(&s, &platform, "shared", "10.84.0.0/24").await;
    for (name, network) in [
        (
            "pc",
            json!({"mode": "ipam", "poolRefs": [{"name": "shared"}], "loadBalancer": {"defaultPoolSize": 4}}),
        ),
        ("cloud", json!({"mode": "cloud"})),
    ] {
        crate::tenants::make::<ProviderConfig>(
            &s,
            &platform,
            json!({"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "ProviderConfig",
                "metadata": {"name": name, "namespace": platform},
                "spec": {"provider": "harvester", "credentialsRef": {"name": "c"}, "harvester": {"networkName": "a/b"},
                    "network": network}}),
        )
        .await;
    }
    let name = team_with_admin(&s, "iso-moved", "mover@example.com", "{maxIPAddresses: 16}").await;
    let team_ns = format!("team-{name}");
    // The first cluster's tenant announces its block and will not let it go (no delete).
    let _tenant =
        crate::tenants::guarded_tenant(&s, &team_ns, "first", &["get", "list", "watch", "create", "patch"])
            .await;
    let home = s.namespace("iso-moved-hooks").await;
    let served = crate::support::serve_webhooks(&s, &home).await;
    let mover = s.cluster.client_as_user("mover@example.com", &[]);
    let clusters: Api<TenantCluster> = Api::namespaced(mover, &team_ns);
    let cluster = |name: &str, config: &str, lb: i64| -> TenantCluster {
        crate::support::from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: {team_ns}}}\nspec:\n  providerConfigRef: {{name: {config}, namespace: {platform}}}\n  networking: {{lbPoolSize: {lb}}}\n"
        ))
    };
    if let Err(e) = clusters.create(&PostParams::default(), &cluster("first", "pc", 12)).await {
        panic!("the first cluster is within the limit: {}", crate::support::api_message(&e));
    }
    let all: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team_ns);
    crate::tenants::cluster_says(&all, "first", "MetalLBSynced", "True").await;
    // Moved to the cloud config, it takes no pool addresses from now on, but its block stays
    // while its tenant announces it.
    let patch = json!({"spec": {"providerConfigRef": {"name": "cloud", "namespace": platform}}});
    clusters.patch("first", &PatchParams::default(), &Patch::Merge(patch)).await.unwrap();
    crate::tenants::cluster_says(&all, "first", "FormerAddressesReleased", "TenantRefusedRelease").await;
    let refused = clusters.create(&PostParams::default(), &cluster("second", "pc", 8)).await.unwrap_err();
    let refusal = crate::support::api_message(&refused);
    assert!(
        refusal.contains("would exceed the Team's maxIPAddresses: 12 in use, 8 requested, limit 16"),
        "{refusal}"
    );
    let _ = served.stop.send(true);
    crate::support::remove_webhook_configurations(&s).await;
}
