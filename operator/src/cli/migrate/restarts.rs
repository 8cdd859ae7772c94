//! Whether taking a Deployment over restarts its pods: the pod template this operator renders
//! against the one that runs. A running template carries what the API server filled in
//! (`protocol: TCP`, probe timings, `terminationMessagePath`, …), so each field the rendering
//! writes must be there with the same value, and the fields the provider's settings decide
//! (images, arguments, commands, environment, resources, scheduling, the account, the
//! template's labels and annotations) must not hold more than the rendering writes.

use serde_json::Value;

/// The fields of each container that the provider's settings decide whole.
const CONTAINER_FIELDS: [&str; 5] = ["image", "args", "command", "env", "resources"];
/// The fields of the pod spec that the provider's settings decide whole.
const POD_FIELDS: [&str; 5] =
    ["nodeSelector", "tolerations", "affinity", "imagePullSecrets", "serviceAccountName"];

/// Where the running template differs from the rendered one, as field paths (empty: the pods
/// keep running).
pub fn differences(rendered: &Value, running: &Value) -> Vec<String> {
    let mut found = Vec::new();
    written_the_same(rendered, running, "template", &mut found);
    for field in ["labels", "annotations"] {
        nothing_more(
            &rendered["metadata"][field],
            &running["metadata"][field],
            &format!("template.metadata.{field}"),
            &mut found,
        );
    }
    let (pod, live) = (&rendered["spec"], &running["spec"]);
    for field in POD_FIELDS {
        nothing_more(&pod[field], &live[field], &format!("template.spec.{field}"), &mut found);
    }
    for list in ["initContainers", "containers"] {
        let names = |spec: &Value| -> Vec<String> {
            spec[list]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["name"].as_str())
                .map(String::from)
                .collect()
        };
        // A container more or less, or another order, shows above as the list itself.
        if names(pod) != names(live) {
            continue;
        }
        for (mine, theirs) in
            pod[list].as_array().into_iter().flatten().zip(live[list].as_array().into_iter().flatten())
        {
            let at = format!("template.spec.{list}[{}]", mine["name"].as_str().unwrap_or_default());
            for field in CONTAINER_FIELDS {
                nothing_more(&mine[field], &theirs[field], &format!("{at}.{field}"), &mut found);
            }
        }
    }
    found.sort();
    found.dedup();
    found
}

/// Each field `rendered` writes is in `running` with the same value (lists item for item, of
/// the same length); what `running` has besides is the server's.
fn written_the_same(rendered: &Value, running: &Value, at: &str, found: &mut Vec<String>) {
    match (rendered, running) {
        (Value::Object(mine), Value::Object(theirs)) => {
            for (key, value) in mine {
                if value.is_null() {
                    continue;
                }
                written_the_same(
                    value,
                    theirs.get(key).unwrap_or(&Value::Null),
                    &format!("{at}.{key}"),
                    found,
                );
            }
        }
        (Value::Array(mine), Value::Array(theirs)) if mine.len() == theirs.len() => {
            for (i, (a, b)) in mine.iter().zip(theirs).enumerate() {
                let key = a["name"].as_str().map(String::from).unwrap_or_else(|| i.to_string());
                written_the_same(a, b, &format!("{at}[{key}]"), found);
            }
        }
        (mine, theirs) if same_scalar(mine, theirs) => {}
        _ => found.push(at.to_string()),
    }
}

/// `running` holds no more than `rendered` writes at a field the settings decide (an empty map
/// or list counts as none), and what it holds is what is written.
fn nothing_more(rendered: &Value, running: &Value, at: &str, found: &mut Vec<String>) {
    let none = |v: &Value| match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::String(s) => s.is_empty(),
        _ => false,
    };
    match (none(rendered), none(running)) {
        (true, true) => {}
        (true, false) | (false, true) => found.push(at.to_string()),
        (false, false) => {
            let mut inner = Vec::new();
            written_the_same(rendered, running, at, &mut inner);
            // Maps hold no keys the rendering lacks (labels, selectors, resource names).
            if let (Value::Object(mine), Value::Object(theirs)) = (rendered, running)
                && at.ends_with("labels") | at.ends_with("annotations") | at.ends_with("nodeSelector")
                && theirs.keys().any(|k| !mine.contains_key(k))
            {
                inner.push(at.to_string());
            }
            if let (Value::Object(mine), Value::Object(theirs)) = (rendered, running)
                && at.ends_with("resources")
            {
                for part in ["limits", "requests"] {
                    nothing_more(
                        &mine.get(part).cloned().unwrap_or_default(),
                        &theirs.get(part).cloned().unwrap_or_default(),
                        &format!("{at}.{part}"),
                        &mut inner,
                    );
                }
            }
            if !inner.is_empty() {
                found.push(at.to_string());
            }
        }
    }
}

/// Scalars equal as the API server stores them: numbers by value, and a quantity or port
/// written as a number or as text alike.
fn same_scalar(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Number(x), Value::String(y)) | (Value::String(y), Value::Number(x)) => x.to_string() == *y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn template(args: Value, extra: Value) -> Value {
        let mut t = json!({
            "metadata": {"labels": {"control-plane": "controller-manager"}},
            "spec": {"serviceAccountName": "capi-manager",
                     "containers": [{"name": "manager", "image": "mirror.local/capi/cluster-api-controller:v1.10.9",
                                     "args": args, "ports": [{"containerPort": 9443, "name": "webhook-server"}],
                                     "env": [{"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]}]}});
        json_patch::merge(&mut t, &extra);
        t
    }

    #[test]
    fn what_the_server_fills_in_restarts_nothing() {
        let rendered = template(json!(["--leader-elect", "--v=2"]), json!({}));
        let running = template(
            json!(["--leader-elect", "--v=2"]),
            json!({"spec": {"dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "schedulerName": "default-scheduler",
                            "serviceAccount": "capi-manager", "securityContext": {}}}),
        );
        let mut running = running;
        running["spec"]["containers"][0]["ports"][0]["protocol"] = json!("TCP");
        running["spec"]["containers"][0]["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] = json!("v1");
        running["spec"]["containers"][0]["terminationMessagePath"] = json!("/dev/termination-log");
        running["spec"]["containers"][0]["resources"] = json!({});
        assert_eq!(differences(&rendered, &running), Vec::<String>::new());
    }

    #[test]
    fn arguments_images_env_and_settings_that_differ_are_named() {
        let rendered = template(json!(["--leader-elect", "--leader-elect=true"]), json!({}));
        // cluster-api-operator rewrote the bare flag; an old image; an env var more; a node selector.
        let mut running =
            template(json!(["--leader-elect=true"]), json!({"spec": {"nodeSelector": {"zone": "a"}}}));
        running["spec"]["containers"][0]["image"] =
            json!("registry.k8s.io/cluster-api/cluster-api-controller:v1.10.9");
        running["spec"]["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "EXP", "value": "1"}));
        assert_eq!(
            differences(&rendered, &running),
            [
                "template.spec.containers[manager].args",
                "template.spec.containers[manager].env",
                "template.spec.containers[manager].image",
                "template.spec.nodeSelector",
            ]
        );
    }

    #[test]
    fn a_label_or_container_more_and_resources_dropped_are_named() {
        let rendered = template(json!([]), json!({}));
        let mut running = template(
            json!([]),
            json!({"metadata": {"labels": {"cluster.x-k8s.io/provider": "cluster-api"}}}),
        );
        running["spec"]["containers"][0]["resources"] = json!({"limits": {"memory": "500Mi"}});
        running["spec"]["containers"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "kube-rbac-proxy", "image": "proxy"}));
        assert_eq!(
            differences(&rendered, &running),
            ["template.metadata.labels", "template.spec.containers"]
        );
        let mut running = template(json!([]), json!({}));
        running["spec"]["containers"][0]["resources"] = json!({"limits": {"memory": "500Mi"}});
        assert_eq!(differences(&rendered, &running), ["template.spec.containers[manager].resources"]);
    }
}
