//! The defaults kube-apiserver fills into built-in kinds on every write, as its registry's
//! defaulting functions do (what `kubectl get -o yaml` shows a moment after a create):
//! Deployments and DaemonSets with their pod templates, admission policies and their bindings,
//! and the empty status of kinds whose status is a struct.

use serde_json::{Value, json};

use crate::registry::ResourceType;

fn default(slot: &mut Value, key: &str, value: Value) {
    if slot.is_object() && slot[key].is_null() {
        slot[key] = value;
    }
}

/// The object at `key` of `slot`, when there is one.
fn object_at<'a>(slot: &'a mut Value, key: &str) -> Option<&'a mut Value> {
    slot.get_mut(key).filter(|v| v.is_object())
}

/// Fills the defaults of `object`, a built-in kind of `rt`.
pub fn apply(rt: &ResourceType, object: &mut Value) {
    if rt.custom.is_some() {
        return;
    }
    match (rt.group.as_str(), rt.kind.as_str()) {
        ("apps", "Deployment") => {
            if let Some(spec) = object_at(object, "spec") {
                default(spec, "replicas", json!(1));
                default(
                    spec,
                    "strategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}),
                );
                if let Some(strategy) = object_at(spec, "strategy").filter(|s| s["type"] == "RollingUpdate") {
                    default(strategy, "rollingUpdate", json!({}));
                    if let Some(rolling) = object_at(strategy, "rollingUpdate") {
                        default(rolling, "maxUnavailable", json!("25%"));
                        default(rolling, "maxSurge", json!("25%"));
                    }
                }
                default(spec, "revisionHistoryLimit", json!(10));
                default(spec, "progressDeadlineSeconds", json!(600));
                pod_template(spec);
            }
        }
        ("apps", "ReplicaSet" | "StatefulSet") => {
            if let Some(spec) = object_at(object, "spec") {
                default(spec, "replicas", json!(1));
                pod_template(spec);
            }
        }
        ("apps", "DaemonSet") => {
            if let Some(spec) = object_at(object, "spec") {
                default(
                    spec,
                    "updateStrategy",
                    json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}),
                );
                default(spec, "revisionHistoryLimit", json!(10));
                pod_template(spec);
            }
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy") => {
            if let Some(spec) = object_at(object, "spec") {
                default(spec, "failurePolicy", json!("Fail"));
                if let Some(constraints) = object_at(spec, "matchConstraints") {
                    match_resources(constraints);
                }
            }
        }
        ("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding") => {
            if let Some(resources) = object_at(object, "spec").and_then(|s| object_at(s, "matchResources")) {
                match_resources(resources);
            }
        }
        _ => {}
    }
    // A status that is a struct is always written, empty or not.
    if rt.status && object.get("status").is_none_or(Value::is_null) {
        object["status"] = match rt.kind.as_str() {
            "Service" => json!({"loadBalancer": {}}),
            _ => json!({}),
        };
    }
}

fn match_resources(resources: &mut Value) {
    default(resources, "namespaceSelector", json!({}));
    default(resources, "objectSelector", json!({}));
    default(resources, "matchPolicy", json!("Equivalent"));
    for rule in resources.get_mut("resourceRules").and_then(Value::as_array_mut).into_iter().flatten() {
        default(rule, "scope", json!("*"));
    }
}

/// The pod template of a workload's `spec`, as the pod defaults make it.
fn pod_template(workload: &mut Value) {
    let Some(spec) = object_at(workload, "template").and_then(|t| object_at(t, "spec")) else { return };
    for list in ["initContainers", "containers"] {
        for container in spec.get_mut(list).and_then(Value::as_array_mut).into_iter().flatten() {
            default(container, "resources", json!({}));
            default(container, "terminationMessagePath", json!("/dev/termination-log"));
            default(container, "terminationMessagePolicy", json!("File"));
            let pull = match image_tag(container["image"].as_str().unwrap_or_default()) {
                Some("latest") | None => "Always",
                Some(_) => "IfNotPresent",
            };
            default(container, "imagePullPolicy", json!(pull));
            for port in container.get_mut("ports").and_then(Value::as_array_mut).into_iter().flatten() {
                default(port, "protocol", json!("TCP"));
            }
        }
    }
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "securityContext", json!({}));
    default(spec, "schedulerName", json!("default-scheduler"));
}

/// The tag of an image reference; none for a digest without a tag or no tag at all.
fn image_tag(image: &str) -> Option<&str> {
    let name = image.split('@').next().unwrap_or(image);
    if image.contains('@') && !name.rsplit('/').next().unwrap_or(name).contains(':') {
        return Some("digest");
    }
    let last = name.rsplit('/').next().unwrap_or(name);
    last.split_once(':').map(|(_, tag)| tag)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::Registry;

    #[test]
    fn images_pull_as_kubernetes_defaults_them() {
        assert_eq!(image_tag("registry.k8s.io/pause:3.10"), Some("3.10"));
        assert_eq!(image_tag("localhost:5000/pause"), None);
        assert_eq!(image_tag("pause:latest"), Some("latest"));
        assert_eq!(image_tag("pause@sha256:abc"), Some("digest"));
    }

    #[test]
    fn a_deployment_gets_the_defaults_kube_apiserver_writes() {
        let rt = Registry::builtin().find("apps", "v1", "deployments").cloned().unwrap();
        let mut d = json!({"spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x:1",
            "ports": [{"containerPort": 80}]}]}}}});
        apply(&rt, &mut d);
        assert_eq!(d["spec"]["replicas"], 1);
        assert_eq!(d["spec"]["strategy"]["rollingUpdate"]["maxSurge"], "25%");
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "IfNotPresent");
        assert_eq!(d["spec"]["template"]["spec"]["containers"][0]["ports"][0]["protocol"], "TCP");
        assert_eq!(d["spec"]["template"]["spec"]["schedulerName"], "default-scheduler");
        assert_eq!(d["status"], json!({}));
    }
}
