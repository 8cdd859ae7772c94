//! `butlerctl upgrade apply`: the upgrade as a ProviderUpgrade, run by the operator's engine
//! (the one GitOps uses too), followed from the terminal. The object is named after what is
//! asked (`butlerctl-{digest}`), so the same command run again after an interruption follows
//! the same upgrade; one that finished is replaced by a new one.

use std::time::Instant;

use butler_repository::sha256_hex;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use super::apply::{Waits, Wanted};
use super::providers::{self, ProviderRow};
use crate::api::{KindNames, ProviderKind, ProviderUpgrade, StepState};

/// The spec a request asks for, from the providers of the namespace.
pub fn spec_for(rows: &[ProviderRow], wanted: &Wanted) -> Result<Value, String> {
    match wanted {
        Wanted::Contract(contract) => Ok(json!({"contract": contract, "approval": "Automatic"})),
        Wanted::Versions(list) => {
            let mut targets = Vec::new();
            for (label, version) in list {
                let row = providers::by_label(rows, label)?;
                targets.push(json!({"kind": row.provider_kind.kind(), "name": row.name, "version": version}));
            }
            Ok(json!({"providers": targets, "approval": "Automatic"}))
        }
    }
}

/// The name of the upgrade a spec is: the same request, the same object.
pub fn name_for(spec: &Value) -> String {
    format!("butlerctl-{}", &sha256_hex(spec.to_string().as_bytes())[..10])
}

fn finished(u: &ProviderUpgrade) -> Option<bool> {
    let status = u.status.as_ref()?;
    status.conditions.iter().find(|c| c.type_ == "Succeeded").map(|c| c.status == "True")
}

/// Runs the upgrade through a ProviderUpgrade and follows it, reporting each step through
/// `progress`; returns the moves.
pub async fn upgrade_apply(
    client: &kube::Client,
    namespace: Option<&str>,
    wanted: &Wanted,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    let rows = providers::list(client, namespace).await?;
    let cores: Vec<&ProviderRow> = rows.iter().filter(|r| r.provider_kind == ProviderKind::Core).collect();
    let core = match cores.as_slice() {
        [] => {
            return Err("no CoreProvider in the cluster: nothing to upgrade; install the providers first (butlerctl init)".into());
        }
        [one] => *one,
        _ => return Err("CoreProviders in several namespaces: name one with -n NS".into()),
    };
    let ns = core.namespace.clone();
    let in_ns: Vec<ProviderRow> = rows.into_iter().filter(|r| r.namespace == ns).collect();
    let spec = spec_for(&in_ns, wanted)?;
    let name = name_for(&spec);
    let api: Api<ProviderUpgrade> = Api::namespaced(client.clone(), &ns);
    let failed =
        |e: kube::Error| format!("ProviderUpgrade {ns}/{name}: {}", butler_runtime::error::describe(&e));
    let all = api.list(&Default::default()).await.map_err(failed)?.items;
    // Another upgrade under way holds this one back: finish it first.
    if let Some(other) =
        all.iter().find(|u| u.metadata.name.as_deref() != Some(&name) && finished(u).is_none())
    {
        let other_name = other.metadata.name.clone().unwrap_or_default();
        let target = other
            .spec
            .contract
            .as_ref()
            .map(|c| format!("to contract {c}"))
            .unwrap_or_else(|| "of named versions".to_string());
        return Err(format!(
            "ProviderUpgrade {ns}/{other_name} ({target}) is in progress; let it finish (kubectl get providerupgrade {other_name} -n {ns}), or delete it, first"
        ));
    }
    match all.iter().find(|u| u.metadata.name.as_deref() == Some(&name)) {
        // Under way: follow it.
        Some(existing) if finished(existing).is_none() => {}
        found => {
            // Asked again after it finished: anew.
            if found.is_some() {
                api.delete(&name, &DeleteParams::default()).await.map_err(failed)?;
                while api.get_opt(&name).await.map_err(failed)?.is_some() {
                    tokio::time::sleep(waits.poll).await;
                }
            }
            let object: ProviderUpgrade = serde_json::from_value(json!({
                "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "ProviderUpgrade",
                "metadata": {"name": name, "namespace": ns}, "spec": spec,
            }))
            .map_err(|e| e.to_string())?;
            let params = PostParams { field_manager: Some("butlerctl".into()), ..Default::default() };
            api.create(&params, &object).await.map_err(failed)?;
        }
    }
    follow(&api, &name, &ns, waits, progress).await
}

/// Reports the plan and each step as it starts until the upgrade ends; its moves, or why it
/// failed.
async fn follow(
    api: &Api<ProviderUpgrade>,
    name: &str,
    ns: &str,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    let failed =
        |e: kube::Error| format!("ProviderUpgrade {ns}/{name}: {}", butler_runtime::error::describe(&e));
    let mut said_plan = false;
    let mut said_steps = 0;
    let mut last_change = Instant::now();
    loop {
        let upgrade = api.get(name).await.map_err(failed)?;
        let status = upgrade.status.clone().unwrap_or_default();
        let condition = |t: &str| status.conditions.iter().find(|c| c.type_ == t).cloned();
        if let Some(planned) = condition("Planned").filter(|c| c.status == "False") {
            return Err(format!("ProviderUpgrade {ns}/{name} cannot be planned: {}", planned.message));
        }
        let moves: Vec<String> = status
            .plan
            .iter()
            .map(|m| format!("{} {ns}/{} {} -> {}", m.kind, m.name, m.from.as_deref().unwrap_or("-"), m.to))
            .collect();
        if !said_plan && !status.steps.is_empty() {
            match (&status.from_contract, &status.to_contract) {
                (Some(from), Some(to)) if from != to => {
                    progress(&format!("Upgrading across contracts, to {to}: pause, upgrade, unpause"))
                }
                _ => progress("Upgrading within the contract"),
            }
            for line in &moves {
                progress(&format!("  {line}"));
            }
            said_plan = true;
        }
        let started = status.steps.iter().filter(|s| s.state != StepState::Pending).count();
        for step in status.steps.iter().skip(said_steps).take(started.saturating_sub(said_steps)) {
            progress(&format!("{}...", step.name));
            last_change = Instant::now();
        }
        said_steps = said_steps.max(started);
        match condition("Succeeded") {
            Some(done) if done.status == "True" => {
                return Ok(moves.iter().map(|l| format!("{l}\n")).collect());
            }
            Some(done) => return Err(done.message),
            None => {}
        }
        if last_change.elapsed() > waits.timeout {
            let step = status.steps.iter().find(|s| s.state == StepState::Running);
            return Err(format!(
                "ProviderUpgrade {ns}/{name} did not move on within {:?}: {}",
                waits.timeout,
                step.map(|s| format!("{}: {}", s.name, s.message.clone().unwrap_or_default()))
                    .unwrap_or_else(|| "no step started (is the operator running?)".into())
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_request_is_the_same_upgrade() {
        let rows = [
            ProviderRow::sample(ProviderKind::Core, "butler", "v1.0.0", vec![]),
            ProviderRow::sample(ProviderKind::Infrastructure, "widget", "v1.0.0", vec![]),
        ];
        let contract = spec_for(&rows, &Wanted::Contract("v1beta2".into())).unwrap();
        assert_eq!(
            name_for(&contract),
            name_for(&spec_for(&rows, &Wanted::Contract("v1beta2".into())).unwrap())
        );
        assert_ne!(
            name_for(&contract),
            name_for(&spec_for(&rows, &Wanted::Contract("v1beta3".into())).unwrap())
        );
        let named =
            spec_for(&rows, &Wanted::Versions(vec![("infrastructure-widget".into(), "v1.1.0".into())]))
                .unwrap();
        assert_eq!(
            named["providers"][0],
            json!({"kind": "InfrastructureProvider", "name": "widget", "version": "v1.1.0"})
        );
        let unknown = spec_for(&rows, &Wanted::Versions(vec![("infrastructure-nope".into(), "v1".into())]))
            .unwrap_err();
        assert!(unknown.contains("no provider infrastructure-nope"), "{unknown}");
    }
}
