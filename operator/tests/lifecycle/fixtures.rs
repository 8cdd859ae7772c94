//! Small providers of our own, published as air-gap ConfigMaps (one per version, under one
//! selector) so that the scenarios can upgrade, change contracts and drop objects.

use butler_operator::release::{CONFIGMAP_PROVIDER_LABEL, provider_configmap};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::support::Scenario;

pub use crate::shapes::converted_crd;

/// clusterctl metadata: 1.0 and 1.1 abide by v1beta1, 2.0 by v1beta2.
pub const METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
  - {major: 1, minor: 0, contract: v1beta1}
  - {major: 1, minor: 1, contract: v1beta1}
  - {major: 2, minor: 0, contract: v1beta2}
";

/// [`METADATA`] with a series 3.0 of contract `v1`, which supports no earlier contract: a core
/// provider there runs with `v1` providers only.
pub fn metadata_with_v1() -> String {
    format!("{METADATA}  - {{major: 3, minor: 0, contract: v1}}\n")
}

/// A node label no node carries: a pod that asks for it stays Pending on any cluster.
pub const NO_NODE_LABEL: &str = "scenario.butlerlabs.dev/no-node-carries-this";

/// The components of the test provider `name` at `version` whose manager Deployment never
/// becomes Available on any cluster: its pods ask for a node label no node carries
/// ([`NO_NODE_LABEL`]), so they are never scheduled.
pub fn broken_components(name: &str, version: &str) -> String {
    let text = components(name, version, &[]);
    let pod = format!("      serviceAccountName: {name}-manager\n");
    assert!(text.contains(&pod), "the test provider's pod spec");
    text.replace(&pod, &format!("{pod}      nodeSelector:\n        {NO_NODE_LABEL}: \"true\"\n"))
}

/// What a release of a test provider holds besides its ServiceAccount and Deployment.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// A ConfigMap `{name}-settings`.
    Settings,
    /// A CRD `gadgets.{name}.test.io`.
    Crd,
    /// An environment variable of the manager that a later release drops.
    Env,
}

/// The components YAML of a test provider `name` at `version`.
pub fn components(name: &str, version: &str, parts: &[Part]) -> String {
    let mut text = format!(
        "apiVersion: v1
kind: Namespace
metadata:
  name: {name}-system
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {name}-manager
  namespace: {name}-system
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {name}-controller-manager
  namespace: {name}-system
  labels:
    control-plane: {name}
spec:
  replicas: 1
  selector:
    matchLabels:
      control-plane: {name}
  template:
    metadata:
      labels:
        control-plane: {name}
    spec:
      serviceAccountName: {name}-manager
      containers:
        - name: manager
          image: registry.example.com/{name}:{version}
          args:
            - --leader-elect
            - --greeting=${{GREETING:=hello}}
"
    );
    if parts.contains(&Part::Env) {
        text.push_str("          env:\n            - name: DROPPED_LATER\n              value: \"yes\"\n");
    }
    if parts.contains(&Part::Settings) {
        text.push_str(&format!(
            "---
apiVersion: v1
kind: ConfigMap
metadata:
  name: {name}-settings
  namespace: {name}-system
data:
  version: {version}
"
        ));
    }
    if parts.contains(&Part::Crd) {
        text.push_str(&format!("---\n{}", gadget_crd(&format!("{name}.test.io"), "Namespaced")));
    }
    text
}

/// The CRD of the kind Gadget (`gadgets.{group}`), of `scope`, version v1, any fields allowed.
pub fn gadget_crd(group: &str, scope: &str) -> String {
    crd_of_versions(group, scope, &["v1"])
}

/// The namespaced Gadget CRD of `group` listing `versions` (any fields allowed), the last one
/// the storage version.
pub fn versioned_gadget_crd(group: &str, versions: &[&str]) -> String {
    crd_of_versions(group, "Namespaced", versions)
}

fn crd_of_versions(group: &str, scope: &str, versions: &[&str]) -> String {
    let listed: Vec<String> = versions
        .iter()
        .map(|v| {
            format!(
                "    - name: {v}\n      served: true\n      storage: {}\n      schema:\n        openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n",
                Some(v) == versions.last()
            )
        })
        .collect();
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.{group}
spec:
  group: {group}
  scope: {scope}
  names: {{kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}}
  versions:
{}",
        listed.concat()
    )
}

/// Publishes one version of a provider as a ConfigMap in the scenario's namespace, labelled
/// `butler.butlerlabs.dev/provider: {label}`; `components_file` is the provider type's.
pub async fn publish(s: &Scenario, label: &str, components_file: &str, version: &str, components: &str) {
    publish_with(s, label, components_file, version, components, METADATA).await
}

/// [`publish`] with the metadata given.
pub async fn publish_with(
    s: &Scenario,
    label: &str,
    components_file: &str,
    version: &str,
    components: &str,
    metadata: &str,
) {
    let files = [
        ("metadata.yaml".to_string(), metadata.to_string()),
        (components_file.to_string(), components.to_string()),
    ];
    let mut cm = provider_configmap(label, version, &files);
    cm.metadata.namespace = Some(s.namespace.clone());
    let name = cm.metadata.name.clone().expect("a named ConfigMap");
    Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .patch(&name, &PatchParams::apply("scenario").force(), &Patch::Apply(&cm))
        .await
        .unwrap_or_else(|e| panic!("publish {label} {version}: {e}"));
}

/// The fetchConfig of a provider published by [`publish`].
pub fn selector(label: &str) -> String {
    json!({"fetchConfig": {"selector": {"matchLabels": {CONFIGMAP_PROVIDER_LABEL: label}}}}).to_string()
}

/// The components of the test provider `name` at `version` with a CRD per kind of `kinds`
/// (shaped as [`converted_crd`], group `{name}.test.io`): a release that renames its kinds
/// ships other kinds than the one before (Cluster API's Docker provider replaced six
/// `Docker*` kinds by `Dev*` in v1.15).
pub fn components_with_kinds(name: &str, version: &str, kinds: &[&str]) -> String {
    let mut text = components(name, version, &[]);
    for kind in kinds {
        text.push_str(&format!(
            "---\n{}",
            converted_crd(name, &format!("{name}.test.io"), kind, "v1beta1", 0)
        ));
    }
    text
}
