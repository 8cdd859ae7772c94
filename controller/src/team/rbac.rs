//! Who may do what in a team: the three roles of spec/001, which the core components ship as
//! ClusterRoles (`butler-team-viewer`, `-operator`, `-admin`) and each team namespace binds to
//! its members (a member listed twice gets the highest role), groups by the names the API
//! server sees, and the Team object itself (every member reads it, nobody of the team writes
//! it) through a ClusterRole per team.

use std::collections::BTreeMap;

use butler_core::api::{Team, TeamRole};
use k8s_openapi::api::rbac::v1::{PolicyRule, RoleRef, Subject};

/// The API group of Butler's kinds.
const BUTLER: &str = "butler.butlerlabs.dev";
const RBAC: &str = "rbac.authorization.k8s.io";

/// The role names, lowest first.
pub const ROLES: [TeamRole; 3] = [TeamRole::Viewer, TeamRole::Operator, TeamRole::Admin];

/// The name of the RoleBinding of a team role in the team namespace: `butler-team-{role}`
/// (also the name of the Role earlier versions made there).
pub fn role_name(role: TeamRole) -> String {
    format!("butler-team-{}", role_word(role))
}

fn role_word(role: TeamRole) -> &'static str {
    match role {
        TeamRole::Viewer => "viewer",
        TeamRole::Operator => "operator",
        TeamRole::Admin => "admin",
    }
}

/// The ClusterRoles the team roles bind, named by a template holding `{role}`: the core
/// components ship `butler-team-{role}`, which the controller may bind by name and nothing
/// else (it holds none of what they grant, so it could not write such roles itself). A
/// platform that grants its teams more ships its own and names them here.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TeamClusterRoles(String);

impl TeamClusterRoles {
    /// The components' own.
    pub const DEFAULT: &'static str = "butler-team-{role}";

    /// The template, checked: it holds `{role}` and makes names the API server takes.
    pub fn new(template: &str) -> Result<TeamClusterRoles, String> {
        let roles = TeamClusterRoles(template.trim().to_string());
        if !roles.0.contains("{role}") {
            return Err(format!(
                "--team-cluster-roles {template:?} must hold {{role}} (the default is {})",
                Self::DEFAULT
            ));
        }
        let valid = |name: &str| {
            !name.is_empty()
                && name.len() <= 253
                && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.:".contains(c))
        };
        if let Some(name) = ROLES.iter().map(|r| roles.name(*r)).find(|name| !valid(name)) {
            return Err(format!(
                "--team-cluster-roles {template:?} makes {name:?}, which is no ClusterRole name (lowercase letters, digits, '-', '.', ':')"
            ));
        }
        // The per-team ClusterRoles are the controller's own, written over at each reconcile:
        // a team role named like one would be rewritten to another team's rules.
        let per_team = |name: &str| {
            name.strip_prefix("butler-team-")
                .and_then(|rest| rest.strip_suffix("-member").or_else(|| rest.strip_suffix("-admin")))
                .is_some_and(|team| !team.is_empty())
        };
        match ROLES.iter().map(|r| roles.name(*r)).find(|name| per_team(name)) {
            Some(name) => Err(format!(
                "--team-cluster-roles {template:?} makes {name:?}, the name of a team's own ClusterRole (butler-team-{{team}}-member or -admin); choose another pattern"
            )),
            None => Ok(roles),
        }
    }

    /// The ClusterRole a team role binds.
    pub fn name(&self, role: TeamRole) -> String {
        self.0.replace("{role}", role_word(role))
    }
}

impl Default for TeamClusterRoles {
    fn default() -> Self {
        TeamClusterRoles(Self::DEFAULT.to_string())
    }
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(groups.iter().map(|g| g.to_string()).collect()),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

/// The ClusterRoles that let members (`member`) and admins (`admin`) read their Team:
/// `butler-team-{team}-{member|admin}`. Nobody of the team writes it: its spec holds the
/// team's limits and what it may use, which are the platform's to set (admins manage the
/// team's namespace instead). The admin role stays, read-only, so that installs which bound
/// it keep working and an earlier version's write grant is replaced wherever it was applied.
pub fn team_role_name(team: &str, admin: bool) -> String {
    format!("butler-team-{team}-{}", if admin { "admin" } else { "member" })
}

/// The rules of [`team_role_name`]: read the Team, by name.
pub fn team_rules(team: &str) -> Vec<PolicyRule> {
    vec![PolicyRule {
        resource_names: Some(vec![team.to_string()]),
        ..rule(&[BUTLER], &["teams"], &["get", "watch"])
    }]
}

/// The Role, and the RoleBinding of it, through which a team's operators read the kubeconfig
/// Secrets of the team's TenantClusters, by name, and no other Secret of the namespace (the
/// operator ClusterRole reads none: a ProviderConfig's credentials are there too).
pub const KUBECONFIGS: &str = "butler-team-kubeconfigs";

/// The rules of [`KUBECONFIGS`]: `get` on `{cluster}-kubeconfig` of each of `clusters` (those
/// whose Secret [`crate::secrets::owns_kubeconfig`]), none when there are none (a rule naming no object would
/// name every one).
pub fn kubeconfig_rules(clusters: &[String]) -> Vec<PolicyRule> {
    if clusters.is_empty() {
        return Vec::new();
    }
    let mut names: Vec<String> = clusters.iter().map(|c| crate::secrets::kubeconfig_name(c)).collect();
    names.sort();
    names.dedup();
    vec![PolicyRule { resource_names: Some(names), ..rule(&[""], &["secrets"], &["get"]) }]
}

/// The group a binding names for a team's group entry: the string the API server puts in the
/// user's groups, which is what RBAC compares. That is the group as the identity provider sends
/// it (`engineers@example.com`, `CN=Engineers,OU=Groups,DC=example`; spec/001's normalised
/// short names are for Butler's own matching, and the API server never sees them), prefixed with
/// `{identityProvider}:` when the entry names one: the prefix each issuer's groups get when the
/// API server's authentication configuration gives that issuer `claimMappings.groups.prefix:
/// "{name}:"` (so one provider's group never matches another's of the same name).
pub fn group_subject(name: &str, identity_provider: Option<&str>) -> String {
    let name = name.trim();
    match identity_provider.map(str::trim).filter(|p| !p.is_empty()) {
        Some(provider) => format!("{provider}:{name}"),
        None => name.to_string(),
    }
}

/// The members of a team with their highest role, by subject: users as `User`, groups (as
/// [`group_subject`] names them) as `Group`.
pub fn members(team: &Team) -> BTreeMap<(&'static str, String), TeamRole> {
    let mut members: BTreeMap<(&'static str, String), TeamRole> = BTreeMap::new();
    let mut grant = |kind: &'static str, name: String, role: Option<TeamRole>| {
        let role = role.unwrap_or_default();
        let entry = members.entry((kind, name)).or_insert(role);
        *entry = (*entry).max(role);
    };
    for user in team.spec.access.users.iter().flatten() {
        grant("User", user.name.trim().to_string(), user.role);
    }
    for group in team.spec.access.groups.iter().flatten() {
        grant("Group", group_subject(&group.name, group.identity_provider.as_deref()), group.role);
    }
    members.retain(|(_, name), _| !name.is_empty());
    members
}

/// The subjects of one role, sorted (users, then groups, by name).
pub fn subjects(
    members: &BTreeMap<(&'static str, String), TeamRole>,
    wanted: impl Fn(TeamRole) -> bool,
) -> Vec<Subject> {
    members
        .iter()
        .filter(|(_, role)| wanted(**role))
        .map(|((kind, name), _)| Subject {
            api_group: Some(RBAC.into()),
            kind: kind.to_string(),
            name: name.clone(),
            namespace: None,
        })
        .collect()
}

/// A reference to a Role or ClusterRole.
pub fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef { api_group: RBAC.into(), kind: kind.into(), name: name.into() }
}

/// How many members a team counts: user entries and group entries (a group counts once, its
/// members are not resolved).
pub fn member_count(team: &Team) -> i32 {
    let entries = team.spec.access.users.as_ref().map_or(0, Vec::len)
        + team.spec.access.groups.as_ref().map_or(0, Vec::len);
    i32::try_from(entries).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_are_bound_as_the_api_server_sees_them() {
        for (name, provider, bound) in [
            ("engineers@company.com", None, "engineers@company.com"),
            ("CN=Engineers,OU=Groups,DC=company", None, "CN=Engineers,OU=Groups,DC=company"),
            ("  viewers  ", None, "viewers"),
            ("platform", Some("google-workspace"), "google-workspace:platform"),
            ("platform", Some(" "), "platform"),
        ] {
            assert_eq!(group_subject(name, provider), bound, "{name} {provider:?}");
        }
    }

    fn team(yaml: &str) -> Team {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: t}}\nspec:\n{yaml}"
        ))
        .unwrap()
    }

    #[test]
    fn a_member_listed_twice_gets_the_highest_role() {
        let t = team(
            "  access:\n    users:\n    - {name: a@x.io, role: viewer}\n    - {name: a@x.io, role: admin}\n    - {name: b@x.io}\n    groups:\n    - {name: devs@x.io, role: operator}\n    - {name: devs@x.io, role: viewer}\n",
        );
        let m = members(&t);
        assert_eq!(m[&("User", "a@x.io".to_string())], TeamRole::Admin);
        assert_eq!(m[&("User", "b@x.io".to_string())], TeamRole::Viewer, "viewer is the default");
        assert_eq!(m[&("Group", "devs@x.io".to_string())], TeamRole::Operator, "both entries name one group");
        let admins = subjects(&m, |r| r == TeamRole::Admin);
        assert_eq!(admins.len(), 1);
        assert_eq!((admins[0].kind.as_str(), admins[0].name.as_str()), ("User", "a@x.io"));
        assert_eq!(member_count(&t), 5, "entries, as documented");
    }

    #[test]
    fn operators_read_their_clusters_kubeconfigs_by_name_only() {
        assert!(kubeconfig_rules(&[]).is_empty(), "no rule: an empty resourceNames names every Secret");
        use crate::secrets::{CLUSTER_NAME_LABEL, CLUSTER_SECRET_TYPE, owns_kubeconfig};
        let secret = |name: &str, type_: Option<&str>, cluster: Option<&str>| {
            let mut s = k8s_openapi::api::core::v1::Secret::default();
            s.metadata.name = Some(name.into());
            s.type_ = type_.map(String::from);
            s.metadata.labels = cluster.map(|c| [(CLUSTER_NAME_LABEL.to_string(), c.to_string())].into());
            s
        };
        let capi = Some(CLUSTER_SECRET_TYPE);
        assert!(owns_kubeconfig(&secret("web-kubeconfig", capi, Some("web")), "web"));
        assert!(
            !owns_kubeconfig(&secret("harvester-kubeconfig", Some("Opaque"), None), "harvester"),
            "credentials"
        );
        assert!(
            !owns_kubeconfig(&secret("harvester-kubeconfig", capi, Some("other")), "harvester"),
            "another's"
        );
        assert!(
            !owns_kubeconfig(&secret("harvester-kubeconfig", None, Some("harvester")), "harvester"),
            "untyped"
        );
        assert!(!owns_kubeconfig(&secret("web-kubeconfig", capi, Some("web")), "harvester"), "another name");
        let rules = kubeconfig_rules(&["web".into(), "api".into(), "web".into()]);
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].resource_names.as_deref(),
            Some(&["api-kubeconfig".to_string(), "web-kubeconfig".to_string()][..])
        );
        assert_eq!(
            (rules[0].resources.as_deref(), rules[0].verbs.as_slice()),
            (Some(&["secrets".to_string()][..]), &["get".to_string()][..])
        );
    }

    #[test]
    fn the_team_roles_are_named_by_a_template_with_the_role() {
        let roles = TeamClusterRoles::default();
        assert_eq!(roles.name(TeamRole::Operator), "butler-team-operator");
        let custom = TeamClusterRoles::new("acme:team-{role}").unwrap();
        assert_eq!(custom.name(TeamRole::Viewer), "acme:team-viewer");
        assert!(TeamClusterRoles::new("butler-team").unwrap_err().contains("must hold {role}"));
        assert!(TeamClusterRoles::new("Team/{role}").unwrap_err().contains("no ClusterRole name"));
        let taken = TeamClusterRoles::new("butler-team-x-{role}").unwrap_err();
        assert!(taken.contains("\"butler-team-x-admin\", the name of a team's own ClusterRole"), "{taken}");
        TeamClusterRoles::new(TeamClusterRoles::DEFAULT).unwrap();
        let team_rules = team_rules("t");
        assert_eq!(team_rules[0].resource_names.as_deref(), Some(&["t".to_string()][..]));
        assert_eq!(team_rules[0].verbs, ["get", "watch"], "nobody of the team changes the Team");
        assert_eq!(role_name(TeamRole::Operator), "butler-team-operator");
    }
}
