//! The controller reads Secrets only where a spec names them: by name, in namespaces bound for
//! it (each team namespace by the Team controller, others by the platform). It lists or watches
//! none, and a namespace nobody bound keeps its Secrets from it, with a message that says how
//! to bind it.

use butler_core::api::{ProviderConfig, Team};
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::{Scenario, api_message, create, wait_for};

fn validated(config: Option<&ProviderConfig>) -> Option<(String, String, String)> {
    let c = config?.status.as_ref()?.conditions.iter().find(|c| c.type_ == "Validated")?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

async fn aws(s: &Scenario, ns: &str) -> Api<ProviderConfig> {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "aws", "namespace": ns},
        "stringData": {"accessKeyID": "AKIAEXAMPLE", "secretAccessKey": "wJalrXUtnFEMI"}});
    Api::<Secret>::namespaced(s.client.clone(), ns)
        .patch("aws", &PatchParams::apply("scenario").force(), &Patch::Apply(secret))
        .await
        .unwrap();
    let configs: Api<ProviderConfig> = Api::namespaced(s.client.clone(), ns);
    create(
        &configs,
        &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: aws, namespace: {ns}}}\nspec:\n  provider: aws\n  credentialsRef: {{name: aws}}\n  aws: {{region: eu-west-1}}\n"),
    )
    .await;
    configs
}

#[tokio::test]
async fn the_controller_reads_secrets_only_where_it_is_bound() {
    let s = Scenario::start().await;
    let controller = s.controller_client_as("butler-controller-probe").await;

    // Nothing cluster-wide: no list, no watch, no read where nobody bound it.
    let elsewhere = s.cluster.namespace("secrets-unbound").await;
    let configs = aws(&s, &elsewhere).await;
    let all = Api::<Secret>::all(controller.clone()).list(&ListParams::default()).await.unwrap_err();
    assert!(api_message(&all).contains("forbidden"), "{}", api_message(&all));
    let unbound = Api::<Secret>::namespaced(controller.clone(), &elsewhere).get("aws").await.unwrap_err();
    assert!(api_message(&unbound).contains("forbidden"), "{}", api_message(&unbound));
    let refused = wait_for(&configs, "aws", "Validated False", |c| {
        validated(c).is_some_and(|(status, _, _)| status == "False")
    })
    .await
    .unwrap();
    let (_, reason, message) = validated(Some(&refused)).unwrap();
    assert_eq!(reason, "CredentialsInvalid");
    let reader = crate::shipped::secret_reader(&s.home, &s.rbac);
    let command = format!(
        "kubectl -n {elsewhere} create rolebinding butler-controller-secrets --clusterrole={} --serviceaccount={}:butler-controller",
        reader.cluster_role, s.home
    );
    assert!(message.ends_with(&command), "{message}");

    // The platform binds it as the message says: the credentials are read at the next try.
    let binding: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "butler-controller-secrets", "namespace": elsewhere},
        "roleRef": reader.role_ref(), "subjects": reader.subjects(),
    }))
    .unwrap();
    Api::<RoleBinding>::namespaced(s.client.clone(), &elsewhere)
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    wait_for(&configs, "aws", "Validated True", |c| {
        validated(c).is_some_and(|(status, _, _)| status == "True")
    })
    .await;

    // A team namespace is bound by the Team controller, to the controller's account alone.
    let teams: Api<Team> = Api::all(s.client.clone());
    let name = s.cluster.unique("secrets");
    let team_ns = format!("team-{name}");
    crate::team::ready_team(&teams, &name, "[{name: tina@example.com, role: admin}]").await;
    let bound = Api::<RoleBinding>::namespaced(s.client.clone(), &team_ns)
        .get("butler-controller-secrets")
        .await
        .unwrap();
    assert_eq!(bound.role_ref.name, reader.cluster_role);
    let subjects = bound.subjects.unwrap_or_default();
    assert_eq!(subjects.len(), 1);
    assert_eq!(
        (subjects[0].kind.as_str(), subjects[0].name.as_str()),
        ("ServiceAccount", "butler-controller")
    );
    assert_eq!(subjects[0].namespace.as_deref(), Some(s.home.as_str()));
    let team_configs = aws(&s, &team_ns).await;
    wait_for(&team_configs, "aws", "Validated True", |c| {
        validated(c).is_some_and(|(status, _, _)| status == "True")
    })
    .await;

    for api in [&configs, &team_configs] {
        api.delete("aws", &DeleteParams::default()).await.unwrap();
        wait_for(api, "aws", "deletion", |c| c.is_none()).await;
    }
    teams.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&teams, &name, "deletion", |t| t.is_none()).await;
}
