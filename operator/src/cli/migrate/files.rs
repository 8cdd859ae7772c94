//! `butlerctl migrate --from-file`: cluster-api-operator's provider objects as GitOps users keep
//! them in Git, converted without a cluster. Each document of theirs (`operator.cluster.x-k8s.io`,
//! `v1alpha1` or `v1alpha2`) becomes this operator's object of the same kind, namespace and name,
//! its spec read as in a migration (fields this operator lacks named, Butler's provider names
//! given clusterctl's URL); every other document passes through as it is. A config Secret of
//! another namespace is copied beside its provider when the files hold it, else named.

use serde_json::{Value, json};

use super::carry::{Carried, MIGRATED_FROM, OldProvider, carry};
use crate::api::{KindNames, ProviderKind};
use crate::controller::install::adopt::CAPI_OPERATOR_GROUP;

/// The converted documents and what was done to them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Converted {
    /// The documents, in their order, as YAML.
    pub yaml: String,
    /// One line per provider, and one per change or field left behind.
    pub report: Vec<String>,
    /// How many provider objects were converted.
    pub providers: usize,
    /// The converted objects that say no version (`Kind namespace/name`): applied as they are
    /// where the operator honours them, the newest release would install.
    pub unversioned: Vec<String>,
}

/// The versions that run, by (kind, namespace, name) of cluster-api-operator's objects.
pub type Running = std::collections::BTreeMap<(String, String, String), String>;

/// The versions cluster-api-operator's objects run in the cluster (`status.installedVersion`,
/// else `spec.version`).
pub async fn running_versions(client: &kube::Client) -> Result<Running, String> {
    let olds = super::old::old_providers(client, None).await?;
    Ok(olds
        .into_iter()
        .filter_map(|old| {
            let text = |v: &Value| v.as_str().filter(|v| !v.is_empty()).map(String::from);
            let version = text(&old.object["status"]["installedVersion"])
                .or_else(|| text(&old.object["spec"]["version"]))?;
            Some(((old.kind, old.namespace, old.name), version))
        })
        .collect())
}

/// Whether a document is one of cluster-api-operator's provider objects.
fn theirs(document: &Value) -> bool {
    let group = document["apiVersion"].as_str().and_then(|v| v.split_once('/')).map(|(g, _)| g);
    group == Some(CAPI_OPERATOR_GROUP) && document["kind"].as_str().is_some_and(|k| k.ends_with("Provider"))
}

/// A `v1alpha1` spec as `v1alpha2` writes it: `secretName`/`secretNamespace` became
/// `configSecret`, `additionalManifestsRef` became `additionalManifests`.
fn to_v1alpha2(spec: &mut Value) {
    let Some(fields) = spec.as_object_mut() else { return };
    let name = fields.remove("secretName");
    let namespace = fields.remove("secretNamespace");
    if let Some(name) = name.filter(|n| n.as_str().is_some_and(|n| !n.is_empty())) {
        let mut secret = json!({"name": name});
        if let Some(ns) = namespace.filter(|n| n.as_str().is_some_and(|n| !n.is_empty())) {
            secret["namespace"] = ns;
        }
        fields.insert("configSecret".into(), secret);
    }
    if let Some(reference) = fields.remove("additionalManifestsRef") {
        fields.insert("additionalManifests".into(), reference);
    }
}

/// `object` in `namespace`, or with no namespace when the original had none (where a
/// kustomization or `kubectl apply -n` puts it).
fn place(object: &mut Value, namespace: &str) {
    match namespace.is_empty() {
        true => {
            if let Some(metadata) = object.get_mut("metadata").and_then(Value::as_object_mut) {
                metadata.remove("namespace");
            }
        }
        false => object["metadata"]["namespace"] = json!(namespace),
    }
}

/// A Secret among `documents` by namespace and name.
fn secret<'a>(documents: &'a [Value], namespace: &str, name: &str) -> Option<&'a Value> {
    documents.iter().find(|d| {
        d["kind"] == "Secret"
            && d["apiVersion"] == "v1"
            && d["metadata"]["name"] == name
            && d["metadata"]["namespace"].as_str() == Some(namespace)
    })
}

/// One of their provider objects converted; the Secret copy it needs, if the files hold it.
fn convert_one(
    document: &Value,
    documents: &[Value],
    schemas: &[(ProviderKind, Value)],
    source: &str,
    running: &Running,
) -> (Vec<Value>, Vec<String>, Option<String>) {
    let mut report = Vec::new();
    let kind_name = document["kind"].as_str().unwrap_or_default();
    let namespace = document["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
    let name = document["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let mut object = document.clone();
    if object["apiVersion"].as_str().is_some_and(|v| v.ends_with("/v1alpha1"))
        && let Some(spec) = object.get_mut("spec")
    {
        to_v1alpha2(spec);
    }
    let old = OldProvider {
        api_version: document["apiVersion"].as_str().unwrap_or_default().to_string(),
        kind: kind_name.to_string(),
        namespace: namespace.clone(),
        name: name.clone(),
        uid: String::new(),
        object,
    };
    let schema =
        schemas.iter().find(|(k, _)| k.kind() == kind_name).map(|(_, s)| s.clone()).unwrap_or_default();
    let Carried { object, dropped, mut notes, .. } = carry(&old, &schema);
    let shown = if namespace.is_empty() { name.clone() } else { format!("{namespace}/{name}") };
    let Some(mut object) = object else {
        report.push(format!("{source}: {kind_name} {shown}: left out"));
        report.extend(dropped.into_iter().map(|d| format!("  not carried: {d}")));
        return (Vec::new(), report, None);
    };
    // Tied to the old object by its kind, namespace and name (a file has no UID): `migrate` in
    // the cluster knows it as its own work.
    object["metadata"]["annotations"][MIGRATED_FROM] = json!(old.file_mark());
    place(&mut object, &namespace);
    let mut out = Vec::new();
    if let Some(copy) = super::secrets::elsewhere(&object["spec"], &namespace) {
        if let Some(fields) = object.pointer_mut("/spec/configSecret").and_then(Value::as_object_mut) {
            fields.remove("namespace");
        }
        let (other, secret_name) = (&copy.namespace, &copy.name);
        let into =
            if namespace.is_empty() { "the provider's namespace".to_string() } else { namespace.clone() };
        match secret(documents, other, secret_name) {
            Some(found) => {
                let mut made = found.clone();
                place(&mut made, &namespace);
                made["metadata"]["labels"][super::secrets::COPIED_FROM] = json!(copy.origin());
                notes.push(format!(
                    "spec.configSecret: Secret {other}/{secret_name} of these files copied into {into} (this operator reads only the provider's own namespace)"
                ));
                out.push(made);
            }
            None => notes.push(format!(
                "spec.configSecret: create Secret {secret_name} in {into}, a copy of {other}/{secret_name} (this operator reads only the provider's own namespace)"
            )),
        }
    }
    let mut unversioned = None;
    if object.pointer("/spec/version").and_then(Value::as_str).is_none_or(str::is_empty) {
        match running.get(&(kind_name.to_string(), namespace.clone(), name.clone())) {
            Some(version) => {
                object["spec"]["version"] = json!(version);
                notes.push(format!("spec.version set to {version}, the version that runs in the cluster"));
            }
            None => unversioned = Some(format!("{kind_name} {shown}")),
        }
    }
    report.push(format!("{source}: {kind_name} {shown}: converted"));
    report.extend(notes.into_iter().map(|n| format!("  changed: {n}")));
    report.extend(dropped.into_iter().map(|d| format!("  not carried: {d}")));
    out.insert(0, object);
    (out, report, unversioned)
}

/// Converts the documents of `files` (`(name, text)`), in their order.
pub fn convert(files: &[(String, String)]) -> Result<Converted, String> {
    convert_with(files, &Running::new())
}

/// [`convert`], giving each object without a version the one that runs (`running`).
pub fn convert_with(files: &[(String, String)], running: &Running) -> Result<Converted, String> {
    let mut all: Vec<(String, Value)> = Vec::new();
    for (source, text) in files {
        let documents: Vec<Value> =
            serde_saphyr::from_multiple(text).map_err(|e| format!("{source}: not YAML documents: {e}"))?;
        all.extend(documents.into_iter().filter(|d| !d.is_null()).map(|d| (source.clone(), d)));
    }
    let documents: Vec<Value> = all.iter().map(|(_, d)| d.clone()).collect();
    let schemas = super::spec_schemas()?;
    let mut out = Vec::new();
    let mut converted = Converted::default();
    for (source, document) in &all {
        if !theirs(document) {
            out.push(document.clone());
            continue;
        }
        let (objects, report, unversioned) = convert_one(document, &documents, &schemas, source, running);
        converted.unversioned.extend(unversioned);
        converted.providers += usize::from(!objects.is_empty());
        converted.report.extend(report);
        out.extend(objects);
    }
    // Where the providers go: migrate labels these namespaces once cluster-api-operator is
    // down; the files' Namespace documents are left without the label until then.
    let mut namespaces: Vec<&str> = all
        .iter()
        .filter(|(_, d)| theirs(d))
        .filter_map(|(_, d)| d["metadata"]["namespace"].as_str().filter(|n| !n.is_empty()))
        .collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    if !namespaces.is_empty() {
        converted.report.push(format!(
            "namespaces {}: butlerctl migrate labels them {}=true once cluster-api-operator is scaled down (so that this operator takes the objects over only then); add the label to their Namespace documents in Git after the move",
            namespaces.join(", "),
            crate::controller::wanted::policy::NAMESPACE_LABEL
        ));
    }
    converted.yaml = out
        .iter()
        .map(|o| serde_saphyr::to_string(o).map_err(|e| e.to_string()))
        .collect::<Result<Vec<_>, _>>()?
        .join("---\n");
    Ok(converted)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn converted(text: &str) -> (Vec<Value>, Converted) {
        let result = convert(&[("providers.yaml".into(), text.into())]).unwrap();
        (serde_saphyr::from_multiple(&result.yaml).unwrap(), result)
    }

    #[test]
    fn their_objects_become_ours_and_the_rest_passes_through() {
        let (out, result) = converted(
            "apiVersion: v1
kind: Namespace
metadata: {name: capi-system}
---
apiVersion: operator.cluster.x-k8s.io/v1alpha2
kind: CoreProvider
metadata: {name: cluster-api, namespace: capi-system}
---
apiVersion: operator.cluster.x-k8s.io/v1alpha2
kind: InfrastructureProvider
metadata: {name: azure, namespace: capz-system}
spec:
  version: v1.17.0
  manager: {verbosity: 1, controller: {cacheSyncTimeout: 120000000000}, somethingNew: x}
",
        );
        assert_eq!(result.providers, 2);
        assert_eq!(out[0]["kind"], "Namespace", "passed through");
        assert_eq!(out[1]["apiVersion"], "operator.butlerlabs.dev/v1alpha1");
        assert_eq!(out[1]["metadata"]["annotations"][MIGRATED_FROM], "CoreProvider capi-system/cluster-api");
        assert_eq!(out[2]["spec"]["manager"]["controller"]["cacheSyncTimeout"], 120000000000u64);
        assert_eq!(
            out[2]["spec"]["fetchConfig"]["url"],
            "https://github.com/kubernetes-sigs/cluster-api-provider-azure/releases/latest/infrastructure-components.yaml",
            "azure here means Butler's: the upstream one by its URL"
        );
        let report = result.report.join("\n");
        assert!(report.contains("not carried: spec.manager.somethingNew"), "{report}");
        assert!(
            report.contains("providers.yaml: CoreProvider capi-system/cluster-api: converted"),
            "{report}"
        );
        assert_eq!(
            result.unversioned,
            ["CoreProvider capi-system/cluster-api"],
            "said, for the command to refuse"
        );
        assert!(
            report.contains("namespaces capi-system, capz-system: butlerctl migrate labels them"),
            "{report}"
        );
    }

    #[test]
    fn v1alpha1_secret_fields_and_a_secret_elsewhere_are_carried() {
        let (out, result) = converted(
            "apiVersion: v1
kind: Secret
metadata: {name: azure-variables, namespace: capi-operator-system}
stringData: {AZURE_CLIENT_ID: x}
---
apiVersion: operator.cluster.x-k8s.io/v1alpha1
kind: InfrastructureProvider
metadata: {name: azure, namespace: capz-system}
spec: {version: v1.17.0, secretName: azure-variables, secretNamespace: capi-operator-system}
---
apiVersion: operator.cluster.x-k8s.io/v1alpha2
kind: InfrastructureProvider
metadata: {name: aws, namespace: capa-system}
spec: {version: v2.8.0, configSecret: {name: aws-variables, namespace: elsewhere}}
",
        );
        assert_eq!(out[0]["kind"], "Secret", "the original stays");
        assert_eq!(out[1]["spec"]["configSecret"], json!({"name": "azure-variables"}));
        assert_eq!(out[2]["kind"], "Secret");
        assert_eq!(out[2]["metadata"]["namespace"], "capz-system", "copied beside its provider");
        assert_eq!(
            out[2]["metadata"]["labels"][super::super::secrets::COPIED_FROM],
            "capi-operator-system.azure-variables"
        );
        assert_eq!(out[3]["spec"]["configSecret"], json!({"name": "aws-variables"}));
        let report = result.report.join("\n");
        assert!(
            report.contains("create Secret aws-variables in capa-system, a copy of elsewhere/aws-variables"),
            "{report}"
        );
    }

    #[test]
    fn an_object_without_a_namespace_or_a_spec_stays_so() {
        let (out, _) = converted(
            "apiVersion: operator.cluster.x-k8s.io/v1alpha2\nkind: CoreProvider\nmetadata: {name: cluster-api}\n",
        );
        assert!(out[0]["metadata"].get("namespace").is_none());
        assert_eq!(out[0]["spec"], json!({}));
        let broken = convert(&[("bad.yaml".into(), "a: [".into())]).unwrap_err();
        assert!(broken.starts_with("bad.yaml: not YAML documents"), "{broken}");
    }
}
