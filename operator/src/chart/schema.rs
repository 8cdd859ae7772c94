//! `values.schema.json`: helm checks values against it before rendering, so a misspelt key is
//! refused with its path (`at '/infrastructure/aws': additional properties 'verison' not
//! allowed`). The keys of a provider are its kind's spec, read from the CRD, closed at every
//! level where the CRD names its fields; the operator's keys are cluster-api-operator's where it
//! has one, and Butler's own beside them.

use serde_json::{Map, Value, json};

use super::PROVIDER_VALUES;

/// `schema` with `additionalProperties: false` on every object that names its properties (and
/// keeps no unknown fields), at every depth: what Kubernetes would prune, helm refuses.
fn closed(schema: &Value) -> Value {
    let mut out = schema.clone();
    let Some(object) = out.as_object_mut() else { return out };
    if let Some(properties) = object.get_mut("properties").and_then(Value::as_object_mut) {
        for value in properties.values_mut() {
            *value = closed(value);
        }
    }
    for key in ["items", "additionalProperties"] {
        if let Some(inner) = object.get(key).filter(|v| v.is_object()) {
            let inner = closed(inner);
            object.insert(key.to_string(), inner);
        }
    }
    let open = object.get("x-kubernetes-preserve-unknown-fields") == Some(&json!(true));
    if object.contains_key("properties") && !object.contains_key("additionalProperties") && !open {
        object.insert("additionalProperties".into(), json!(false));
    }
    out
}

/// A value of `kind` (a JSON schema type, or a list of them) and what it does.
fn typed(kind: Value, description: &str) -> Value {
    json!({"type": kind, "description": description})
}

/// The spec schema of the provider kinds, as their CRD declares it.
fn provider_spec() -> Value {
    let crd = crate::crds::providers().into_iter().next().expect("the provider CRDs");
    let version = crd.spec.versions.iter().find(|v| v.storage).expect("a storage version");
    let schema = version.schema.as_ref().and_then(|s| s.open_api_v3_schema.as_ref()).expect("a schema");
    let schema = serde_json::to_value(schema).expect("schemas serialize");
    schema["properties"]["spec"].clone()
}

/// One provider's values: its spec, and where it goes.
fn provider_entry(spec: &Value) -> Value {
    let mut entry = closed(spec);
    let properties =
        entry.pointer_mut("/properties").and_then(Value::as_object_mut).expect("the spec names its fields");
    for (key, kind, description) in [
        (
            "namespace",
            "string",
            "The provider's namespace; by default cluster-api-operator's: capi-system for the core, {name}-{kind}-system for the others.",
        ),
        (
            "createNamespace",
            "boolean",
            "Create the namespace (labelled for the operator, Pod Security baseline); true unless false.",
        ),
        (
            "enabled",
            "boolean",
            "false leaves the provider out (cluster-api-operator's documented `--set infrastructure.docker.enabled=true` declares it).",
        ),
    ] {
        properties.insert(key.into(), typed(json!(kind), description));
    }
    // The chart writes the ConfigMap of additionalManifests from `manifests`.
    if let Some(manifests) = properties
        .get_mut("additionalManifests")
        .and_then(|m| m.pointer_mut("/properties"))
        .and_then(Value::as_object_mut)
    {
        manifests.insert(
            "manifests".into(),
            json!({"type": "string", "description": "The manifests the chart puts in the ConfigMap it creates."}),
        );
    }
    entry.as_object_mut().expect("an object").remove("description");
    // `docker:` alone (null) declares the provider with every default, as `docker: {}`.
    entry["type"] = json!(["object", "null"]);
    entry
}

/// What cluster-api-operator's chart has and this chart accepts without effect, with why.
const ACCEPTED: [(&str, &str, &str); 11] = [
    (
        "enableHelmHook",
        "boolean",
        "The CRDs come from the chart's crds/ folder, installed before anything else, so the provider objects need no hook.",
    ),
    ("cluster-api-operator", "object", "This chart is the operator and its providers in one."),
    ("diagnosticsAddress", "string", "Metrics are served on port 8443 over HTTPS (the metrics Service)."),
    ("healthAddr", "string", "Probes are served on port 8081."),
    ("profilerAddress", "string", "The operator has no profiler endpoint."),
    ("contentionProfiling", "boolean", "The operator has no profiler endpoint."),
    ("insecureDiagnostics", "boolean", "Metrics are HTTPS with token review; see metrics."),
    ("watchConfigSecret", "boolean", "Config Secrets are always watched: a change re-renders its providers."),
    ("watchConfigMap", "boolean", "ConfigMap repositories are always watched."),
    ("volumes", "array", "The operator mounts only its cache; it serves no webhook."),
    ("volumeMounts", "object", "The operator mounts only its cache; it serves no webhook."),
];

/// The whole `values.schema.json`.
pub fn values_schema() -> Value {
    let spec = provider_spec();
    let entry = provider_entry(&spec);
    let mut properties = Map::new();
    let object = |description: &str, props: Value| json!({"type": "object", "description": description, "additionalProperties": false, "properties": props});
    properties.insert(
        "image".into(),
        object(
            "The operator's image.",
            json!({"manager": object("", json!({
                "repository": {"type": "string", "description": "Without the tag."},
                "tag": {"type": "string", "description": "The chart's appVersion when empty."},
                "pullPolicy": {"enum": ["", "Always", "IfNotPresent", "Never"], "description": "Kubernetes' default when empty."},
            }))}),
        ),
    );
    properties.insert("replicaCount".into(), json!({"type": "integer", "minimum": 0, "description": "Operator replicas; one leads, the others wait."}));
    properties.insert(
        "leaderElection".into(),
        object("", json!({"enabled": {"type": "boolean", "description": "Off only with one replica."}})),
    );
    properties.insert("logLevel".into(), json!({"type": ["integer", "null"], "minimum": 0, "description": "--v: 0 to 2 info, 3 to 4 debug, 5 and more trace."}));
    properties.insert(
        "resources".into(),
        object("", json!({"manager": {"type": "object", "description": "The operator container's requests and limits."}})),
    );
    properties.insert(
        "env".into(),
        object("", json!({"manager": {"type": "array", "description": "Environment variables added to the operator's (HTTPS_PROXY, NO_PROXY, ...)."}})),
    );
    properties.insert(
        "imagePullSecrets".into(),
        typed(json!(["array", "object"]), "Secrets to pull the operator's image with, as a list of {name}."),
    );
    properties.insert("nodeSelector".into(), typed(json!("object"), "Where the operator's pods may run."));
    properties.insert("affinity".into(), typed(json!("object"), "The operator's pods' affinity."));
    properties.insert("tolerations".into(), typed(json!("array"), "The operator's pods' tolerations."));
    properties.insert(
        "containerSecurityContext".into(),
        typed(
            json!("object"),
            "Replaces the operator container's security context (restricted by default) when given.",
        ),
    );
    properties.insert("providerNamespaces".into(), json!({"type": "array", "items": {"type": "string"}, "description": "Namespaces whose provider objects the operator honours (--provider-namespace), besides the namespaces of the providers declared here and those labelled."}));
    properties.insert(
        "providerNamespaceLabel".into(),
        typed(
            json!("string"),
            "The label that honours a namespace when true (--provider-namespace-label); empty for none.",
        ),
    );
    properties.insert("extraArgs".into(), json!({"type": "array", "items": {"type": "string"}, "description": "More flags of butler-operator run."}));
    properties.insert(
        "createNamespace".into(),
        typed(
            json!("boolean"),
            "Create the release namespace, Pod Security restricted (instead of helm's --create-namespace).",
        ),
    );
    properties.insert(
        "clusterRoleName".into(),
        json!({"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 200, "description": "The name of the operator's ClusterRole and its binding, and the start of the chart's other cluster-wide names (-metrics-reader, -upstream, -uninstall): another for each release when a cluster runs several."}),
    );
    properties.insert(
        "roleCeiling".into(),
        object(
            "What the roles of a provider's release may grant (--role-ceiling): the ClusterRole {clusterRoleName}-role-ceiling, bound to no one.",
            json!({
                "enabled": {"type": "boolean", "description": "Refuse a release whose Roles or ClusterRoles grant beyond it; false leaves only the six powers that --allow-role-power names refused."},
                "rules": {"type": "array", "items": {"type": "object"}, "description": "More PolicyRules a provider's roles may grant (a provider of another repository that needs them)."},
            }),
        ),
    );
    properties.insert(
        "upstreamRBAC".into(),
        object(
            "Rules beyond Butler's providers: what Cluster API's own providers hold (cert-manager objects, Secrets, Cluster API's kinds).",
            json!({
                "enabled": {"type": ["boolean", "null"], "description": "Granted when true, or when empty and a declared provider is not one of Butler's."},
                "rules": {"type": "array", "items": {"type": "object"}, "description": "More PolicyRules for providers of other repositories."},
            }),
        ),
    );
    properties.insert(
        "metrics".into(),
        object("", json!({"serviceMonitor": object("", json!({"enabled": {"type": "boolean", "description": "A Prometheus Operator ServiceMonitor for the operator's metrics."}}))})),
    );
    properties.insert(
        "uninstall".into(),
        object(
            "What helm uninstall does with the providers declared here.",
            json!({
                "deleteProviders": {"type": "boolean", "description": "Delete them, every other kind before the core, and wait for the operator to remove their components before it goes; false keeps them (and the operator must be reinstalled to remove them)."},
                "timeout": {"type": "integer", "minimum": 1, "description": "Seconds each provider may take to go."},
                "managedBy": {"type": "string", "description": "The controller that runs the uninstall Job (its spec.managedBy), such as a multi-cluster dispatcher; Kubernetes' own when empty."},
            }),
        ),
    );
    for (key, _, _) in PROVIDER_VALUES {
        properties.insert(
            key.into(),
            json!({"type": ["object", "null"], "description": "Providers of this kind by name, as cluster-api-operator's chart declares them.", "additionalProperties": {"$ref": "#/$defs/provider"}}),
        );
    }
    let spec_of = |field: &str| closed(&spec["properties"][field]);
    properties.insert(
        "manager".into(),
        object(
            "Settings for every provider, as cluster-api-operator's chart has them.",
            json!({"featureGates": {"type": "object", "description": "Feature gates by provider name, for control-plane, infrastructure and IPAM providers, and `core` for the core provider (as cluster-api-operator's chart gives them).", "additionalProperties": {"type": "object", "additionalProperties": {"type": "boolean"}}}}),
        ),
    );
    properties.insert("fetchConfig".into(), json!({"type": "object", "description": "A fetchConfig by provider name, for infrastructure and IPAM providers (cluster-api-operator's older form; a provider's own wins).", "additionalProperties": spec_of("fetchConfig")}));
    properties.insert("configSecret".into(), {
        let mut secret = spec_of("configSecret");
        secret["description"] = json!("The config Secret of every provider without its own, addons aside (as cluster-api-operator's chart gives it).");
        secret.as_object_mut().expect("an object").remove("required");
        secret
    });
    properties.insert("additionalDeployments".into(), {
        let mut deployments = spec_of("additionalDeployments");
        deployments["description"] = json!("additionalDeployments of every infrastructure and IPAM provider without its own, as cluster-api-operator's chart copies them.");
        deployments
    });
    for (key, kind, why) in ACCEPTED {
        properties.insert(key.into(), json!({"type": [kind, "null"], "description": format!("Accepted from cluster-api-operator's values, without effect: {why}")}));
    }
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "butler-operator values",
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
        // One provider's keys, once for every kind.
        "$defs": {"provider": entry},
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_named_object_is_closed_and_open_ones_stay_open() {
        let schema = closed(&json!({
            "type": "object",
            "properties": {
                "a": {"type": "object", "properties": {"b": {"type": "string"}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true, "properties": {"c": {}}},
                "list": {"type": "array", "items": {"type": "object", "properties": {"d": {}}}},
                "map": {"type": "object", "additionalProperties": {"type": "object", "properties": {"e": {}}}},
            },
        }));
        assert_eq!(schema["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["a"]["additionalProperties"], json!(false));
        assert!(schema["properties"]["free"].get("additionalProperties").is_none());
        assert_eq!(schema["properties"]["list"]["items"]["additionalProperties"], json!(false));
        assert_eq!(schema["properties"]["map"]["additionalProperties"]["additionalProperties"], json!(false));
    }

    #[test]
    fn a_provider_takes_its_kinds_spec_and_where_it_goes() {
        let schema = values_schema();
        assert_eq!(
            schema["properties"]["infrastructure"]["additionalProperties"]["$ref"],
            "#/$defs/provider"
        );
        let entry = &schema["$defs"]["provider"];
        let keys: Vec<&String> = entry["properties"].as_object().unwrap().keys().collect();
        for key in [
            "version",
            "namespace",
            "createNamespace",
            "manager",
            "deployment",
            "configSecret",
            "fetchConfig",
        ] {
            assert!(keys.iter().any(|k| *k == key), "{key} is missing: {keys:?}");
        }
        assert_eq!(entry["additionalProperties"], json!(false));
        assert_eq!(entry["properties"]["additionalManifests"]["properties"]["manifests"]["type"], "string");
    }
}
