use super::*;
use serde_json::json;

const NS: &str = "p-system";

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
spec:
  group: p.test.io
  names: {kind: Gadget, plural: gadgets}
  conversion:
    strategy: Webhook
    webhook: {clientConfig: {service: {name: p-webhook, namespace: p-system}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: p-validating}
webhooks:
- name: validation.gadget.p.test.io
  clientConfig: {service: {name: p-webhook, namespace: p-system}}
  rules: [{apiGroups: [p.test.io], apiVersions: [v1], operations: [CREATE], resources: [gadgets]}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p-confinement}
spec:
  matchConditions:
  - {name: the-manager, expression: \"request.userInfo.username == 'system:serviceaccount:p-system:manager'\"}
  validations: [{expression: 'true'}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: p-confinement}
spec: {policyName: p-confinement, validationActions: [Deny]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: p-manager, namespace: p-system}
spec:
  template:
    spec:
      serviceAccountName: manager
      containers: [{name: manager, image: p:v1, securityContext: {capabilities: {drop: [ALL]}}}]
---
apiVersion: p.test.io/v1
kind: Gadget
metadata: {name: default-gadget, namespace: p-system}
",
    )
    .unwrap()
}

fn with(extra: Value) -> Vec<Value> {
    let mut objects = own();
    objects.push(extra);
    objects
}

fn refused(objects: &[Value]) -> String {
    admit(objects, NS, &Policy::default(), None).unwrap_err()
}

#[test]
fn a_providers_own_objects_pass() {
    assert_eq!(admit(&own(), NS, &Policy::default(), None), Ok(()));
}

#[test]
fn kinds_no_rule_names_are_refused_and_the_flag_that_allows_them_is_named() {
    let limit = json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l", "namespace": NS}});
    assert_eq!(
        refused(&with(limit.clone())),
        "LimitRange p-system/l is refused: LimitRange is no kind a provider's components may create (the kinds Cluster API's providers ship, and the kinds of the provider's own CRDs); start the operator with --allow-kind LimitRange if the provider needs it"
    );
    let allowed = Policy { kinds: vec!["LimitRange".into()], ..Default::default() };
    assert_eq!(admit(&with(limit), NS, &allowed, None), Ok(()));
    for (api_version, kind) in [
        ("v1", "PodTemplate"),
        ("v1", "ReplicationController"),
        ("v1", "Pod"),
        ("other.test.io/v1", "Gadget"),
    ] {
        let object =
            json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": NS}});
        assert!(refused(&with(object)).contains("is no kind"), "{kind}");
    }
}

#[test]
fn bindings_to_roles_or_subjects_outside_the_components_are_refused() {
    let binding = |role: &str, subject: Value| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "evil"},
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
            "its subject Group \"system:authenticated\" is not a ServiceAccount of the provider's components",
        ),
        (binding("p-manager", json!({"kind": "User", "name": "mallory"})), "its subject User \"mallory\""),
        (
            binding(
                "p-manager",
                json!({"kind": "ServiceAccount", "name": "default", "namespace": "kube-system"}),
            ),
            "its subject ServiceAccount \"default\" is not a ServiceAccount",
        ),
        (
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "x", "namespace": "kube-system"},
                "roleRef": {"kind": "Role", "name": "leader"}, "subjects": [{"kind": "ServiceAccount", "name": "manager"}]}),
            "RoleBinding kube-system/x is refused: it binds the Role \"leader\"",
        ),
    ];
    for (object, wanted) in cases {
        let said = refused(&with(object));
        assert!(said.contains(wanted), "{said}");
    }
    let allowed = Policy { cluster_roles: vec!["system:auth-delegator".into()], ..Default::default() };
    let delegator = binding(
        "system:auth-delegator",
        json!({"kind": "ServiceAccount", "name": "manager", "namespace": NS}),
    );
    assert_eq!(admit(&with(delegator.clone()), NS, &allowed, None), Ok(()));
    assert!(admit(&with(delegator), NS, &Policy::default(), None).is_err());
}

#[test]
fn a_decoy_kind_of_another_group_is_no_role_and_no_account() {
    // The binding "names a role the release defines" only through a ClusterRole of another group.
    let mut objects = own();
    objects.push(json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "clusterroles.decoy.test.io"},
        "spec": {"group": "decoy.test.io", "names": {"kind": "ClusterRole", "plural": "clusterroles"}}}));
    objects.push(json!({"apiVersion": "decoy.test.io/v1", "kind": "ClusterRole", "metadata": {"name": "cluster-admin"}}));
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": "takeover"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": "manager", "namespace": NS}]}));
    assert!(refused(&objects).contains("it binds the ClusterRole \"cluster-admin\""));
}

#[test]
fn roles_never_aggregate_into_kubernetes_own_roles() {
    let to_admin = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "sneaky",
        "labels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}, "rules": []});
    assert!(refused(&with(to_admin)).starts_with(
        "ClusterRole sneaky is refused: its label rbac.authorization.k8s.io/aggregate-to-admin"
    ));
    for selector in
        [json!({}), json!({"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}})]
    {
        let gathering = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "all"},
            "aggregationRule": {"clusterRoleSelectors": [selector]}});
        assert!(refused(&with(gathering)).contains("aggregationRule"));
    }
}

#[test]
fn webhooks_intercept_the_providers_own_kinds_and_call_its_services() {
    let hook = |client: Value, group: &str, resources: &[&str]| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration", "metadata": {"name": "m"},
            "webhooks": [{"name": "w.p.test.io", "clientConfig": client, "rules": [{"apiGroups": [group], "resources": resources}]}]})
    };
    let service = json!({"service": {"name": "p-webhook", "namespace": NS}});
    assert_eq!(
        refused(&with(hook(service.clone(), "", &["pods"]))),
        "MutatingWebhookConfiguration m is refused: its webhook \"w.p.test.io\" intercepts the API group \"\" (the core group), outside the groups of the provider's own CRDs; allow it with --allow-webhook-group if the provider needs it"
    );
    assert!(
        refused(&with(hook(service.clone(), "p.test.io", &["*"])))
            .contains("which is no kind of the provider's own CRDs")
    );
    let elsewhere = json!({"service": {"name": "x", "namespace": "kube-system"}});
    assert!(
        refused(&with(hook(elsewhere, "p.test.io", &["gadgets"])))
            .contains("outside the provider's namespace p-system")
    );
    let url = json!({"url": "https://hooks.example.com/mutate"});
    assert!(
        refused(&with(hook(url.clone(), "p.test.io", &["gadgets"])))
            .contains("calls the URL \"https://hooks.example.com/mutate\"")
    );
    let allowed = Policy { webhook_urls: vec!["https://hooks.example.com/".into()], ..Default::default() };
    assert_eq!(admit(&with(hook(url, "p.test.io", &["gadgets"])), NS, &allowed, None), Ok(()));
}

#[test]
fn crds_stay_out_of_kubernetes_and_the_operators_groups_and_convert_through_the_providers_service() {
    let crd = |group: &str, conversion: Value| {
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("things.{group}")},
            "spec": {"group": group, "names": {"kind": "Thing", "plural": "things"}, "conversion": conversion}})
    };
    for group in ["coordination.k8s.io", "k8s.io", "x.kubernetes.io", "operator.butlerlabs.dev"] {
        assert!(refused(&with(crd(group, Value::Null))).contains(&format!("its group {group}")), "{group}");
    }
    let by_url = json!({"strategy": "Webhook", "webhook": {"clientConfig": {"url": "https://evil.example.com/convert"}}});
    let said = refused(&with(crd("p.test.io", by_url)));
    assert!(
        said.contains("its conversion webhook calls the URL \"https://evil.example.com/convert\""),
        "{said}"
    );
    assert!(said.contains("--allow-webhook-url"), "{said}");
}

#[test]
fn admission_policies_constrain_the_providers_own_requests_without_parameters() {
    let policy = |condition: &str, param: Value| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "deny-all"},
            "spec": {"paramKind": param, "matchConditions": [{"name": "c", "expression": condition}],
                "matchConstraints": {"resourceRules": [{"apiGroups": ["*"], "resources": ["*"]}]}}})
    };
    let everyone = refused(&with(policy("true", Value::Null)));
    assert!(everyone.contains("would constrain requests of anyone"), "{everyone}");
    let another = "request.userInfo.username == 'system:serviceaccount:kube-system:replicaset-controller'";
    assert!(refused(&with(policy(another, Value::Null))).contains("would constrain requests of anyone"));
    let mine = "request.userInfo.username=='system:serviceaccount:p-system:manager'";
    assert_eq!(admit(&with(policy(mine, Value::Null)), NS, &Policy::default(), None), Ok(()));
    let secrets = policy(mine, json!({"apiVersion": "v1", "kind": "Secret"}));
    assert!(refused(&with(secrets)).contains("spec.paramKind"));
    let binding = json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "b"}, "spec": {"policyName": "someone-elses", "validationActions": ["Deny"]}});
    assert!(refused(&with(binding)).contains("binds the ValidatingAdmissionPolicy \"someone-elses\""));
}

#[test]
fn services_claim_no_external_ips_and_secrets_no_other_accounts_token() {
    let service = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": NS},
        "spec": {"externalIPs": ["10.0.0.1"], "ports": [{"port": 443}]}});
    assert!(refused(&with(service)).contains("spec.externalIPs"));
    let token = |account: &str| {
        json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/service-account-token",
            "metadata": {"name": "t", "namespace": NS, "annotations": {"kubernetes.io/service-account.name": account}}})
    };
    assert!(refused(&with(token("default"))).contains("a token of the ServiceAccount p-system/default"));
    assert_eq!(admit(&with(token("manager")), NS, &Policy::default(), None), Ok(()));
}

#[test]
fn a_release_of_many_accounts_and_subjects_is_checked_in_one_pass() {
    // 20,000 ServiceAccounts bound by one binding: each subject once looked through every
    // object (hundreds of millions of comparisons).
    let count = 20_000;
    let mut objects: Vec<Value> = (0..count)
        .map(|i| json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": format!("sa-{i}"), "namespace": NS}}))
        .collect();
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}}));
    let subjects: Vec<Value> = (0..count)
        .map(|i| json!({"kind": "ServiceAccount", "name": format!("sa-{i}"), "namespace": NS}))
        .collect();
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": "b"},
        "roleRef": {"kind": "ClusterRole", "name": "r"}, "subjects": subjects}));
    assert_eq!(admit(&objects, NS, &Policy::default(), None), Ok(()));
    assert_eq!(check_accounts(&objects), Ok(()));
}

/// An object the base set lets a release add, made unique by `i`.
fn allowed(kind: usize, i: usize) -> Value {
    let name = format!("a{i}");
    match kind % 4 {
        0 => json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NS}}),
        1 => json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"ports": [{"port": 443}]}}),
        2 => {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"spec": {"serviceAccountName": "manager", "containers": [{"name": "c", "image": "i"}]}}}})
        }
        _ => {
            json!({"apiVersion": "p.test.io/v1", "kind": "Gadget", "metadata": {"name": name, "namespace": NS}})
        }
    }
}

/// An object no rule allows, made unique by `i`.
fn forbidden(kind: usize, i: usize) -> Value {
    let name = format!("f{i}");
    match kind % 9 {
        0 => json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}}),
        8 => {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]})
        }
        1 => json!({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": NS}}),
        2 => {
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
            "subjects": [{"kind": "ServiceAccount", "name": "manager", "namespace": NS}]})
        }
        3 => json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": NS},
            "spec": {"externalIPs": ["10.0.0.1"]}}),
        4 => {
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"template": {"spec": {"hostPID": true, "containers": [{"name": "c"}]}}}})
        }
        5 => json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name}, "spec": {"validations": [{"expression": "false"}]}}),
        6 => json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{name}s.coordination.k8s.io")},
            "spec": {"group": "coordination.k8s.io", "names": {"kind": name, "plural": format!("{name}s")}}}),
        _ => {
            json!({"apiVersion": "decoy.test.io/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS}})
        }
    }
}

#[test]
fn a_role_granting_a_power_is_refused_unless_the_operator_allows_that_power() {
    let mut objects = own();
    objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "wide"},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}));
    let refused = admit(&objects, NS, &Policy::default(), None).unwrap_err();
    assert!(refused.starts_with("ClusterRole wide is refused: its rule"), "{refused}");
    assert!(
        refused.ends_with("start the operator with --allow-role-power escalate if the provider needs it"),
        "{refused}"
    );
    // Each power is allowed by its own name only.
    let some = Policy { role_powers: vec!["escalate".into(), "bind".into()], ..Policy::default() };
    assert!(admit(&objects, NS, &some, None).unwrap_err().contains("--allow-role-power impersonate"));
    let all = Policy {
        role_powers: super::ceiling::Power::ALL.iter().map(|p| p.flag().to_string()).collect(),
        ..Policy::default()
    };
    assert_eq!(admit(&objects, NS, &all, None), Ok(()));
}

proptest::proptest! {
    /// Random releases mixing allowed and forbidden objects, in random order: admitted exactly
    /// when none is forbidden, wherever in the order the forbidden one stands.
    #[test]
    fn a_release_is_admitted_only_when_no_object_of_it_is_forbidden(
        picks in proptest::collection::vec((proptest::bool::weighted(0.2), 0usize..9), 0..12),
        order in proptest::collection::vec(0usize..1000, 24),
    ) {
        let mut objects = own();
        let mut any_forbidden = false;
        for (i, (bad, kind)) in picks.iter().enumerate() {
            any_forbidden |= *bad;
            objects.push(if *bad { forbidden(*kind, i) } else { allowed(*kind, i) });
        }
        // A random order: every object moved to a random place.
        for (i, at) in order.iter().enumerate().take(objects.len()) {
            let at = at % objects.len();
            objects.swap(i, at);
        }
        let verdict = admit(&objects, NS, &Policy::default(), None);
        proptest::prop_assert_eq!(verdict.is_err(), any_forbidden, "{:?}", verdict);
    }
}
