//! The install manifest of the operator (`operator/butler-operator.yaml` of a release): its
//! Namespace, the provider CRDs, a ServiceAccount with the least RBAC that Butler's providers
//! need, and the Deployment.
//!
//! The RBAC follows from what the operator does and from the kinds in Butler's components, so
//! it grows with them and with nothing else: a provider from another repository that brings
//! other kinds needs a rule added to `butler-operator-providers`.

use std::collections::{BTreeMap, BTreeSet};

use butler_repository::{ComponentsOptions, ImageOverrides, embedded_providers, process_components};
use serde_json::{Value, json};

use crate::api::{FIELD_MANAGER, KindNames, ProviderKind};
use butler_runtime::apply::builtin;

/// The namespace the operator runs in.
pub const NAMESPACE: &str = "butler-operator-system";

/// Where the install manifest has the operator honour provider objects.
pub const PROVIDERS_NAMESPACE: &str = "butler-system";
/// The operator's image, without the tag.
pub const IMAGE: &str = "ghcr.io/butlerdotdev/butler-operator";

/// Kind and resource of the kinds of Butler's components that Kubernetes does not build in.
const CERT_MANAGER: &[(&str, &str)] = &[("Issuer", "issuers"), ("Certificate", "certificates")];

/// The group and resource (plural) of a kind, by `apiVersion` and kind: a built-in kind as the
/// applier knows it, or one of cert-manager's.
fn resource_of(api_version: &str, kind: &str) -> Option<(String, String)> {
    if let Some((resource, _)) = builtin(api_version, kind) {
        return Some((resource.group, resource.plural));
    }
    let group = api_version.rsplit_once('/').map_or("", |(g, _)| g);
    let (_, plural) = CERT_MANAGER.iter().find(|(k, _)| group == "cert-manager.io" && *k == kind)?;
    Some((group.to_string(), plural.to_string()))
}

/// Every object of Butler's components, rendered with the defaults of their variables.
fn component_objects() -> Vec<Value> {
    let images = ImageOverrides::default();
    let mut all = Vec::new();
    for provider in embedded_providers() {
        let label = provider.label();
        // Defaults only: a variable without one still renders, as an empty value.
        let any = |_: &str| Some(String::new());
        let options = ComponentsOptions {
            what: &label,
            provider_label: &label,
            target_namespace: Some("default"),
            images: &images,
            variables: &any,
        };
        let objects = process_components(&provider.components(), &options)
            .and_then(|c| c.objects())
            .expect("Butler's components process");
        all.extend(objects);
    }
    all
}

/// The kinds (`apiVersion`, kind) of every object in Butler's components, except Namespaces,
/// which the operator never writes.
pub fn component_kinds() -> BTreeSet<(String, String)> {
    let mut kinds = BTreeSet::new();
    for object in component_objects() {
        let api_version = object["apiVersion"].as_str().unwrap_or_default().to_string();
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        if kind != "Namespace" {
            kinds.insert((api_version, kind));
        }
    }
    kinds
}

/// The rule that lets the operator write the stored objects of the CRDs of Butler's components
/// again after a release moved their storage version (list them, and an empty patch each).
fn storage_migration_rule() -> Value {
    let mut groups = BTreeSet::new();
    let mut plurals = BTreeSet::new();
    for crd in component_objects().iter().filter(|o| o["kind"] == "CustomResourceDefinition") {
        groups.insert(crd["spec"]["group"].as_str().unwrap_or_default().to_string());
        plurals.insert(crd["spec"]["names"]["plural"].as_str().unwrap_or_default().to_string());
    }
    json!({"apiGroups": groups, "resources": plurals, "verbs": ["list", "patch"]})
}

/// The rules of the ClusterRole that lets the operator install Butler's providers.
pub fn provider_rules() -> Vec<Value> {
    let mut by_group: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (api_version, kind) in component_kinds() {
        let (group, plural) = resource_of(&api_version, &kind)
            .unwrap_or_else(|| panic!("{api_version} {kind}: add its resource to manifest::resource_of"));
        by_group.entry(group).or_default().insert(plural);
    }
    let mut rules: Vec<Value> = by_group
        .into_iter()
        .map(|(group, plurals)| {
            json!({
                "apiGroups": [group],
                "resources": plurals,
                "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
            })
        })
        .collect();
    // The providers' own Roles grant what the operator does not hold; Kubernetes allows writing
    // them only with these verbs.
    rules.push(json!({
        "apiGroups": ["rbac.authorization.k8s.io"],
        "resources": ["clusterroles", "roles"],
        "verbs": ["escalate", "bind"],
    }));
    rules
}

/// The rules of what the operator itself does.
fn operator_rules() -> Vec<Value> {
    let mut kinds: Vec<&str> = ProviderKind::ALL.map(KindNames::plural).to_vec();
    kinds.push("providerupgrades");
    vec![
        json!({"apiGroups": ["operator.butlerlabs.dev"], "resources": kinds, "verbs": ["get", "list", "watch", "update", "patch"]}),
        // The upgrades a provider's spec.upgradePolicy proposes.
        json!({"apiGroups": ["operator.butlerlabs.dev"], "resources": ["providerupgrades"], "verbs": ["create"]}),
        json!({
            "apiGroups": ["operator.butlerlabs.dev"],
            "resources": kinds.iter().flat_map(|k| [format!("{k}/status"), format!("{k}/finalizers")]).collect::<Vec<_>>(),
            "verbs": ["get", "update", "patch"],
        }),
        // Inventories, and ConfigMap repositories of air-gapped clusters.
        json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]}),
        // Config Secrets: read, and watched so that a change re-renders the provider.
        json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch"]}),
        json!({"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch"]}),
        // Whether a provider's namespace is being deleted, read before a drift repair; the
        // namespaces labelled for providers (metadata only), which are honoured.
        json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}),
        // What holds up a deletion: workload clusters, and objects of the providers' CRDs.
        json!({"apiGroups": ["butler.butlerlabs.dev"], "resources": ["*"], "verbs": ["get", "list", "watch"]}),
        // Storage-version migration: the stored objects of the providers' CRDs written again,
        // then the CRD's storedVersions trimmed.
        storage_migration_rule(),
        json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions/status"], "verbs": ["patch"]}),
        // Secure metrics: who a scraper's token is, and whether it may get /metrics.
        json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}),
        json!({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}),
    ]
}

/// The ClusterRole a scraper's ServiceAccount is bound to, to read the operator's metrics.
pub const METRICS_READER: &str = "butler-operator-metrics-reader";
/// The Service in front of the operator's metrics (HTTPS, port `https`).
pub const METRICS_SERVICE: &str = "butler-operator-metrics";
/// Where the operator serves its metrics.
pub const METRICS_PORT: u16 = 8443;

/// The metrics Service, and the ClusterRole that lets a scraper read them (bound to nothing:
/// bind it to Prometheus's ServiceAccount).
fn metrics_objects(labels: &Value) -> Vec<Value> {
    vec![
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": METRICS_SERVICE, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "selector": {"app.kubernetes.io/name": FIELD_MANAGER},
                "ports": [{"name": "https", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
            },
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": METRICS_READER, "labels": labels},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }),
    ]
}

/// The opt-in ServiceMonitor (Prometheus Operator) that scrapes the operator over HTTPS with
/// the Prometheus ServiceAccount's token (`operator/butler-operator-servicemonitor.yaml`).
pub fn service_monitor(version: &str) -> Value {
    let labels = json!({"app.kubernetes.io/name": FIELD_MANAGER, "app.kubernetes.io/version": version});
    json!({
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
        "metadata": {"name": FIELD_MANAGER, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": FIELD_MANAGER}},
            "namespaceSelector": {"matchNames": [NAMESPACE]},
            "endpoints": [{
                "port": "https", "path": "/metrics", "scheme": "https", "interval": "30s",
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                // The certificate is made at start unless --metrics-cert-dir names one; the
                // token is what is checked.
                "tlsConfig": {"insecureSkipVerify": true},
            }],
        },
    })
}

/// The operator's CRDs, as the manifest and the chart carry them.
pub fn crd_objects() -> Vec<Value> {
    crate::crds::operator()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).expect("CRDs serialize"))
        .collect()
}

/// The rules of the operator's ClusterRole: what it does itself, then what Butler's providers
/// need.
pub fn cluster_rules() -> Vec<Value> {
    let mut rules = operator_rules();
    rules.extend(provider_rules());
    rules
}

/// Every object of the install manifest, in the order to apply them.
pub fn objects(version: &str) -> Vec<Value> {
    let labels = json!({"app.kubernetes.io/name": FIELD_MANAGER, "app.kubernetes.io/version": version});
    let cluster_rules = cluster_rules();
    let mut objects = vec![json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"pod-security.kubernetes.io/enforce": "restricted"}},
    })];
    objects.extend(crd_objects());
    objects.extend([
        json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": FIELD_MANAGER, "namespace": NAMESPACE, "labels": labels}}),
    ]);
    objects.extend(bound_cluster_role(FIELD_MANAGER, &cluster_rules, &labels));
    objects.extend([
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": format!("{FIELD_MANAGER}-leader-election"), "namespace": NAMESPACE, "labels": labels},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["get", "list", "watch", "create", "update", "patch"]}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": format!("{FIELD_MANAGER}-leader-election"), "namespace": NAMESPACE, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": format!("{FIELD_MANAGER}-leader-election")},
            "subjects": [{"kind": "ServiceAccount", "name": FIELD_MANAGER, "namespace": NAMESPACE}],
        }),
        deployment(version, &labels),
    ]);
    objects.extend(metrics_objects(&labels));
    objects.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": ROLE_CEILING, "labels": labels},
        "rules": ceiling_rules(),
    }));
    objects
}

fn deployment(version: &str, labels: &Value) -> Value {
    let field = |path: &str| json!({"valueFrom": {"fieldRef": {"fieldPath": path}}});
    let probe = |path: &str| json!({"httpGet": {"path": path, "port": "health"}, "periodSeconds": 10});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": FIELD_MANAGER, "namespace": NAMESPACE, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": FIELD_MANAGER}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": FIELD_MANAGER,
                    "securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": "operator",
                        "image": format!("{IMAGE}:{version}"),
                        // Provider objects are honoured where the docs put them and in the
                        // namespaces labelled for them (butlerctl init and migrate label those
                        // they use).
                        "args": [
                            "run",
                            format!("--provider-namespace={PROVIDERS_NAMESPACE}"),
                            format!("--provider-namespace-label={}", crate::controller::wanted::policy::NAMESPACE_LABEL),
                            format!("--role-ceiling={ROLE_CEILING}"),
                        ],
                        "env": [
                            {"name": "POD_NAME", "valueFrom": field("metadata.name")["valueFrom"]},
                            {"name": "POD_NAMESPACE", "valueFrom": field("metadata.namespace")["valueFrom"]},
                            // A folder the operator makes (0700) inside the volume, which
                            // the kubelet makes writable by every user.
                            {"name": "BUTLER_CACHE_DIR", "value": "/var/cache/butler/repositories"},
                            {"name": "BUTLER_LOG_FORMAT", "value": "json"},
                        ],
                        "ports": [
                            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
                            {"name": "health", "containerPort": 8081, "protocol": "TCP"},
                        ],
                        "livenessProbe": probe("/healthz"),
                        "readinessProbe": probe("/readyz"),
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "64Mi"},
                            "limits": {"cpu": "500m", "memory": "256Mi"},
                        },
                        "securityContext": {
                            "allowPrivilegeEscalation": false,
                            "readOnlyRootFilesystem": true,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [{"name": "cache", "mountPath": "/var/cache/butler"}],
                    }],
                    "volumes": [{"name": "cache", "emptyDir": {}}],
                },
            },
        },
    })
}

/// The ClusterRole whose rules bound what a release's roles may grant (`--role-ceiling`); bound
/// to no one.
pub const ROLE_CEILING: &str = "butler-operator-role-ceiling";

/// What a release's Roles and ClusterRoles may grant by default (besides the kinds of the CRDs
/// the release defines): what the managers of Cluster API's core, kubeadm bootstrap and control
/// plane and the common infrastructure providers hold, and every rule of Butler's own
/// providers (read from the releases compiled in, so that it covers them by construction).
pub fn ceiling_rules() -> Vec<Value> {
    let all = ["get", "list", "watch", "create", "update", "patch", "delete"];
    let read = ["get", "list", "watch"];
    let mut rules = vec![
        // Cluster API's own kinds, which its managers reconcile.
        json!({"apiGroups": CLUSTER_API_GROUPS, "resources": ["*"], "verbs": ["*"]}),
        // Kubeconfigs, bootstrap data, credentials; the providers' configuration.
        json!({"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": all}),
        json!({"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch", "create", "update", "patch"]}),
        json!({"apiGroups": [""], "resources": ["namespaces", "serviceaccounts"], "verbs": read}),
        // Node labels and deletion (MachineHealthCheck, node label sync), drains.
        json!({"apiGroups": [""], "resources": ["nodes"], "verbs": all}),
        json!({"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch", "delete"]}),
        json!({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}),
        // Load balancers of providers that run clusters in this one (KubeVirt's, Harvester's).
        json!({"apiGroups": [""], "resources": ["services"], "verbs": all}),
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": all}),
        // The core's CRD migration, and the providers' checks of installed CRDs.
        json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["get", "list", "watch", "update", "patch"]}),
        json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions/status"], "verbs": ["update", "patch"]}),
        json!({"apiGroups": ["cert-manager.io"], "resources": ["issuers", "certificates"], "verbs": all}),
        // Secure metrics (the diagnostics endpoint): who asks, and whether they may.
        json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}),
        json!({"apiGroups": ["authorization.k8s.io"], "resources": ["subjectaccessreviews"], "verbs": ["create"]}),
        json!({"nonResourceURLs": ["/metrics"], "verbs": ["get"]}),
    ];
    for provider in butler_repository::embedded_providers() {
        let documents: Vec<Value> = serde_saphyr::from_multiple(&provider.components()).unwrap_or_default();
        for role in documents.iter().filter(|d| {
            d["apiVersion"] == "rbac.authorization.k8s.io/v1"
                && matches!(d["kind"].as_str(), Some("Role" | "ClusterRole"))
        }) {
            for rule in role["rules"].as_array().into_iter().flatten() {
                if !rules.contains(rule) {
                    rules.push(rule.clone());
                }
            }
        }
    }
    rules
}

/// The name of the ClusterRole (and its binding) of the grants beyond Butler's own providers.
pub const EXTRA_ROLE: &str = "butler-operator-upstream";

/// The API groups of Cluster API's providers, whose kinds the upstream rules let the operator
/// list and write again.
pub const CLUSTER_API_GROUPS: &[&str] = &[
    "cluster.x-k8s.io",
    "addons.cluster.x-k8s.io",
    "bootstrap.cluster.x-k8s.io",
    "controlplane.cluster.x-k8s.io",
    "infrastructure.cluster.x-k8s.io",
    "ipam.cluster.x-k8s.io",
    "runtime.cluster.x-k8s.io",
];

/// What upstream providers' components hold beyond Butler's (which the install manifest grants
/// alone, least privilege): cert-manager Issuers and Certificates, Secrets (Cluster API
/// Provider AWS ships its bootstrap credentials as one), and the objects of Cluster API's kinds:
/// listed by a deletion (what still uses the provider; all of them with `crdDeletionPolicy:
/// Delete`) and written again by a storage-version migration after a contract move.
pub fn upstream_rules() -> Vec<Value> {
    let verbs = ["get", "list", "watch", "create", "update", "patch", "delete"];
    vec![
        json!({"apiGroups": ["cert-manager.io"], "resources": ["issuers", "certificates"], "verbs": verbs}),
        json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "update", "patch", "delete"]}),
        json!({"apiGroups": CLUSTER_API_GROUPS, "resources": ["*"], "verbs": ["get", "list", "patch"]}),
    ]
}

/// A ClusterRole of `rules` bound to the operator's ServiceAccount, applied beside the install
/// manifest when the operator installs more than Butler's providers.
pub fn extra_rbac(version: &str, rules: &[Value]) -> Vec<Value> {
    let labels = json!({"app.kubernetes.io/name": FIELD_MANAGER, "app.kubernetes.io/version": version});
    bound_cluster_role(EXTRA_ROLE, rules, &labels).to_vec()
}

/// A ClusterRole of `rules` named `name`, and its binding to the operator's ServiceAccount.
fn bound_cluster_role(name: &str, rules: &[Value], labels: &Value) -> [Value; 2] {
    [
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": rules,
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": FIELD_MANAGER, "namespace": NAMESPACE}],
        }),
    ]
}

/// Policy rules as a file writes them: a YAML (or JSON) list of Kubernetes PolicyRules.
pub fn parse_rules(text: &str) -> Result<Vec<Value>, String> {
    let rules: Vec<k8s_openapi::api::rbac::v1::PolicyRule> =
        serde_saphyr::from_str(text).map_err(|e| format!("not a list of PolicyRules: {e}"))?;
    if let Some(i) = rules.iter().position(|r| r.verbs.is_empty()) {
        return Err(format!("rule {i} names no verbs"));
    }
    Ok(rules.iter().map(|r| serde_json::to_value(r).expect("rules serialize")).collect())
}

/// The install manifest as one YAML stream.
pub fn render(version: &str) -> String {
    objects(version)
        .iter()
        .map(|o| serde_saphyr::to_string(o).expect("objects serialize"))
        .collect::<Vec<_>>()
        .join("---\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::wanted::admission::ceiling::uncovered;

    #[test]
    fn the_shipped_ceiling_covers_butlers_providers_and_what_cluster_apis_managers_hold() {
        let ceiling = ceiling_rules();
        let mut checked = 0;
        for provider in butler_repository::embedded_providers() {
            let documents: Vec<Value> = serde_saphyr::from_multiple(&provider.components()).unwrap();
            for role in
                documents.iter().filter(|d| matches!(d["kind"].as_str(), Some("Role" | "ClusterRole")))
            {
                for rule in role["rules"].as_array().into_iter().flatten() {
                    assert_eq!(
                        uncovered(rule, &ceiling),
                        None,
                        "{} {}: {rule}",
                        provider.name,
                        role["metadata"]["name"]
                    );
                    checked += 1;
                }
            }
        }
        assert!(checked > 40, "Butler's roles are read: {checked} rules");
        let within = [
            json!({"apiGroups": ["cluster.x-k8s.io"], "resources": ["clusters", "clusters/status", "machines"], "verbs": ["*"]}),
            json!({"apiGroups": ["infrastructure.cluster.x-k8s.io"], "resources": ["*"], "verbs": ["get", "list", "watch", "patch"]}),
            json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list", "watch", "create", "patch", "delete"]}),
            json!({"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}),
            json!({"apiGroups": ["authentication.k8s.io"], "resources": ["tokenreviews"], "verbs": ["create"]}),
        ];
        for rule in within {
            assert_eq!(uncovered(&rule, &ceiling), None, "{rule}");
        }
        let beyond = [
            (
                json!({"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]}),
                "create on deployments.apps",
            ),
            (
                json!({"apiGroups": ["admissionregistration.k8s.io"], "resources": ["validatingadmissionpolicies"], "verbs": ["create"]}),
                "create on validatingadmissionpolicies.admissionregistration.k8s.io",
            ),
            (
                json!({"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}),
                "create on pods/exec",
            ),
            (
                json!({"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}),
                "create on serviceaccounts/token",
            ),
            (json!({"apiGroups": ["*"], "resources": ["*"], "verbs": ["get"]}), "get on *.*"),
        ];
        for (rule, words) in beyond {
            assert_eq!(uncovered(&rule, &ceiling).as_deref(), Some(words), "{rule}");
        }
    }

    #[test]
    fn the_service_monitor_reaches_the_metrics_port_through_the_service() {
        let objects = objects("v0.1.0");
        let find = |kind: &str, name: &str| {
            objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).cloned().unwrap()
        };
        let service = find("Service", METRICS_SERVICE);
        let deployment = find("Deployment", FIELD_MANAGER);
        let monitor = service_monitor("v0.1.0");
        let service_labels = service["metadata"]["labels"].as_object().unwrap();
        for (key, value) in monitor["spec"]["selector"]["matchLabels"].as_object().unwrap() {
            assert_eq!(service_labels.get(key), Some(value), "the ServiceMonitor selects the Service");
        }
        assert_eq!(monitor["spec"]["namespaceSelector"]["matchNames"][0], service["metadata"]["namespace"]);
        let port = &service["spec"]["ports"][0];
        assert_eq!(monitor["spec"]["endpoints"][0]["port"], port["name"]);
        let pod_labels = deployment["spec"]["template"]["metadata"]["labels"].as_object().unwrap();
        for (key, value) in service["spec"]["selector"].as_object().unwrap() {
            assert_eq!(pod_labels.get(key), Some(value), "the Service selects the operator's pods");
        }
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        let named =
            container["ports"].as_array().unwrap().iter().find(|p| p["name"] == port["targetPort"]).unwrap();
        assert_eq!(named["containerPort"], json!(METRICS_PORT));
        let reader = find("ClusterRole", METRICS_READER);
        assert_eq!(reader["rules"], json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]));
    }

    #[test]
    fn extra_rules_read_as_policy_rules_and_bind_the_operators_account() {
        let rules = parse_rules(
            "- {apiGroups: [infrastructure.example.io], resources: [widgets], verbs: [get, create]}\n",
        )
        .unwrap();
        assert_eq!(rules[0]["resources"], json!(["widgets"]));
        assert!(
            parse_rules("- {apiGroups: [''], resources: [pods]}\n")
                .unwrap_err()
                .contains("rule 0 names no verbs")
        );
        assert!(parse_rules("apiGroups: x").unwrap_err().contains("not a list of PolicyRules"));
        let objects = extra_rbac("v0.1.0", &rules);
        assert_eq!(objects[0]["rules"], json!(rules));
        assert_eq!(
            objects[1]["subjects"][0],
            json!({"kind": "ServiceAccount", "name": FIELD_MANAGER, "namespace": NAMESPACE})
        );
    }

    #[test]
    fn the_rules_cover_every_kind_of_butlers_components_and_nothing_wider() {
        let rules = provider_rules();
        for (api_version, kind) in component_kinds() {
            let (group, plural) = resource_of(&api_version, &kind).unwrap();
            assert!(
                rules.iter().any(|r| r["apiGroups"][0] == group
                    && r["resources"].as_array().unwrap().iter().any(|p| *p == plural)),
                "{kind} is not covered"
            );
        }
        let text = serde_json::to_string(&rules).unwrap();
        assert!(!text.contains("\"*\""), "no wildcard in the provider rules: {text}");
        assert!(!text.contains("namespaces"), "Namespaces are never written");
    }
}
