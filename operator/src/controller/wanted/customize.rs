//! The provider's `manager` and `deployment` settings applied to its Deployments: manager
//! settings become flags of the `manager` container and win over the same flags in
//! `containers[].args`; the `namespace` argument of containers is ignored, since providers
//! watch every namespace.

use std::collections::BTreeMap;

use butler_repository::ImageOverrides;
use serde_json::{Value, json};

use super::manager_flags::{for_release, manager_flags, set_flags, with_own_gates};
use crate::api::{ContainerSpec, ManagerSpec, ProviderSpec};

/// Applies `spec.manager` and `spec.deployment` to every Deployment of the components. The
/// error names the field and says what to do.
pub fn customize(objects: &mut [Value], spec: &ProviderSpec, component: &str) -> Result<(), String> {
    let managers = match manager_deployments(objects) {
        Ok(managers) => managers,
        // Nothing to apply to them: nothing to choose.
        Err(_) if spec.manager.is_none() && spec.deployment.is_none() => Vec::new(),
        Err(why) => return Err(format!("spec.manager and spec.deployment: {why}")),
    };
    let own = Settings {
        manager: spec.manager.as_ref(),
        deployment: spec.deployment.as_ref(),
        field: "spec".into(),
    };
    apply_settings(objects, &managers, &own, component)?;
    // cluster-api-operator's additionalDeployments: other Deployments of the components, by name.
    for (name, extra) in spec.additional_deployments.iter().flatten() {
        let field = format!("spec.additionalDeployments.{name}");
        let named: Vec<usize> = (0..objects.len())
            .filter(|i| {
                objects[*i]["kind"] == "Deployment" && objects[*i]["metadata"]["name"] == name.as_str()
            })
            .collect();
        if named.is_empty() {
            let all: Vec<&str> = objects
                .iter()
                .filter(|o| o["kind"] == "Deployment")
                .filter_map(|o| o["metadata"]["name"].as_str())
                .collect();
            return Err(format!(
                "{field}: the components have no Deployment {name:?} (they have {}); name one of those",
                if all.is_empty() { "none".to_string() } else { all.join(", ") }
            ));
        }
        let settings =
            Settings { manager: extra.manager.as_ref(), deployment: extra.deployment.as_ref(), field };
        apply_settings(objects, &named, &settings, component)?;
    }
    Ok(())
}

/// `manager` and `deployment` settings, and the field they are written under (for messages).
struct Settings<'a> {
    manager: Option<&'a ManagerSpec>,
    deployment: Option<&'a crate::api::DeploymentSpec>,
    field: String,
}

/// Applies `settings` to the Deployments at `targets`.
fn apply_settings(
    objects: &mut [Value],
    targets: &[usize],
    settings: &Settings,
    component: &str,
) -> Result<(), String> {
    let manager_flags = match settings.manager {
        Some(manager) => {
            manager_flags(manager).map_err(|e| e.replacen("spec.", &format!("{}.", settings.field), 1))?
        }
        None => Vec::new(),
    };
    let deployment = settings.deployment.cloned().unwrap_or_default();
    let containers: Vec<ContainerSpec> = deployment.containers.clone().unwrap_or_default();
    let mut seen: Vec<String> = Vec::new();
    let mut known: Vec<String> = Vec::new();
    for (_, object) in objects.iter_mut().enumerate().filter(|(i, _)| targets.contains(i)) {
        if let Some(replicas) = deployment.replicas {
            object["spec"]["replicas"] = json!(replicas);
        }
        // Read, not indexed mutably: a Deployment always has its pod spec.
        let Some(pod) = object.pointer_mut("/spec/template/spec") else { continue };
        if let Some(selector) = &deployment.node_selector {
            pod["nodeSelector"] = json!(selector);
        }
        if let Some(tolerations) = &deployment.tolerations {
            pod["tolerations"] = serde_json::to_value(tolerations).expect("tolerations serialize");
        }
        if let Some(affinity) = &deployment.affinity {
            pod["affinity"] = serde_json::to_value(affinity).expect("affinity serializes");
        }
        if let Some(account) = &deployment.service_account_name {
            pod["serviceAccountName"] = json!(account);
        }
        if let Some(secrets) = &deployment.image_pull_secrets {
            pod["imagePullSecrets"] = serde_json::to_value(secrets).expect("references serialize");
        }
        // The manager is the container named `manager`, else the first, as cluster-api-operator
        // picks it.
        let manager = pod["containers"]
            .as_array()
            .and_then(|cs| cs.iter().position(|c| c["name"] == "manager"))
            .unwrap_or(0);
        for (index, container) in
            pod.get_mut("containers").and_then(Value::as_array_mut).into_iter().flatten().enumerate()
        {
            let name = container["name"].as_str().unwrap_or_default().to_string();
            known.push(name.clone());
            if let Some(wanted) = containers.iter().find(|c| c.name == name) {
                seen.push(name.clone());
                apply_container(container, wanted, component)?;
            }
            if index == manager && !manager_flags.is_empty() {
                let mut args = container["args"].as_array().cloned().unwrap_or_default();
                let flags = for_release(with_own_gates(&manager_flags, &args), &args);
                set_flags(&mut args, &flags);
                container["args"] = Value::Array(args);
                if let Some(health) = &settings.manager.and_then(|m| m.health.clone()) {
                    if let Some(path) = &health.readiness_endpoint_name {
                        container["readinessProbe"]["httpGet"]["path"] =
                            json!(format!("/{}", path.trim_start_matches('/')));
                    }
                    if let Some(path) = &health.liveness_endpoint_name {
                        container["livenessProbe"]["httpGet"]["path"] =
                            json!(format!("/{}", path.trim_start_matches('/')));
                    }
                }
            }
        }
    }
    if let Some((i, c)) = containers.iter().enumerate().find(|(_, c)| !seen.contains(&c.name)) {
        return Err(format!(
            "{}.deployment.containers[{i}].name: the Deployment has no container {:?} (it has {}); name one of those",
            settings.field,
            c.name,
            if known.is_empty() { "none".to_string() } else { known.join(", ") }
        ));
    }
    Ok(())
}

/// The provider's manager Deployments (their indexes), which `manager` and `deployment` change,
/// by cluster-api-operator's rule: the one Deployment of the components, or of several those
/// named `ca*-controller-manager` (Cluster API Provider Azure ships Azure Service Operator's
/// `azureserviceoperator-controller-manager` beside its `capz-controller-manager`); else the one
/// named `*-controller-manager`. `Err` names the Deployments when none of several is the
/// manager.
fn manager_deployments(objects: &[Value]) -> Result<Vec<usize>, String> {
    let all: Vec<usize> = (0..objects.len()).filter(|i| objects[*i]["kind"] == "Deployment").collect();
    if all.len() <= 1 {
        return Ok(all);
    }
    let name = |i: &usize| objects[*i]["metadata"]["name"].as_str().unwrap_or_default();
    let named = |test: &dyn Fn(&str) -> bool| -> Vec<usize> {
        all.iter().copied().filter(|i| test(name(i))).collect()
    };
    let providers = named(&|n| n.starts_with("ca") && n.ends_with("-controller-manager"));
    if !providers.is_empty() {
        return Ok(providers);
    }
    match named(&|n| n.ends_with("-controller-manager")).as_slice() {
        [one] => Ok(vec![*one]),
        _ => Err(format!(
            "the components have several Deployments ({}) and none is the provider's manager (ca*-controller-manager, or the one *-controller-manager); set them through spec.additionalDeployments by name",
            all.iter().map(name).collect::<Vec<_>>().join(", ")
        )),
    }
}

fn apply_container(container: &mut Value, wanted: &ContainerSpec, component: &str) -> Result<(), String> {
    if wanted.image.is_some() && wanted.image_url.is_some() {
        return Err(format!(
            "spec.deployment.containers[{}]: image and imageUrl both replace the image; keep one",
            wanted.name
        ));
    }
    if let Some(url) = &wanted.image_url {
        container["image"] = json!(url);
    }
    if let Some(command) = &wanted.command {
        container["command"] = json!(command);
    }
    if let Some(image) = &wanted.image {
        let current = container["image"].as_str().unwrap_or_default().to_string();
        let overrides = ImageOverrides(BTreeMap::from([(
            "all".to_string(),
            butler_repository::ImageMeta {
                repository: image.repository.clone(),
                name: image.name.clone(),
                tag: image.tag.clone(),
            },
        )]));
        let replaced = overrides
            .apply(component, &current)
            .map_err(|e| format!("the image of container {}: {e}", wanted.name))?;
        container["image"] = json!(replaced);
    }
    if let Some(args) = &wanted.args {
        let flags: Vec<(String, String)> = args
            .iter()
            .filter(|(k, _)| k.as_str() != "namespace")
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut current = container["args"].as_array().cloned().unwrap_or_default();
        set_flags(&mut current, &flags);
        container["args"] = Value::Array(current);
    }
    if let Some(env) = &wanted.env {
        let mut current = container["env"].as_array().cloned().unwrap_or_default();
        // As cluster-api-operator sets them: one of the same name removed, each appended at the end.
        for var in env {
            let value = serde_json::to_value(var).expect("env vars serialize");
            if let Some(i) = current.iter().position(|e| e["name"] == var.name.as_str()) {
                current.remove(i);
            }
            current.push(value);
        }
        container["env"] = Value::Array(current);
    }
    if let Some(resources) = &wanted.resources {
        container["resources"] = serde_json::to_value(resources).expect("resources serialize");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({"kind": "Deployment", "spec": {"replicas": 1, "template": {"spec": {"containers": [
            {"name": "manager", "image": "ghcr.io/x/manager:v1", "args": ["--leader-elect", "--v=1", "--sync-period=1h"],
             "readinessProbe": {"httpGet": {"path": "/readyz"}}},
            {"name": "sidecar", "image": "busybox:1"}
        ]}}}})
    }

    fn spec(yaml: &str) -> ProviderSpec {
        serde_saphyr::from_str(yaml).unwrap()
    }

    #[test]
    fn cluster_api_operators_manager_fields_are_emitted_as_it_emits_them() {
        let mut objects = vec![deployment()];
        let spec = spec(
            "manager:\n  leaderElection: {leaderElect: true, resourceLock: leases, resourceName: capi, resourceNamespace: capi-system}\n  gracefulShutDown: 30s\n  webhook: {host: 0.0.0.0, port: 9443}\n  controller: {groupKindConcurrency: {Cluster.cluster.x-k8s.io: 5}, recoverPanic: true}\n  metrics: {bindAddress: ':8080'}\n  additionalArgs: {'--kube-api-qps': '50', v: '2'}\n  verbosity: 4\n",
        );
        customize(&mut objects, &spec, "infrastructure-x").unwrap();
        let args = &objects[0]["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(
            args,
            &json!([
                // A bare --leader-elect stays; cluster-api-operator appends its =true form.
                "--leader-elect",
                "--v=2",
                "--sync-period=1h",
                "--cluster.cluster.x-k8s.io-concurrency=5",
                "--leader-elect=true",
                "--leader-election-id=capi-system/capi",
                "--metrics-bind-addr=:8080",
                "--webhook-host=0.0.0.0",
                "--webhook-port=9443",
                "--kube-api-qps=50",
            ])
        );
    }

    /// What cluster-api-operator v0.28 renders, by its rules: `--insecure-diagnostics` only when
    /// true; the lease timings only while leader election is on, in whole seconds; a variable
    /// set again removed from its place and appended.
    #[test]
    fn cluster_api_operators_rules_for_diagnostics_leases_and_env() {
        let mut objects = vec![json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
            {"name": "manager", "args": ["--diagnostics-address=:8443"],
             "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]}]}}}})];
        let off = spec(
            "manager:\n  metrics: {insecureDiagnostics: false}\n  leaderElection: {leaderElect: false, leaseDuration: 15s, renewDeadline: 10s, retryPeriod: 2s}\ndeployment:\n  containers:\n  - name: manager\n    env: [{name: A, value: '3'}]\n",
        );
        customize(&mut objects, &off, "c").unwrap();
        let manager = &objects[0]["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(manager["args"], json!(["--diagnostics-address=:8443", "--leader-elect=false"]));
        assert_eq!(manager["env"], json!([{"name": "B", "value": "2"}, {"name": "A", "value": "3"}]));
        let mut objects = vec![deployment()];
        let on = spec(
            "manager:\n  metrics: {insecureDiagnostics: true}\n  leaderElection: {leaderElect: true, leaseDuration: 1m30s, renewDeadline: 10s}\n  syncPeriod: 10m\n",
        );
        customize(&mut objects, &on, "c").unwrap();
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["args"],
            json!([
                "--leader-elect",
                "--v=1",
                "--sync-period=600s",
                "--leader-elect=true",
                "--leader-elect-lease-duration=90s",
                "--leader-elect-renew-deadline=10s",
                "--insecure-diagnostics=true",
            ])
        );
    }

    #[test]
    fn the_metrics_address_goes_to_the_flag_the_release_has() {
        let mut objects = vec![deployment()];
        objects[0]["spec"]["template"]["spec"]["containers"][0]["args"] =
            json!(["--diagnostics-address=:8443", "--insecure-diagnostics=false"]);
        customize(&mut objects, &spec("manager:\n  metrics: {bindAddress: ':9090'}\n"), "c").unwrap();
        let args = &objects[0]["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(args, &json!(["--diagnostics-address=:9090", "--insecure-diagnostics=false"]));
        let mut older = vec![deployment()];
        customize(&mut older, &spec("manager:\n  metrics: {bindAddress: ':9090'}\n"), "c").unwrap();
        let args = older[0]["spec"]["template"]["spec"]["containers"][0]["args"].as_array().unwrap().clone();
        assert!(args.contains(&json!("--metrics-bind-addr=:9090")), "{args:?}");
    }

    #[test]
    fn manager_settings_go_to_the_first_container_when_none_is_named_manager() {
        let mut objects = vec![deployment()];
        objects[0]["spec"]["template"]["spec"]["containers"] =
            json!([{"name": "controller", "args": []}, {"name": "sidecar", "args": []}]);
        customize(&mut objects, &spec("manager: {verbosity: 3}\n"), "c").unwrap();
        let containers = &objects[0]["spec"]["template"]["spec"]["containers"];
        assert_eq!(containers[0]["args"], json!(["--v=3"]), "as cluster-api-operator picks the manager");
        assert_eq!(containers[1]["args"], json!([]));
    }

    #[test]
    fn deployment_fields_of_cluster_api_operator_reach_the_manager_deployment_only() {
        let other = json!({"kind": "Deployment", "metadata": {"name": "azureserviceoperator-controller-manager"},
            "spec": {"template": {"spec": {"containers": [{"name": "manager", "image": "aso:v2", "args": []}]}}}});
        let mut manager = deployment();
        manager["metadata"] = json!({"name": "capz-controller-manager"});
        let mut objects = vec![manager, other.clone()];
        let wanted = spec(
            "deployment:\n  serviceAccountName: capz-manager\n  imagePullSecrets: [{name: mirror}]\n  containers:\n  - name: manager\n    imageUrl: mirror.local/capz:v1.17.0\n    command: [/manager, --extra]\nmanager: {verbosity: 3}\n",
        );
        customize(&mut objects, &wanted, "infrastructure-azure").unwrap();
        let pod = &objects[0]["spec"]["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], "capz-manager");
        assert_eq!(pod["imagePullSecrets"], json!([{"name": "mirror"}]));
        assert_eq!(pod["containers"][0]["image"], "mirror.local/capz:v1.17.0");
        assert_eq!(pod["containers"][0]["command"], json!(["/manager", "--extra"]));
        assert_eq!(objects[1], other, "another Deployment of the components is left as it is");
        let both = spec(
            "deployment:\n  containers:\n  - name: manager\n    imageUrl: a/b:c\n    image: {tag: v2}\n",
        );
        let error = customize(&mut [deployment()], &both, "c").unwrap_err();
        assert!(error.contains("image and imageUrl both replace the image"), "{error}");
    }

    #[test]
    fn several_deployments_without_a_manager_among_them_are_named_when_settings_are_asked() {
        let named = |name: &str| {
            let mut d = deployment();
            d["metadata"] = json!({"name": name});
            d
        };
        let mut two = vec![named("web"), named("worker")];
        customize(&mut two, &spec("{}"), "c").unwrap();
        let error = customize(&mut two, &spec("manager: {verbosity: 3}\n"), "c").unwrap_err();
        assert!(error.contains("several Deployments (web, worker)"), "{error}");
        let mut one_manager = vec![named("butler-controller-manager"), named("webhook")];
        customize(&mut one_manager, &spec("manager: {verbosity: 3}\n"), "c").unwrap();
        assert!(
            one_manager[0].to_string().contains("--v=3") && !one_manager[1].to_string().contains("--v=3")
        );
    }

    #[test]
    fn keys_written_with_their_dashes_are_the_same_flags() {
        let mut objects = vec![deployment()];
        let spec = spec(
            "deployment:\n  containers:\n  - name: manager\n    args: {'--v': '4', '-sync-period': 5m, '--extra': x}\n",
        );
        customize(&mut objects, &spec, "infrastructure-x").unwrap();
        let args = &objects[0]["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(args, &json!(["--leader-elect", "--v=4", "--sync-period=5m", "--extra=x"]));
    }

    #[test]
    fn feature_gates_join_the_providers_own() {
        let mut objects = vec![deployment()];
        objects[0]["spec"]["template"]["spec"]["containers"][0]["args"] =
            json!(["--feature-gates=MachinePool=true,ClusterTopology=false", "--v=1"]);
        let spec = spec("manager:\n  featureGates: {ClusterTopology: true, RuntimeSDK: false}\n");
        customize(&mut objects, &spec, "infrastructure-x").unwrap();
        let args = &objects[0]["spec"]["template"]["spec"]["containers"][0]["args"];
        assert_eq!(
            args,
            &json!(["--feature-gates=ClusterTopology=true,MachinePool=true,RuntimeSDK=false", "--v=1"])
        );
    }

    #[test]
    fn manager_settings_become_flags_that_win_over_container_args() {
        let mut objects = vec![deployment()];
        let spec = spec(
            "manager:\n  syncPeriod: 600s\n  verbosity: 3\n  featureGates: {Zeta: true, Alpha: false}\n  health: {readinessEndpointName: ready}\n  leaderElection: {leaderElect: false}\ndeployment:\n  replicas: 2\n  nodeSelector: {tier: infra}\n  containers:\n  - name: manager\n    args: {v: '9', namespace: other, extra: x}\n    image: {repository: mirror.local/x, tag: v2}\n    env: [{name: A, value: b}]\n",
        );
        customize(&mut objects, &spec, "infrastructure-x").unwrap();
        let d = &objects[0];
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(d["spec"]["template"]["spec"]["nodeSelector"], json!({"tier": "infra"}));
        let manager = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            manager["args"],
            json!([
                "--leader-elect",
                "--v=3",
                "--sync-period=600s",
                "--extra=x",
                "--leader-elect=false",
                "--feature-gates=Alpha=false,Zeta=true"
            ]),
            "manager settings win over args; the namespace arg is ignored"
        );
        assert_eq!(manager["image"], "mirror.local/x/manager:v2");
        assert_eq!(manager["env"], json!([{"name": "A", "value": "b"}]));
        assert_eq!(manager["readinessProbe"]["httpGet"]["path"], "/ready");
    }

    #[test]
    fn verbosity_one_is_the_managers_default_and_passes_no_flag() {
        let mut objects = vec![deployment()];
        customize(&mut objects, &spec("manager: {verbosity: 1}\n"), "c").unwrap();
        assert_eq!(objects, vec![deployment()], "verbosity 1 changes nothing");
        customize(&mut objects, &spec("manager: {verbosity: 0}\n"), "c").unwrap();
        let args = objects[0].pointer("/spec/template/spec/containers/0/args").unwrap().to_string();
        assert!(args.contains("--v=0"), "{args}");
    }

    #[test]
    fn debug_sets_verbosity_and_profiler_and_refuses_other_fields() {
        let mut objects = vec![deployment()];
        customize(&mut objects, &spec("manager: {debug: true}\n"), "c").unwrap();
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["args"],
            json!(["--leader-elect", "--v=5", "--sync-period=1h", "--profiler-address=localhost:6060"])
        );
        let error =
            customize(&mut [deployment()], &spec("manager: {debug: true, verbosity: 2}\n"), "c").unwrap_err();
        assert!(error.starts_with("spec.manager.debug sets verbosity"), "{error}");
    }

    #[test]
    fn a_flag_written_without_equals_stays_and_its_new_value_follows_it() {
        let mut objects = vec![json!({"kind": "Deployment", "spec": {"template": {"spec": {"containers": [
            {"name": "manager", "args": ["--leader-elect", "--v", "1", "--sync-period", "10m", "--extra"]}]}}}})];
        customize(&mut objects, &spec("manager: {verbosity: 3, syncPeriod: 600s}\n"), "c").unwrap();
        assert_eq!(
            objects[0]["spec"]["template"]["spec"]["containers"][0]["args"],
            json!([
                "--leader-elect",
                "--v",
                "1",
                "--sync-period",
                "10m",
                "--extra",
                "--sync-period=600s",
                "--v=3"
            ]),
            "as cluster-api-operator sets them; the manager reads the last"
        );
    }

    #[test]
    fn an_unknown_container_is_an_error_naming_the_field() {
        let error = customize(&mut [deployment()], &spec("deployment:\n  containers:\n  - name: mgr\n"), "c")
            .unwrap_err();
        assert_eq!(
            error,
            "spec.deployment.containers[0].name: the Deployment has no container \"mgr\" (it has manager, sidecar); name one of those"
        );
    }
}
