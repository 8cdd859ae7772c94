//! What a carried-over provider's release needs of the cluster, checked before anything
//! changes (the operator would otherwise fail it only after cluster-api-operator is scaled
//! down): the account of the operator that will honour it must be allowed to write every object
//! of the release (Cluster API's providers ship kinds Butler's do not, cert-manager's Issuers
//! and Certificates among them: the upstream rules grant them), the release's roles must stay
//! within that operator's role ceiling and allowed powers, and every kind it ships must be
//! served by the cluster or defined by its own CRDs.

use std::collections::BTreeSet;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::cli::honoured::{Found, flag_values};
use crate::controller::wanted::admission::ceiling::Atom;

/// Reviews in flight at once.
const AT_ONCE: usize = 8;
/// Rights named in one message; the rest are counted.
const NAMED: usize = 6;

/// The writes of `objects` (server-side apply: `create` and `patch` of each resource, in its
/// namespace) that the ServiceAccount `account` (namespace, name) may not make, in words. A
/// kind is resolved by the release's own CRDs, else by what the cluster serves (a kind it
/// does not serve is said by [`unserved_kinds`]).
pub async fn missing_writes(
    client: &kube::Client,
    account: &(String, String),
    objects: &[Value],
) -> Result<Vec<String>, String> {
    let mut wanted: BTreeSet<(Option<String>, Atom)> = BTreeSet::new();
    for object in objects {
        let (Some(api_version), Some(kind)) = (object["apiVersion"].as_str(), object["kind"].as_str()) else {
            continue;
        };
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
        let Some((resource, namespaced)) = resource_of(client, objects, api_version, kind).await else {
            continue;
        };
        let namespace =
            namespaced.then(|| object["metadata"]["namespace"].as_str().unwrap_or_default().to_string());
        for verb in ["create", "patch"] {
            let atom = Atom::Resource {
                verb: verb.into(),
                group: group.into(),
                resource: resource.clone(),
                name: None,
            };
            wanted.insert((namespace.clone(), atom));
        }
    }
    let answers: Vec<Option<String>> = futures::stream::iter(wanted)
        .map(|(namespace, atom)| async move {
            let held = allowed(client, account, namespace.as_deref(), &atom).await?;
            let words = match &namespace {
                Some(ns) => format!("{} in {ns}", atom.describe()),
                None => atom.describe(),
            };
            Ok::<_, String>((!held).then_some(words))
        })
        .buffered(AT_ONCE)
        .try_collect()
        .await?;
    Ok(answers.into_iter().flatten().collect())
}

/// The resource (plural) of `kind` in `api_version` and whether it is namespaced: a built-in
/// kind's, one a CRD of `objects` defines, or what the cluster serves.
async fn resource_of(
    client: &kube::Client,
    objects: &[Value],
    api_version: &str,
    kind: &str,
) -> Option<(String, bool)> {
    if let Some((resource, namespaced)) = butler_runtime::apply::builtin(api_version, kind) {
        return Some((resource.plural, namespaced));
    }
    let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
    let defined = objects.iter().find(|o| {
        o["kind"] == "CustomResourceDefinition"
            && o["spec"]["group"] == group
            && o["spec"]["names"]["kind"] == kind
    });
    if let Some(crd) = defined {
        return Some((
            crd["spec"]["names"]["plural"].as_str()?.to_string(),
            crd["spec"]["scope"] != "Cluster",
        ));
    }
    let served = client.list_api_group_resources(api_version).await.ok()?;
    served
        .resources
        .into_iter()
        .find(|r| r.kind == kind && !r.name.contains('/'))
        .map(|r| (r.name, r.namespaced))
}

/// The lack of rights as one line, naming a few.
pub fn describe_missing(who: &str, account: &(String, String), missing: &[String]) -> Option<String> {
    if missing.is_empty() {
        return None;
    }
    let more = match missing.len().saturating_sub(NAMED) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    Some(format!(
        "{who}: this operator's account {}/{} may not write what its release ships ({}{more}), so the operator could not install it; give the operator the upstream rules (butler-operator-upstream-rbac.yaml of its release, or upstreamRBAC.enabled=true in its chart) and run migrate again",
        account.0,
        account.1,
        missing.iter().take(NAMED).map(String::as_str).collect::<Vec<_>>().join(", ")
    ))
}

/// Why the operator would refuse the release's roles: a rule beyond its role ceiling (the
/// ClusterRole its `--role-ceiling` names, read live; with the kinds of the release's own
/// CRDs), or a power its `--allow-role-power` does not allow. Checked as the operator checks
/// them (`admission::ceiling::check`).
pub async fn refused_roles(
    client: &kube::Client,
    operator: &Found,
    objects: &[Value],
    namespace: &str,
) -> Result<Option<String>, String> {
    let ceiling_name = flag_values(&operator.args, "--role-ceiling").pop().filter(|n| !n.is_empty());
    let policy = crate::controller::wanted::policy::Policy {
        role_ceiling: ceiling_name.clone(),
        role_powers: flag_values(&operator.args, "--allow-role-power"),
        ..Default::default()
    };
    let ceiling: Option<Vec<Value>> = match &ceiling_name {
        Some(name) => {
            let found = Api::<ClusterRole>::all(client.clone()).get_opt(name).await.map_err(|e| {
                format!(
                    "reading the role ceiling ClusterRole {name}: {}",
                    butler_runtime::error::describe(&e)
                )
            })?;
            let Some(role) = found else {
                return Ok(Some(format!(
                    "the operator {} names the role ceiling ClusterRole {name}, which does not exist: it would refuse every release; install it (it comes with the operator's manifest and chart)",
                    operator.name
                )));
            };
            Some(
                role.rules
                    .unwrap_or_default()
                    .iter()
                    .map(|r| serde_json::to_value(r).unwrap_or_default())
                    .collect(),
            )
        }
        None => None,
    };
    let set = crate::controller::wanted::admission::Set::of(objects, namespace);
    Ok(crate::controller::wanted::admission::ceiling::check(&set, &policy, ceiling.as_deref())
        .err()
        .map(|why| format!("the operator {} would refuse it: {why}", operator.name)))
}

/// Whether the ServiceAccount may do `atom` (in `namespace`, or cluster-wide), by a
/// SubjectAccessReview: the API server's own answer, every binding and authorizer counted.
async fn allowed(
    client: &kube::Client,
    account: &(String, String),
    namespace: Option<&str>,
    atom: &Atom,
) -> Result<bool, String> {
    let (ns, name) = account;
    let mut spec = SubjectAccessReviewSpec {
        user: Some(format!("system:serviceaccount:{ns}:{name}")),
        groups: Some(vec![
            "system:serviceaccounts".into(),
            format!("system:serviceaccounts:{ns}"),
            "system:authenticated".into(),
        ]),
        ..Default::default()
    };
    match atom {
        Atom::Url { verb, url } => {
            spec.non_resource_attributes =
                Some(NonResourceAttributes { verb: Some(verb.clone()), path: Some(url.clone()) });
        }
        Atom::Resource { verb, group, resource, name } => {
            let (resource, subresource) = match resource.split_once('/') {
                Some((r, sub)) => (r.to_string(), Some(sub.to_string())),
                None => (resource.clone(), None),
            };
            spec.resource_attributes = Some(ResourceAttributes {
                verb: Some(verb.clone()),
                group: Some(group.clone()),
                resource: Some(resource),
                subresource,
                name: name.clone(),
                namespace: namespace.map(String::from),
                ..Default::default()
            });
        }
    }
    let review = SubjectAccessReview { spec, ..Default::default() };
    let answer = Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .map_err(|e| {
            format!(
                "asking the API server what {ns}/{name} may do (a SubjectAccessReview): {}; run migrate with rights to create subjectaccessreviews",
                butler_runtime::error::describe(&e)
            )
        })?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

/// The kinds of `objects` that neither the cluster serves nor the release's own CRDs define, as
/// `Kind (group/version)`.
pub async fn unserved_kinds(client: &kube::Client, objects: &[Value]) -> Result<Vec<String>, String> {
    let defined: BTreeSet<(String, String)> = objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .map(|crd| {
            let group = crd["spec"]["group"].as_str().unwrap_or_default().to_string();
            (group, crd["spec"]["names"]["kind"].as_str().unwrap_or_default().to_string())
        })
        .collect();
    let mut kinds: BTreeSet<(String, String)> = BTreeSet::new();
    for object in objects {
        let (Some(api_version), Some(kind)) = (object["apiVersion"].as_str(), object["kind"].as_str()) else {
            continue;
        };
        let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
        if !defined.contains(&(group.to_string(), kind.to_string())) {
            kinds.insert((api_version.to_string(), kind.to_string()));
        }
    }
    let mut unserved = Vec::new();
    let versions: BTreeSet<&String> = kinds.iter().map(|(v, _)| v).collect();
    for version in versions {
        // The core group is served under /api, the others under /apis.
        let listed = match version.contains('/') {
            true => client.list_api_group_resources(version).await,
            false => client.list_core_api_resources(version).await,
        };
        let served = match listed {
            Ok(list) => list.resources.into_iter().map(|r| r.kind).collect::<BTreeSet<_>>(),
            Err(kube::Error::Api(e)) if e.code == 404 => BTreeSet::new(),
            Err(e) => {
                return Err(format!(
                    "reading which kinds {version} serves: {}",
                    butler_runtime::error::describe(&e)
                ));
            }
        };
        for (_, kind) in kinds.iter().filter(|(v, _)| v == version) {
            if !served.contains(kind) {
                unserved.push(format!("{kind} ({version})"));
            }
        }
    }
    Ok(unserved)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lack_of_rights_is_said_in_one_line_naming_a_few() {
        let account = ("capi-system".to_string(), "butler-operator".to_string());
        assert_eq!(describe_missing("x", &account, &[]), None);
        let missing: Vec<String> =
            (0..8).map(|i| format!("create on thing{i}.cert-manager.io in capi-system")).collect();
        let line =
            describe_missing("CoreProvider capi-system/cluster-api v1.10.9", &account, &missing).unwrap();
        assert!(line.starts_with("CoreProvider capi-system/cluster-api v1.10.9: this operator's account capi-system/butler-operator may not write what its release ships (create on thing0.cert-manager.io in capi-system"), "{line}");
        assert!(line.contains("thing5.cert-manager.io in capi-system and 2 more)"), "{line}");
    }
}
