//! The pods a release runs: as ServiceAccounts of the release (or the namespace's `default`),
//! never another's, and within Pod Security's `baseline` unless the operator allows more
//! (`--allow-privileged-pods`). Every kind that holds a pod template is covered; the kinds
//! table ([`super::kinds`]) refuses the others that hold one (ReplicationController,
//! PodTemplate, Pod).

use std::collections::BTreeSet;

use serde_json::Value;

use super::{describe, text};

/// The kinds whose objects run pods: API group, kind, and where their pod spec is.
pub const POD_HOLDERS: &[(&str, &str, &str)] = &[
    ("apps", "Deployment", "/spec/template/spec"),
    ("apps", "DaemonSet", "/spec/template/spec"),
    ("apps", "StatefulSet", "/spec/template/spec"),
    ("apps", "ReplicaSet", "/spec/template/spec"),
    ("batch", "Job", "/spec/template/spec"),
    ("batch", "CronJob", "/spec/jobTemplate/spec/template/spec"),
    ("", "ReplicationController", "/spec/template/spec"),
    ("", "PodTemplate", "/template/spec"),
    ("", "Pod", "/spec"),
];

/// The pod spec an object holds, when it is of a kind that holds one.
pub fn pod_of(object: &Value) -> Option<&Value> {
    let r = butler_runtime::objects::ObjectRef::of(object);
    let holder = POD_HOLDERS.iter().find(|(group, kind, _)| *group == r.group() && *kind == r.kind)?;
    object.pointer(holder.2)
}

/// Whether the pods of a release's own objects (as rendered, before the provider object's
/// customisation, which its administrator writes) run as ServiceAccounts of the release, or
/// the namespace's `default`: a release's pods get no one else's rights.
pub fn check_accounts(objects: &[Value]) -> Result<(), String> {
    let accounts: BTreeSet<(&str, &str)> = objects
        .iter()
        .filter(|o| o["kind"] == "ServiceAccount" && o["apiVersion"] == "v1")
        .map(|o| (text(&o["metadata"]["namespace"]), text(&o["metadata"]["name"])))
        .collect();
    for object in objects {
        let Some(pod) = pod_of(object) else { continue };
        let account =
            pod["serviceAccountName"].as_str().or(pod["serviceAccount"].as_str()).unwrap_or_default();
        let namespace = text(&object["metadata"]["namespace"]);
        let own = accounts.contains(&(namespace, account));
        if !account.is_empty() && account != "default" && !own {
            return Err(format!(
                "{} is refused: its pods would run as the ServiceAccount {namespace}/{account}, which the provider's components do not define; a provider's pods run as its own ServiceAccounts",
                describe(object)
            ));
        }
    }
    Ok(())
}

/// The capabilities Pod Security's baseline lets a container add.
const BASELINE_CAPABILITIES: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];

/// The sysctls Pod Security's baseline allows.
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];

/// The SELinux types baseline allows.
const SELINUX_TYPES: &[&str] =
    &["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"];

/// What of a pod spec goes beyond Pod Security's `baseline`, in words; `None` within it.
pub fn beyond_baseline(pod: &Value) -> Option<String> {
    for host in ["hostNetwork", "hostPID", "hostIPC"] {
        if pod[host] == true {
            return Some(format!("share the node's namespaces ({host}: true)"));
        }
    }
    if let Some(volume) = pod["volumes"].as_array().into_iter().flatten().find(|v| !v["hostPath"].is_null()) {
        return Some(format!("mount a path of the node (the hostPath volume {:?})", text(&volume["name"])));
    }
    for sysctl in pod["securityContext"]["sysctls"].as_array().into_iter().flatten() {
        let name = text(&sysctl["name"]);
        if !SAFE_SYSCTLS.contains(&name) {
            return Some(format!("set the sysctl {name}"));
        }
    }
    if let Some(why) = security_context(&pod["securityContext"]) {
        return Some(why);
    }
    let containers = ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .flat_map(|list| pod[*list].as_array().into_iter().flatten());
    for container in containers {
        let name = text(&container["name"]);
        let context = &container["securityContext"];
        if context["privileged"] == true {
            return Some(format!("run the container {name:?} privileged"));
        }
        let added = context["capabilities"]["add"].as_array().into_iter().flatten().map(text);
        if let Some(capability) = added.into_iter().find(|c| !BASELINE_CAPABILITIES.contains(c)) {
            return Some(format!("give the container {name:?} the capability {capability}"));
        }
        if let Some(port) = container["ports"]
            .as_array()
            .into_iter()
            .flatten()
            .find_map(|p| p["hostPort"].as_i64().filter(|port| *port != 0))
        {
            return Some(format!("open the node's port {port} for the container {name:?}"));
        }
        if !matches!(context["procMount"].as_str(), None | Some("Default")) {
            return Some(format!("unmask /proc in the container {name:?}"));
        }
        if let Some(why) = security_context(context) {
            return Some(format!("{why} (the container {name:?})"));
        }
    }
    None
}

/// What of a pod's or container's securityContext goes beyond baseline.
fn security_context(context: &Value) -> Option<String> {
    if context["windowsOptions"]["hostProcess"] == true {
        return Some("run as a Windows host process".into());
    }
    if context["seccompProfile"]["type"] == "Unconfined" {
        return Some("run without a seccomp profile (Unconfined)".into());
    }
    if context["appArmorProfile"]["type"] == "Unconfined" {
        return Some("run without an AppArmor profile (Unconfined)".into());
    }
    let selinux = &context["seLinuxOptions"];
    let kind = selinux["type"].as_str().unwrap_or_default();
    if !SELINUX_TYPES.contains(&kind) || !selinux["user"].is_null() || !selinux["role"].is_null() {
        return Some("set SELinux options beyond the container types".into());
    }
    None
}

/// Whether every pod the set runs keeps to baseline, unless `privileged` allows more.
pub fn check_baseline(objects: &[Value], privileged: bool) -> Result<(), String> {
    if privileged {
        return Ok(());
    }
    for object in objects {
        if let Some(why) = pod_of(object).and_then(beyond_baseline) {
            return Err(format!(
                "{} is refused: its pods would {why}, beyond Pod Security's baseline; start the operator with --allow-privileged-pods if the provider needs it",
                describe(object)
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn holder(kind: &str, pod: Value) -> Value {
        let (api_version, path) = match kind {
            "CronJob" => ("batch/v1", "/spec/jobTemplate/spec/template/spec"),
            "PodTemplate" => ("v1", "/template/spec"),
            "ReplicationController" => ("v1", "/spec/template/spec"),
            _ => ("apps/v1", "/spec/template/spec"),
        };
        let mut object = json!({"apiVersion": api_version, "kind": kind, "metadata": {"name": "h", "namespace": "p-system"}});
        let mut at = &mut object;
        for part in path.trim_start_matches('/').split('/') {
            at = &mut at[part];
        }
        *at = pod;
        object
    }

    #[test]
    fn pods_beyond_baseline_are_refused_in_every_holder() {
        let cases = [
            (json!({"hostNetwork": true}), "share the node's namespaces (hostNetwork: true)"),
            (json!({"volumes": [{"name": "root", "hostPath": {"path": "/"}}]}), "mount a path of the node"),
            (
                json!({"containers": [{"name": "m", "securityContext": {"privileged": true}}]}),
                "run the container \"m\" privileged",
            ),
            (
                json!({"containers": [{"name": "m", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}]}),
                "the capability SYS_ADMIN",
            ),
            (
                json!({"initContainers": [{"name": "i", "ports": [{"hostPort": 22}]}]}),
                "open the node's port 22",
            ),
            (
                json!({"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}}),
                "set the sysctl kernel.msgmax",
            ),
            (json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}), "seccomp"),
        ];
        for kind in ["Deployment", "CronJob", "PodTemplate", "ReplicationController"] {
            for (pod, said) in &cases {
                let refused = check_baseline(&[holder(kind, pod.clone())], false).unwrap_err();
                assert!(refused.contains(said), "{kind}: {refused}");
                assert!(refused.contains("--allow-privileged-pods"), "{refused}");
                assert_eq!(check_baseline(&[holder(kind, pod.clone())], true), Ok(()));
            }
        }
        let fine = json!({"containers": [{"name": "m", "ports": [{"containerPort": 9443}],
            "securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
            "seccompProfile": {"type": "RuntimeDefault"}}}], "volumes": [{"name": "cert", "secret": {"secretName": "c"}}]});
        assert_eq!(check_baseline(&[holder("Deployment", fine)], false), Ok(()));
    }

    #[test]
    fn pods_run_as_the_providers_own_service_accounts_only() {
        let account = json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "manager", "namespace": "p-system"}});
        let runs_as = |kind: &str, name: &str| holder(kind, json!({"serviceAccountName": name}));
        assert_eq!(check_accounts(&[account.clone(), runs_as("Deployment", "manager")]), Ok(()));
        assert_eq!(check_accounts(&[account.clone(), runs_as("Deployment", "default")]), Ok(()));
        for kind in ["Deployment", "CronJob", "PodTemplate"] {
            let refused =
                check_accounts(&[account.clone(), runs_as(kind, "generic-garbage-collector")]).unwrap_err();
            assert!(
                refused.contains("would run as the ServiceAccount p-system/generic-garbage-collector"),
                "{refused}"
            );
        }
        let decoy_account = json!({"apiVersion": "decoy.test.io/v1", "kind": "ServiceAccount", "metadata": {"name": "x", "namespace": "p-system"}});
        assert!(
            check_accounts(&[decoy_account, runs_as("Deployment", "x")]).is_err(),
            "a decoy kind is no account"
        );
        let decoy = json!({"apiVersion": "decoy.test.io/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"serviceAccountName": "anyone"}}}});
        assert_eq!(
            check_accounts(&[decoy]),
            Ok(()),
            "a decoy kind runs no pods (the kinds table refuses it)"
        );
    }
}
