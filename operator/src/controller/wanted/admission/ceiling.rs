//! The ceiling of what a release's roles may grant. Rules are matched as Kubernetes' RBAC
//! authorizer matches them (`*` for every verb, group or resource, `*/sub` for a subresource
//! of every resource), so a rule is judged by what it grants, however it is written. The
//! powers that reach beyond any provider's own work (granting rights the holder lacks,
//! acting as someone else, minting tokens, a node's kubelet, everything everywhere) each need
//! `--allow-role-power`; `escalate` and `bind` limited by `resourceNames` to roles of the
//! release itself stay within it and pass (Butler's core binds its team roles so).

use serde_json::Value;

use super::{RBAC, Set, describe};
use crate::controller::wanted::policy::Policy;

/// A power a role may hold only when the operator allows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Power {
    Escalate,
    Bind,
    Impersonate,
    Token,
    NodesProxy,
    Wildcard,
}

impl Power {
    pub const ALL: [Power; 6] =
        [Power::Escalate, Power::Bind, Power::Impersonate, Power::Token, Power::NodesProxy, Power::Wildcard];

    /// Its name in `--allow-role-power`.
    pub fn flag(self) -> &'static str {
        match self {
            Power::Escalate => "escalate",
            Power::Bind => "bind",
            Power::Impersonate => "impersonate",
            Power::Token => "token",
            Power::NodesProxy => "nodes-proxy",
            Power::Wildcard => "wildcard",
        }
    }

    fn words(self) -> &'static str {
        match self {
            Power::Escalate => "escalate on roles (granting rights its holder lacks)",
            Power::Bind => "bind on roles (binding rights its holder lacks)",
            Power::Impersonate => "impersonate (acting as another user, group or ServiceAccount)",
            Power::Token => "create on serviceaccounts/token (minting any ServiceAccount's token)",
            Power::NodesProxy => "nodes/proxy (the kubelet's API: running commands in any pod of a node)",
            Power::Wildcard => "every resource of every API group",
        }
    }
}

/// Whether a list of a rule holds `item` or `*`.
fn holds(list: &Value, item: &str) -> bool {
    list.as_array().into_iter().flatten().any(|v| v == "*" || v == item)
}

/// Whether a rule's resources cover `resource` (`name` or `name/sub`), as RBAC matches them.
fn covers(resources: &Value, resource: &str) -> bool {
    let sub = resource.split_once('/').map(|(_, s)| format!("*/{s}"));
    resources
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .any(|r| r == "*" || r == resource || sub.as_deref() == Some(r))
}

/// The powers a rule grants. `escalate` and `bind` count only when they reach roles beyond
/// `own` (by `resourceNames`): none named means every role.
pub fn powers(rule: &Value, own: &dyn Fn(&str) -> bool) -> Vec<Power> {
    let (groups, resources, verbs) = (&rule["apiGroups"], &rule["resources"], &rule["verbs"]);
    let names: Vec<&str> =
        rule["resourceNames"].as_array().into_iter().flatten().filter_map(Value::as_str).collect();
    let beyond_own = names.is_empty() || names.iter().any(|n| !own(n));
    let on_roles = holds(groups, RBAC) && (covers(resources, "roles") || covers(resources, "clusterroles"));
    let core = holds(groups, "");
    let mut found = Vec::new();
    if on_roles && holds(verbs, "escalate") && beyond_own {
        found.push(Power::Escalate);
    }
    if on_roles && holds(verbs, "bind") && beyond_own {
        found.push(Power::Bind);
    }
    let identities = (core
        && (covers(resources, "users")
            || covers(resources, "groups")
            || covers(resources, "serviceaccounts")))
        || (holds(groups, "authentication.k8s.io")
            && (covers(resources, "uids") || covers(resources, "userextras/scopes")));
    if identities && holds(verbs, "impersonate") {
        found.push(Power::Impersonate);
    }
    if core && covers(resources, "serviceaccounts/token") && holds(verbs, "create") {
        found.push(Power::Token);
    }
    if core && covers(resources, "nodes/proxy") && !verbs.as_array().is_none_or(Vec::is_empty) {
        found.push(Power::NodesProxy);
    }
    let literal = |list: &Value| list.as_array().into_iter().flatten().any(|v| v == "*");
    if literal(groups) && literal(resources) {
        found.push(Power::Wildcard);
    }
    found
}

/// The strings of a rule's list.
fn strings(list: &Value) -> Vec<&str> {
    list.as_array().into_iter().flatten().filter_map(Value::as_str).collect()
}

/// Whether a ceiling rule grants one atom of a release's rule: every part held by the ceiling
/// as RBAC matches it, a named atom by a rule for every name or for that one.
fn grants(ceiling: &Value, verb: &str, target: Target<'_>) -> bool {
    let verbs = &ceiling["verbs"];
    if !holds(verbs, verb) || (verb == "*" && !strings(verbs).contains(&"*")) {
        return false;
    }
    let literal = |list: &Value, item: &str| item != "*" || strings(list).contains(&"*");
    match target {
        Target::Url(url) => strings(&ceiling["nonResourceURLs"]).iter().any(|c| {
            *c == "*" || *c == url || c.strip_suffix('*').is_some_and(|prefix| url.starts_with(prefix))
        }),
        Target::Resource { group, resource, name } => {
            let names = strings(&ceiling["resourceNames"]);
            let resources = &ceiling["resources"];
            let resource_held = match resource {
                "*" => strings(resources).contains(&"*"),
                r if r.starts_with("*/") => strings(resources).iter().any(|c| *c == "*" || *c == r),
                r => covers(resources, r),
            };
            holds(&ceiling["apiGroups"], group)
                && literal(&ceiling["apiGroups"], group)
                && resource_held
                && (names.is_empty() || name.is_some_and(|n| names.contains(&n)))
        }
    }
}

/// What an atom is on.
#[derive(Clone, Copy)]
enum Target<'a> {
    Url(&'a str),
    Resource { group: &'a str, resource: &'a str, name: Option<&'a str> },
}

/// One part of a rule: one verb on one URL, or on one group's resource by one name or none.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Atom {
    Url { verb: String, url: String },
    Resource { verb: String, group: String, resource: String, name: Option<String> },
}

impl Atom {
    /// In words: `get on deployments.apps named x`.
    pub fn describe(&self) -> String {
        match self {
            Atom::Url { verb, url } => format!("{verb} on the URL {url}"),
            Atom::Resource { verb, group, resource, name } => {
                let on = match group.as_str() {
                    "" => resource.to_string(),
                    g => format!("{resource}.{g}"),
                };
                match name {
                    Some(n) => format!("{verb} on {on} named {n}"),
                    None => format!("{verb} on {on}"),
                }
            }
        }
    }
}

/// `rule` broken down as Kubernetes does before it checks that a role does not escalate, each
/// part as written: `*` stays `*` (granted only by `*`).
pub fn atoms(rule: &Value) -> Vec<Atom> {
    let (verbs, groups, resources) =
        (strings(&rule["verbs"]), strings(&rule["apiGroups"]), strings(&rule["resources"]));
    let names = strings(&rule["resourceNames"]);
    let each: Vec<Option<&str>> =
        if names.is_empty() { vec![None] } else { names.iter().copied().map(Some).collect() };
    let mut out = Vec::new();
    for verb in &verbs {
        for url in strings(&rule["nonResourceURLs"]) {
            out.push(Atom::Url { verb: verb.to_string(), url: url.to_string() });
        }
        for group in &groups {
            for resource in &resources {
                for name in &each {
                    out.push(Atom::Resource {
                        verb: verb.to_string(),
                        group: group.to_string(),
                        resource: resource.to_string(),
                        name: name.map(String::from),
                    });
                }
            }
        }
    }
    out
}

/// The first part of `rule` that no rule of `ceiling` grants, in words; `None` when the
/// ceiling covers it whole (see [`atoms`]).
pub fn uncovered(rule: &Value, ceiling: &[Value]) -> Option<String> {
    atoms(rule)
        .into_iter()
        .find(|atom| {
            let target = match atom {
                Atom::Url { url, .. } => Target::Url(url),
                Atom::Resource { group, resource, name, .. } => {
                    Target::Resource { group, resource, name: name.as_deref() }
                }
            };
            let verb = match atom {
                Atom::Url { verb, .. } | Atom::Resource { verb, .. } => verb,
            };
            !ceiling.iter().any(|c| grants(c, verb, target))
        })
        .map(|atom| atom.describe())
}

/// What a release's roles may grant besides the ceiling: every verb on the resources of the
/// CRDs the release itself defines (a provider's manager manages its own kinds), by group and
/// plural, with their subresources.
pub fn own_kinds(set: &Set<'_>) -> Vec<Value> {
    set.crd_plurals
        .iter()
        .map(|(group, plural)| {
            let resources: Vec<String> =
                ["", "/status", "/finalizers", "/scale"].iter().map(|s| format!("{plural}{s}")).collect();
            serde_json::json!({"apiGroups": [group], "resources": resources, "verbs": ["*"]})
        })
        .collect()
}

/// Refuses a release whose Roles or ClusterRoles grant a power the operator does not allow, or,
/// with a ceiling ClusterRole configured (`--role-ceiling`, its rules read live as `ceiling`),
/// anything its rules and the release's own kinds ([`own_kinds`]) do not.
pub fn check(set: &Set<'_>, policy: &Policy, ceiling: Option<&[Value]>) -> Result<(), String> {
    let widened: Option<Vec<Value>> = ceiling.map(|rules| {
        let mut all = rules.to_vec();
        all.extend(own_kinds(set));
        all
    });
    let ceiling = widened.as_deref();
    for object in set.objects {
        let r = butler_runtime::objects::ObjectRef::of(object);
        if r.group() != RBAC || !matches!(r.kind.as_str(), "Role" | "ClusterRole") {
            continue;
        }
        let namespace = (r.kind == "Role").then_some(r.namespace.as_deref().unwrap_or(set.namespace));
        // Roles of the release: a Role binds Roles of its namespace, or ClusterRoles.
        let own = |name: &str| {
            set.defined(RBAC, "ClusterRole", None, name)
                || namespace.is_some_and(|ns| set.defined(RBAC, "Role", Some(ns), name))
        };
        for rule in object["rules"].as_array().into_iter().flatten() {
            if let (Some(ceiling), Some(name)) = (ceiling, policy.role_ceiling.as_deref())
                && let Some(beyond) = uncovered(rule, ceiling)
            {
                return Err(format!(
                    "{} is refused: its rule {rule} grants {beyond}, which the ceiling ClusterRole {name} (--role-ceiling) does not, nor is it on a kind of the release's own CRDs; add it to {name} if the provider needs it",
                    describe(object)
                ));
            }
            let Some(power) =
                powers(rule, &own).into_iter().find(|p| !policy.role_powers.iter().any(|a| a == p.flag()))
            else {
                continue;
            };
            return Err(format!(
                "{} is refused: its rule {rule} grants {}, beyond what a provider's roles hold; start the operator with --allow-role-power {} if the provider needs it",
                describe(object),
                power.words(),
                power.flag()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn found(rule: Value) -> Vec<Power> {
        powers(&rule, &|name| name == "mine")
    }

    #[test]
    fn each_power_is_found_however_the_rule_is_written() {
        let cases = [
            (
                json!({"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["escalate"]}),
                vec![Power::Escalate],
            ),
            (
                json!({"apiGroups": ["*"], "resources": ["roles"], "verbs": ["*"]}),
                vec![Power::Escalate, Power::Bind],
            ),
            (json!({"apiGroups": [RBAC], "resources": ["*"], "verbs": ["bind"]}), vec![Power::Bind]),
            (
                json!({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["impersonate"]}),
                vec![Power::Impersonate],
            ),
            (
                json!({"apiGroups": ["authentication.k8s.io"], "resources": ["uids"], "verbs": ["*"]}),
                vec![Power::Impersonate],
            ),
            (
                json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}),
                vec![Power::Token],
            ),
            (json!({"apiGroups": [""], "resources": ["*/token"], "verbs": ["*"]}), vec![Power::Token]),
            (
                json!({"apiGroups": [""], "resources": ["nodes/proxy"], "verbs": ["get"]}),
                vec![Power::NodesProxy],
            ),
            (
                json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]}),
                vec![Power::NodesProxy, Power::Wildcard],
            ),
        ];
        for (rule, wanted) in cases {
            assert_eq!(found(rule.clone()), wanted, "{rule}");
        }
    }

    #[test]
    fn a_release_may_grant_anything_on_the_kinds_of_its_own_crds_and_no_more() {
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                         "metadata": {"name": "gadgets.widget.example"},
                         "spec": {"group": "widget.example", "names": {"plural": "gadgets", "kind": "Gadget"}}});
        let objects = [crd];
        let own = own_kinds(&Set::of(&objects, "widget-system"));
        let mine = json!({"apiGroups": ["widget.example"], "resources": ["gadgets", "gadgets/status"], "verbs": ["*"]});
        assert_eq!(uncovered(&mine, &own), None);
        let other = json!({"apiGroups": ["widget.example"], "resources": ["sprockets"], "verbs": ["get"]});
        assert_eq!(uncovered(&other, &own).as_deref(), Some("get on sprockets.widget.example"));
        let every = json!({"apiGroups": ["widget.example"], "resources": ["*"], "verbs": ["get"]});
        assert_eq!(uncovered(&every, &own).as_deref(), Some("get on *.widget.example"));
    }

    #[test]
    fn a_ceiling_covers_a_rule_part_by_part_as_kubernetes_checks_escalation() {
        let ceiling = [
            json!({"apiGroups": ["", "apps"], "resources": ["configmaps", "deployments", "*/log"], "verbs": ["get", "list", "watch"]}),
            json!({"apiGroups": ["cluster.x-k8s.io"], "resources": ["*"], "verbs": ["*"]}),
            json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine"], "verbs": ["get"]}),
            json!({"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]}),
        ];
        let inside = [
            json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "watch"]}),
            json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["list"]}),
            json!({"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get"]}),
            json!({"apiGroups": ["cluster.x-k8s.io"], "resources": ["machines", "*"], "verbs": ["*"]}),
            json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine"], "verbs": ["get"]}),
            json!({"nonResourceURLs": ["/metrics", "/debug/pprof"], "verbs": ["get"]}),
        ];
        for rule in inside {
            assert_eq!(uncovered(&rule, &ceiling), None, "{rule}");
        }
        let beyond = [
            (
                json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "delete"]}),
                "delete on configmaps",
            ),
            (json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]}), "* on configmaps"),
            (
                json!({"apiGroups": ["*"], "resources": ["configmaps"], "verbs": ["get"]}),
                "get on configmaps.*",
            ),
            (json!({"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}), "get on *"),
            (json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}), "get on secrets"),
            (
                json!({"apiGroups": [""], "resources": ["secrets"], "resourceNames": ["mine", "theirs"], "verbs": ["get"]}),
                "get on secrets named theirs",
            ),
            (json!({"nonResourceURLs": ["/healthz"], "verbs": ["get"]}), "get on the URL /healthz"),
        ];
        for (rule, words) in beyond {
            assert_eq!(uncovered(&rule, &ceiling).as_deref(), Some(words), "{rule}");
        }
    }

    #[test]
    fn what_providers_hold_grants_no_power() {
        for rule in [
            json!({"apiGroups": [""], "resources": ["secrets", "configmaps", "events"], "verbs": ["*"]}),
            json!({"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}),
            json!({"apiGroups": ["cluster.x-k8s.io"], "resources": ["*"], "verbs": ["*"]}),
            json!({"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["get", "list", "create", "patch"]}),
            json!({"apiGroups": [RBAC], "resources": ["clusterroles"], "resourceNames": ["mine"], "verbs": ["bind", "escalate"]}),
            json!({"apiGroups": [""], "resources": ["serviceaccounts"], "verbs": ["create", "get"]}),
            json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}),
        ] {
            assert_eq!(found(rule.clone()), Vec::<Power>::new(), "{rule}");
        }
        // A name beyond the release's own roles is every role it could name.
        let other = json!({"apiGroups": [RBAC], "resources": ["clusterroles"], "resourceNames": ["mine", "cluster-admin"], "verbs": ["bind"]});
        assert_eq!(found(other), vec![Power::Bind]);
    }
}
