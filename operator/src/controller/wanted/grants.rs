//! The render-time checks: what a provider's components may grant, checked on the rendered
//! objects before anything is written. The operator may `escalate` and `bind` every role (it
//! installs providers' RBAC), so without this a release (or a ConfigMap repository in a
//! tenant's namespace) could bind `cluster-admin` to every authenticated user.
//!
//! - A RoleBinding or ClusterRoleBinding names a Role or ClusterRole that the same components
//!   define, or a ClusterRole the operator's configuration allows (`--allow-cluster-role`).
//! - Its subjects are ServiceAccounts that the same components define: never a User or Group.
//! - A Role or ClusterRole never aggregates into Kubernetes' own roles (labels
//!   `rbac.authorization.k8s.io/aggregate-to-*`), and an aggregated ClusterRole selects by
//!   labels of its own (not everything, not the built-in roles' pieces).
//! - A pod template of the release runs as a ServiceAccount of the same components (or the
//!   namespace's `default`), never another's: a release's pods get no one else's rights
//!   ([`check_pods`], before the provider object's customisation).
//! - A webhook configuration intercepts only the kinds of the CRDs the same components define
//!   (named, by group and plural: a group may hold another project's kinds too, and a release
//!   may bring a decoy CRD into it), or groups the operator's configuration allows
//!   (`--allow-webhook-group`); it calls a Service, never a URL the configuration does not
//!   allow (`--allow-webhook-url`).
//! - A CRD that exists already and that no provider of this operator made is taken over only in
//!   Cluster API's and Butler's groups, or groups the configuration allows
//!   (`--adopt-crd-group`): a release must not rewrite another project's API (cert-manager's,
//!   say) for the whole cluster.

use std::collections::BTreeSet;

use serde_json::Value;

use super::policy::Policy;

/// Kubernetes' prefix of the labels that aggregate into its own roles (admin, edit, view).
const BUILT_IN_AGGREGATION: &str = "rbac.authorization.k8s.io/aggregate-to-";

fn text(value: &Value) -> &str {
    value.as_str().unwrap_or_default()
}

fn describe(object: &Value) -> String {
    let meta = &object["metadata"];
    match meta["namespace"].as_str().filter(|n| !n.is_empty()) {
        Some(ns) => format!("{} {ns}/{}", text(&object["kind"]), text(&meta["name"])),
        None => format!("{} {}", text(&object["kind"]), text(&meta["name"])),
    }
}

/// The first object of `objects` that breaks the policy, as a message that names the object
/// and the rule; `Ok` when every object keeps to it.
pub fn check(objects: &[Value], policy: &Policy) -> Result<(), String> {
    // Indexed once: a release of many bindings and subjects is checked in linear time.
    let placed: std::collections::HashSet<(&str, &str, &str)> = objects
        .iter()
        .map(|o| (text(&o["kind"]), text(&o["metadata"]["namespace"]), text(&o["metadata"]["name"])))
        .collect();
    let named: std::collections::HashSet<(&str, &str)> =
        placed.iter().map(|(kind, _, name)| (*kind, *name)).collect();
    let defined = |kind: &str, namespace: Option<&str>, name: &str| match namespace {
        Some(ns) => placed.contains(&(kind, ns, name)),
        None => named.contains(&(kind, name)),
    };
    let crds = objects.iter().filter(|o| o["kind"] == "CustomResourceDefinition");
    let own: BTreeSet<(&str, &str)> =
        crds.clone().map(|o| (text(&o["spec"]["group"]), text(&o["spec"]["names"]["plural"]))).collect();
    let groups: BTreeSet<&str> = crds.map(|o| text(&o["spec"]["group"])).collect();
    let allowed_group = |g: &str| policy.webhook_groups.iter().any(|a| a == g);
    let allowed_url = |url: &str| {
        policy.webhook_urls.iter().any(|a| a == url || (a.ends_with('/') && url.starts_with(a.as_str())))
    };
    for object in objects {
        let refuse = |rule: String| Err(format!("{} is refused: {rule}", describe(object)));
        match text(&object["kind"]) {
            kind @ ("RoleBinding" | "ClusterRoleBinding") => {
                let namespace = (kind == "RoleBinding").then(|| text(&object["metadata"]["namespace"]));
                let role = text(&object["roleRef"]["name"]);
                let own_role = match text(&object["roleRef"]["kind"]) {
                    "ClusterRole" => {
                        defined("ClusterRole", None, role) || policy.cluster_roles.iter().any(|r| r == role)
                    }
                    "Role" => namespace.is_some() && defined("Role", namespace, role),
                    _ => false,
                };
                if !own_role {
                    return refuse(format!(
                        "it binds the {} {role:?}, which the provider's components do not define; a provider's bindings name its own roles (or a ClusterRole the operator allows with --allow-cluster-role)",
                        text(&object["roleRef"]["kind"])
                    ));
                }
                for subject in object["subjects"].as_array().into_iter().flatten() {
                    let name = text(&subject["name"]);
                    let subject_namespace =
                        subject["namespace"].as_str().filter(|n| !n.is_empty()).or(namespace);
                    let own = subject["kind"] == "ServiceAccount"
                        && subject_namespace.is_some_and(|ns| defined("ServiceAccount", Some(ns), name));
                    if !own {
                        return refuse(format!(
                            "its subject {} {name:?} is not a ServiceAccount of the provider's components; a provider binds roles to its own ServiceAccounts only",
                            text(&subject["kind"])
                        ));
                    }
                }
            }
            "Role" | "ClusterRole" => {
                let labels = object["metadata"]["labels"].as_object();
                if let Some(label) =
                    labels.into_iter().flatten().map(|(k, _)| k).find(|k| k.starts_with(BUILT_IN_AGGREGATION))
                {
                    return refuse(format!(
                        "its label {label} would add its rules to Kubernetes' own roles; a provider's roles aggregate into its own roles only"
                    ));
                }
                for selector in
                    object["aggregationRule"]["clusterRoleSelectors"].as_array().into_iter().flatten()
                {
                    let keys: Vec<&str> = selector["matchLabels"]
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, _)| k.as_str())
                        .chain(
                            selector["matchExpressions"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .map(|e| text(&e["key"])),
                        )
                        .collect();
                    if keys.is_empty() || keys.iter().any(|k| k.starts_with("rbac.authorization.k8s.io/")) {
                        return refuse(
                            "its aggregationRule selects every ClusterRole or Kubernetes' own roles; select by labels of the provider's own".into(),
                        );
                    }
                }
            }
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration" => {
                for webhook in object["webhooks"].as_array().into_iter().flatten() {
                    let name = text(&webhook["name"]);
                    if let Some(url) = webhook["clientConfig"]["url"].as_str()
                        && !allowed_url(url)
                    {
                        return refuse(format!(
                            "its webhook {name:?} calls the URL {url:?} instead of a Service of the provider; allow it with --allow-webhook-url {url} if the provider needs it"
                        ));
                    }
                    for rule in webhook["rules"].as_array().into_iter().flatten() {
                        for group in rule["apiGroups"].as_array().into_iter().flatten().map(text) {
                            if allowed_group(group) {
                                continue;
                            }
                            if !groups.contains(group) {
                                let shown = match group {
                                    "" => "\"\" (the core group)".to_string(),
                                    g => format!("{g:?}"),
                                };
                                return refuse(format!(
                                    "its webhook {name:?} intercepts the API group {shown}, outside the groups of the provider's own CRDs; allow it with --allow-webhook-group if the provider needs it"
                                ));
                            }
                            let resources = rule["resources"].as_array().into_iter().flatten().map(text);
                            for resource in resources {
                                let plural = resource.split('/').next().unwrap_or_default();
                                if !own.contains(&(group, plural)) {
                                    return refuse(format!(
                                        "its webhook {name:?} intercepts {resource:?} in the API group {group:?}, which is no kind of the provider's own CRDs (a group may hold other projects' kinds); name the provider's own resources, or allow the group with --allow-webhook-group"
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The kinds whose objects run pods: API group, kind, and where their pod spec is.
const POD_HOLDERS: &[(&str, &str, &str)] = &[
    ("apps", "Deployment", "/spec/template/spec"),
    ("apps", "DaemonSet", "/spec/template/spec"),
    ("apps", "StatefulSet", "/spec/template/spec"),
    ("apps", "ReplicaSet", "/spec/template/spec"),
    ("batch", "Job", "/spec/template/spec"),
    ("", "Pod", "/spec"),
];

/// Whether the pods of a release's own objects (as rendered, before the provider object's
/// customisation, which its administrator writes) run as ServiceAccounts of the release, or
/// the namespace's `default`: a release's pods get no one else's rights.
pub fn check_pods(objects: &[Value]) -> Result<(), String> {
    let accounts: BTreeSet<(&str, &str)> = objects
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount")
        .map(|o| (text(&o["metadata"]["namespace"]), text(&o["metadata"]["name"])))
        .collect();
    for object in objects {
        let r = butler_runtime::objects::ObjectRef::of(object);
        let holder = POD_HOLDERS.iter().find(|(group, kind, _)| *group == r.group() && *kind == r.kind);
        let Some(pod) = holder.and_then(|(_, _, path)| object.pointer(path)) else { continue };
        let account =
            pod["serviceAccountName"].as_str().or(pod["serviceAccount"].as_str()).unwrap_or_default();
        let namespace = text(&object["metadata"]["namespace"]);
        let own = accounts.contains(&(namespace, account));
        if !account.is_empty() && account != "default" && !own {
            return Err(format!(
                "{} is refused: its pods would run as the ServiceAccount {namespace}/{account}, which the provider's components do not define; a provider's pods run as its own ServiceAccounts",
                describe(object)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn own() -> Vec<Value> {
        serde_saphyr::from_multiple(
            "apiVersion: v1
kind: ServiceAccount
metadata: {name: manager, namespace: p-system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: p-manager, labels: {cluster.x-k8s.io/aggregate-to-manager: 'true'}}
rules: [{apiGroups: [p.test.io], resources: ['*'], verbs: ['*']}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: p-manager}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: p-manager}
subjects: [{kind: ServiceAccount, name: manager, namespace: p-system}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leader, namespace: p-system}
rules: [{apiGroups: [coordination.k8s.io], resources: [leases], verbs: [get]}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leader, namespace: p-system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader}
subjects: [{kind: ServiceAccount, name: manager}]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.p.test.io}
spec: {group: p.test.io, names: {plural: gadgets}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: p-validating}
webhooks:
- name: validation.gadget.p.test.io
  rules: [{apiGroups: [p.test.io], apiVersions: [v1], operations: [CREATE], resources: [gadgets]}]
",
        )
        .unwrap()
    }

    fn with(extra: Value) -> Vec<Value> {
        let mut objects = own();
        objects.push(extra);
        objects
    }

    #[test]
    fn a_providers_own_rbac_crds_and_webhooks_pass() {
        assert_eq!(check(&own(), &Policy::default()), Ok(()));
    }

    #[test]
    fn bindings_to_roles_or_subjects_outside_the_components_are_refused() {
        let binding = |role: &str, subject: Value| {
            json!({"kind": "ClusterRoleBinding", "metadata": {"name": "evil"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
                "subjects": [subject]})
        };
        let cases = [
            (
                binding("cluster-admin", json!({"kind": "Group", "name": "system:authenticated"})),
                "ClusterRoleBinding evil is refused: it binds the ClusterRole \"cluster-admin\", which the provider's components do not define",
            ),
            (
                binding("p-manager", json!({"kind": "Group", "name": "system:authenticated"})),
                "ClusterRoleBinding evil is refused: its subject Group \"system:authenticated\" is not a ServiceAccount of the provider's components",
            ),
            (
                binding("p-manager", json!({"kind": "User", "name": "mallory"})),
                "its subject User \"mallory\" is not a ServiceAccount",
            ),
            (
                binding(
                    "p-manager",
                    json!({"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"}),
                ),
                "its subject ServiceAccount \"default\" is not a ServiceAccount",
            ),
            (
                json!({"kind": "RoleBinding", "metadata": {"name": "x", "namespace": "kube-system"},
                    "roleRef": {"kind": "Role", "name": "leader"}, "subjects": [{"kind": "ServiceAccount", "name": "manager"}]}),
                "RoleBinding kube-system/x is refused: it binds the Role \"leader\"",
            ),
        ];
        for (object, wanted) in cases {
            let refused = check(&with(object), &Policy::default()).unwrap_err();
            assert!(refused.contains(wanted), "{refused}");
        }
        let allowed = Policy { cluster_roles: vec!["system:auth-delegator".into()], ..Default::default() };
        let delegator = binding(
            "system:auth-delegator",
            json!({"kind": "ServiceAccount", "name": "manager", "namespace": "p-system"}),
        );
        assert_eq!(check(&with(delegator.clone()), &allowed), Ok(()));
        assert!(check(&with(delegator), &Policy::default()).is_err());
    }

    #[test]
    fn roles_never_aggregate_into_kubernetes_own_roles() {
        let to_admin = json!({"kind": "ClusterRole", "metadata": {"name": "sneaky",
            "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}, "rules": []});
        let refused = check(&with(to_admin), &Policy::default()).unwrap_err();
        assert!(
            refused.starts_with(
                "ClusterRole sneaky is refused: its label rbac.authorization.k8s.io/aggregate-to-admin"
            ),
            "{refused}"
        );
        for selector in
            [json!({}), json!({"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}})]
        {
            let gathering = json!({"kind": "ClusterRole", "metadata": {"name": "all"},
                "aggregationRule": {"clusterRoleSelectors": [selector]}});
            assert!(check(&with(gathering), &Policy::default()).unwrap_err().contains("aggregationRule"));
        }
        let own_aggregation = json!({"kind": "ClusterRole", "metadata": {"name": "mine"},
            "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"p.test.io/aggregate": "true"}}]}});
        assert_eq!(check(&with(own_aggregation), &Policy::default()), Ok(()));
    }

    #[test]
    fn webhooks_intercept_the_providers_own_groups_only() {
        let hook = |group: &str| {
            json!({"kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"},
                "webhooks": [{"name": "pods.p.test.io", "rules": [{"apiGroups": [group], "resources": ["*"]}]}]})
        };
        let refused = check(&with(hook("")), &Policy::default()).unwrap_err();
        assert_eq!(
            refused,
            "MutatingWebhookConfiguration m is refused: its webhook \"pods.p.test.io\" intercepts the API group \"\" (the core group), outside the groups of the provider's own CRDs; allow it with --allow-webhook-group if the provider needs it"
        );
        assert!(check(&with(hook("*")), &Policy::default()).unwrap_err().contains("\"*\""));
        let allowed = Policy { webhook_groups: vec!["apps".into()], ..Default::default() };
        assert_eq!(check(&with(hook("apps")), &allowed), Ok(()));
    }

    #[test]
    fn a_release_of_many_accounts_and_subjects_is_checked_in_one_pass() {
        // 20,000 ServiceAccounts bound by one binding: each subject once looked through every
        // object (hundreds of millions of comparisons).
        let count = 20_000;
        let mut objects: Vec<Value> = (0..count)
            .map(|i| json!({"kind": "ServiceAccount", "metadata": {"name": format!("sa-{i}"), "namespace": "p-system"}}))
            .collect();
        objects.push(json!({"kind": "ClusterRole", "metadata": {"name": "r"}}));
        let subjects: Vec<Value> = (0..count)
            .map(|i| json!({"kind": "ServiceAccount", "name": format!("sa-{i}"), "namespace": "p-system"}))
            .collect();
        objects.push(json!({"kind": "ClusterRoleBinding", "metadata": {"name": "b"},
            "roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": subjects}));
        assert_eq!(check(&objects, &Policy::default()), Ok(()));
        assert_eq!(check_pods(&objects), Ok(()));
    }

    #[test]
    fn pods_run_as_the_providers_own_service_accounts_only() {
        let deployment = |namespace: &str, account: &str| {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": namespace},
                "spec": {"template": {"spec": {"serviceAccountName": account}}}})
        };
        assert_eq!(check_pods(&with(deployment("p-system", "manager"))), Ok(()));
        assert_eq!(check_pods(&with(deployment("p-system", "default"))), Ok(()));
        let refused = check_pods(&with(deployment("p-system", "generic-garbage-collector"))).unwrap_err();
        assert!(
            refused.contains("would run as the ServiceAccount p-system/generic-garbage-collector"),
            "{refused}"
        );
        assert!(check_pods(&with(deployment("kube-system", "manager"))).is_err(), "another namespace's");
        let decoy = json!({"apiVersion": "decoy.test.io/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"serviceAccountName": "anyone"}}}});
        assert_eq!(check_pods(&with(decoy)), Ok(()), "a decoy kind runs no pods");
    }

    #[test]
    fn webhooks_intercept_the_providers_own_kinds_and_call_its_services() {
        let crd = |group: &str, plural: &str| {
            json!({"kind": "CustomResourceDefinition", "metadata": {"name": format!("{plural}.{group}")},
                "spec": {"group": group, "names": {"plural": plural}}})
        };
        let hook = |client: Value, group: &str, resources: &[&str]| {
            json!({"kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"},
                "webhooks": [{"name": "w.p.test.io", "clientConfig": client,
                    "rules": [{"apiGroups": [group], "resources": resources}]}]})
        };
        let service = json!({"service": {"name": "p-webhook", "namespace": "p-system"}});
        // A decoy CRD in another project's group does not open that group's kinds.
        let decoy =
            vec![crd("argoproj.io", "decoys"), hook(service.clone(), "argoproj.io", &["applications"])];
        let refused = check(&decoy, &Policy::default()).unwrap_err();
        assert!(refused.contains("intercepts \"applications\" in the API group \"argoproj.io\", which is no kind of the provider's own CRDs"), "{refused}");
        let every = vec![crd("argoproj.io", "decoys"), hook(service.clone(), "argoproj.io", &["*"])];
        assert!(
            check(&every, &Policy::default()).is_err(),
            "every kind of a group is more than the provider's"
        );
        let own =
            vec![crd("p.test.io", "gadgets"), hook(service, "p.test.io", &["gadgets", "gadgets/status"])];
        assert_eq!(check(&own, &Policy::default()), Ok(()));
        // A URL: only one the configuration allows.
        let url = json!({"url": "https://hooks.example.com/mutate"});
        let called = vec![crd("p.test.io", "gadgets"), hook(url, "p.test.io", &["gadgets"])];
        let refused = check(&called, &Policy::default()).unwrap_err();
        assert!(
            refused.contains("calls the URL \"https://hooks.example.com/mutate\" instead of a Service"),
            "{refused}"
        );
        let allowed =
            Policy { webhook_urls: vec!["https://hooks.example.com/".into()], ..Default::default() };
        assert_eq!(check(&called, &allowed), Ok(()));
    }
}
