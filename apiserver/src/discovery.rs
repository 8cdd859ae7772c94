//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}` and
//! `/apis/{group}/{version}` (the legacy, unaggregated form).

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::registry::{Registry, ResourceType};

/// The Kubernetes version the server claims to be.
pub const GIT_VERSION: &str = "v1.33.0+butler-e2e";

/// `/version`.
pub fn version() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "gitVersion": GIT_VERSION,
        "gitCommit": "0000000000000000000000000000000000000000",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "go1.24",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

pub fn core_versions(address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": address}],
    })
}

fn verbs(rt: &ResourceType) -> Vec<&'static str> {
    vec!["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
        .into_iter()
        .filter(|v| rt.namespaced || rt.kind != "Namespace" || *v != "deletecollection")
        .collect()
}

/// The resources of one group version, with their subresources.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<&ResourceType> =
        registry.all().filter(|rt| rt.group == group && rt.version == version).collect();
    if types.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for rt in types {
        let mut resource = json!({
            "name": rt.plural,
            "singularName": rt.singular,
            "namespaced": rt.namespaced,
            "kind": rt.kind,
            "verbs": verbs(rt),
        });
        if !rt.short_names.is_empty() {
            resource["shortNames"] = json!(rt.short_names);
        }
        if !rt.categories.is_empty() {
            resource["categories"] = json!(rt.categories);
        }
        resources.push(resource);
        if rt.scale.is_some() {
            resources.push(json!({
                "name": format!("{}/scale", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "group": "autoscaling",
                "version": "v1",
                "kind": "Scale",
                "verbs": ["get", "patch", "update"],
            }));
        }
        if rt.status {
            resources.push(json!({
                "name": format!("{}/status", rt.plural),
                "singularName": "",
                "namespaced": rt.namespaced,
                "kind": rt.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    let group_version = if group.is_empty() { version.to_string() } else { format!("{group}/{version}") };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

fn groups(registry: &Registry) -> BTreeMap<String, Vec<String>> {
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rt in registry.all().filter(|rt| !rt.group.is_empty()) {
        let versions = groups.entry(rt.group.clone()).or_default();
        if !versions.contains(&rt.version) {
            versions.push(rt.version.clone());
        }
    }
    groups
}

fn group_document(name: &str, versions: &[String]) -> Value {
    let entries: Vec<Value> =
        versions.iter().map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v})).collect();
    json!({"name": name, "versions": entries, "preferredVersion": entries[0]})
}

pub fn group_list(registry: &Registry) -> Value {
    let groups: Vec<Value> =
        groups(registry).iter().map(|(name, versions)| group_document(name, versions)).collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let groups = groups(registry);
    let versions = groups.get(name)?;
    let mut document = group_document(name, versions);
    document["kind"] = json!("APIGroup");
    document["apiVersion"] = json!("v1");
    Some(document)
}
