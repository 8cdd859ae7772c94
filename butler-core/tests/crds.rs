//! The Butler CRDs as an API server sees them: structural, documented, with the scope, names,
//! print columns, defaults, enums and minimums of the API documents.

use butler_runtime::crds::{check_structural, render, tidy, undocumented_fields};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

fn all() -> Vec<CustomResourceDefinition> {
    butler_core::api::crds().into_iter().map(tidy).collect()
}

fn crd(plural: &str) -> CustomResourceDefinition {
    all().into_iter().find(|c| c.spec.names.plural == plural).unwrap_or_else(|| panic!("no CRD {plural}"))
}

/// The schema node at a dotted path below the root (`spec.network.mode`); `[]` steps into items.
fn node(crd: &CustomResourceDefinition, path: &str) -> Value {
    let schema = serde_json::to_value(
        crd.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap(),
    )
    .unwrap();
    path.split('.').fold(schema, |node, step| match step.strip_suffix("[]") {
        Some(name) => node["properties"][name]["items"].clone(),
        None => node["properties"][step].clone(),
    })
}

/// The enum values of a node without the `null` that optional enums carry.
fn values(node: Value) -> Value {
    Value::Array(
        node["enum"].as_array().cloned().unwrap_or_default().into_iter().filter(|v| !v.is_null()).collect(),
    )
}

fn columns(crd: &CustomResourceDefinition) -> Vec<(String, String)> {
    crd.spec.versions[0]
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.clone(), c.json_path.clone()))
        .collect()
}

#[test]
fn every_crd_is_structural_documented_and_has_a_status_subresource() {
    for crd in all() {
        let errors = check_structural(&crd);
        assert!(errors.is_empty(), "{}", errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"));
        assert_eq!(undocumented_fields(&crd), Vec::<String>::new(), "{}", crd.spec.names.kind);
        assert!(crd.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
        assert_eq!(crd.spec.names.categories.as_deref(), Some(&["butler".to_string()][..]));
        // Conditions merge by type under server-side apply, as metav1.Condition lists do.
        let conditions = node(&crd, "status.conditions");
        assert_eq!(conditions["x-kubernetes-list-type"], json!("map"), "{}", crd.spec.names.kind);
        assert_eq!(conditions["x-kubernetes-list-map-keys"], json!(["type"]));
    }
}

#[test]
fn scope_and_short_names_follow_the_documents() {
    let expect = [
        ("teams", "Cluster", Some("tm")),
        ("providerconfigs", "Namespaced", None), // `pc` is PriorityClass in kubectl
        ("networkpools", "Namespaced", Some("np")),
        ("ipallocations", "Namespaced", Some("ipa")),
        ("tenantclusters", "Namespaced", Some("tc")),
    ];
    for (plural, scope, short) in expect {
        let crd = crd(plural);
        assert_eq!(crd.spec.scope, scope, "{plural}");
        let shorts = crd.spec.names.short_names.clone().unwrap_or_default();
        assert_eq!(shorts, short.map(|s| vec![s.to_string()]).unwrap_or_default(), "{plural}");
    }
}

#[test]
fn print_columns_follow_the_documents() {
    let pc = columns(&crd("providerconfigs"));
    assert_eq!(
        pc,
        [
            ("Provider", ".spec.provider"),
            ("Scope", ".spec.scope.type"),
            ("Ready", ".status.ready"),
            ("Validated", ".status.validated"),
            ("Age", ".metadata.creationTimestamp"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    let team = columns(&crd("teams"));
    assert_eq!(
        team,
        [
            ("Display Name", ".spec.displayName"),
            ("Phase", ".status.phase"),
            ("Namespace", ".status.namespace"),
            ("Clusters", ".status.clusterCount"),
            ("Quota", ".status.quotaStatus"),
            ("Age", ".metadata.creationTimestamp"),
        ]
        .map(|(a, b)| (a.to_string(), b.to_string()))
    );
    for plural in ["networkpools", "ipallocations", "tenantclusters"] {
        let cols = columns(&crd(plural));
        assert_eq!(cols.last().unwrap().0, "Age", "{plural}");
    }
}

#[test]
fn enums_defaults_and_minimums_are_in_the_schema() {
    let pc = crd("providerconfigs");
    assert_eq!(
        values(node(&pc, "spec.provider")),
        json!(["harvester", "nutanix", "proxmox", "azure", "aws", "gcp"])
    );
    assert_eq!(values(node(&pc, "spec.scope.type")), json!(["platform", "team"]));
    assert_eq!(node(&pc, "spec.scope.type")["default"], json!("platform"));
    assert_eq!(values(node(&pc, "spec.network.mode")), json!(["ipam", "cloud"]));
    assert_eq!(node(&pc, "spec.network.mode")["default"], json!("cloud"));
    assert_eq!(node(&pc, "spec.network.poolRefs[].priority")["default"], json!(0));
    let lb = node(&pc, "spec.network.loadBalancer");
    assert_eq!(values(lb["properties"]["allocationMode"].clone()), json!(["static", "elastic"]));
    assert_eq!(lb["properties"]["allocationMode"]["default"], json!("static"));
    for (field, default) in [("defaultPoolSize", 8), ("initialPoolSize", 2), ("growthIncrement", 2)] {
        assert_eq!(lb["properties"][field]["default"], json!(default), "{field}");
        assert_eq!(lb["properties"][field]["minimum"], json!(1.0), "{field}");
    }
    for field in ["maxNodeIPs", "maxLoadBalancerIPs"] {
        assert_eq!(node(&pc, "spec.network.quotaPerTenant")["properties"][field]["minimum"], json!(1.0));
    }
    for field in ["maxClustersPerTeam", "maxNodesPerTeam"] {
        assert_eq!(node(&pc, "spec.limits")["properties"][field]["minimum"], json!(1.0));
    }
    assert_eq!(node(&pc, "spec.proxmox.vmidRange.start")["minimum"], json!(100.0));
    assert_eq!(node(&pc, "spec.proxmox.vmidRange.end")["minimum"], json!(100.0));
    assert_eq!(node(&pc, "spec.proxmox.nodes")["minItems"], json!(1));
    assert_eq!(node(&pc, "spec.nutanix.port")["default"], json!(9440));
    assert_eq!(node(&pc, "spec.nutanix.endpoint")["pattern"], json!("^https://"));
    assert_eq!(node(&pc, "spec.harvester.namespace")["default"], json!("default"));
    assert_eq!(node(&pc, "spec")["required"], json!(["credentialsRef", "provider"]));

    let team = crd("teams");
    assert_eq!(values(node(&team, "spec.access.users[].role")), json!(["viewer", "operator", "admin"]));
    assert_eq!(node(&team, "spec.access.users[].role")["default"], json!("viewer"));
    assert_eq!(node(&team, "spec.resourceLimits.maxClusters")["minimum"], json!(0.0));
    assert_eq!(node(&team, "spec.resourceLimits.defaultNodeCount")["default"], json!(3));
    assert_eq!(node(&team, "spec.resourceLimits.maxCPUCores")["x-kubernetes-int-or-string"], json!(true));
    assert_eq!(values(node(&team, "status.phase")), json!(["Pending", "Ready", "Terminating", "Failed"]));
    assert_eq!(values(node(&team, "status.quotaStatus")), json!(["OK", "Warning", "Exceeded"]));

    let ipa = crd("ipallocations");
    assert_eq!(values(node(&ipa, "spec.type")), json!(["nodes", "loadbalancer"]));
    assert_eq!(node(&ipa, "spec.count")["minimum"], json!(1.0));
    assert_eq!(node(&ipa, "status.allocatedAt")["format"], json!("date-time"));
    assert_eq!(values(node(&ipa, "status.phase")), json!(["Pending", "Allocated", "Failed", "Released"]));

    let np = crd("networkpools");
    assert_eq!(node(&np, "spec.tenantAllocation.defaults.nodesPerTenant")["default"], json!(5));
    assert_eq!(node(&np, "spec.tenantAllocation.defaults.lbPoolPerTenant")["default"], json!(8));
    assert_eq!(node(&np, "spec")["required"], json!(["cidr"]));
}

#[test]
fn cross_field_rules_are_cel_validations() {
    let pc = crd("providerconfigs");
    let rules = |path: &str| node(&pc, path)["x-kubernetes-validations"].to_string();
    assert!(rules("spec.scope").contains("teamRef"));
    assert!(rules("spec.network").contains("poolRefs"));
    assert!(rules("spec.proxmox.vmidRange").contains("self.start <= self.end"));
}

#[test]
fn whole_number_bounds_render_as_integers() {
    let yaml = render(&crd("networkpools"));
    assert!(yaml.contains("minimum: 1\n"), "{yaml}");
    assert!(!yaml.contains("minimum: 1.0"));
}

#[test]
fn file_names_follow_controller_gen() {
    let names: Vec<String> = all().iter().map(butler_runtime::crds::file_name).collect();
    assert_eq!(names[0], "butler.butlerlabs.dev_teams.yaml");
    assert!(names.contains(&"butler.butlerlabs.dev_ipallocations.yaml".to_string()));
}
