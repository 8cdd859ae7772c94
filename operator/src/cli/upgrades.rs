//! `butlerctl upgrade approve`: approves a ProviderUpgrade, as setting `spec.approved: true` in
//! Git would.

use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use crate::api::ProviderUpgrade;

/// Approves the upgrade and says what it will do.
pub async fn approve(client: &kube::Client, namespace: &str, name: &str) -> Result<String, String> {
    let api: Api<ProviderUpgrade> = Api::namespaced(client.clone(), namespace);
    let failed = |e: kube::Error| {
        format!("ProviderUpgrade {namespace}/{name}: {}", butler_runtime::error::describe(&e))
    };
    let upgrade = api.get_opt(name).await.map_err(failed)?.ok_or_else(|| {
        format!("no ProviderUpgrade {namespace}/{name}; kubectl get providerupgrades -A lists them")
    })?;
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
