//! `butlerctl upgrade approve`: approves a ProviderUpgrade, as setting `spec.approved: true` in
//! Git would.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::ProviderUpgrade;

fn failed(namespace: &str, name: &str, e: kube::Error) -> String {
    format!("ProviderUpgrade {namespace}/{name}: {}", butler_runtime::error::describe(&e))
}

/// The upgrade `namespace/name`, and the API that reads it; a clear error when it is not there.
async fn read(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<(Api<ProviderUpgrade>, ProviderUpgrade), String> {
    let api: Api<ProviderUpgrade> = Api::namespaced(client.clone(), namespace);
    let found = api.get_opt(name).await.map_err(|e| failed(namespace, name, e))?;
    let upgrade = found.ok_or_else(|| {
        format!("no ProviderUpgrade {namespace}/{name}; kubectl get providerupgrades -A lists them")
    })?;
    Ok((api, upgrade))
}

/// Approves the upgrade and says what it will do.
pub async fn approve(client: &kube::Client, namespace: &str, name: &str) -> Result<String, String> {
    let (api, upgrade) = read(client, namespace, name).await?;
    let failed = |e: kube::Error| failed(namespace, name, e);
    let status = upgrade.status.unwrap_or_default();
    let planned = status.conditions.iter().find(|c| c.type_ == "Planned");
    if planned.is_none_or(|c| c.status != "True") {
        return Err(format!(
            "ProviderUpgrade {namespace}/{name} has no plan yet{}; approve it once it is planned",
            planned.map(|c| format!(" ({}: {})", c.reason, c.message)).unwrap_or_default()
        ));
    }
    let params = PatchParams { field_manager: Some("butlerctl".into()), ..Default::default() };
    api.patch(name, &params, &Patch::Merge(json!({"spec": {"approved": true}}))).await.map_err(failed)?;
    let steps: Vec<String> = status.steps.iter().map(|s| format!("  {}\n", s.name)).collect();
    Ok(format!("ProviderUpgrade {namespace}/{name} approved; its steps:\n{}", steps.concat()))
}

/// Rolls back the upgrade `name`: a ProviderUpgrade `{name}-rollback` that moves each provider
/// it moved back to the version it had before, in the contract's order, approved (asking for
/// it is the approval).
pub async fn rollback(client: &kube::Client, namespace: &str, name: &str) -> Result<String, String> {
    let (api, upgrade) = read(client, namespace, name).await?;
    let failed = |e: kube::Error| failed(namespace, name, e);
    let plan = upgrade.status.map(|s| s.plan).unwrap_or_default();
    let back: Vec<serde_json::Value> = plan
        .iter()
        .filter_map(|m| m.from.as_ref().map(|from| json!({"kind": m.kind, "name": m.name, "version": from})))
        .collect();
    if back.is_empty() {
        return Err(format!(
            "ProviderUpgrade {namespace}/{name} moved no installed provider: nothing to roll back"
        ));
    }
    let rollback_name = format!("{name}-rollback");
    let object: ProviderUpgrade = serde_json::from_value(json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "ProviderUpgrade",
        "metadata": {"name": rollback_name, "namespace": namespace},
        "spec": {"providers": back, "rollbackOf": name, "approval": "Automatic"},
    }))
    .map_err(|e| e.to_string())?;
    let params = kube::api::PostParams { field_manager: Some("butlerctl".into()), ..Default::default() };
    match api.create(&params, &object).await {
        Ok(_) => {}
        // Asked before: the same roll-back, under way or done.
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(e) => return Err(failed(e)),
    }
    let moves: Vec<String> = plan
        .iter()
        .filter_map(|m| m.from.as_ref().map(|from| format!("  {} {} {} -> {from}\n", m.kind, m.name, m.to)))
        .collect();
    Ok(format!(
        "ProviderUpgrade {namespace}/{rollback_name} rolls back {name}; follow it with kubectl get providerupgrade {rollback_name} -n {namespace}:\n{}",
        moves.concat()
    ))
}
