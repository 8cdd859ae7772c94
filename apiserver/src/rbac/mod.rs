//! RBAC for ServiceAccount tokens: a request is allowed when a rule of a Role or ClusterRole
//! bound to the account (or to one of its groups) allows its verb on its resource, as
//! Kubernetes' RBAC authorizer decides. Writing a Role or ClusterRole takes the `escalate` verb
//! on it, or holding every permission it grants (in its namespace); writing a binding the
//! `bind` verb on the role it names, or holding every permission of that role; a ClusterRole
//! with an `aggregationRule` always takes `escalate`. Discovery is open to every authenticated
//! account, as the bootstrap `system:discovery` role makes it.

mod covers;

use serde_json::Value;

use super::errors::ApiError;
use super::store::{ListOptions, Store};

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Who makes a request: a ServiceAccount (as its token names it) or a user an administrator
/// impersonates (`Impersonate-User` and `Impersonate-Group`, as `kubectl --as` sends them),
/// with the groups Kubernetes gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    user: String,
    groups: Vec<String>,
}

impl Account {
    /// The ServiceAccount `namespace/name`.
    pub fn service_account(namespace: &str, name: &str) -> Account {
        Account {
            user: format!("system:serviceaccount:{namespace}:{name}"),
            groups: vec![
                "system:serviceaccounts".into(),
                format!("system:serviceaccounts:{namespace}"),
                "system:authenticated".into(),
            ],
        }
    }

    /// A user with the groups it is given, and `system:authenticated`; a ServiceAccount's user
    /// name gets the account's groups, as Kubernetes gives them to an impersonated account.
    pub fn user(name: &str, groups: Vec<String>) -> Account {
        let parts: Vec<&str> = name.split(':').collect();
        if let ["system", "serviceaccount", namespace, account] = parts.as_slice() {
            let mut sa = Account::service_account(namespace, account);
            sa.groups.extend(groups);
            return sa;
        }
        let mut groups = groups;
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        Account { user: name.into(), groups }
    }

    pub fn username(&self) -> &str {
        &self.user
    }

    pub fn groups(&self) -> &[String] {
        &self.groups
    }

    /// Whether a binding's subject is this account (`namespace` is the binding's, the default
    /// of a ServiceAccount subject in a RoleBinding).
    fn is(&self, subject: &Value, namespace: Option<&str>) -> bool {
        let name = subject["name"].as_str().unwrap_or_default();
        match subject["kind"].as_str() {
            Some("ServiceAccount") => {
                let ns = subject["namespace"].as_str().filter(|n| !n.is_empty()).or(namespace);
                ns.is_some_and(|ns| self.user == format!("system:serviceaccount:{ns}:{name}"))
            }
            Some("User") => name == self.user,
            Some("Group") => self.groups.iter().any(|g| g == name),
            _ => false,
        }
    }
}

/// What a request does, in RBAC's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attributes {
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub namespace: Option<String>,
    pub name: Option<String>,
}

impl Attributes {
    /// The verb of an HTTP request on a resource path.
    pub fn verb_of(method: &str, named: bool, watch: bool) -> &'static str {
        butler_runtime::requests::verb_of(method, named, watch).unwrap_or("unknown")
    }

    fn with_verb(&self, verb: &str) -> Attributes {
        Attributes { verb: verb.into(), ..self.clone() }
    }
}

pub(crate) fn strings(value: &Value) -> impl Iterator<Item = &str> {
    value.as_array().into_iter().flatten().filter_map(Value::as_str)
}

/// Whether one policy rule allows the request (Kubernetes' `RuleAllows`).
pub fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    let verb = strings(&rule["verbs"]).any(|v| v == "*" || v == a.verb);
    let group = strings(&rule["apiGroups"]).any(|g| g == "*" || g == a.group);
    let combined = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let resource = strings(&rule["resources"]).any(|r| {
        r == "*" || r == combined || a.subresource.as_ref().is_some_and(|sub| r == format!("*/{sub}"))
    });
    let names: Vec<&str> = strings(&rule["resourceNames"]).collect();
    let name = names.is_empty() || a.name.as_deref().is_some_and(|n| names.contains(&n));
    verb && group && resource && name
}

/// Whether one policy rule allows `verb` on the non-resource URL `path` (`/metrics`,
/// `/healthz`): its `nonResourceURLs` name it, or a prefix of it ending in `*`.
pub fn non_resource_allows(rule: &Value, path: &str, verb: &str) -> bool {
    let verb = strings(&rule["verbs"]).any(|v| v == "*" || v == verb);
    let url = strings(&rule["nonResourceURLs"]).any(|u| match u.strip_suffix('*') {
        Some(prefix) => path.starts_with(prefix),
        None => u == path,
    });
    verb && url
}

fn items(store: &Store, plural: &str, namespace: Option<&str>) -> Vec<Value> {
    let Some(rt) = store.registry.find(RBAC_GROUP, "v1", plural).cloned() else { return Vec::new() };
    store
        .list(&rt, namespace, &ListOptions::default())
        .map(|list| list["items"].as_array().cloned().unwrap_or_default())
        .unwrap_or_default()
}

fn role_rules(store: &Store, role_ref: &Value, namespace: Option<&str>) -> Vec<Value> {
    let name = role_ref["name"].as_str().unwrap_or_default();
    let (plural, scope) = match role_ref["kind"].as_str() {
        Some("ClusterRole") => ("clusterroles", None),
        Some("Role") if namespace.is_some() => ("roles", namespace),
        _ => return Vec::new(),
    };
    items(store, plural, scope)
        .into_iter()
        .find(|r| r["metadata"]["name"] == name)
        .and_then(|r| r["rules"].as_array().cloned())
        .unwrap_or_default()
}

/// Every rule that applies to `account` for a request in `namespace` (cluster-wide bindings,
/// then the namespace's).
pub fn rules_for(store: &Store, account: &Account, namespace: Option<&str>) -> Vec<Value> {
    let mut rules = Vec::new();
    for binding in items(store, "clusterrolebindings", None) {
        if strings_subjects(&binding).any(|s| account.is(s, None)) {
            rules.extend(role_rules(store, &binding["roleRef"], None));
        }
    }
    if let Some(ns) = namespace {
        for binding in items(store, "rolebindings", Some(ns)) {
            if strings_subjects(&binding).any(|s| account.is(s, Some(ns))) {
                rules.extend(role_rules(store, &binding["roleRef"], Some(ns)));
            }
        }
    }
    rules
}

fn strings_subjects(binding: &Value) -> impl Iterator<Item = &Value> {
    binding["subjects"].as_array().into_iter().flatten()
}

fn describe(a: &Attributes) -> String {
    let resource = match &a.subresource {
        Some(sub) => format!("{}/{sub}", a.resource),
        None => a.resource.clone(),
    };
    let mut text = format!("cannot {} resource {resource:?} in API group {:?}", a.verb, a.group);
    match &a.namespace {
        Some(ns) => text.push_str(&format!(" in the namespace {ns:?}")),
        None => text.push_str(" at the cluster scope"),
    }
    text
}

fn refusal(account: &Account, a: &Attributes, why: Option<String>) -> ApiError {
    let target = match (&a.group[..], &a.name) {
        ("", Some(name)) => format!("{} {name:?}", a.resource),
        (group, Some(name)) => format!("{}.{group} {name:?}", a.resource),
        ("", None) => a.resource.clone(),
        (group, None) => format!("{}.{group}", a.resource),
    };
    let reason = why.unwrap_or_else(|| describe(a));
    ApiError::forbidden(format!("{target} is forbidden: User {:?} {reason}", account.username()))
}

/// Decides a request of `account`. `body` is what a write sends, for the role a binding names.
pub fn authorize(store: &Store, account: &Account, a: &Attributes, body: &[u8]) -> Result<(), ApiError> {
    let rules = rules_for(store, account, a.namespace.as_deref());
    let allows = |a: &Attributes| rules.iter().any(|r| rule_allows(r, a));
    if !allows(a) {
        return Err(refusal(account, a, None));
    }
    let writes = matches!(a.verb.as_str(), "create" | "update" | "patch");
    if a.group != RBAC_GROUP || !writes || a.subresource.is_some() {
        return Ok(());
    }
    let sent: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    match a.resource.as_str() {
        "roles" | "clusterroles" if !allows(&a.with_verb("escalate")) => {
            let granted = sent["rules"].as_array().map(Vec::as_slice).unwrap_or_default();
            // A JSON patch (an array) could change anything: it needs escalate, as does an
            // aggregation (what it gathers is decided later, by labels).
            let held =
                !sent.is_array() && sent["aggregationRule"].is_null() && covers::covers_all(&rules, granted);
            match held {
                true => Ok(()),
                false => Err(refusal(
                    account,
                    a,
                    Some(format!(
                        "is attempting to grant RBAC permissions not currently held: it needs the escalate verb on {}, or every permission the role grants",
                        a.resource
                    )),
                )),
            }
        }
        "rolebindings" | "clusterrolebindings" => {
            let role_ref = &sent["roleRef"];
            let (resource, namespace) = match role_ref["kind"].as_str() {
                Some("Role") => ("roles", a.namespace.clone()),
                _ => ("clusterroles", None),
            };
            let bind = Attributes {
                verb: "bind".into(),
                group: RBAC_GROUP.into(),
                resource: resource.into(),
                subresource: None,
                namespace,
                name: role_ref["name"].as_str().map(String::from),
            };
            let held = role_ref.is_null()
                || rules_for(store, account, bind.namespace.as_deref()).iter().any(|r| rule_allows(r, &bind))
                || covers::covers_all(&rules, &role_rules(store, role_ref, a.namespace.as_deref()));
            match held {
                true => Ok(()),
                false => Err(refusal(
                    account,
                    a,
                    Some(format!(
                        "cannot bind {resource} {:?}: it needs the bind verb on it, or every permission it grants",
                        role_ref["name"].as_str().unwrap_or_default()
                    )),
                )),
            }
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn attrs(verb: &str, group: &str, resource: &str, sub: Option<&str>, name: Option<&str>) -> Attributes {
        Attributes {
            verb: verb.into(),
            group: group.into(),
            resource: resource.into(),
            subresource: sub.map(String::from),
            namespace: Some("ns".into()),
            name: name.map(String::from),
        }
    }

    #[test]
    fn rules_match_verbs_groups_resources_subresources_and_names() {
        let rule = json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get", "list"]});
        assert!(rule_allows(&rule, &attrs("get", "apps", "deployments", None, Some("d"))));
        assert!(!rule_allows(&rule, &attrs("delete", "apps", "deployments", None, Some("d"))));
        assert!(!rule_allows(&rule, &attrs("get", "", "deployments", None, Some("d"))));
        assert!(
            !rule_allows(&rule, &attrs("get", "apps", "deployments", Some("status"), Some("d"))),
            "a subresource needs its own rule"
        );
        let star_sub = json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["*"]});
        assert!(rule_allows(&star_sub, &attrs("patch", "x.io", "widgets", Some("status"), Some("w"))));
        assert!(!rule_allows(&star_sub, &attrs("patch", "x.io", "widgets", None, Some("w"))));
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["get", "list"]});
        assert!(rule_allows(&named, &attrs("get", "", "configmaps", None, Some("a"))));
        assert!(!rule_allows(&named, &attrs("get", "", "configmaps", None, Some("b"))));
        assert!(!rule_allows(&named, &attrs("list", "", "configmaps", None, None)), "a list names nothing");
    }

    #[test]
    fn subjects_are_the_account_its_user_name_or_its_groups() {
        let me = Account::service_account("ops", "op");
        assert!(me.is(&json!({"kind": "ServiceAccount", "name": "op", "namespace": "ops"}), None));
        assert!(me.is(&json!({"kind": "ServiceAccount", "name": "op"}), Some("ops")));
        assert!(!me.is(&json!({"kind": "ServiceAccount", "name": "op"}), None));
        assert!(!me.is(&json!({"kind": "ServiceAccount", "name": "op", "namespace": "other"}), Some("ops")));
        assert!(me.is(&json!({"kind": "User", "name": "system:serviceaccount:ops:op"}), None));
        assert!(me.is(&json!({"kind": "Group", "name": "system:serviceaccounts:ops"}), None));
        assert!(!me.is(&json!({"kind": "Group", "name": "system:masters"}), None));
        let alice = Account::user("alice@example.com", vec!["devs".into()]);
        assert!(alice.is(&json!({"kind": "User", "name": "alice@example.com"}), None));
        assert!(alice.is(&json!({"kind": "Group", "name": "devs"}), None));
        assert!(alice.is(&json!({"kind": "Group", "name": "system:authenticated"}), None));
        assert!(!alice.is(&json!({"kind": "ServiceAccount", "name": "alice@example.com"}), Some("x")));
        let impersonated = Account::user("system:serviceaccount:ops:op", Vec::new());
        assert_eq!(impersonated, me, "an account's user name is the account, with its groups");
    }

    #[test]
    fn non_resource_rules_match_paths_and_prefixes() {
        let rule = json!({"nonResourceURLs": ["/metrics", "/debug/*"], "verbs": ["get"]});
        assert!(non_resource_allows(&rule, "/metrics", "get"));
        assert!(non_resource_allows(&rule, "/debug/pprof", "get"));
        assert!(!non_resource_allows(&rule, "/metrics", "post"));
        assert!(!non_resource_allows(&rule, "/metricsx", "get"));
        let resources = json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]});
        assert!(!non_resource_allows(&resources, "/metrics", "get"), "resource rules grant no URLs");
    }

    #[test]
    fn verbs_follow_the_method_and_whether_a_name_is_given() {
        assert_eq!(Attributes::verb_of("GET", false, true), "watch");
        assert_eq!(Attributes::verb_of("GET", false, false), "list");
        assert_eq!(Attributes::verb_of("DELETE", false, false), "deletecollection");
        assert_eq!(Attributes::verb_of("PATCH", true, false), "patch");
    }
}
