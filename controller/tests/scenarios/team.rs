//! A Team from creation to Ready, its quota going to Warning and Exceeded as clusters come,
//! no write at all while nothing changes, and its deletion in order.

use std::time::Duration;

use butler_core::api::{QuotaStatus, Team, TeamPhase, TenantCluster};
use k8s_openapi::api::core::v1::{Event, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, Role, RoleBinding};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::support::{Scenario, create, wait_for};

fn condition(team: &Team, type_: &str) -> Option<(String, String)> {
    let c = team.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

fn ready(team: Option<&Team>) -> bool {
    team.and_then(|t| t.status.as_ref()).is_some_and(|s| s.phase == Some(TeamPhase::Ready))
}

/// A Team whose `users` (YAML flow list) are its only members, once Ready.
pub async fn ready_team(teams: &Api<Team>, name: &str, users: &str) -> Team {
    create(teams, &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {name}}}\nspec:\n  access:\n    users: {users}\n")).await;
    wait_for(teams, name, "Ready", ready).await.unwrap()
}

fn quota(team: Option<&Team>) -> Option<QuotaStatus> {
    team.and_then(|t| t.status.as_ref()).and_then(|s| s.quota_status)
}

#[tokio::test]
async fn a_team_from_creation_to_ready_over_quota_and_deleted_in_order() {
    let s = Scenario::start().await;
    let name = s.cluster.unique("platform");
    let ns = format!("team-{name}");
    let teams: Api<Team> = Api::all(s.client.clone());
    create(
        &teams,
        &format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {name}}}\nspec:\n  displayName: Platform\n  access:\n    users:\n    - {{name: alice@example.com, role: admin}}\n    - {{name: bob@example.com, role: viewer}}\n    - {{name: bob@example.com, role: operator}}\n    groups:\n    - {{name: 'CN=Platform-Engineers,OU=Groups,DC=example', role: operator}}\n    - {{name: viewers@example.com}}\n  resourceLimits: {{maxClusters: 2, maxCPUCores: '10', maxTotalNodes: 10}}\n"
        ),
    )
    .await;

    // Ready: namespace, roles and bindings.
    let team = wait_for(&teams, &name, "Ready", ready).await.unwrap();
    assert_eq!(condition(&team, "NamespaceReady"), Some(("True".into(), "NamespaceReady".into())));
    assert_eq!(condition(&team, "RBACReady"), Some(("True".into(), "RBACReady".into())));
    assert_eq!(condition(&team, "Ready"), Some(("True".into(), "Ready".into())));
    assert_eq!(condition(&team, "QuotaExceeded"), Some(("False".into(), "WithinQuota".into())));
    let status = team.status.as_ref().unwrap();
    assert_eq!(
        (status.namespace.as_deref(), status.member_count, status.cluster_count),
        (Some(ns.as_str()), Some(5), Some(0))
    );
    assert_eq!(status.observed_generation, team.metadata.generation);
    assert!(team.finalizers().contains(&"butler.butlerlabs.dev/team".to_string()));

    let namespace = Api::<Namespace>::all(s.client.clone()).get(&ns).await.unwrap();
    assert_eq!(namespace.owner_references()[0].uid, team.uid().unwrap(), "the Team owns its namespace");
    assert_eq!(namespace.labels().get("butler.butlerlabs.dev/team"), Some(&name));
    let roles = Api::<Role>::namespaced(s.client.clone(), &ns).list(&ListParams::default()).await.unwrap();
    let names: Vec<String> = roles.items.iter().map(|r| r.name_any()).collect();
    assert_eq!(names, ["butler-team-kubeconfigs"], "the team roles are the components' ClusterRoles");
    let quotas = Api::<k8s_openapi::api::core::v1::ResourceQuota>::namespaced(s.client.clone(), &ns);
    assert!(quotas.get_opt("butler-team-objects").await.unwrap().is_some(), "the team's quota");
    let bindings = Api::<RoleBinding>::namespaced(s.client.clone(), &ns);
    let admins = bindings.get("butler-team-admin").await.unwrap();
    assert_eq!(
        (admins.role_ref.kind.as_str(), admins.role_ref.name.as_str()),
        ("ClusterRole", format!("butler-team-admin-{}", s.rbac).as_str())
    );
    let subjects = |binding: RoleBinding| -> Vec<String> {
        binding.subjects.unwrap_or_default().into_iter().map(|s| format!("{} {}", s.kind, s.name)).collect()
    };
    assert_eq!(subjects(bindings.get("butler-team-admin").await.unwrap()), ["User alice@example.com"]);
    assert_eq!(
        subjects(bindings.get("butler-team-operator").await.unwrap()),
        ["Group CN=Platform-Engineers,OU=Groups,DC=example", "User bob@example.com"],
        "bob has the higher of his two roles; the group is bound as the API server sees it"
    );
    assert_eq!(subjects(bindings.get("butler-team-viewer").await.unwrap()), ["Group viewers@example.com"]);
    let team_admin =
        Api::<ClusterRole>::all(s.client.clone()).get(&format!("butler-team-{name}-admin")).await.unwrap();
    assert_eq!(team_admin.rules.unwrap()[0].resource_names.as_deref(), Some(&[name.clone()][..]));

    // Nothing changes: a touch of the Team reconciles it, and nothing is written.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = s.writes();
    teams
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": "1"}}})),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    if let (Some(before), Some(after)) = (before, s.writes()) {
        assert_eq!(after[before.len()..], [], "a steady team costs no writes");
        println!("writes to set the team up: {}", before.len());
    }

    // Clusters: 9 of 10 CPU cores is a warning, a second cluster exceeds it.
    let clusters: Api<TenantCluster> = Api::namespaced(s.client.clone(), &ns);
    let cluster = |n: &str, replicas: i32, cpu: &str| {
        format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {n}, namespace: {ns}}}\nspec:\n  kubernetesVersion: 1.30.4\n  workers: {{replicas: {replicas}, machineTemplate: {{cpu: '{cpu}', memory: 8Gi, diskSize: 50Gi}}}}\n"
        )
    };
    create(&clusters, &cluster("one", 3, "3")).await;
    let team =
        wait_for(&teams, &name, "quota Warning", |t| quota(t) == Some(QuotaStatus::Warning)).await.unwrap();
    let status = team.status.unwrap();
    assert_eq!(status.quota_message.as_deref(), Some("above 80% of a limit: 9 of maxCPUCores 10 (90%)"));
    let usage = status.resource_usage.unwrap();
    assert_eq!((usage.clusters, usage.total_nodes, usage.cpu_utilization), (Some(1), Some(3), Some(90)));
    assert_eq!(usage.total_memory.unwrap().0, "24Gi");

    create(&clusters, &cluster("two", 2, "2")).await;
    let team =
        wait_for(&teams, &name, "quota Exceeded", |t| quota(t) == Some(QuotaStatus::Exceeded)).await.unwrap();
    assert_eq!(condition(&team, "QuotaExceeded"), Some(("True".into(), "QuotaExceeded".into())));
    assert_eq!(
        condition(&team, "Ready"),
        Some(("True".into(), "Ready".into())),
        "over quota, still operational"
    );
    assert!(team.status.unwrap().quota_message.unwrap().contains("13 of maxCPUCores 10 (130%)"));
    let events = Api::<Event>::all(s.client.clone())
        .list(&ListParams::default().fields(&format!("involvedObject.name={name}")))
        .await
        .unwrap();
    assert!(events.items.iter().any(|e| e.reason.as_deref() == Some("QuotaExceeded")), "{:?}", events.items);

    // Deletion: the clusters go first, then RBAC and the namespace, then the Team.
    teams.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&teams, &name, "deletion", |t| t.is_none()).await;
    assert!(clusters.list(&ListParams::default()).await.map(|l| l.items.is_empty()).unwrap_or(true));
    assert!(
        Api::<ClusterRole>::all(s.client.clone())
            .get_opt(&format!("butler-team-{name}-admin"))
            .await
            .unwrap()
            .is_none()
    );
    let namespace = Api::<Namespace>::all(s.client.clone()).get_opt(&ns).await.unwrap();
    assert!(namespace.is_none_or(|n| n.metadata.deletion_timestamp.is_some()), "the namespace is going");
}

#[tokio::test]
async fn a_namespace_that_belongs_to_someone_else_is_left_alone() {
    let s = Scenario::start().await;
    // Someone made the team's namespace before the Team existed.
    let ns = s.cluster.namespace("team-taken").await;
    let name = ns.strip_prefix("team-").unwrap().to_string();
    let teams: Api<Team> = Api::all(s.client.clone());
    create(&teams, &format!("apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: {name}}}\nspec:\n  access: {{}}\n")).await;
    // (A reconcile whose cache has not seen the namespace yet fails to create it first; the
    // next one sees whose it is.)
    let team = wait_for(&teams, &name, "refused", |t| {
        t.is_some_and(|t| condition(t, "NamespaceReady").is_some_and(|c| c.1 == "NamespaceTaken"))
    })
    .await
    .unwrap();
    assert_eq!(team.status.as_ref().unwrap().phase, Some(TeamPhase::Failed));
    let namespace = Api::<Namespace>::all(s.client.clone()).get(&ns).await.unwrap();
    assert!(namespace.owner_references().is_empty(), "not taken over");
    teams.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&teams, &name, "deletion", |t| t.is_none()).await;
    let namespace = Api::<Namespace>::all(s.client.clone()).get(&ns).await.unwrap();
    assert!(
        namespace.metadata.deletion_timestamp.is_none(),
        "a namespace the Team did not make is never deleted"
    );
}

#[tokio::test]
async fn the_roles_of_an_earlier_version_move_to_the_components_team_roles() {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use kube::api::PostParams;
    let mut s = Scenario::start().await;
    let name = s.cluster.unique("moved");
    let ns = format!("team-{name}");
    let teams: Api<Team> = Api::all(s.client.clone());
    let team = ready_team(&teams, &name, "[{name: erin@example.com, role: operator}]").await;
    // What an earlier version made: a Role of the team's own, and the binding to it.
    let meta = json!({"name": "butler-team-operator", "namespace": ns,
        "labels": {"butler.butlerlabs.dev/team": name, "app.kubernetes.io/managed-by": "butler-controller"},
        "ownerReferences": [{"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "Team", "name": name, "uid": team.uid().unwrap()}]});
    let bindings: Api<RoleBinding> = Api::namespaced(s.client.clone(), &ns);
    let roles: Api<Role> = Api::namespaced(s.client.clone(), &ns);
    // The controller is kept out while the old objects are put back, as an upgrade finds them.
    s.kill_controllers();
    bindings.delete("butler-team-operator", &DeleteParams::default()).await.unwrap();
    let old_role: Role = serde_json::from_value(json!({"metadata": meta,
        "rules": [{"apiGroups": ["butler.butlerlabs.dev"], "resources": ["tenantclusters"], "verbs": ["get"]}]}))
    .unwrap();
    roles.create(&PostParams::default(), &old_role).await.unwrap();
    let old_binding: RoleBinding = serde_json::from_value(json!({"metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "butler-team-operator"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "erin@example.com"}]}))
    .unwrap();
    bindings.create(&PostParams::default(), &old_binding).await.unwrap();

    s.start_controllers().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let binding = bindings.get_opt("butler-team-operator").await.unwrap();
        let moved = binding.is_some_and(|b| b.role_ref.kind == "ClusterRole");
        if moved && roles.get_opt("butler-team-operator").await.unwrap().is_none() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the team's bindings never moved to the team roles");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Erin keeps what an operator may do.
    let erin = s.cluster.client_as_user("erin@example.com", &[]);
    Api::<TenantCluster>::namespaced(erin, &ns)
        .list(&ListParams::default())
        .await
        .expect("an operator lists clusters");
    teams.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&teams, &name, "deletion", |t| t.is_none()).await;
}

#[tokio::test]
async fn a_binding_of_the_teams_name_made_by_someone_else_is_never_replaced() {
    use k8s_openapi::api::rbac::v1::RoleBinding;
    use kube::api::PostParams;
    let mut s = Scenario::start().await;
    let name = s.cluster.unique("foreign");
    let ns = format!("team-{name}");
    let teams: Api<Team> = Api::all(s.client.clone());
    ready_team(&teams, &name, "[{name: frank@example.com}]").await;
    // A platform administrator puts a binding of their own in the viewers' place (while the
    // controllers are down: running, they would remake theirs between the delete and the
    // create).
    s.kill_controllers();
    let bindings: Api<RoleBinding> = Api::namespaced(s.client.clone(), &ns);
    bindings.delete("butler-team-viewer", &DeleteParams::default()).await.unwrap();
    let theirs: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "butler-team-viewer", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "auditor@example.com"}],
    }))
    .unwrap();
    bindings.create(&PostParams::default(), &theirs).await.unwrap();
    s.start_controllers().await;
    teams
        .patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"touched": "1"}}})),
        )
        .await
        .unwrap();
    let team = wait_for(&teams, &name, "RBACReady False", |t| {
        t.is_some_and(|t| condition(t, "RBACReady").is_some_and(|c| c.0 == "False"))
    })
    .await
    .unwrap();
    assert_eq!(condition(&team, "RBACReady").unwrap().1, "ApplyFailed");
    let kept = bindings.get("butler-team-viewer").await.unwrap();
    assert_eq!(kept.role_ref.name, "view", "the administrator's binding stays theirs");
    teams.delete(&name, &DeleteParams::default()).await.unwrap();
    wait_for(&teams, &name, "deletion", |t| t.is_none()).await;
    assert!(bindings.get_opt("butler-team-viewer").await.unwrap().is_none_or(|b| b.role_ref.name == "view"));
}
