//! What ties an object to a GitOps tool or a Helm release, so that a move neither carries it
//! (Argo CD with label tracking and auto-prune would prune the new object, and this operator
//! then delete the provider's components) nor runs while such a tool still manages what it
//! changes (it would put cluster-api-operator's objects and replicas back).

use serde_json::Value;

/// Labels and annotations that say which tool or release manages an object, never carried to
/// the new provider object.
pub fn tracking(key: &str, value: &Value) -> bool {
    const PREFIXES: [&str; 6] = [
        "argocd.argoproj.io/",
        "helm.sh/",
        "meta.helm.sh/",
        "kustomize.toolkit.fluxcd.io/",
        "helm.toolkit.fluxcd.io/",
        "fluxcd.io/",
    ];
    PREFIXES.iter().any(|p| key.starts_with(p))
        || key == "app.kubernetes.io/instance"
        || key == "kubectl.kubernetes.io/last-applied-configuration"
        || (key == "app.kubernetes.io/managed-by" && value == "Helm")
}

/// The tool that manages an object, from its metadata, in words; `None` when none does.
pub fn owner(metadata: &Value) -> Option<String> {
    let text = |map: &str, key: &str| metadata[map][key].as_str().filter(|v| !v.is_empty());
    let label = |key: &str| text("labels", key);
    let annotation = |key: &str| text("annotations", key);
    if let Some(id) = annotation("argocd.argoproj.io/tracking-id") {
        let app = id.split_once(':').map_or(id, |(app, _)| app);
        return Some(format!("Argo CD (application {app})"));
    }
    if let Some(app) =
        label("argocd.argoproj.io/instance").or_else(|| annotation("argocd.argoproj.io/instance"))
    {
        return Some(format!("Argo CD (application {app})"));
    }
    for (kind, prefix) in [("Kustomization", "kustomize"), ("HelmRelease", "helm")] {
        if let Some(name) = label(&format!("{prefix}.toolkit.fluxcd.io/name")) {
            let namespace = label(&format!("{prefix}.toolkit.fluxcd.io/namespace")).unwrap_or_default();
            return Some(format!("Flux ({kind} {namespace}/{name})"));
        }
    }
    None
}

/// How to stop the tool named by [`owner`] for the move.
pub fn how_to_pause(owner: &str) -> &'static str {
    match owner.starts_with("Argo CD") {
        true => "turn its automated sync off (argocd app set APP --sync-policy none)",
        false => "suspend it (flux suspend kustomization NAME, or flux suspend helmrelease NAME)",
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tracking_keys_are_found_and_others_kept() {
        for (key, value) in [
            ("app.kubernetes.io/instance", json!("capi")),
            (
                "argocd.argoproj.io/tracking-id",
                json!("capi:operator.cluster.x-k8s.io/CoreProvider:capi-system/cluster-api"),
            ),
            ("helm.sh/chart", json!("cluster-api-operator-0.28.0")),
            ("meta.helm.sh/release-name", json!("capi-operator")),
            ("kustomize.toolkit.fluxcd.io/name", json!("infra")),
            ("app.kubernetes.io/managed-by", json!("Helm")),
        ] {
            assert!(tracking(key, &value), "{key}");
        }
        for (key, value) in [("team", json!("platform")), ("app.kubernetes.io/managed-by", json!("ops"))] {
            assert!(!tracking(key, &value), "{key}");
        }
    }

    #[test]
    fn the_managing_tool_is_named() {
        let argo = json!({"annotations": {"argocd.argoproj.io/tracking-id": "capi:apps/Deployment:capi-system/capi-operator"}});
        assert_eq!(owner(&argo).as_deref(), Some("Argo CD (application capi)"));
        let argo_label = json!({"labels": {"argocd.argoproj.io/instance": "platform"}});
        assert_eq!(owner(&argo_label).as_deref(), Some("Argo CD (application platform)"));
        let flux = json!({"labels": {"kustomize.toolkit.fluxcd.io/name": "infra", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}});
        assert_eq!(owner(&flux).as_deref(), Some("Flux (Kustomization flux-system/infra)"));
        let helm = json!({"labels": {"helm.toolkit.fluxcd.io/name": "capi", "helm.toolkit.fluxcd.io/namespace": "flux-system"}});
        assert_eq!(owner(&helm).as_deref(), Some("Flux (HelmRelease flux-system/capi)"));
        assert_eq!(
            owner(&json!({"labels": {"app.kubernetes.io/managed-by": "Helm"}})),
            None,
            "Helm alone undoes nothing"
        );
    }
}
