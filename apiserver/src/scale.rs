//! The scale subresource (`.../deployments/{name}/scale`, and a CRD's `subresources.scale`): the
//! object seen as an `autoscaling/v1` Scale, and a Scale written back as a change of the
//! object's replicas (what `kubectl scale` and autoscalers do). Pure: the store reads and writes.

use serde_json::{Value, json};

use crate::errors::{ApiError, Cause};
use crate::registry::ScalePaths;

fn pointer(path: &str) -> String {
    path.trim_start_matches('.').split('.').map(|p| format!("/{p}")).collect()
}

/// The Scale of `object`.
pub fn of(paths: &ScalePaths, object: &Value) -> Value {
    let meta = &object["metadata"];
    let replicas = object.pointer(&pointer(&paths.spec_replicas)).and_then(Value::as_i64).unwrap_or(0);
    let current = object.pointer(&pointer(&paths.status_replicas)).and_then(Value::as_i64).unwrap_or(0);
    let selector = match &paths.label_selector {
        Some(path) => object.pointer(&pointer(path)).and_then(Value::as_str).unwrap_or_default().to_string(),
        None => crate::selectors::text_of(&object["spec"]["selector"]),
    };
    // `replicas` is omitempty: a Scale of 0 says `spec: {}`.
    let spec = match replicas {
        0 => json!({}),
        n => json!({"replicas": n}),
    };
    let mut status = json!({"replicas": current});
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"],
                     "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]},
        "spec": spec,
        "status": status,
    })
}

/// The merge patch of the object that a written Scale asks for, checked as kube-apiserver
/// checks it (the name of the URL, replicas not negative; its resourceVersion, when set, a
/// precondition).
pub fn patch_for(paths: &ScalePaths, name: &str, scale: &Value) -> Result<Value, ApiError> {
    if let Some(named) = scale["metadata"]["name"].as_str().filter(|n| *n != name) {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({named}) does not match the name on the URL ({name})"
        )));
    }
    let replicas = scale["spec"]["replicas"].as_i64().unwrap_or(0);
    if replicas < 0 {
        return Err(ApiError::invalid(
            "autoscaling",
            "Scale",
            name,
            vec![Cause {
                reason: "FieldValueInvalid",
                message: format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                field: "spec.replicas".into(),
            }],
        ));
    }
    let mut patch = json!({});
    let steps: Vec<&str> = paths.spec_replicas.trim_start_matches('.').split('.').collect();
    let mut slot = &mut patch;
    for step in &steps[..steps.len().saturating_sub(1)] {
        slot[*step] = json!({});
        slot = slot.get_mut(*step).ok_or_else(|| ApiError::internal("a patch object"))?;
    }
    if let Some(last) = steps.last() {
        slot[*last] = json!(replicas);
    }
    if let Some(rv) = scale["metadata"]["resourceVersion"].as_str().filter(|rv| !rv.is_empty()) {
        patch["metadata"] = json!({"resourceVersion": rv});
    }
    Ok(patch)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn a_deployment_reads_and_writes_as_a_scale() {
        let rt = Registry::builtin().find("apps", "v1", "deployments").cloned().unwrap();
        let paths = rt.scale.clone().unwrap();
        let d = json!({"metadata": {"name": "web", "namespace": "n", "uid": "u", "resourceVersion": "7"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}}}, "status": {"replicas": 1}});
        let scale = of(&paths, &d);
        assert_eq!(scale["spec"], json!({"replicas": 2}));
        assert_eq!(scale["status"], json!({"replicas": 1, "selector": "app=web"}));
        let patch = patch_for(
            &paths,
            "web",
            &json!({"metadata": {"name": "web", "resourceVersion": "7"}, "spec": {"replicas": 0}}),
        )
        .unwrap();
        assert_eq!(patch, json!({"spec": {"replicas": 0}, "metadata": {"resourceVersion": "7"}}));
        assert_eq!(patch_for(&paths, "web", &json!({"spec": {"replicas": -1}})).unwrap_err().code, 422);
        assert_eq!(patch_for(&paths, "web", &json!({"metadata": {"name": "other"}})).unwrap_err().code, 400);
    }
}
