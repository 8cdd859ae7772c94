//! Which namespaces the operators of a cluster honour, read from their Deployments as they run
//! them (`--provider-namespace`, `--namespace`, `BUTLER_NAMESPACE`, their own namespace), so
//! that `butlerctl describe` names the provider objects that no operator honours: nothing is
//! installed for them, and no operator writes their status. A Deployment counts as an operator
//! only when it runs as a ServiceAccount bound to the operator's ClusterRole.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use kube::core::PartialObjectMeta;

use crate::api::FIELD_MANAGER;
use crate::controller::wanted::policy::{NAMESPACE_LABEL, honoured_namespaces};

/// An operator found running: `namespace/name`, the namespaces it honours by name (`None`:
/// every one) and the label that honours a namespace besides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Found {
    pub name: String,
    pub namespaces: Option<Vec<String>>,
    pub label: Option<String>,
    /// The ServiceAccount it runs as: (namespace, name).
    pub account: (String, String),
    /// Its first container's arguments, and its environment (`None`: a value read from
    /// elsewhere, a Secret or ConfigMap).
    pub args: Vec<String>,
    pub env: BTreeMap<String, Option<String>>,
}

/// The operators found, and the namespaces that carry each of their labels set to `true`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Operators {
    pub found: Vec<Found>,
    pub labelled: BTreeMap<String, BTreeSet<String>>,
}

impl Operators {
    /// Why no operator honours provider objects of `namespace`, or `None` when one does.
    pub fn why_not(&self, namespace: &str) -> Option<String> {
        if self.found.is_empty() {
            return Some(format!(
                "no operator runs in this cluster (no Deployment labelled app.kubernetes.io/name={FIELD_MANAGER}): nothing is installed for the providers of {namespace}"
            ));
        }
        if self.honouring(namespace).is_some() {
            return None;
        }
        let theirs: Vec<String> = self
            .found
            .iter()
            .map(|o| {
                let list = o.namespaces.as_deref().unwrap_or_default().join(", ");
                match &o.label {
                    Some(label) => format!("{} honours {list} and namespaces labelled {label}=true", o.name),
                    None => format!("{} honours {list}", o.name),
                }
            })
            .collect();
        let fix = match self.label_for() {
            Some(label) => format!("label it (kubectl label namespace {namespace} {label}=true)"),
            None => format!("add --provider-namespace={namespace} to an operator"),
        };
        Some(format!(
            "no operator honours provider objects in {namespace} ({}): nothing is installed for them; move them to a honoured namespace, or {fix}",
            theirs.join("; ")
        ))
    }

    /// The operator that honours provider objects of `namespace`, if one does.
    pub fn honouring(&self, namespace: &str) -> Option<&Found> {
        let labelled = |label: &Option<String>| {
            label.as_ref().is_some_and(|l| self.labelled.get(l).is_some_and(|n| n.contains(namespace)))
        };
        self.found.iter().find(|o| {
            o.namespaces.as_ref().is_none_or(|l| l.iter().any(|n| n == namespace)) || labelled(&o.label)
        })
    }

    /// The label that makes an operator honour a namespace when set to `true` on it (the first
    /// operator's that selects one), or `None` when no operator selects a label.
    pub fn label_for(&self) -> Option<&str> {
        self.found.iter().find_map(|o| o.label.as_deref().filter(|_| o.namespaces.is_some()))
    }
}

/// What an operator's Deployment honours, from its first container's arguments and
/// environment: the namespaces by name, and the namespace label (the operator's default when
/// the flag is not given).
pub fn honoured_by(deployment: &Deployment) -> (Option<Vec<String>>, Option<String>) {
    let Some(container) = first_container(deployment) else {
        return (
            honoured_namespaces(&[], None, deployment.namespace().as_deref()),
            Some(NAMESPACE_LABEL.into()),
        );
    };
    let own = deployment.namespace();
    let args = container.args.clone().unwrap_or_default();
    let given = flag_values(&args, "--provider-namespace");
    // The last of a flag given twice wins, as the operator reads its flags.
    let label = match flag_values(&args, "--provider-namespace-label").pop() {
        Some(value) => Some(value).filter(|l| !l.is_empty()),
        None => Some(NAMESPACE_LABEL.to_string()),
    };
    let from_env =
        container.env.iter().flatten().find(|e| e.name == "BUTLER_NAMESPACE").and_then(|e| e.value.clone());
    let managed = flag_values(&args, "--namespace").pop().or(from_env);
    (honoured_namespaces(&given, managed.as_deref(), own.as_deref()), label)
}

/// The operators of the cluster, or `None` when their Deployments cannot be read (then nothing
/// is said about honoured namespaces).
pub async fn operators(client: &kube::Client) -> Option<Operators> {
    let api: Api<Deployment> = Api::all(client.clone());
    let params = ListParams::default().labels(&format!("app.kubernetes.io/name={FIELD_MANAGER}"));
    let list = api.list(&params).await.ok()?;
    let accounts = operator_accounts(client).await?;
    let found: Vec<Found> = list
        .items
        .iter()
        .filter(|d| accounts.contains(&runs_as(d)))
        .map(|d| {
            let (namespaces, label) = honoured_by(d);
            Found {
                name: format!("{}/{}", d.namespace().unwrap_or_default(), d.name_any()),
                namespaces,
                label,
                account: runs_as(d),
                args: first_container(d).and_then(|c| c.args.clone()).unwrap_or_default(),
                env: first_container(d)
                    .and_then(|c| c.env.as_ref())
                    .into_iter()
                    .flatten()
                    .map(|e| (e.name.clone(), e.value.clone().filter(|_| e.value_from.is_none())))
                    .collect(),
            }
        })
        .collect();
    let mut labelled = BTreeMap::new();
    let namespaces: Api<PartialObjectMeta<Namespace>> = Api::all(client.clone());
    for label in found.iter().filter_map(|o| o.label.clone()).collect::<BTreeSet<_>>() {
        let listed =
            namespaces.list_metadata(&ListParams::default().labels(&format!("{label}=true"))).await.ok()?;
        labelled.insert(label, listed.items.iter().map(|n| n.name_any()).collect());
    }
    Some(Operators { found, labelled })
}

/// The ServiceAccounts, as (namespace, name), that the cluster binds to an operator's
/// ClusterRole: the manifest's `butler-operator`, or one labelled
/// `app.kubernetes.io/name=butler-operator` (the chart names its own after `clusterRoleName`)
/// that grants what only the operator holds, writing provider objects' status. Only a
/// Deployment that runs as one is taken for an operator: anyone who may write Deployments could
/// label one as the operator, but binding a role that grants those rights takes an
/// administrator (Kubernetes lets a binding grant only what its writer holds), while a labelled
/// role with no such rule would bind for anyone who may write bindings.
async fn operator_accounts(client: &kube::Client) -> Option<BTreeSet<(String, String)>> {
    let roles: Api<ClusterRole> = Api::all(client.clone());
    let labelled = roles
        .list(&ListParams::default().labels(&format!("app.kubernetes.io/name={FIELD_MANAGER}")))
        .await
        .ok()?;
    let mut names: BTreeSet<String> =
        labelled.items.iter().filter(|role| grants_provider_status(role)).map(|r| r.name_any()).collect();
    names.insert(FIELD_MANAGER.to_string());
    let api: Api<ClusterRoleBinding> = Api::all(client.clone());
    let bindings = api.list(&ListParams::default()).await.ok()?;
    Some(
        bindings
            .items
            .iter()
            .filter(|b| b.role_ref.kind == "ClusterRole" && names.contains(&b.role_ref.name))
            .flat_map(|b| b.subjects.iter().flatten())
            .filter(|s| s.kind == "ServiceAccount")
            .map(|s| (s.namespace.clone().unwrap_or_default(), s.name.clone()))
            .collect(),
    )
}

/// Whether `role` grants writing the status of every provider kind, as the operator's own does.
fn grants_provider_status(role: &ClusterRole) -> bool {
    use crate::api::{KindNames, ProviderKind};
    let rules: Vec<serde_json::Value> =
        role.rules.iter().flatten().filter_map(|r| serde_json::to_value(r).ok()).collect();
    let statuses: Vec<String> = ProviderKind::ALL.iter().map(|k| format!("{}/status", k.plural())).collect();
    let wanted = serde_json::json!({"apiGroups": [crate::api::GROUP], "resources": statuses, "verbs": ["update", "patch"]});
    crate::controller::wanted::admission::ceiling::uncovered(&wanted, &rules).is_none()
}

/// The values of `flag` in `args`, written `--flag=value` or `--flag value`, in order.
pub fn flag_values(args: &[String], flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut words = args.iter();
    while let Some(arg) = words.next() {
        match arg.strip_prefix(flag) {
            Some("") => out.extend(words.next().cloned()),
            Some(rest) if let Some(value) = rest.strip_prefix('=') => out.push(value.to_string()),
            _ => {}
        }
    }
    out
}

/// A Deployment's first container (the operator's).
fn first_container(deployment: &Deployment) -> Option<&k8s_openapi::api::core::v1::Container> {
    deployment.spec.as_ref()?.template.spec.as_ref()?.containers.first()
}

/// The ServiceAccount a Deployment's pods run as, as (namespace, name).
fn runs_as(deployment: &Deployment) -> (String, String) {
    let spec = deployment.spec.as_ref().and_then(|s| s.template.spec.as_ref());
    let name = spec.and_then(|s| s.service_account_name.clone().or_else(|| s.service_account.clone()));
    (
        deployment.namespace().unwrap_or_default(),
        name.filter(|n| !n.is_empty()).unwrap_or_else(|| "default".into()),
    )
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
        let honoured_by = |d: &Deployment| honoured_by(d).0;
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
    fn an_operators_namespace_label_is_its_flag_or_the_default() {
        let label = |args: &[&str]| honoured_by(&deployment("ops", args, &[])).1;
        assert_eq!(label(&["run"]).as_deref(), Some(NAMESPACE_LABEL));
        assert_eq!(label(&["run", "--provider-namespace-label=x.io/p"]).as_deref(), Some("x.io/p"));
        assert_eq!(label(&["run", "--provider-namespace-label", ""]), None);
    }

    #[test]
    fn only_a_role_that_writes_provider_status_makes_an_operator_account() {
        let role = |rules: serde_json::Value| -> ClusterRole {
            serde_json::from_value(
                serde_json::json!({"metadata": {"name": "butler-operator-team-a"}, "rules": rules}),
            )
            .unwrap()
        };
        assert!(grants_provider_status(&role(serde_json::json!(crate::manifest::cluster_rules()))));
        // An empty role binds for anyone who may write bindings: it proves nothing.
        assert!(!grants_provider_status(&role(serde_json::json!([]))));
        let some = serde_json::json!([{"apiGroups": ["operator.butlerlabs.dev"], "resources": ["coreproviders/status"], "verbs": ["patch"]}]);
        assert!(!grants_provider_status(&role(some)), "every provider kind's status");
    }

    #[test]
    fn flags_are_read_in_both_forms() {
        let args: Vec<String> =
            ["--allow-network=10.0.0.0/8", "--allow-network", "fd00::/8", "--allow-networks=x"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        assert_eq!(flag_values(&args, "--allow-network"), ["10.0.0.0/8", "fd00::/8"]);
    }

    fn found(name: &str, namespaces: Option<&[&str]>, label: Option<&str>) -> Found {
        Found {
            name: name.into(),
            namespaces: namespaces.map(|l| l.iter().map(|s| s.to_string()).collect()),
            label: label.map(String::from),
            ..Default::default()
        }
    }

    #[test]
    fn a_labelled_namespace_is_honoured_and_an_unlabelled_one_is_told_how() {
        let mut operators = Operators {
            found: vec![found("ops/butler-operator", Some(&["butler-system"]), Some(NAMESPACE_LABEL))],
            ..Default::default()
        };
        let why = operators.why_not("capi-system").unwrap();
        assert!(
            why.ends_with(
                "or label it (kubectl label namespace capi-system operator.butlerlabs.dev/providers=true)"
            ),
            "{why}"
        );
        assert_eq!(operators.label_for(), Some(NAMESPACE_LABEL));
        operators.labelled.insert(NAMESPACE_LABEL.into(), ["capi-system".to_string()].into());
        assert_eq!(operators.why_not("capi-system"), None);
    }

    #[test]
    fn a_namespace_no_operator_honours_is_named_with_what_they_honour() {
        let operators = Operators {
            found: vec![found("butler-system/butler-operator", Some(&["butler-system"]), None)],
            ..Default::default()
        };
        assert_eq!(operators.why_not("butler-system"), None);
        assert_eq!(operators.label_for(), None);
        let why = operators.why_not("team-a").unwrap();
        assert!(why.starts_with("no operator honours provider objects in team-a (butler-system/butler-operator honours butler-system)"), "{why}");
        let everywhere =
            Operators { found: vec![found("x/y", None, Some(NAMESPACE_LABEL))], ..Default::default() };
        assert_eq!(everywhere.why_not("team-a"), None);
        assert!(Operators::default().why_not("a").unwrap().starts_with("no operator runs in this cluster"));
        assert_eq!(not_honoured(&operators, ["team-a", "butler-system", "team-a"]).len(), 1);
    }
}
