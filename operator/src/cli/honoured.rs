//! Which namespaces the operators of a cluster honour, read from their Deployments as they run
//! them (`--provider-namespace`, `--namespace`, `BUTLER_NAMESPACE`, their own namespace), so
//! that `butlerctl describe` names the provider objects that no operator honours: nothing is
//! installed for them, and no operator writes their status.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, ListParams};

use crate::api::FIELD_MANAGER;
use crate::controller::policy::honoured_namespaces;

/// The operators found, each as `namespace/name` with the namespaces it honours (`None`: every
/// one).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operators {
    pub found: Vec<(String, Option<Vec<String>>)>,
}

impl Operators {
    /// Why no operator honours provider objects of `namespace`, or `None` when one does.
    pub fn why_not(&self, namespace: &str) -> Option<String> {
        if self.found.is_empty() {
            return Some(format!(
                "no operator runs in this cluster (no Deployment labelled app.kubernetes.io/name={FIELD_MANAGER}): nothing is installed for the providers of {namespace}"
            ));
        }
        let honours =
            |list: &Option<Vec<String>>| list.as_ref().is_none_or(|l| l.iter().any(|n| n == namespace));
        if self.found.iter().any(|(_, list)| honours(list)) {
            return None;
        }
        let theirs: Vec<String> = self
            .found
            .iter()
            .map(|(name, list)| format!("{name} honours {}", list.as_deref().unwrap_or_default().join(", ")))
            .collect();
        Some(format!(
            "no operator honours provider objects in {namespace} ({}): nothing is installed for them; move them to a honoured namespace, or add --provider-namespace={namespace} to an operator",
            theirs.join("; ")
        ))
    }
}

/// The namespaces an operator's Deployment honours, from its first container's arguments and
/// environment.
pub fn honoured_by(deployment: &Deployment) -> Option<Vec<String>> {
    let own = deployment.namespace();
    let container = deployment.spec.as_ref()?.template.spec.as_ref()?.containers.first()?;
    let args = container.args.clone().unwrap_or_default();
    let mut given = Vec::new();
    let mut managed =
        container.env.iter().flatten().find(|e| e.name == "BUTLER_NAMESPACE").and_then(|e| e.value.clone());
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        let mut flag = |name: &str| -> Option<String> {
            match arg.strip_prefix(name)? {
                "" => words.clone().next().cloned().inspect(|_| {
                    words.next();
                }),
                rest => rest.strip_prefix('=').map(String::from),
            }
        };
        if let Some(value) = flag("--provider-namespace") {
            given.push(value);
        } else if let Some(value) = flag("--namespace") {
            managed = Some(value);
        }
    }
    honoured_namespaces(&given, managed.as_deref(), own.as_deref())
}

/// The operators of the cluster, or `None` when their Deployments cannot be read (then nothing
/// is said about honoured namespaces).
pub async fn operators(client: &kube::Client) -> Option<Operators> {
    let api: Api<Deployment> = Api::all(client.clone());
    let params = ListParams::default().labels(&format!("app.kubernetes.io/name={FIELD_MANAGER}"));
    let list = api.list(&params).await.ok()?;
    let found = list
        .items
        .iter()
        .map(|d| (format!("{}/{}", d.namespace().unwrap_or_default(), d.name_any()), honoured_by(d)))
        .collect();
    Some(Operators { found })
}

/// The namespaces of `namespaces` that no operator honours, with why.
pub fn not_honoured<'a>(
    operators: &Operators,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> Vec<(String, String)> {
    let unique: BTreeSet<&str> = namespaces.into_iter().collect();
    unique.into_iter().filter_map(|ns| operators.why_not(ns).map(|why| (ns.to_string(), why))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(namespace: &str, args: &[&str], env: &[(&str, &str)]) -> Deployment {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "butler-operator", "namespace": namespace},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{
                "name": "operator", "args": args,
                "env": env.iter().map(|(n, v)| serde_json::json!({"name": n, "value": v})).collect::<Vec<_>>(),
            }]}}}
        }))
        .unwrap()
    }

    #[test]
    fn an_operators_namespaces_are_read_as_it_reads_its_flags() {
        let list = |l: &[&str]| Some(l.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let manifest = deployment("butler-system", &["run", "--provider-namespace=butler-system"], &[]);
        assert_eq!(honoured_by(&manifest), list(&["butler-system"]));
        let two = deployment("ops", &["run", "--provider-namespace", "a", "--provider-namespace=b"], &[]);
        assert_eq!(honoured_by(&two), list(&["a", "b"]));
        assert_eq!(honoured_by(&deployment("ops", &["run", "--provider-namespace=*"], &[])), None);
        assert_eq!(honoured_by(&deployment("ops", &["run", "--namespace=m"], &[])), list(&["m"]));
        assert_eq!(honoured_by(&deployment("ops", &["run"], &[("BUTLER_NAMESPACE", "e")])), list(&["e"]));
        assert_eq!(honoured_by(&deployment("ops", &["run"], &[])), list(&["ops"]), "its own namespace");
    }

    #[test]
    fn a_namespace_no_operator_honours_is_named_with_what_they_honour() {
        let operators = Operators {
            found: vec![("butler-system/butler-operator".into(), Some(vec!["butler-system".into()]))],
        };
        assert_eq!(operators.why_not("butler-system"), None);
        let why = operators.why_not("team-a").unwrap();
        assert!(why.starts_with("no operator honours provider objects in team-a (butler-system/butler-operator honours butler-system)"), "{why}");
        let everywhere = Operators { found: vec![("x/y".into(), None)] };
        assert_eq!(everywhere.why_not("team-a"), None);
        assert!(Operators::default().why_not("a").unwrap().starts_with("no operator runs in this cluster"));
        assert_eq!(not_honoured(&operators, ["team-a", "butler-system", "team-a"]).len(), 1);
    }
}
