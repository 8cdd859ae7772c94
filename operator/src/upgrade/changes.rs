//! What an upgrade step would do to a provider's objects: both versions rendered as the
//! operator renders them (the provider's variables, its customizations), then compared by
//! kind, namespace and name. CRDs that the new version drops stay, as the operator keeps them.

use butler_repository::{
    ClusterctlConfig, ComponentsOptions, ImageOverrides, Repository, Version, process_components,
};
use serde_json::Value;

use super::providers::ProviderRow;
use crate::controller::wanted::config::{self, SecretCache};
use crate::controller::wanted::customize::customize;

/// The objects a step adds, changes and deletes, and the CRDs it drops but keeps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ObjectDiff {
    pub added: Vec<String>,
    pub changed: Vec<String>,
    pub deleted: Vec<String>,
    pub kept: Vec<String>,
}

fn key(object: &Value) -> String {
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match object["metadata"]["namespace"].as_str() {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

/// Compares two renderings. The version labels and image tags are part of the content: a
/// Deployment whose image moves counts as changed.
pub fn diff(current: &[Value], next: &[Value]) -> ObjectDiff {
    let find = |set: &[Value], k: &str| set.iter().find(|o| key(o) == k).cloned();
    let mut out = ObjectDiff::default();
    for object in next {
        let k = key(object);
        match find(current, &k) {
            None => out.added.push(k),
            Some(before) if before != *object => out.changed.push(k),
            Some(_) => {}
        }
    }
    for object in current {
        let k = key(object);
        if find(next, &k).is_none() {
            if object["kind"] == "CustomResourceDefinition" {
                out.kept.push(k);
            } else {
                out.deleted.push(k);
            }
        }
    }
    out
}

/// The CRDs of both renderings whose storage version differs, as `name: old -> new`.
pub fn storage_changes(current: &[Value], next: &[Value]) -> Vec<String> {
    let storage = |crd: &Value| {
        crd["spec"]["versions"].as_array()?.iter().find(|v| v["storage"] == true)?["name"]
            .as_str()
            .map(String::from)
    };
    let crds = |set: &[Value]| -> Vec<(String, Option<String>)> {
        set.iter()
            .filter(|o| o["kind"] == "CustomResourceDefinition")
            .map(|o| (o["metadata"]["name"].as_str().unwrap_or_default().to_string(), storage(o)))
            .collect()
    };
    let before = crds(current);
    crds(next)
        .into_iter()
        .filter_map(|(name, after)| {
            let (_, was) = before.iter().find(|(n, _)| *n == name)?;
            (was != &after).then(|| {
                format!("{name}: {} -> {}", was.as_deref().unwrap_or("-"), after.as_deref().unwrap_or("-"))
            })
        })
        .collect()
}

/// The diff counted by kind, for an upgrade's plan.
pub fn counted(diff: &ObjectDiff, storage: Vec<String>) -> crate::api::ObjectChanges {
    let by_kind = |keys: &[String]| {
        let mut counts = std::collections::BTreeMap::new();
        for k in keys {
            *counts.entry(k.split(' ').next().unwrap_or_default().to_string()).or_insert(0) += 1;
        }
        counts
    };
    crate::api::ObjectChanges {
        added: by_kind(&diff.added),
        changed: by_kind(&diff.changed),
        removed: by_kind(&diff.deleted),
        kept_crds: diff
            .kept
            .iter()
            .map(|k| k.trim_start_matches("CustomResourceDefinition ").to_string())
            .collect(),
        storage_versions: storage,
    }
}

/// The objects of `version` as the operator would apply them for `row`.
pub async fn render(
    client: &kube::Client,
    row: &ProviderRow,
    repo: &Repository,
    version: &str,
    operator_config: &ClusterctlConfig,
) -> Result<Vec<Value>, String> {
    let version = Version::parse(version, "a version").map_err(|e| e.to_string())?;
    let text = String::from_utf8(repo.components(&version).await.map_err(|e| e.to_string())?)
        .map_err(|_| format!("the components of {} {version} are not UTF-8 text", repo.provider()))?;
    let loaded =
        config::load(client, &SecretCache::default(), &row.namespace, &row.spec, &Default::default())
            .await
            .map_err(|e| e.0)?;
    let secret = loaded.variables;
    // As the operator: the config Secret, then the config file; never the environment.
    let lookup =
        |name: &str| secret.get(name).cloned().or_else(|| operator_config.variables.get(name).cloned());
    let images = config::merged_images(&operator_config.images, &loaded.images);
    render_text(&text, &row.spec, &row.label(), &row.namespace, &version.to_string(), &images, &lookup)
}

/// The objects of a release's components `text` as the operator installs them for a provider
/// labelled `label` in `namespace` with `spec`: variables and images put in, the provider's
/// pods held to the release's accounts, its `manager` and `deployment` settings, then its
/// patches; its Namespace left out.
pub fn render_text(
    text: &str,
    spec: &crate::api::ProviderSpec,
    label: &str,
    namespace: &str,
    version: &str,
    images: &ImageOverrides,
    variables: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Value>, String> {
    let what = format!("{label} {version}");
    let options = ComponentsOptions {
        what: &what,
        provider_label: label,
        target_namespace: Some(namespace),
        images,
        variables,
    };
    let mut objects =
        process_components(text, &options).and_then(|c| c.objects()).map_err(|e| format!("{what}: {e}"))?;
    crate::controller::wanted::admission::check_accounts(&objects)?;
    customize(&mut objects, spec, label)?;
    crate::controller::wanted::patches::apply(&mut objects, spec)?;
    objects.retain(|o| o["kind"] != "Namespace");
    Ok(objects)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn storage_version_moves_are_named_and_counted_by_kind() {
        let crd = |storage: &str| {
            json!({"kind": "CustomResourceDefinition", "metadata": {"name": "gadgets.x.io"},
                   "spec": {"versions": [{"name": "v1alpha1", "storage": storage == "v1alpha1"}, {"name": "v1beta1", "storage": storage == "v1beta1"}]}})
        };
        assert_eq!(
            storage_changes(&[crd("v1alpha1")], &[crd("v1beta1")]),
            ["gadgets.x.io: v1alpha1 -> v1beta1"]
        );
        assert!(storage_changes(&[crd("v1beta1")], &[crd("v1beta1")]).is_empty());
        let diff = ObjectDiff {
            added: vec!["Secret ns/a".into(), "Secret ns/b".into()],
            changed: vec!["Deployment ns/m".into()],
            deleted: vec![],
            kept: vec!["CustomResourceDefinition gadgets.x.io".into()],
        };
        let counted = counted(&diff, vec![]);
        assert_eq!(counted.added.get("Secret"), Some(&2));
        assert_eq!(counted.changed.get("Deployment"), Some(&1));
        assert_eq!(counted.kept_crds, ["gadgets.x.io"]);
    }

    #[test]
    fn added_changed_deleted_and_kept_crds() {
        let o = |kind: &str, name: &str, v: &str| json!({"kind": kind, "metadata": {"name": name, "namespace": "ns"}, "data": v});
        let crd = |name: &str| json!({"kind": "CustomResourceDefinition", "metadata": {"name": name}});
        let current = [
            o("ConfigMap", "settings", "1"),
            o("Deployment", "manager", "v1"),
            crd("gadgets.x.io"),
            o("Service", "s", "1"),
        ];
        let next = [o("Deployment", "manager", "v2"), o("Secret", "new", "1"), o("Service", "s", "1")];
        assert_eq!(
            diff(&current, &next),
            ObjectDiff {
                added: vec!["Secret ns/new".into()],
                changed: vec!["Deployment ns/manager".into()],
                deleted: vec!["ConfigMap ns/settings".into()],
                kept: vec!["CustomResourceDefinition gadgets.x.io".into()],
            }
        );
    }
}
