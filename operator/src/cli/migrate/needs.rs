//! What a carried-over provider's release needs of the cluster, checked before anything
//! changes (the operator would otherwise fail it only after cluster-api-operator is scaled
//! down): this operator's account must hold every right the release's Roles and ClusterRoles
//! grant, since Kubernetes refuses a role that grants more than its writer holds (Cluster API's
//! providers need the upstream rules), and every kind it ships must be served by the cluster or
//! defined by its own CRDs (every upstream provider ships cert-manager's Issuer and
//! Certificate).

use std::collections::BTreeSet;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use serde_json::Value;

use crate::controller::wanted::admission::ceiling::{Atom, atoms};

/// Reviews in flight at once.
const AT_ONCE: usize = 8;
/// Rights named in one message; the rest are counted.
const NAMED: usize = 6;

/// The rights of the release's roles in `objects` that the ServiceAccount `account`
/// (namespace, name) lacks, as (where: `ClusterRole x` or `Role ns/x`, right in words).
pub async fn missing_rights(
    client: &kube::Client,
    account: &(String, String),
    objects: &[Value],
) -> Result<Vec<(String, String)>, String> {
    let mut wanted: BTreeSet<(Option<String>, Atom, String)> = BTreeSet::new();
    for role in objects.iter().filter(|o| {
        o["apiVersion"] == "rbac.authorization.k8s.io/v1"
            && matches!(o["kind"].as_str(), Some("Role" | "ClusterRole"))
    }) {
        let namespace = role["metadata"]["namespace"].as_str().map(String::from);
        let name = role["metadata"]["name"].as_str().unwrap_or_default();
        let what = match &namespace {
            Some(ns) => format!("Role {ns}/{name}"),
            None => format!("ClusterRole {name}"),
        };
        for rule in role["rules"].as_array().into_iter().flatten() {
            for atom in atoms(rule) {
                wanted.insert((namespace.clone(), atom, what.clone()));
            }
        }
    }
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    // Who may escalate writes any role (Kubernetes checks nothing more).
    let escalate = Atom::Resource {
        verb: "escalate".into(),
        group: "rbac.authorization.k8s.io".into(),
        resource: "clusterroles".into(),
        name: None,
    };
    if allowed(client, account, None, &escalate).await? {
        return Ok(Vec::new());
    }
    let answers: Vec<Option<(String, String)>> = futures::stream::iter(wanted)
        .map(|(namespace, atom, what)| async move {
            let held = allowed(client, account, namespace.as_deref(), &atom).await?;
            Ok::<_, String>((!held).then(|| (what, atom.describe())))
        })
        .buffered(AT_ONCE)
        .try_collect()
        .await?;
    Ok(answers.into_iter().flatten().collect())
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

/// The lack of rights as one line per role, naming a few.
pub fn describe_missing(who: &str, account: &(String, String), missing: &[(String, String)]) -> Vec<String> {
    let roles: BTreeSet<&str> = missing.iter().map(|(what, _)| what.as_str()).collect();
    roles
        .into_iter()
        .map(|role| {
            let rights: Vec<&str> =
                missing.iter().filter(|(what, _)| what == role).map(|(_, right)| right.as_str()).collect();
            let more = match rights.len().saturating_sub(NAMED) {
                0 => String::new(),
                n => format!(" and {n} more"),
            };
            format!(
                "{who}: its release's {role} grants what this operator's account {}/{} does not hold ({}{more}), so the operator could not write it; give the operator the upstream rules (butler-operator-upstream-rbac.yaml of its release, or upstreamRBAC.enabled=true in its chart) and run migrate again",
                account.0,
                account.1,
                rights.iter().take(NAMED).copied().collect::<Vec<_>>().join(", ")
            )
        })
        .collect()
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
    fn the_lack_of_rights_is_said_per_role_naming_a_few() {
        let account = ("capi-system".to_string(), "butler-operator".to_string());
        let missing: Vec<(String, String)> = (0..8)
            .map(|i| {
                ("ClusterRole capi-manager-role".to_string(), format!("get on thing{i}.cluster.x-k8s.io"))
            })
            .chain([(
                "Role capi-system/capi-leader-election-role".to_string(),
                "create on leases.coordination.k8s.io".to_string(),
            )])
            .collect();
        let lines = describe_missing("CoreProvider capi-system/cluster-api v1.10.9", &account, &missing);
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(lines[0].contains("ClusterRole capi-manager-role grants what this operator's account capi-system/butler-operator does not hold (get on thing0.cluster.x-k8s.io"), "{lines:?}");
        assert!(lines[0].contains("thing5.cluster.x-k8s.io and 2 more)"), "{lines:?}");
        assert!(lines[1].contains("(create on leases.coordination.k8s.io)"), "{lines:?}");
    }
}
