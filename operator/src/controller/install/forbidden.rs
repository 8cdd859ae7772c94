//! A refusal of the API server's authorizer read back into the rule the operator lacks, so that
//! a provider says at once what to add (on its conditions and in an event) instead of retrying
//! with only a log line.

use crate::manifest::EXTRA_ROLE;

/// What the operator was refused, as Kubernetes' RBAC authorizer words it: `User "..." cannot
/// list resource "gadgets" in API group "x.io" at the cluster scope`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missing {
    pub verb: String,
    /// The resource, with its subresource (`customresourcedefinitions/status`).
    pub resource: String,
    pub group: String,
    /// `None`: at the cluster scope.
    pub namespace: Option<String>,
}

/// The refusal a message carries, if it carries one.
pub fn missing(message: &str) -> Option<Missing> {
    let (_, rest) = message.split_once(" is forbidden: ")?;
    let (_, rest) = rest.split_once(" cannot ")?;
    let (verb, rest) = rest.split_once(" resource \"")?;
    let (resource, rest) = rest.split_once("\" in API group \"")?;
    let (group, rest) = rest.split_once('"')?;
    let namespace = rest
        .strip_prefix(" in the namespace \"")
        .and_then(|r| r.split_once('"'))
        .map(|(ns, _)| ns.to_string());
    let word = |s: &str| !s.is_empty() && !s.contains(' ');
    (word(verb) && word(resource)).then(|| Missing {
        verb: verb.into(),
        resource: resource.into(),
        group: group.into(),
        namespace,
    })
}

impl Missing {
    /// The PolicyRule that allows it, in YAML's flow form.
    pub fn rule(&self) -> String {
        format!(
            "{{apiGroups: [\"{}\"], resources: [\"{}\"], verbs: [\"{}\"]}}",
            self.group, self.resource, self.verb
        )
    }

    /// What was refused and what to add.
    pub fn explain(&self) -> String {
        let what = match self.group.as_str() {
            "" => self.resource.clone(),
            group => format!("{} in API group {group}", self.resource),
        };
        let scope = match &self.namespace {
            Some(ns) => format!("in the namespace {ns}"),
            None => "at the cluster scope".into(),
        };
        format!(
            "the operator may not {} {what} {scope}: add the rule {} to the operator's ClusterRole {EXTRA_ROLE} (butlerctl init --operator-rules FILE, or edit the ClusterRole); it is retried within seconds",
            self.verb,
            self.rule()
        )
    }
}

/// `message`, followed by what to add when it carries a refusal.
pub fn explained(message: &str) -> String {
    match missing(message) {
        Some(m) => format!("{message}; {}", m.explain()),
        None => message.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubernetes_refusals_are_read_back_into_the_rule_to_add() {
        let cluster = r#"listing the objects of the CRD gadgets.x.io: gadgets.x.io is forbidden: User "system:serviceaccount:butler-system:butler-operator" cannot list resource "gadgets" in API group "x.io" at the cluster scope (Forbidden, HTTP 403)"#;
        let found = missing(cluster).unwrap();
        assert_eq!(
            found,
            Missing {
                verb: "list".into(),
                resource: "gadgets".into(),
                group: "x.io".into(),
                namespace: None
            }
        );
        assert_eq!(found.rule(), r#"{apiGroups: ["x.io"], resources: ["gadgets"], verbs: ["list"]}"#);
        let text = explained(cluster);
        assert!(text.starts_with(cluster), "{text}");
        assert!(
            text.contains("may not list gadgets in API group x.io at the cluster scope: add the rule"),
            "{text}"
        );

        let namespaced = r#"secrets "creds" is forbidden: User "system:serviceaccount:a:b" cannot patch resource "secrets" in API group "" in the namespace "capa-system""#;
        let found = missing(namespaced).unwrap();
        assert_eq!((found.group.as_str(), found.namespace.as_deref()), ("", Some("capa-system")));
        assert!(
            found.explain().starts_with("the operator may not patch secrets in the namespace capa-system")
        );

        let sub = r#"customresourcedefinitions.apiextensions.k8s.io "a.x.io" is forbidden: User "u" cannot patch resource "customresourcedefinitions/status" in API group "apiextensions.k8s.io" at the cluster scope"#;
        assert_eq!(missing(sub).unwrap().resource, "customresourcedefinitions/status");
    }

    #[test]
    fn other_messages_are_left_as_they_are() {
        for text in [
            "",
            "the object is invalid",
            "x is forbidden: unable to create new content in namespace y because it is being terminated",
        ] {
            assert_eq!(missing(text), None, "{text}");
            assert_eq!(explained(text), text);
        }
    }
}
