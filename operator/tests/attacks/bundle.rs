//! A bundle someone handed over: `butlerctl airgap load` applies the operator's manifest only
//! when it is this butlerctl's own, and provider ConfigMaps only; otherwise nothing at all.

use std::collections::BTreeMap;

use butler_operator::cli::airgap::load;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::Api;

use crate::support::Scenario;

const CONFIGMAP: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: infrastructure-x-v1.0.0\n  labels: {butler.butlerlabs.dev/provider: infrastructure-x}\ndata: {metadata: x}\n";

#[tokio::test]
async fn a_bundle_with_anything_but_provider_configmaps_or_another_manifest_applies_nothing() {
    let s = Scenario::new("attack-bundle").await;
    let binding = s.cluster.unique("bundle-admin");
    let planted = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: {binding}}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\nsubjects: [{{kind: Group, name: 'system:authenticated', apiGroup: rbac.authorization.k8s.io}}]\n"
    );
    let bundle = |files: &[(&str, String)]| -> BTreeMap<String, Vec<u8>> {
        files.iter().map(|(p, t)| (p.to_string(), t.clone().into_bytes())).collect()
    };
    // A binding among the ConfigMaps.
    let files =
        bundle(&[("configmaps/a.yaml", CONFIGMAP.to_string()), ("configmaps/b.yaml", planted.clone())]);
    let refused = load(&s.client, &files, &s.namespace, true, &|_| {}).await.unwrap_err().to_string();
    assert!(refused.contains("configmaps/b.yaml holds a ClusterRoleBinding"), "{refused}");
    // An operator manifest that is not this butlerctl's.
    let mut manifest = butler_operator::manifest::render(butler_repository::EMBEDDED_VERSION);
    manifest.push_str(&format!("---\n{planted}"));
    let files =
        bundle(&[("operator/butler-operator.yaml", manifest), ("configmaps/a.yaml", CONFIGMAP.to_string())]);
    let refused = load(&s.client, &files, &s.namespace, false, &|_| {}).await.unwrap_err().to_string();
    assert!(refused.contains("is not the install manifest of this butlerctl"), "{refused}");
    // Nothing of either was applied.
    let bindings: Api<ClusterRoleBinding> = Api::all(s.client.clone());
    assert!(bindings.get_opt(&binding).await.unwrap().is_none());
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(configmaps.get_opt("infrastructure-x-v1.0.0").await.unwrap().is_none(), "nothing half-applied");
}
