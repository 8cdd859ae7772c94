//! `butlerctl upgrade apply`: the upgrade as a ProviderUpgrade, run by the operator's engine
//! (the one GitOps uses too), followed from the terminal. The object is named after what is
//! asked (`butlerctl-{digest}`), so the same command run again after an interruption follows
//! the same upgrade; one that finished is replaced by a new one.

use std::time::Instant;

use butler_repository::sha256_hex;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::{Value, json};

use super::apply::Waits;
use crate::api::{KindNames, ProviderKind, ProviderUpgrade, StepState};
use crate::controller::upgrades::finished;
use crate::upgrade::moves::Wanted;
use crate::upgrade::providers::{self, ProviderRow};

/// The spec a request asks for, from the providers of the namespace (the approval aside: a
/// plan and an apply of the same request are the same upgrade).
pub fn spec_for(rows: &[ProviderRow], wanted: &Wanted) -> Result<Value, String> {
    match wanted {
        Wanted::Contract(contract) => Ok(json!({"contract": contract})),
        Wanted::Versions(list) => {
            let mut targets = Vec::new();
            for (label, version) in list {
                let row = providers::by_label(rows, label)?;
                targets.push(json!({"kind": row.provider_kind.kind(), "name": row.name, "version": version}));
            }
            Ok(json!({"providers": targets}))
        }
    }
}

/// The name of the upgrade a spec is: the same request, the same object.
pub fn name_for(spec: &Value) -> String {
    format!("butlerctl-{}", &sha256_hex(spec.to_string().as_bytes())[..10])
}

/// The upgrade a request is: where, its name and spec, and the object if it exists and has not
/// finished (one that finished is deleted, to be made anew).
struct Request {
    api: Api<ProviderUpgrade>,
    ns: String,
    name: String,
    spec: Value,
    open: Option<ProviderUpgrade>,
    /// Another upgrade of the namespace that has not finished.
    other: Option<ProviderUpgrade>,
}

impl Request {
    fn failed(&self, e: kube::Error) -> String {
        format!("ProviderUpgrade {}/{}: {}", self.ns, self.name, butler_runtime::error::describe(&e))
    }

    async fn read(
        client: &kube::Client,
        namespace: Option<&str>,
        wanted: &Wanted,
        waits: Waits,
    ) -> Result<Request, String> {
        let rows = providers::list(client, namespace).await?;
        let cores: Vec<&ProviderRow> =
            rows.iter().filter(|r| r.provider_kind == ProviderKind::Core).collect();
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
        let mut request = Request { api, ns, name, spec, open: None, other: None };
        let all = request.api.list(&Default::default()).await.map_err(|e| request.failed(e))?.items;
        request.other = all
            .iter()
            .find(|u| u.metadata.name.as_deref() != Some(&request.name) && finished(u).is_none())
            .cloned();
        match all.into_iter().find(|u| u.metadata.name.as_deref() == Some(&request.name)) {
            Some(existing) if finished(&existing).is_none() => request.open = Some(existing),
            // Asked again after it finished: anew.
            Some(_) => {
                request
                    .api
                    .delete(&request.name, &DeleteParams::default())
                    .await
                    .map_err(|e| request.failed(e))?;
                while request.api.get_opt(&request.name).await.map_err(|e| request.failed(e))?.is_some() {
                    tokio::time::sleep(waits.poll).await;
                }
            }
            None => {}
        }
        Ok(request)
    }

    async fn create(&self, approval: &str) -> Result<(), String> {
        let mut spec = self.spec.clone();
        spec["approval"] = json!(approval);
        let object: ProviderUpgrade = serde_json::from_value(json!({
            "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "ProviderUpgrade",
            "metadata": {"name": self.name, "namespace": self.ns}, "spec": spec,
        }))
        .map_err(|e| e.to_string())?;
        let params = PostParams { field_manager: Some("butlerctl".into()), ..Default::default() };
        self.api.create(&params, &object).await.map(|_| ()).map_err(|e| self.failed(e))
    }
}

/// Plans the upgrade as a ProviderUpgrade waiting for approval (the operator plans it, with its
/// repositories and credentials), and shows the plan; the same request applied later runs it.
pub async fn upgrade_plan(
    client: &kube::Client,
    namespace: Option<&str>,
    wanted: &Wanted,
    waits: Waits,
) -> Result<String, String> {
    let request = Request::read(client, namespace, wanted, waits).await?;
    if request.open.is_none() {
        request.create("Manual").await?;
    }
    let (ns, name) = (&request.ns, &request.name);
    let started = Instant::now();
    let upgrade = loop {
        let upgrade = request.api.get(name).await.map_err(|e| request.failed(e))?;
        let current =
            upgrade.status.as_ref().is_some_and(|s| s.observed_generation == upgrade.metadata.generation);
        let planned =
            upgrade.status.as_ref().and_then(|s| s.conditions.iter().find(|c| c.type_ == "Planned"));
        match planned {
            Some(c) if c.status == "False" => {
                return Err(format!("ProviderUpgrade {ns}/{name} cannot be planned: {}", c.message));
            }
            Some(_) if current => break upgrade,
            _ => {}
        }
        if started.elapsed() > waits.timeout {
            return Err(format!(
                "ProviderUpgrade {ns}/{name} was not planned within {:?} (is the operator running?)",
                waits.timeout
            ));
        }
        tokio::time::sleep(waits.poll).await;
    };
    let mut out = describe_plan(&upgrade);
    let approved =
        upgrade.spec.approved == Some(true) || upgrade.spec.approval == Some(crate::api::Approval::Automatic);
    match approved {
        true => out.push_str(&format!("It is approved and runs; follow it: kubectl get providerupgrade {name} -n {ns} -w\n")),
        false => out.push_str(&format!(
            "It waits for approval: butlerctl upgrade approve {name} -n {ns} (or the same butlerctl upgrade apply); kubectl delete providerupgrade {name} -n {ns} drops it.\n"
        )),
    }
    if let Some(other) = &request.other {
        out.push_str(&format!(
            "ProviderUpgrade {ns}/{} has not finished: this one starts after it.\n",
            other.metadata.name.clone().unwrap_or_default()
        ));
    }
    Ok(out)
}

/// The plan of an upgrade as people read it: the moves with what they do to the objects, and
/// the steps.
fn describe_plan(upgrade: &ProviderUpgrade) -> String {
    let status = upgrade.status.clone().unwrap_or_default();
    let ns = upgrade.metadata.namespace.clone().unwrap_or_default();
    let name = upgrade.metadata.name.clone().unwrap_or_default();
    let mut out = match (&status.from_contract, &status.to_contract) {
        (Some(from), Some(to)) if from != to => format!(
            "ProviderUpgrade {ns}/{name}: across contracts, {from} to {to} (every provider paused meanwhile)\n"
        ),
        _ => format!("ProviderUpgrade {ns}/{name}: within the contract\n"),
    };
    let counted = |what: &str, map: &std::collections::BTreeMap<String, i64>| {
        map.iter().map(|(kind, n)| format!("{what} {n} {kind}")).collect::<Vec<_>>()
    };
    for m in &status.plan {
        let mut parts = Vec::new();
        if let Some(objects) = &m.objects {
            parts.extend(counted("adds", &objects.added));
            parts.extend(counted("changes", &objects.changed));
            parts.extend(counted("removes", &objects.removed));
            parts.extend(objects.kept_crds.iter().map(|c| format!("keeps CRD {c}")));
            parts
                .extend(objects.storage_versions.iter().map(|c| format!("moves the storage version of {c}")));
        }
        let what = match parts.is_empty() {
            true => String::new(),
            false => format!(": {}", parts.join(", ")),
        };
        out.push_str(&format!(
            "  {} {} {} -> {}{what}\n",
            m.kind,
            m.name,
            m.from.as_deref().unwrap_or("-"),
            m.to
        ));
    }
    out.push_str("Steps:\n");
    for (i, step) in status.steps.iter().enumerate() {
        out.push_str(&format!("  {}. {}\n", i + 1, step.name));
    }
    out
}

/// Runs the upgrade through a ProviderUpgrade and follows it, reporting each step through
/// `progress`; returns the moves. A plan of the same request that waits for approval is
/// approved: asking to apply it is the approval.
pub async fn upgrade_apply(
    client: &kube::Client,
    namespace: Option<&str>,
    wanted: &Wanted,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    let request = Request::read(client, namespace, wanted, waits).await?;
    let (ns, name) = (&request.ns, &request.name);
    // Another upgrade under way holds this one back: finish it first.
    if let Some(other) = &request.other {
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
    match &request.open {
        None => request.create("Automatic").await?,
        Some(open)
            if open.spec.approved != Some(true)
                && open.spec.approval != Some(crate::api::Approval::Automatic) =>
        {
            let params =
                kube::api::PatchParams { field_manager: Some("butlerctl".into()), ..Default::default() };
            let approved = kube::api::Patch::Merge(json!({"spec": {"approved": true}}));
            request.api.patch(name, &params, &approved).await.map_err(|e| request.failed(e))?;
        }
        // Under way: follow it.
        Some(_) => {}
    }
    follow(&request.api, name, ns, waits, progress).await
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
