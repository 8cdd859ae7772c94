//! RBAC's escalation check: an account writes a role, or binds one, without `escalate` or
//! `bind` when it holds every permission granted, and is refused when it does not.

use butler_e2e::Cluster;
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

fn role(ns: &str, name: &str, rules: Value) -> Role {
    serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}, "rules": rules})).unwrap()
}

fn binding(ns: &str, name: &str, role: &str, account: &str) -> RoleBinding {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}],
    }))
    .unwrap()
}

#[tokio::test]
async fn roles_and_bindings_grant_only_what_their_writer_holds() {
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("rbac").await;
    let admin = cluster.client();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    let account: ServiceAccount =
        serde_json::from_value(json!({"metadata": {"name": "writer", "namespace": ns}})).unwrap();
    accounts.create(&PostParams::default(), &account).await.unwrap();
    let read_configmaps = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]}]);
    let writer_rules = json!([
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"]},
        {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": ["create"]},
    ]);
    let roles: Api<Role> = Api::namespaced(admin.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(admin.clone(), &ns);
    let post = PostParams::default();
    roles.create(&post, &role(&ns, "writer", writer_rules)).await.unwrap();
    bindings.create(&post, &binding(&ns, "writer", "writer", "writer")).await.unwrap();
    let secrets = json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]);
    roles.create(&post, &role(&ns, "secrets", secrets.clone())).await.unwrap();

    let config = cluster.service_account_config("rbac-writer", &ns, "writer").await;
    let writer = kube::Client::try_from(config).unwrap();
    let roles: Api<Role> = Api::namespaced(writer.clone(), &ns);
    let bindings: Api<RoleBinding> = Api::namespaced(writer, &ns);

    // What it holds it may grant, and bind.
    roles.create(&post, &role(&ns, "readers", read_configmaps)).await.unwrap();
    bindings.create(&post, &binding(&ns, "readers", "readers", "writer")).await.unwrap();
    // What it does not hold it may neither grant nor bind.
    let refused = |e: kube::Error| match e {
        kube::Error::Api(status) => status.code,
        other => panic!("{other}"),
    };
    let granted = roles.create(&post, &role(&ns, "more", secrets)).await.map_err(refused);
    assert_eq!(granted.err(), Some(403), "a Role granting Secrets it cannot read");
    let wider = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}]);
    let granted = roles.create(&post, &role(&ns, "wider", wider)).await.map_err(refused);
    assert_eq!(granted.err(), Some(403), "a wildcard verb it does not hold");
    let bound = bindings.create(&post, &binding(&ns, "secrets", "secrets", "writer")).await.map_err(refused);
    assert_eq!(bound.err(), Some(403), "a binding to a Role granting Secrets");
}

/// A server that delegates (controller-runtime's secure metrics) asks the API server who a
/// token is and what it may do; the answers follow the bindings.
#[tokio::test]
async fn token_and_subject_access_reviews_answer_as_the_bindings_say() {
    use k8s_openapi::api::authentication::v1::TokenReview;
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
    let cluster = Cluster::connect().await;
    let ns = cluster.namespace("reviews").await;
    let admin = cluster.client();
    let post = PostParams::default();
    let accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), &ns);
    for name in ["scraper", "stranger"] {
        let account: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": ns}})).unwrap();
        accounts.create(&post, &account).await.unwrap();
    }
    // A ClusterRole of this scenario's own, bound to the scraper alone.
    let name = format!("{ns}-metrics-reader");
    cluster.remove_cluster_objects_labelled(&format!("scenario.butlerlabs.dev/run={ns}"));
    let labels = json!({"scenario.butlerlabs.dev/run": ns});
    let reader: ClusterRole = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
    }))
    .unwrap();
    Api::<ClusterRole>::all(admin.clone()).create(&post, &reader).await.unwrap();
    let bound: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": ns}],
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(admin.clone()).create(&post, &bound).await.unwrap();

    let config = cluster.service_account_config("reviews", &ns, "scraper").await;
    let token = serde_json::to_value(&config.auth_info).unwrap()["token"].as_str().unwrap().to_string();
    let review =
        |token: &str| -> TokenReview { serde_json::from_value(json!({"spec": {"token": token}})).unwrap() };
    let reviews: Api<TokenReview> = Api::all(admin.clone());
    let who = reviews.create(&post, &review(&token)).await.unwrap();
    let user = who.status.as_ref().unwrap().user.clone().unwrap();
    assert_eq!(who.status.as_ref().unwrap().authenticated, Some(true));
    assert_eq!(user.username.as_deref(), Some(format!("system:serviceaccount:{ns}:scraper").as_str()));
    let forged = reviews.create(&post, &review("not-a-token")).await.unwrap();
    assert_ne!(forged.status.unwrap().authenticated, Some(true));

    let access = |account: &str| -> SubjectAccessReview {
        serde_json::from_value(json!({"spec": {
            "user": format!("system:serviceaccount:{ns}:{account}"),
            "groups": ["system:serviceaccounts", format!("system:serviceaccounts:{ns}"), "system:authenticated"],
            "nonResourceAttributes": {"path": "/metrics", "verb": "get"},
        }}))
        .unwrap()
    };
    let accesses: Api<SubjectAccessReview> = Api::all(admin);
    let allowed = |r: SubjectAccessReview| r.status.map(|s| s.allowed).unwrap_or(false);
    assert!(allowed(accesses.create(&post, &access("scraper")).await.unwrap()));
    assert!(!allowed(accesses.create(&post, &access("stranger")).await.unwrap()));
}

/// The rules of a ClusterRole, and who owns `rules` by managedFields.
fn rules_and_owners(role: &k8s_openapi::api::rbac::v1::ClusterRole) -> (Value, Vec<String>) {
    let owners = role
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| serde_json::to_value(&e.fields_v1).unwrap().get("f:rules").is_some())
        .filter_map(|e| e.manager.clone())
        .collect();
    (serde_json::to_value(&role.rules).unwrap(), owners)
}

#[tokio::test]
async fn cluster_roles_with_an_aggregation_rule_get_the_rules_of_the_roles_they_select() {
    use k8s_openapi::api::rbac::v1::ClusterRole;
    use kube::api::{Patch, PatchParams};

    let cluster = Cluster::connect().await;
    let run = cluster.unique("agg");
    let label = format!("e2e.butlerlabs.dev/{run}");
    cluster.remove_cluster_objects_labelled(&format!("{label}-owner=scenario"));
    let roles: Api<ClusterRole> = Api::all(cluster.client());
    let apply = PatchParams::apply("scenario").force();
    let read = json!([{"apiGroups": ["e2e.butlerlabs.dev"], "resources": ["gadgets"], "verbs": ["get"]}]);
    let part = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{run}-part"), "labels": {label.clone(): "true", format!("{label}-owner"): "scenario"}},
        "rules": read});
    roles.patch(&format!("{run}-part"), &apply, &Patch::Apply(&part)).await.unwrap();
    // The shape releases ship: an aggregationRule and `rules: []`.
    let whole = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": format!("{run}-whole"), "labels": {format!("{label}-owner"): "scenario"}},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {label.clone(): "true"}}]},
        "rules": []});
    roles.patch(&format!("{run}-whole"), &apply, &Patch::Apply(&whole)).await.unwrap();

    let name = format!("{run}-whole");
    let filled = crate::support::eventually("the aggregated rules", || async {
        let role = roles.get(&name).await.unwrap();
        (rules_and_owners(&role).0 == read).then_some(role)
    })
    .await;
    let (_, owners) = rules_and_owners(&filled);
    assert!(owners.iter().any(|o| o == "clusterrole-aggregation-controller"), "{owners:?}");

    // Applying `rules: []` again takes `rules` back for a moment; the aggregation restores them.
    roles.patch(&name, &apply, &Patch::Apply(&whole)).await.unwrap();
    crate::support::eventually("the rules restored", || async {
        let role = roles.get(&name).await.unwrap();
        (rules_and_owners(&role).0 == read).then_some(())
    })
    .await;
    // An apply that leaves `rules` out never touches them.
    let mut without = whole.clone();
    without.as_object_mut().unwrap().remove("rules");
    roles.patch(&name, &PatchParams::apply("scenario-2"), &Patch::Apply(&without)).await.unwrap();
    assert_eq!(rules_and_owners(&roles.get(&name).await.unwrap()).0, read);
}
