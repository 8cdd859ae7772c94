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
