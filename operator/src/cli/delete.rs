//! `butlerctl delete`: provider objects deleted in the safe order (every other provider before
//! the core provider), each waited for until it is gone, with what blocks it shown as the
//! operator says it. `--include-crd` sets `crdDeletionPolicy: Delete` first, as
//! `clusterctl delete --include-crd` removes the CRDs and every object of them.

use std::time::Instant;

use kube::api::{DeleteParams, DynamicObject};
use serde_json::json;

use super::apply::{Waits, patch, provider_api};
use crate::api::{KindNames, ProviderKind};
use crate::controller::vocabulary::ProviderKey;
use crate::upgrade::providers::{self, ProviderRow};

/// Which providers to delete.
#[derive(Debug, Clone)]
pub enum Which {
    All,
    /// By label (`infrastructure-harvester`, `butler`).
    Labels(Vec<String>),
}

/// The providers to delete, in the order to delete them: every other kind before the core.
pub fn order(rows: &[ProviderRow], which: &Which) -> Result<Vec<ProviderRow>, String> {
    let mut chosen: Vec<ProviderRow> = match which {
        Which::All => rows.to_vec(),
        Which::Labels(labels) => {
            let mut out = Vec::new();
            for label in labels {
                let row = providers::by_label(rows, label)?;
                out.push(row.clone());
            }
            out
        }
    };
    chosen.sort_by_key(|r| {
        (r.provider_kind == ProviderKind::Core, r.provider_kind, r.namespace.clone(), r.name.clone())
    });
    Ok(chosen)
}

/// The message of the condition that says why deletion waits, if any.
fn blocker(object: &DynamicObject) -> Option<String> {
    object.data["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["reason"] == "DeletionBlocked" || (c["type"] == "Ready" && c["reason"] == "Deleting"))
        .map(|c| {
            format!(
                "{}: {}",
                c["reason"].as_str().unwrap_or_default(),
                c["message"].as_str().unwrap_or_default()
            )
        })
}

/// Deletes the providers `which` names and waits for each; returns what was deleted.
pub async fn delete(
    client: &kube::Client,
    namespace: Option<&str>,
    which: &Which,
    include_crd: bool,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    let chosen = chosen(client, namespace, which).await?;
    delete_rows(client, &chosen, include_crd, waits, progress).await
}

/// The providers `which` names, in the order to delete them.
pub async fn chosen(
    client: &kube::Client,
    namespace: Option<&str>,
    which: &Which,
) -> Result<Vec<ProviderRow>, String> {
    let rows = providers::list(client, namespace).await?;
    let chosen = order(&rows, which)?;
    if chosen.is_empty() {
        return Err("no providers to delete".into());
    }
    Ok(chosen)
}

/// `--include-namespace`: the namespaces of the providers deleted, each deleted (with all it
/// holds, as `clusterctl delete --include-namespace` does) unless a provider object is still
/// there, which it names instead.
pub async fn delete_namespaces(
    client: &kube::Client,
    namespaces: &[String],
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    use k8s_openapi::api::core::v1::Namespace;
    let left = providers::list(client, None).await?;
    let api: kube::Api<Namespace> = kube::Api::all(client.clone());
    let mut done = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for namespace in namespaces.iter().filter(|n| seen.insert(n.as_str())) {
        let staying: Vec<String> = left
            .iter()
            .filter(|r| &r.namespace == namespace)
            .map(|r| format!("{} {}", r.kind, r.name))
            .collect();
        if !staying.is_empty() {
            done.push_str(&format!("Namespace {namespace} kept: {} is still there\n", staying.join(", ")));
            continue;
        }
        progress(&format!("Deleting Namespace {namespace}..."));
        match api.delete(namespace, &DeleteParams::default()).await {
            Ok(_) => done.push_str(&format!("Namespace {namespace} deleted\n")),
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => {
                return Err(format!(
                    "cannot delete Namespace {namespace}: {}",
                    butler_runtime::error::describe(&e)
                ));
            }
        }
    }
    Ok(done)
}

/// A provider object named as `KIND/NAMESPACE/NAME` (`InfrastructureProvider/capd-system/docker`).
pub fn parse_key(text: &str) -> Result<ProviderKey, String> {
    let parts: Vec<&str> = text.split('/').collect();
    let [kind, namespace, name] = parts[..] else {
        return Err(format!(
            "{text:?} is not KIND/NAMESPACE/NAME (InfrastructureProvider/capd-system/docker)"
        ));
    };
    let kind = ProviderKind::from_kind(kind).ok_or_else(|| {
        let kinds: Vec<&str> = ProviderKind::ALL.map(KindNames::kind).to_vec();
        format!("{text:?}: {kind:?} is not a provider kind; one of {}", kinds.join(", "))
    })?;
    if namespace.is_empty() || name.is_empty() {
        return Err(format!("{text:?}: give the namespace and the name"));
    }
    Ok(ProviderKey { kind, namespace: namespace.to_string(), name: name.to_string() })
}

/// Deletes exactly the provider objects `keys` names (those already gone are done), every other
/// kind before the core, each waited for: what a Helm release declared, and nothing else.
pub async fn delete_these(
    client: &kube::Client,
    keys: &[ProviderKey],
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    let rows = providers::list(client, None).await?;
    let named = |r: &ProviderRow| {
        keys.iter().any(|k| k.kind == r.provider_kind && k.namespace == r.namespace && k.name == r.name)
    };
    let chosen = order(&rows.into_iter().filter(named).collect::<Vec<_>>(), &Which::All)?;
    if chosen.is_empty() {
        return Ok("no provider of this release is left\n".into());
    }
    delete_rows(client, &chosen, false, waits, progress).await
}

/// Deletes `chosen` in their order, each waited for until it is gone.
async fn delete_rows(
    client: &kube::Client,
    chosen: &[ProviderRow],
    include_crd: bool,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    let mut done = String::new();
    for row in chosen {
        let what = format!("{} {}/{}", row.kind, row.namespace, row.name);
        let api = provider_api(client, row.provider_kind, &row.namespace);
        if include_crd {
            let policy = json!({"spec": {"crdDeletionPolicy": "Delete"}});
            if let Err(e) = patch(client, row.provider_kind, &row.namespace, &row.name, policy).await {
                // One that went on its own meanwhile (an earlier deletion finishing) is done.
                if !matches!(api.get_opt(&row.name).await, Ok(None)) {
                    return Err(e);
                }
            }
        }
        progress(&format!("Deleting {what}..."));
        match api.delete(&row.name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(e) => return Err(format!("cannot delete {what}: {}", butler_runtime::error::describe(&e))),
        }
        let started = Instant::now();
        let mut last_said = None;
        loop {
            match api.get_opt(&row.name).await.map_err(|e| butler_runtime::error::describe(&e))? {
                None => break,
                Some(object) => {
                    let blocked = blocker(&object);
                    if blocked.is_some() && blocked != last_said {
                        progress(&format!("  waiting: {}", blocked.as_deref().unwrap_or_default()));
                        last_said = blocked;
                    }
                    if started.elapsed() > waits.timeout {
                        return Err(format!(
                            "{what} is not gone after {:?}{}",
                            waits.timeout,
                            last_said.map(|m| format!("; {m}")).unwrap_or_default()
                        ));
                    }
                }
            }
            tokio::time::sleep(waits.poll).await;
        }
        if include_crd {
            crds_gone(client, row.provider_kind, &row.namespace, &row.name, &what, waits, progress).await?;
        }
        done.push_str(&format!("{what} deleted\n"));
    }
    Ok(done)
}

/// Waits until the CRDs the provider made are gone: a CRD stays, Terminating, while the API
/// server removes its objects. A timeout names the ones left and what their status says.
async fn crds_gone(
    client: &kube::Client,
    kind: crate::api::ProviderKind,
    namespace: &str,
    name: &str,
    what: &str,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), String> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let key = ProviderKey { kind, namespace: namespace.to_string(), name: name.to_string() };
    let selector: Vec<String> = key.labels().iter().map(|(k, v)| format!("{k}={v}")).collect();
    let params = kube::api::ListParams::default().labels(&selector.join(","));
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let started = Instant::now();
    let mut said = false;
    loop {
        let left = api.list(&params).await.map_err(|e| butler_runtime::error::describe(&e))?.items;
        if left.is_empty() {
            return Ok(());
        }
        let described: Vec<String> = left
            .iter()
            .map(|crd| {
                let name = crd.metadata.name.clone().unwrap_or_default();
                let terminating = crd
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .and_then(|c| c.iter().find(|c| c.type_ == "Terminating" && c.status == "True"));
                match terminating {
                    Some(c) => format!("{name} (Terminating: {})", c.message.clone().unwrap_or_default()),
                    None => name,
                }
            })
            .collect();
        if !said {
            progress(&format!("  waiting for the CRDs of {what} to go: {}", described.join(", ")));
            said = true;
        }
        if started.elapsed() > waits.timeout {
            return Err(format!(
                "the CRDs of {what} are not gone after {:?}: {}; their objects are still being removed, or a finalizer of an object holds them",
                waits.timeout,
                described.join(", ")
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_provider_is_named_by_kind_namespace_and_name() {
        let key = parse_key("InfrastructureProvider/capd-system/docker").unwrap();
        assert_eq!(
            (key.kind, key.namespace.as_str(), key.name.as_str()),
            (ProviderKind::Infrastructure, "capd-system", "docker")
        );
        assert!(parse_key("docker").unwrap_err().contains("is not KIND/NAMESPACE/NAME"));
        assert!(
            parse_key("Widget/ns/x")
                .unwrap_err()
                .contains("\"Widget\" is not a provider kind; one of CoreProvider")
        );
        assert!(parse_key("CoreProvider//x").unwrap_err().contains("give the namespace and the name"));
    }
}
