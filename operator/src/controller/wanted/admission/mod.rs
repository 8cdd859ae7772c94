//! Release admission: the whole rendered set of a provider (components after customisation,
//! patches and `additionalManifests`) judged together before anything is written, by rules
//! that deny what they do not name and match by API group and kind. One entry, [`admit`]: the
//! set in, the first refusal out (naming the object, the rule and the flag that widens it).
//! The security page is its table.
//!
//! - [`kinds`]: only the kinds providers ship, their own CRDs' kinds and what `--allow-kind`
//!   adds.
//! - [`rbac`]: bindings of the release's own roles to its own ServiceAccounts.
//! - [`ceiling`]: no role grants escalate, bind, impersonate, tokens, `nodes/proxy` or `*` on
//!   `*` unless `--allow-role-power` allows it, nor, with `--role-ceiling`, anything that
//!   ClusterRole does not.
//! - [`hooks`]: webhooks, CRDs (never in Kubernetes' or the operator's groups), conversion
//!   webhooks, admission policies, Services' external IPs, token Secrets.
//! - [`pods`]: the release's own ServiceAccounts, and Pod Security's baseline.
//!
//! What a set claims against the cluster as it is (objects someone else made, CRDs another
//! defines) is judged where the cluster is read, before the first write
//! ([`crate::controller::install::applying`]).

use std::collections::{BTreeSet, HashSet};

use serde_json::Value;

use crate::controller::wanted::policy::Policy;

pub mod ceiling;
pub mod hooks;
pub mod kinds;
pub mod pods;
pub mod rbac;

pub use pods::check_accounts;

/// RBAC's API group.
pub const RBAC: &str = "rbac.authorization.k8s.io";

pub(crate) fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn group_of(object: &Value) -> &str {
    text(&object["apiVersion"]).split_once('/').map_or("", |(g, _)| g)
}

pub(crate) fn describe(object: &Value) -> String {
    let meta = &object["metadata"];
    match meta["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{} {ns}/{}", text(&object["kind"]), text(&meta["name"])),
        None => format!("{} {}", text(&object["kind"]), text(&meta["name"])),
    }
}

/// A release's objects, indexed once (a release of many objects is checked in n log n).
pub struct Set<'a> {
    pub objects: &'a [Value],
    /// The provider's namespace, where its namespaced objects go.
    pub namespace: &'a str,
    /// Every object, as (group, kind, namespace, name).
    placed: HashSet<(&'a str, &'a str, &'a str, &'a str)>,
    /// Every object, as (group, kind, name), whatever its namespace.
    named: HashSet<(&'a str, &'a str, &'a str)>,
    /// The ServiceAccounts, as (namespace, name).
    pub accounts: BTreeSet<(&'a str, &'a str)>,
    /// The CRDs' groups, (group, plural) and (group, kind).
    pub crd_groups: BTreeSet<&'a str>,
    pub crd_plurals: BTreeSet<(&'a str, &'a str)>,
    pub crd_kinds: BTreeSet<(&'a str, &'a str)>,
    /// The ValidatingAdmissionPolicies' names.
    pub policies: BTreeSet<&'a str>,
}

impl<'a> Set<'a> {
    pub fn of(objects: &'a [Value], namespace: &'a str) -> Set<'a> {
        let key = |o: &'a Value| {
            (group_of(o), text(&o["kind"]), text(&o["metadata"]["namespace"]), text(&o["metadata"]["name"]))
        };
        let placed: HashSet<_> = objects.iter().map(key).collect();
        let named = placed.iter().map(|(g, k, _, n)| (*g, *k, *n)).collect();
        let accounts = placed
            .iter()
            .filter(|(g, k, _, _)| g.is_empty() && *k == "ServiceAccount")
            .map(|(_, _, ns, n)| (*ns, *n))
            .collect();
        let crds: Vec<&Value> = objects
            .iter()
            .filter(|o| group_of(o) == "apiextensions.k8s.io" && o["kind"] == "CustomResourceDefinition")
            .collect();
        let spec = |o: &'a Value, field: &str| -> &'a str {
            match field {
                "group" => text(&o["spec"]["group"]),
                name => text(&o["spec"]["names"][name]),
            }
        };
        Set {
            objects,
            namespace,
            placed,
            named,
            accounts,
            crd_groups: crds.iter().map(|o| spec(o, "group")).collect(),
            crd_plurals: crds.iter().map(|o| (spec(o, "group"), spec(o, "plural"))).collect(),
            crd_kinds: crds.iter().map(|o| (spec(o, "group"), spec(o, "kind"))).collect(),
            policies: objects
                .iter()
                .filter(|o| {
                    group_of(o) == "admissionregistration.k8s.io" && o["kind"] == "ValidatingAdmissionPolicy"
                })
                .map(|o| text(&o["metadata"]["name"]))
                .collect(),
        }
    }

    /// Whether the set holds an object of `group` and `kind` named `name` (in `namespace`,
    /// when given).
    pub fn defined(&self, group: &str, kind: &str, namespace: Option<&str>, name: &str) -> bool {
        match namespace {
            Some(ns) => self.placed.contains(&(group, kind, ns, name)),
            None => self.named.contains(&(group, kind, name)),
        }
    }
}

/// Admits a provider's whole rendered set, or says why not: the first object that breaks a
/// rule, the rule, and the flag that would allow it. Nothing of a refused set is written.
/// `ceiling` holds the rules of the ClusterRole `--role-ceiling` names, read live.
pub fn admit(
    objects: &[Value],
    namespace: &str,
    policy: &Policy,
    ceiling: Option<&[Value]>,
) -> Result<(), String> {
    let set = Set::of(objects, namespace);
    for object in objects {
        let (group, kind) = (group_of(object), text(&object["kind"]));
        if !kinds::may_create(group, kind, &set.crd_kinds, &policy.kinds) {
            let named = match group {
                "" => kind.to_string(),
                g => format!("{g}/{kind}"),
            };
            return Err(format!(
                "{} is refused: {named} is no kind a provider's components may create (the kinds Cluster API's providers ship, and the kinds of the provider's own CRDs); start the operator with --allow-kind {named} if the provider needs it",
                describe(object)
            ));
        }
    }
    rbac::check(&set, policy)?;
    ceiling::check(&set, policy, ceiling)?;
    hooks::check(&set, policy)?;
    pods::check_baseline(objects, policy.privileged_pods)
}

#[cfg(test)]
mod tests;
