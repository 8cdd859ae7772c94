//! What a Team should have, decided from what was observed without I/O: its namespace, the
//! bindings of its members to the team ClusterRoles, the ClusterRoles over the Team object, and
//! its status. Only objects whose cached copy does not hold the desired content are applied,
//! so a steady team costs no writes.

use butler_core::api::labels::FIELD_MANAGER;
use butler_core::api::{QuotaStatus, Team, TeamPhase, TenantCluster};
use butler_runtime::conditions::{READY, Wanted};
use butler_runtime::objects::{ObjectRef, holds};
use k8s_openapi::api::core::v1::Namespace;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::quota::TeamQuota;
use super::rbac::{self, ROLES, TeamClusterRoles};
use super::usage::{Assessment, Totals, assess};
use crate::secrets::SecretReader;

/// Condition types of a Team, in the order the status lists them.
pub const NAMESPACE_READY: &str = "NamespaceReady";
pub const RBAC_READY: &str = "RBACReady";
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";
pub const ORDER: &[&str] = &[NAMESPACE_READY, RBAC_READY, QUOTA_EXCEEDED, READY];

/// The label that names the Team on everything made for it.
pub const LABEL_TEAM: &str = "butler.butlerlabs.dev/team";

/// The namespace of a team: `team-{name}`.
pub fn namespace_of(team: &str) -> String {
    format!("team-{team}")
}

/// The Team whose namespace this is, by its name.
pub fn team_of_namespace(namespace: &str) -> Option<&str> {
    namespace.strip_prefix("team-").filter(|t| !t.is_empty())
}

/// Whether a namespace may be a team's, so that what a team could write there is never
/// trusted as the platform's: named as a team's (`team-{name}`, whether or not that Team
/// exists yet) or labelled for a Team (`labels` of the namespace, when it is known).
pub fn may_be_teams(namespace: &str, labels: Option<&std::collections::BTreeMap<String, String>>) -> bool {
    team_of_namespace(namespace).is_some() || labels.is_some_and(|l| l.contains_key(LABEL_TEAM))
}

/// What the plan reads.
pub struct Observed<'a> {
    pub team: &'a Team,
    /// The ClusterRoles the team roles bind.
    pub roles: &'a TeamClusterRoles,
    /// The objects a team namespace may hold.
    pub quota: &'a TeamQuota,
    /// The controller's own binding to read Secrets in the team namespace.
    pub reader: &'a SecretReader,
    /// The team namespace, if it exists.
    pub namespace: Option<&'a Namespace>,
    /// The TenantClusters of the team namespace.
    pub clusters: Vec<&'a TenantCluster>,
    /// The names of those whose kubeconfig Secret is the one Cluster API made for them
    /// ([`crate::secrets::owns_kubeconfig`], read live): the only ones the team's operators may read.
    pub kubeconfigs: &'a [String],
    /// The cached copy of each object the plan wants, as JSON, by `{kind}/{name}` (namespaced
    /// objects live in the team namespace).
    pub existing: &'a dyn Fn(&str, &str) -> Option<Value>,
}

/// What the reconcile should write.
#[derive(Debug, Default)]
pub struct Plan {
    /// Objects to delete before applying: bindings whose role changes (a binding's roleRef
    /// cannot be changed, only made anew).
    pub replace: Vec<ObjectRef>,
    /// Objects to apply (namespace first), those whose cache does not hold them.
    pub apply: Vec<Value>,
    /// Objects to delete after applying: what earlier versions made and this one does not (the
    /// team's own Roles, now ClusterRoles of the components).
    pub retire: Vec<ObjectRef>,
    pub conditions: Vec<Wanted>,
    pub phase: Option<TeamPhase>,
    pub namespace: Option<String>,
    pub assessment: Option<Assessment>,
    /// Why the team cannot be set up, when it cannot: `(reason, message)`.
    pub refused: Option<(&'static str, String)>,
}

fn owner(team: &Team) -> Value {
    json!(team.controller_owner_ref(&()).map(|mut r| {
        r.block_owner_deletion = Some(true);
        r
    }))
}

fn labels(team: &Team) -> Value {
    json!({ LABEL_TEAM: team.name_any(), "app.kubernetes.io/managed-by": FIELD_MANAGER })
}

fn meta(team: &Team, name: &str, namespace: Option<&str>) -> Value {
    let mut meta = json!({"name": name, "labels": labels(team), "ownerReferences": [owner(team)]});
    if let Some(ns) = namespace {
        meta["namespace"] = json!(ns);
    }
    meta
}

/// Every object a team should have: its namespace and ResourceQuota, a RoleBinding per team
/// role in it (to the components' team ClusterRoles), the controller's own binding to read the
/// Secrets its ProviderConfigs and TenantClusters name there, the Role and binding that let
/// the team's operators read the kubeconfigs of `clusters` (its TenantClusters' names), and
/// the ClusterRoles and bindings over the Team object.
pub fn desired_objects(
    team: &Team,
    roles: &TeamClusterRoles,
    reader: &SecretReader,
    quota: &TeamQuota,
    clusters: &[String],
) -> Vec<Value> {
    let name = team.name_any();
    let ns = namespace_of(&name);
    let members = rbac::members(team);
    let mut objects =
        vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": meta(team, &ns, None)})];
    objects.push(json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": meta(team, super::quota::NAME, Some(&ns)),
        "spec": {"hard": quota.hard()},
    }));
    for role in ROLES {
        let role_name = rbac::role_name(role);
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": meta(team, &role_name, Some(&ns)),
            "roleRef": rbac::role_ref("ClusterRole", &roles.name(role)),
            "subjects": rbac::subjects(&members, |r| r == role),
        }));
    }
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": meta(team, SecretReader::BINDING, Some(&ns)),
        "roleRef": reader.role_ref(),
        "subjects": reader.subjects(),
    }));
    // After the controller's own Secrets binding: it may grant only what it holds.
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": meta(team, rbac::KUBECONFIGS, Some(&ns)),
        "rules": rbac::kubeconfig_rules(clusters),
    }));
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": meta(team, rbac::KUBECONFIGS, Some(&ns)),
        "roleRef": rbac::role_ref("Role", rbac::KUBECONFIGS),
        "subjects": rbac::subjects(&members, |r| r == butler_core::api::TeamRole::Operator),
    }));
    for admin in [false, true] {
        let role_name = rbac::team_role_name(&name, admin);
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": meta(team, &role_name, None), "rules": rbac::team_rules(&name),
        }));
        let wanted = move |r: butler_core::api::TeamRole| !admin || r == butler_core::api::TeamRole::Admin;
        objects.push(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": meta(team, &role_name, None),
            "roleRef": rbac::role_ref("ClusterRole", &role_name),
            "subjects": rbac::subjects(&members, wanted),
        }));
    }
    objects
}

/// Whether an object (as JSON) names the owner of `uid` among its owner references.
pub fn owned_by(object: &Value, uid: &str) -> bool {
    object["metadata"]["ownerReferences"].as_array().is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

/// Whether the namespace belongs to this Team (an owner reference with its UID): a namespace
/// of that name made by anyone else is never taken over.
pub fn owns(team: &Team, namespace: &Namespace) -> bool {
    let uid = team.meta().uid.as_deref();
    uid.is_some() && namespace.owner_references().iter().any(|r| Some(r.uid.as_str()) == uid)
}

/// Plans a Team that is not being deleted.
pub fn plan(observed: &Observed<'_>) -> Plan {
    let team = observed.team;
    let ns = namespace_of(&team.name_any());
    let mut plan = Plan { namespace: Some(ns.clone()), ..Default::default() };
    let totals = Totals::of(team, &observed.clusters);
    let assessment = assess(team, &totals);
    let exceeded = assessment.status == QuotaStatus::Exceeded;
    plan.conditions.push(Wanted::new(
        QUOTA_EXCEEDED,
        exceeded,
        if exceeded { "QuotaExceeded" } else { "WithinQuota" },
        assessment.message.clone(),
    ));
    plan.assessment = Some(assessment);

    match observed.namespace {
        Some(existing) if !owns(team, existing) => {
            let message = format!(
                "the namespace {ns} exists and does not belong to this Team; delete or rename it, or give the Team another name"
            );
            plan.refused = Some(("NamespaceTaken", message.clone()));
            plan.phase = Some(TeamPhase::Failed);
            plan.conditions.push(Wanted::new(NAMESPACE_READY, false, "NamespaceTaken", message.clone()));
            plan.conditions.push(Wanted::new(
                RBAC_READY,
                false,
                "NamespaceTaken",
                "waiting for the team namespace",
            ));
            plan.conditions.push(Wanted::new(READY, false, "NamespaceTaken", message));
            return plan;
        }
        Some(existing) if existing.metadata.deletion_timestamp.is_some() => {
            let message = format!("the namespace {ns} of an earlier Team of this name is still terminating");
            plan.phase = Some(TeamPhase::Pending);
            plan.conditions.push(Wanted::new(
                NAMESPACE_READY,
                false,
                "NamespaceTerminating",
                message.clone(),
            ));
            plan.conditions.push(Wanted::new(
                RBAC_READY,
                false,
                "NamespaceTerminating",
                "waiting for the team namespace",
            ));
            plan.conditions.push(Wanted::new(READY, false, "NamespaceTerminating", message));
            return plan;
        }
        _ => {}
    }
    let uid = team.meta().uid.clone().unwrap_or_default();
    let ours = |actual: &Value| owned_by(actual, &uid);
    for desired in
        desired_objects(team, observed.roles, observed.reader, observed.quota, observed.kubeconfigs)
    {
        let kind = desired["kind"].as_str().unwrap_or_default();
        let name = desired["metadata"]["name"].as_str().unwrap_or_default();
        let actual = (observed.existing)(kind, name);
        if actual.as_ref().is_some_and(|actual| holds(actual, &desired)) {
            continue;
        }
        let role_changed = |a: &Value| a["roleRef"].is_object() && a["roleRef"] != desired["roleRef"];
        if actual.is_some_and(|a| role_changed(&a) && ours(&a)) {
            plan.replace.push(ObjectRef::of(&desired));
        }
        plan.apply.push(desired);
    }
    for role in ROLES {
        let name = rbac::role_name(role);
        if (observed.existing)("Role", &name).is_some_and(|actual| ours(&actual)) {
            plan.retire.push(ObjectRef::of(&json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": name, "namespace": ns},
            })));
        }
    }
    plan.phase = Some(TeamPhase::Ready);
    plan.conditions.push(Wanted::new(
        NAMESPACE_READY,
        true,
        "NamespaceReady",
        format!("the namespace {ns} is ready"),
    ));
    plan.conditions.push(Wanted::new(
        RBAC_READY,
        true,
        "RBACReady",
        "the team roles and their members' bindings are in place",
    ));
    plan.conditions.push(Wanted::new(READY, true, "Ready", "the team is set up"));
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    fn team() -> Team {
        let mut t: Team = serde_saphyr::from_str(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {name: platform, uid: u-1}\nspec:\n  access:\n    users: [{name: a@x.io, role: admin}]\n    groups: [{name: Viewers@x.io}]\n  resourceLimits: {maxClusters: 1}\n",
        )
        .unwrap();
        t.metadata.uid = Some("u-1".into());
        t
    }

    /// The plan of `t` with the components' team roles and no clusters.
    fn plan_of(
        t: &Team,
        namespace: Option<&Namespace>,
        existing: &dyn Fn(&str, &str) -> Option<Value>,
    ) -> Plan {
        let roles = TeamClusterRoles::default();
        let reader = SecretReader::default();
        let quota = TeamQuota::default();
        plan(&Observed {
            team: t,
            roles: &roles,
            reader: &reader,
            quota: &quota,
            namespace,
            clusters: vec![],
            kubeconfigs: &[],
            existing,
        })
    }

    fn namespace(owner_uid: Option<&str>) -> Namespace {
        let mut ns = Namespace::default();
        ns.metadata.name = Some("team-platform".into());
        ns.metadata.owner_references = owner_uid.map(|uid| {
            vec![OwnerReference {
                uid: uid.into(),
                name: "platform".into(),
                kind: "Team".into(),
                ..Default::default()
            }]
        });
        ns
    }

    #[test]
    fn a_new_team_gets_its_namespace_roles_and_bindings() {
        let t = team();
        let none = |_: &str, _: &str| None;
        let p = plan_of(&t, None, &none);
        let kinds: Vec<&str> = p.apply.iter().map(|o| o["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds[0], "Namespace");
        assert_eq!(kinds[1], "ResourceQuota");
        let roles: Vec<&Value> = p.apply.iter().filter(|o| o["kind"] == "Role").collect();
        assert_eq!(roles.len(), 1, "the components ship the team roles; the kubeconfig Role is the team's");
        assert_eq!(roles[0]["metadata"]["name"], "butler-team-kubeconfigs");
        assert_eq!(
            roles[0]["rules"],
            json!([]),
            "no cluster: no rule (an empty resourceNames names every Secret)"
        );
        assert_eq!(kinds.iter().filter(|k| **k == "RoleBinding").count(), 5);
        let reader = p.apply.iter().find(|o| o["metadata"]["name"] == "butler-controller-secrets").unwrap();
        assert_eq!(reader["metadata"]["namespace"], "team-platform");
        assert_eq!(reader["roleRef"]["name"], "butler-controller-secrets");
        assert_eq!(
            reader["subjects"],
            json!([{"kind": "ServiceAccount", "name": "butler-controller", "namespace": "butler-system"}])
        );
        assert_eq!(kinds.iter().filter(|k| **k == "ClusterRoleBinding").count(), 2);
        let viewers = p
            .apply
            .iter()
            .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["name"] == "butler-team-viewer")
            .unwrap();
        assert_eq!(viewers["subjects"][0]["name"], "Viewers@x.io", "as the API server sees the group");
        assert_eq!(
            viewers["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "butler-team-viewer"})
        );
        assert_eq!(viewers["metadata"]["ownerReferences"][0]["uid"], "u-1");
        assert_eq!(p.phase, Some(TeamPhase::Ready));
        assert!(p.conditions.iter().any(|c| c.type_ == READY && c.status));
    }

    #[test]
    fn a_steady_team_applies_nothing() {
        let t = team();
        let objects = desired_objects(
            &t,
            &TeamClusterRoles::default(),
            &SecretReader::default(),
            &TeamQuota::default(),
            &[],
        );
        let existing = |kind: &str, name: &str| {
            objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).map(|o| {
                let mut o = o.clone();
                o["metadata"]["resourceVersion"] = json!("7");
                o
            })
        };
        let ns = namespace(Some("u-1"));
        let p = plan_of(&t, Some(&ns), &existing);
        assert!(p.apply.is_empty(), "{:?}", p.apply);
        assert!(p.replace.is_empty() && p.retire.is_empty());
    }

    #[test]
    fn the_roles_of_an_earlier_version_give_way_to_the_components_team_roles() {
        let t = team();
        let owner = json!([{"apiVersion": "butler.butlerlabs.dev/v1alpha1", "kind": "Team", "name": "platform", "uid": "u-1"}]);
        // An earlier version bound its own Roles; someone else made the viewer binding.
        let existing = |kind: &str, name: &str| match (kind, name) {
            ("Role", "butler-team-admin" | "butler-team-operator") => {
                Some(json!({"metadata": {"name": name, "ownerReferences": owner}}))
            }
            ("Role", "butler-team-viewer") => Some(json!({"metadata": {"name": name}})),
            ("RoleBinding", "butler-team-viewer") => Some(json!({
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            })),
            ("RoleBinding", _) if name.starts_with("butler-team-") => Some(json!({
                "metadata": {"name": name, "ownerReferences": owner},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            })),
            _ => None,
        };
        let ns = namespace(Some("u-1"));
        let p = plan_of(&t, Some(&ns), &existing);
        let names =
            |refs: &[ObjectRef]| refs.iter().map(|r| format!("{} {}", r.kind, r.name)).collect::<Vec<_>>();
        assert_eq!(
            names(&p.replace),
            ["RoleBinding butler-team-operator", "RoleBinding butler-team-admin"],
            "only the team's own bindings are made anew"
        );
        assert_eq!(names(&p.retire), ["Role butler-team-operator", "Role butler-team-admin"]);
        assert_eq!(p.retire[0].namespace.as_deref(), Some("team-platform"));
        assert_eq!(p.apply.iter().filter(|o| o["kind"] == "RoleBinding").count(), 5);
    }

    #[test]
    fn a_namespace_of_someone_else_is_never_taken_over() {
        let t = team();
        let none = |_: &str, _: &str| None;
        let foreign = namespace(None);
        let p = plan_of(&t, Some(&foreign), &none);
        assert!(p.apply.is_empty());
        assert_eq!(p.phase, Some(TeamPhase::Failed));
        assert_eq!(p.refused.as_ref().unwrap().0, "NamespaceTaken");
        let other_team = namespace(Some("u-other"));
        assert!(!owns(&t, &other_team));
        assert!(owns(&t, &namespace(Some("u-1"))));
        assert_eq!(team_of_namespace("team-platform"), Some("platform"));
        let labelled = std::collections::BTreeMap::from([(LABEL_TEAM.to_string(), "platform".to_string())]);
        assert!(may_be_teams("team-platform", None), "by its name, before the Team exists");
        assert!(may_be_teams("platform-ns", Some(&labelled)), "by its label");
        assert!(!may_be_teams("butler-system", Some(&Default::default())));
        assert_eq!(team_of_namespace("default"), None);
    }
}
