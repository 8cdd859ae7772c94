//! Kubernetes' escalation check (`rbac/validation.Covers`): a role may be written, and a role
//! bound, without the `escalate` or `bind` verb when its writer already holds every
//! permission it grants. Rules are broken into single permissions (one group, resource, verb
//! and name each), each of which some rule of the writer must cover.

use serde_json::Value;

use super::{Attributes, rule_allows, strings};

/// One permission of a rule: a resource one (group, resource, verb, name or any) or a
/// non-resource one (URL, verb).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Permission<'a> {
    Resource { group: &'a str, resource: &'a str, verb: &'a str, name: Option<&'a str> },
    Url { url: &'a str, verb: &'a str },
}

fn permissions(rule: &Value) -> Vec<Permission<'_>> {
    let mut out = Vec::new();
    let names: Vec<Option<&str>> = match strings(&rule["resourceNames"]).collect::<Vec<_>>() {
        names if names.is_empty() => vec![None],
        names => names.into_iter().map(Some).collect(),
    };
    for verb in strings(&rule["verbs"]) {
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for name in &names {
                    out.push(Permission::Resource { group, resource, verb, name: *name });
                }
            }
        }
        for url in strings(&rule["nonResourceURLs"]) {
            out.push(Permission::Url { url, verb });
        }
    }
    out
}

/// Whether `owner` grants the permission (Kubernetes' `ruleCovers` for one permission): a
/// resource permission is the request it allows, as the authorizer matches requests.
fn covers(owner: &Value, permission: &Permission<'_>) -> bool {
    match permission {
        Permission::Resource { group, resource, verb, name } => {
            let (resource, subresource) = match resource.split_once('/') {
                Some((resource, sub)) => (resource, Some(sub.to_string())),
                None => (*resource, None),
            };
            let request = Attributes {
                verb: verb.to_string(),
                group: group.to_string(),
                resource: resource.to_string(),
                subresource,
                namespace: None,
                name: name.map(String::from),
            };
            rule_allows(owner, &request)
        }
        Permission::Url { url, verb } => {
            let url_held = strings(&owner["nonResourceURLs"]).any(|u| {
                u == *url || u == "*" || u.strip_suffix('*').is_some_and(|prefix| url.starts_with(prefix))
            });
            strings(&owner["verbs"]).any(|v| v == "*" || v == *verb) && url_held
        }
    }
}

/// Whether the rules `owner` holds grant everything `wanted` grants.
pub fn covers_all(owner: &[Value], wanted: &[Value]) -> bool {
    wanted.iter().flat_map(permissions).all(|p| owner.iter().any(|o| covers(o, &p)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_writer_grants_only_what_it_holds() {
        let owner = [
            json!({"apiGroups": ["butler.butlerlabs.dev"], "resources": ["teams"], "verbs": ["get", "list", "watch"]}),
            json!({"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["get"]}),
            json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a", "b"], "verbs": ["*"]}),
            json!({"nonResourceURLs": ["/healthz/*"], "verbs": ["get"]}),
        ];
        let team_read = json!({"apiGroups": ["butler.butlerlabs.dev"], "resources": ["teams"], "resourceNames": ["t"], "verbs": ["get", "watch"]});
        assert!(covers_all(&owner, std::slice::from_ref(&team_read)));
        let team_write =
            json!({"apiGroups": ["butler.butlerlabs.dev"], "resources": ["teams"], "verbs": ["update"]});
        assert!(!covers_all(&owner, &[team_read, team_write]), "one permission not held refuses the role");
        let star_verb =
            json!({"apiGroups": ["butler.butlerlabs.dev"], "resources": ["teams"], "verbs": ["*"]});
        assert!(!covers_all(&owner, &[star_verb]), "a wildcard is only covered by a wildcard");
        let status = json!({"apiGroups": ["apps"], "resources": ["deployments/status"], "verbs": ["get"]});
        assert!(covers_all(&owner, &[status]));
        let named = json!({"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["a"], "verbs": ["delete"]});
        assert!(covers_all(&owner, &[named]));
        let every_name = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
        assert!(!covers_all(&owner, &[every_name]), "named rules never cover every name");
        let url = json!({"nonResourceURLs": ["/healthz/ready"], "verbs": ["get"]});
        assert!(covers_all(&owner, &[url]));
        assert!(!covers_all(&owner, &[json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]})]));
        assert!(covers_all(&[], &[]), "an empty role grants nothing");
    }
}
