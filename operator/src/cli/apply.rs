//! Reading, changing and waiting on provider objects for the commands that move providers
//! (`upgrade apply`, `init`, `delete`, `migrate`): each step waits for the operator to report
//! the provider's current generation and stops at its refusal.

use std::time::{Duration, Instant};

use kube::api::{Api, DynamicObject, Patch, PatchParams};

use crate::api::{KindNames, ProviderKind};
use crate::upgrade::moves::{Move, condition_true, refusal};
use crate::upgrade::providers::ProviderRow;

const FIELD_MANAGER: &str = "butlerctl";

/// How long to wait for each step, and how often to look.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    pub timeout: Duration,
    pub poll: Duration,
}

/// The API of the provider objects of `kind` in `namespace`.
pub(crate) fn provider_api(client: &kube::Client, kind: ProviderKind, namespace: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), namespace, &kind.api_resource())
}

pub(crate) async fn patch(
    client: &kube::Client,
    kind: ProviderKind,
    namespace: &str,
    name: &str,
    body: serde_json::Value,
) -> Result<(), String> {
    let api = provider_api(client, kind, namespace);
    api.patch(
        name,
        &PatchParams { field_manager: Some(FIELD_MANAGER.into()), ..Default::default() },
        &Patch::Merge(body),
    )
    .await
    .map(|_| ())
    .map_err(|e| {
        format!("cannot update {} {namespace}/{name}: {}", kind.kind(), butler_runtime::error::describe(&e))
    })
}

/// The provider as it is now, with its generation.
async fn read(
    client: &kube::Client,
    kind: ProviderKind,
    namespace: &str,
    name: &str,
) -> Result<(ProviderRow, i64, bool), String> {
    let api = provider_api(client, kind, namespace);
    let object = api
        .get_opt(name)
        .await
        .map_err(|e| butler_runtime::error::describe(&e))?
        .ok_or_else(|| format!("{} {namespace}/{name} is gone", kind.kind()))?;
    let generation = object.metadata.generation.unwrap_or_default();
    let observed = object.data["status"]["observedGeneration"].as_i64().unwrap_or_default();
    let row = ProviderRow::from_dynamic(kind, &object)?;
    Ok((row, generation, observed >= generation))
}

/// Waits until `done` holds for the provider's current generation; stops at a refusal.
async fn wait_for(
    client: &kube::Client,
    m: &Move,
    what: &str,
    waits: Waits,
    done: impl Fn(&ProviderRow) -> bool,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let (row, _, current) = read(client, m.kind, &m.namespace, &m.name).await?;
        if current {
            if done(&row) {
                return Ok(());
            }
            if let Some(refused) = refusal(&row) {
                return Err(format!("the operator refused: {refused}"));
            }
        }
        if started.elapsed() > waits.timeout {
            let conditions: Vec<String> = row
                .conditions
                .iter()
                .map(|c| format!("{} {} ({}): {}", c.type_, c.status, c.reason, c.message))
                .collect();
            return Err(format!(
                "{} did not become {what} within {:?}; its conditions: {}",
                m.describe(),
                waits.timeout,
                conditions.join("; ")
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}

/// Waits until the provider is Ready with its Deployments running (Ready while still held at 0
/// proves nothing), stopping at the operator's refusal.
pub(crate) async fn wait_ready(client: &kube::Client, m: &Move, waits: Waits) -> Result<(), String> {
    wait_for(client, m, "Ready", waits, |r| condition_true(r, "Ready") && !condition_true(r, "Paused")).await
}
