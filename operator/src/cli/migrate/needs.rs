//! What a carried-over provider's release needs of the cluster, checked before anything
//! changes (the operator would otherwise fail it only after cluster-api-operator is scaled
//! down): the account of the operator that will honour it must be allowed to write every object
//! of the release (Cluster API's providers ship kinds Butler's do not, cert-manager's Issuers
//! and Certificates among them: the upstream rules grant them), the release's roles must stay
//! within that operator's role ceiling and allowed powers. (That every kind it ships is served
//! or defined by its own CRDs is `Applier::unserved`, the operator's own check.)

use std::collections::BTreeSet;

use butler_runtime::apply::Applier;
use butler_runtime::objects::ObjectRef;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
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
/// kind is resolved as `applier` resolves it (its discovery, asked once a group version), else
/// by the release's own CRDs; one the cluster does not serve is said by `Applier::unserved`.
pub async fn missing_writes(
    client: &kube::Client,
    applier: &Applier,
    account: &(String, String),
    objects: &[Value],
) -> Result<Vec<String>, String> {
    let mut wanted: BTreeSet<(Option<String>, Atom)> = BTreeSet::new();
    for object in objects {
        let r = ObjectRef::of(object);
        let Some((resource, namespaced)) = resource_of(applier, objects, &r).await else { continue };
        let namespace = namespaced.then(|| r.namespace.clone().unwrap_or_default());
        for verb in ["create", "patch"] {
            let atom = Atom::Resource {
                verb: verb.into(),
                group: r.group().into(),
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

/// The resource (plural) of the kind of `r` and whether it is namespaced: what the cluster
/// serves, else what a CRD of `objects` defines (not served before the release is applied).
async fn resource_of(applier: &Applier, objects: &[Value], r: &ObjectRef) -> Option<(String, bool)> {
    if let Ok((resource, namespaced)) = applier.resource(&r.api_version, &r.kind, false).await {
        return Some((resource.plural, namespaced));
    }
    let crd = objects.iter().find(|o| {
        o["kind"] == "CustomResourceDefinition"
            && o["spec"]["group"] == r.group()
            && o["spec"]["names"]["kind"] == r.kind
    })?;
    Some((crd["spec"]["names"]["plural"].as_str()?.to_string(), crd["spec"]["scope"] != "Cluster"))
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
    // Only writes of resources are asked (never URLs): see `missing_writes`.
    if let Atom::Resource { verb, group, resource, name } = atom {
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
