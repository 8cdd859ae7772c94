//! A team admin trying to reach beyond the team through what the controller reads for it: a
//! tenant kubeconfig that would make the controller send its own token to the team's server,
//! and a ProviderConfig that names the platform's credentials Secret.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use butler_core::api::{ProviderConfig, TenantCluster};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{Scenario, create, wait_for};
use crate::tenants::{cluster, config, pool};

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

fn condition<'a>(
    conditions: &'a [k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
    type_: &str,
) -> Option<&'a k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[tokio::test]
async fn a_tenant_kubeconfig_that_reads_the_controllers_files_is_refused_by_its_field() {
    let s = Scenario::start().await;
    let system = s.cluster.namespace("iso-kc-system").await;
    let team = s.cluster.namespace("iso-kc-team").await;
    let (server, requests) = attacker().await;
    // The controller's own token file, in a pod; here a file of this process.
    let token = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(token.path(), "the-controllers-token").unwrap();
    pool(&s, &system, "lab", "10.61.0.0/24").await;
    config(
        &s,
        &system,
        json!({"mode": "ipam", "poolRefs": [{"name": "lab"}], "loadBalancer": {"defaultPoolSize": 4}}),
    )
    .await;
    let kubeconfig = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster: {{server: '{server}'}}\ncontexts:\n- name: t\n  context: {{cluster: t, user: u}}\ncurrent-context: t\nusers:\n- name: u\n  user: {{tokenFile: '{}'}}\n",
        token.path().display()
    );
    let secret: Secret =
        serde_json::from_value(json!({"metadata": {"name": "web-kubeconfig", "namespace": team},
        "stringData": {"value": kubeconfig}}))
        .unwrap();
    Api::<Secret>::namespaced(s.client.clone(), &team).create(&PostParams::default(), &secret).await.unwrap();
    cluster(&s, &team, "web", &system).await;
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &team);
    let refused = wait_for(&clusters, "web", "the kubeconfig refused", |c| {
        c.and_then(|c| c.status.as_ref())
            .and_then(|st| condition(&st.conditions, "MetalLBSynced"))
            .is_some_and(|c| c.reason == "KubeconfigInvalid")
    })
    .await
    .unwrap();
    let status = refused.status.unwrap();
    let message = &condition(&status.conditions, "MetalLBSynced").unwrap().message;
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
    let system = s.cluster.namespace("iso-pc-system").await;
    let team = s.cluster.namespace("iso-pc-team").await;
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
        let refused = wait_for(&configs, name, "the reference refused", |c| {
            c.and_then(|c| c.status.as_ref())
                .and_then(|st| condition(&st.conditions, "Validated"))
                .is_some_and(|c| c.reason == "CredentialsInvalid")
        })
        .await
        .unwrap();
        let status = refused.status.unwrap();
        assert_eq!(
            condition(&status.conditions, "Validated").unwrap().message,
            format!(
                "spec.credentialsRef.namespace \"{system}\" is refused: {whose} reads Secrets of its own namespace ({team}) only; put the Secret in {team} and leave spec.credentialsRef.namespace out"
            )
        );
        assert_eq!(status.ready, Some(false));
    }
}
