//! `butler-operator uninstall --keep`: the chart's pre-delete hook when a Helm release keeps its
//! providers (`uninstall.deleteProviders=false`). The operator is scaled to none first (else it
//! would put its finalizer back), then its finalizer is taken off each kept provider object: the
//! objects and their components stay and run on, and a provider object deleted later goes at
//! once (its components left in place) instead of waiting for an operator that is gone.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::apply::{Waits, provider_api};
use crate::api::{KindNames, PROVIDER_FINALIZER};
use crate::controller::vocabulary::ProviderKey;

/// The finalizers without the operator's, when it holds one.
pub fn without_ours(finalizers: &[String]) -> Option<Vec<String>> {
    finalizers
        .iter()
        .any(|f| f == PROVIDER_FINALIZER)
        .then(|| finalizers.iter().filter(|f| *f != PROVIDER_FINALIZER).cloned().collect())
}

/// `NAMESPACE/NAME` of a Deployment.
pub fn parse_deployment(text: &str) -> Result<(String, String), String> {
    match text.split_once('/') {
        Some((namespace, name)) if !namespace.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((namespace.to_string(), name.to_string()))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME (butler-system/butler-operator)")),
    }
}

fn describe(e: &kube::Error) -> String {
    butler_runtime::error::describe(e)
}

/// Scales the operator's Deployment to none and waits until it runs no pod.
async fn stop_operator(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    waits: Waits,
) -> Result<(), String> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let scale = Patch::Merge(json!({"spec": {"replicas": 0}}));
    match api.patch_scale(name, &PatchParams::default(), &scale).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(e) => {
            return Err(format!("cannot scale the operator {namespace}/{name} to none: {}", describe(&e)));
        }
    }
    let started = Instant::now();
    loop {
        let running = match api.get_opt(name).await.map_err(|e| describe(&e))? {
            None => 0,
            Some(d) => d.status.and_then(|s| s.replicas).unwrap_or(0),
        };
        if running == 0 {
            return Ok(());
        }
        if started.elapsed() > waits.timeout {
            return Err(format!(
                "the operator {namespace}/{name} still runs {running} pods after {:?}; nothing was changed",
                waits.timeout
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}

/// Keeps the provider objects `keys` names: the operator (`operator`, its Deployment) stopped,
/// then its finalizer taken off each, checked again a moment later (a pod of the operator that
/// was still going could have put it back). Returns what was done.
pub async fn keep_these(
    client: &kube::Client,
    keys: &[ProviderKey],
    operator: Option<&(String, String)>,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    if let Some((namespace, name)) = operator {
        progress(&format!("Scaling the operator {namespace}/{name} to none..."));
        stop_operator(client, namespace, name, waits).await?;
    }
    let mut done = String::new();
    for key in keys {
        let what = format!("{} {}/{}", key.kind.kind(), key.namespace, key.name);
        let api = provider_api(client, key.kind, &key.namespace);
        for round in 0..3 {
            let Some(object) = api.get_opt(&key.name).await.map_err(|e| describe(&e))? else { break };
            let finalizers = object.metadata.finalizers.clone().unwrap_or_default();
            let Some(rest) = without_ours(&finalizers) else { break };
            // Against the version read: a finalizer another writer added meanwhile stays.
            let patch = json!([
                {"op": "test", "path": "/metadata/resourceVersion", "value": object.metadata.resource_version},
                {"op": "replace", "path": "/metadata/finalizers", "value": rest},
            ]);
            let patch: json_patch::Patch = serde_json::from_value(patch).expect("a JSON patch");
            match api.patch(&key.name, &PatchParams::default(), &Patch::<()>::Json(patch)).await {
                Ok(_) | Err(kube::Error::Api(_)) if round < 2 => {}
                Ok(_) => {}
                Err(e) => return Err(format!("cannot release {what}: {}", describe(&e))),
            }
            tokio::time::sleep(Duration::from_secs(1).min(waits.poll * 2)).await;
        }
        let still = api.get_opt(&key.name).await.map_err(|e| describe(&e))?;
        if still
            .as_ref()
            .is_some_and(|o| without_ours(o.metadata.finalizers.as_deref().unwrap_or_default()).is_some())
        {
            return Err(format!(
                "{what} keeps the operator's finalizer: an operator still runs and puts it back; stop it and run the uninstall again"
            ));
        }
        if still.is_some() {
            progress(&format!(
                "Kept {what}: its components run on; deleting it later removes the object alone"
            ));
            done.push_str(&format!("kept {what}\n"));
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_operators_finalizer_is_taken_off() {
        let theirs = "example.com/keep".to_string();
        assert_eq!(
            without_ours(&[PROVIDER_FINALIZER.to_string(), theirs.clone()]),
            Some(vec![theirs.clone()])
        );
        assert_eq!(without_ours(&[theirs]), None, "nothing of ours: nothing to write");
        assert_eq!(parse_deployment("butler-system/butler-operator").unwrap().1, "butler-operator");
        assert!(parse_deployment("butler-operator").is_err());
    }
}
