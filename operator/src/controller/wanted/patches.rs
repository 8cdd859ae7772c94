//! cluster-api-operator's patches of the rendered objects, applied after the operator's own
//! customisation and before the policy and the apply: `spec.manifestPatches` (RFC 7396 merge
//! patches that name the kind, and optionally the apiVersion, name and namespace, they apply
//! to) and `spec.patches` (a merge patch, or an RFC 6902 list of operations, for the objects a
//! target selects by group, version, kind, name, namespace and label selector). A patch that
//! matches nothing or does not apply fails the whole render, naming it: nothing is applied
//! half patched.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::api::{ProviderPatch, ProviderSpec};

/// Applies the spec's patches to `objects`.
pub fn apply(objects: &mut [Value], spec: &ProviderSpec) -> Result<(), String> {
    for (i, text) in spec.manifest_patches.iter().flatten().enumerate() {
        let field = format!("spec.manifestPatches[{i}]");
        let patch: Value = yaml(text).map_err(|e| format!("{field} is not YAML: {e}"))?;
        let kind = patch["kind"]
            .as_str()
            .ok_or_else(|| format!("{field} names no kind; a manifest patch says which kind it changes"))?;
        let target = Target {
            api_version: patch["apiVersion"].as_str(),
            kind: Some(kind),
            name: patch["metadata"]["name"].as_str(),
            namespace: patch["metadata"]["namespace"].as_str(),
            ..Target::default()
        };
        patch_matching(objects, &target, &field, |object| {
            json_patch::merge(object, &patch);
            Ok(())
        })?;
    }
    for (i, p) in spec.patches.iter().flatten().enumerate() {
        let field = format!("spec.patches[{i}]");
        let target = target_of(p, &field)?;
        let patch: Value = yaml(&p.patch).map_err(|e| format!("{field}.patch is not YAML: {e}"))?;
        let operations: Option<json_patch::Patch> = match &patch {
            Value::Array(_) => Some(
                serde_json::from_value(patch.clone())
                    .map_err(|e| format!("{field}.patch is not a list of RFC 6902 operations: {e}"))?,
            ),
            Value::Object(_) => None,
            _ => {
                return Err(format!(
                    "{field}.patch is neither a merge patch (a map) nor RFC 6902 operations (a list)"
                ));
            }
        };
        patch_matching(objects, &target, &field, |object| match &operations {
            Some(ops) => json_patch::patch(object, ops).map_err(|e| e.to_string()),
            None => {
                json_patch::merge(object, &patch);
                Ok(())
            }
        })?;
    }
    Ok(())
}

fn yaml(text: &str) -> Result<Value, String> {
    serde_saphyr::from_str(text).map_err(|e| e.to_string())
}

/// Which objects a patch is for; `None` matches any.
#[derive(Default)]
struct Target<'a> {
    group: Option<&'a str>,
    version: Option<&'a str>,
    api_version: Option<&'a str>,
    kind: Option<&'a str>,
    name: Option<&'a str>,
    namespace: Option<&'a str>,
    labels: Vec<Requirement>,
}

fn target_of<'a>(p: &'a ProviderPatch, field: &str) -> Result<Target<'a>, String> {
    let Some(t) = &p.target else { return Ok(Target::default()) };
    let labels = match t.label_selector.as_deref() {
        Some(text) => requirements(text).map_err(|e| format!("{field}.target.labelSelector: {e}"))?,
        None => Vec::new(),
    };
    Ok(Target {
        group: t.group.as_deref(),
        version: t.version.as_deref(),
        api_version: None,
        kind: t.kind.as_deref(),
        name: t.name.as_deref(),
        namespace: t.namespace.as_deref(),
        labels,
    })
}

impl Target<'_> {
    fn matches(&self, object: &Value) -> bool {
        let api_version = object["apiVersion"].as_str().unwrap_or_default();
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        let text = |path: &str| object.pointer(path).and_then(Value::as_str).unwrap_or_default().to_string();
        let labels: BTreeMap<String, String> =
            serde_json::from_value(object["metadata"]["labels"].clone()).unwrap_or_default();
        let wanted = |want: Option<&str>, have: &str| want.is_none_or(|w| w == have);
        wanted(self.group, group)
            && wanted(self.version, version)
            && wanted(self.api_version, api_version)
            && wanted(self.kind, &text("/kind"))
            && wanted(self.name, &text("/metadata/name"))
            && wanted(self.namespace, &text("/metadata/namespace"))
            && self.labels.iter().all(|r| r.holds(&labels))
    }
}

/// Applies `change` to every object `target` matches; none matched is an error.
fn patch_matching(
    objects: &mut [Value],
    target: &Target,
    field: &str,
    change: impl Fn(&mut Value) -> Result<(), String>,
) -> Result<(), String> {
    let mut matched = 0;
    for object in objects.iter_mut().filter(|o| target.matches(o)) {
        matched += 1;
        let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
        let kind = object["kind"].as_str().unwrap_or_default().to_string();
        change(object).map_err(|e| format!("{field} does not apply to {kind} {name}: {e}"))?;
    }
    match matched {
        0 => Err(format!("{field} matches no object of the components; check its kind, name and target")),
        _ => Ok(()),
    }
}

/// One requirement of a label selector as kubectl writes it.
#[derive(Debug, PartialEq)]
enum Requirement {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    Missing(String),
}

impl Requirement {
    fn holds(&self, labels: &BTreeMap<String, String>) -> bool {
        match self {
            Requirement::Equals(k, v) => labels.get(k) == Some(v),
            Requirement::NotEquals(k, v) => labels.get(k) != Some(v),
            Requirement::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            Requirement::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            Requirement::Exists(k) => labels.contains_key(k),
            Requirement::Missing(k) => !labels.contains_key(k),
        }
    }
}

/// `a=b,c!=d,e in (f,g),h notin (i),j,!k`.
fn requirements(text: &str) -> Result<Vec<Requirement>, String> {
    // Commas inside parentheses belong to the set.
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    let set = |rest: &str| -> Result<Vec<String>, String> {
        let inner = rest.trim().strip_prefix('(').and_then(|r| r.strip_suffix(')'));
        let inner = inner.ok_or_else(|| format!("{rest:?}: a set is written (a,b)"))?;
        Ok(inner.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect())
    };
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            if let Some((k, v)) = p.split_once("!=") {
                return Ok(Requirement::NotEquals(k.trim().into(), v.trim().into()));
            }
            if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                return Ok(Requirement::Equals(k.trim().into(), v.trim().into()));
            }
            if let Some((k, rest)) = p.split_once(" notin ") {
                return Ok(Requirement::NotIn(k.trim().into(), set(rest)?));
            }
            if let Some((k, rest)) = p.split_once(" in ") {
                return Ok(Requirement::In(k.trim().into(), set(rest)?));
            }
            if let Some(k) = p.strip_prefix('!') {
                return Ok(Requirement::Missing(k.trim().into()));
            }
            match p.contains(' ') {
                true => Err(format!(
                    "{p:?} is not a label requirement (k=v, k!=v, k in (a,b), k notin (a,b), k, !k)"
                )),
                false => Ok(Requirement::Exists(p.into())),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "capa-controller-manager", "namespace": "ns", "labels": {"tier": "manager"}},
                "spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "manager", "args": []}]}}}}),
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "capa-webhook", "namespace": "ns"}, "spec": {"ports": [{"port": 443}]}}),
        ]
    }

    fn spec(yaml: &str) -> ProviderSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn manifest_patches_merge_into_the_kinds_they_name() {
        let mut all = objects();
        let s = spec(
            "manifestPatches:\n- |\n  apiVersion: v1\n  kind: Service\n  metadata: {annotations: {a: b}}\n  spec: {type: NodePort}\n",
        );
        apply(&mut all, &s).unwrap();
        assert_eq!(all[1]["spec"]["type"], "NodePort");
        assert_eq!(all[1]["metadata"]["annotations"]["a"], "b");
        assert_eq!(all[0]["spec"]["replicas"], 1, "other kinds untouched");
    }

    #[test]
    fn patches_with_targets_as_merge_or_operations() {
        let mut all = objects();
        let s = spec(
            "patches:\n- target: {group: apps, kind: Deployment, labelSelector: 'tier in (manager, web),!skip'}\n  patch: |\n    - {op: add, path: /spec/template/spec/containers/0/args/-, value: --extra}\n- target: {kind: Service, name: capa-webhook}\n  patch: 'metadata: {labels: {x: z}}'\n",
        );
        apply(&mut all, &s).unwrap();
        assert_eq!(all[0]["spec"]["template"]["spec"]["containers"][0]["args"], json!(["--extra"]));
        assert_eq!(all[1]["metadata"]["labels"]["x"], "z");
    }

    #[test]
    fn a_patch_that_matches_nothing_or_does_not_apply_is_named() {
        let missing = spec("patches:\n- target: {kind: Deploymnt}\n  patch: 'spec: {replicas: 2}'\n");
        let error = apply(&mut objects(), &missing).unwrap_err();
        assert_eq!(
            error,
            "spec.patches[0] matches no object of the components; check its kind, name and target"
        );
        let broken =
            spec("patches:\n- target: {kind: Service}\n  patch: '[{op: remove, path: /spec/nothing}]'\n");
        let error = apply(&mut objects(), &broken).unwrap_err();
        assert!(error.starts_with("spec.patches[0] does not apply to Service capa-webhook:"), "{error}");
        let kindless = spec("manifestPatches: ['spec: {x: 1}']\n");
        assert!(
            apply(&mut objects(), &kindless).unwrap_err().contains("spec.manifestPatches[0] names no kind")
        );
        let selector = spec("patches:\n- target: {labelSelector: 'a b'}\n  patch: '{}'\n");
        assert!(
            apply(&mut objects(), &selector).unwrap_err().contains("spec.patches[0].target.labelSelector")
        );
    }
}
