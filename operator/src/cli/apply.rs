//! What upgrades share: what is asked for ([`Wanted`]), the moves it makes from the providers'
//! repositories, the contract they end at, and reading and waiting on provider objects (the
//! operator's upgrade engine and the commands that follow providers use them).

use std::time::{Duration, Instant};

use butler_repository::Version;
use kube::api::{Api, DynamicObject, Patch, PatchParams};

use super::providers::ProviderRow;
use crate::api::{KindNames, ProviderKind};

const FIELD_MANAGER: &str = "butlerctl";

/// Reasons the operator gives when it will not do what was asked until something changes: the
/// command stops there with the operator's message.
const REFUSALS: [&str; 11] = [
    "DowngradeRefused",
    "ContractMismatch",
    "ContractChangeNeedsPause",
    "UnpauseRefused",
    "RenderFailed",
    "InvalidCustomization",
    "PolicyViolation",
    "InvalidVersion",
    "UnknownProvider",
    "InvalidFetchConfig",
    "DuplicateProvider",
];

/// What to upgrade to.
#[derive(Debug, Clone)]
pub enum Wanted {
    /// Every provider to its newest release of this contract.
    Contract(String),
    /// These providers (by label: `butler`, `infrastructure-aws`) to these versions.
    Versions(Vec<(String, String)>),
}

/// How long to wait for each step, and how often to look.
#[derive(Debug, Clone, Copy)]
pub struct Waits {
    pub timeout: Duration,
    pub poll: Duration,
}

/// One provider's part of the upgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub kind: ProviderKind,
    pub namespace: String,
    pub name: String,
    pub from: Option<String>,
    pub to: String,
}

impl Move {
    fn describe(&self) -> String {
        format!("{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
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

/// The operator's refusal, if the provider shows one for its current generation.
pub(crate) fn refusal(row: &ProviderRow) -> Option<String> {
    row.conditions.iter().find(|c| c.status == "False" && REFUSALS.contains(&c.reason.as_str())).map(|c| {
        format!("{} {}/{}: {} ({}): {}", row.kind, row.namespace, row.name, c.type_, c.reason, c.message)
    })
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

pub(crate) fn condition_true(row: &ProviderRow, type_: &str) -> bool {
    row.condition(type_).is_some_and(|c| c.status == "True")
}

pub(crate) fn installed(row: &ProviderRow, version: &str) -> bool {
    let same = match (
        row.installed_version.as_deref().map(|v| Version::parse(v, "status")),
        Version::parse(version, "target"),
    ) {
        (Some(Ok(a)), Ok(b)) => a == b,
        _ => false,
    };
    same && condition_true(row, "ProviderInstalled")
}

/// The repositories of the providers an upgrade reads, as the caller reaches them (the command
/// line with its user's credentials, the operator under its policy): every provider's for a
/// contract, the core provider's for named versions ([`Repositories::needed`]).
#[derive(Default)]
pub(crate) struct Repositories(Vec<((ProviderKind, String, String), butler_repository::Repository)>);

impl Repositories {
    /// The providers whose repositories `wanted` reads.
    pub(crate) fn needed<'a>(rows: &'a [ProviderRow], wanted: &Wanted) -> Vec<&'a ProviderRow> {
        match wanted {
            Wanted::Contract(_) => rows.iter().collect(),
            Wanted::Versions(_) => rows.iter().filter(|r| r.provider_kind == ProviderKind::Core).collect(),
        }
    }

    pub(crate) fn add(&mut self, row: &ProviderRow, repository: butler_repository::Repository) {
        self.0.push(((row.provider_kind, row.namespace.clone(), row.name.clone()), repository));
    }

    pub(crate) fn of(&self, row: &ProviderRow) -> Result<&butler_repository::Repository, String> {
        self.0
            .iter()
            .find(|((k, ns, n), _)| *k == row.provider_kind && *ns == row.namespace && *n == row.name)
            .map(|(_, r)| r)
            .ok_or_else(|| {
                format!("{} {}/{}: its repository was not read", row.kind, row.namespace, row.name)
            })
    }
}

/// The newest release of `repo` that a core provider of `contract` accepts: of that contract,
/// else of the earlier one it still supports (Cluster API v1.11 and later run v1beta1
/// providers under a v1beta2 core). The core provider itself takes `contract` only.
pub(crate) async fn latest_accepted(
    repo: &butler_repository::Repository,
    kind: ProviderKind,
    contract: &str,
) -> Result<Version, butler_repository::RepositoryError> {
    let accepted = match kind {
        ProviderKind::Core => vec![contract],
        _ => butler_repository::supported_contracts(contract),
    };
    let mut first_error = None;
    for c in accepted {
        match repo.latest_for_contract(c).await {
            Ok(v) => return Ok(v),
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    Err(first_error.expect("a contract is tried"))
}

/// The moves `wanted` asks for, from the providers and their repositories.
pub(crate) async fn moves(
    rows: &[ProviderRow],
    wanted: &Wanted,
    repositories: &Repositories,
) -> Result<Vec<Move>, String> {
    let mut out = Vec::new();
    match wanted {
        Wanted::Contract(contract) => {
            for row in rows {
                let repo = repositories.of(row)?;
                let to = latest_accepted(repo, row.provider_kind, contract).await.map_err(|e| {
                    format!(
                        "{} {}/{} cannot move to contract {contract}: {e}",
                        row.kind, row.namespace, row.name
                    )
                })?;
                out.push(Move {
                    kind: row.provider_kind,
                    namespace: row.namespace.clone(),
                    name: row.name.clone(),
                    from: row.installed_version.clone(),
                    to: to.to_string(),
                });
            }
        }
        Wanted::Versions(list) => {
            for (label, version) in list {
                let row = super::providers::by_label(rows, label)?;
                Version::parse(version, &format!("the version of {label}")).map_err(|e| e.to_string())?;
                out.push(Move {
                    kind: row.provider_kind,
                    namespace: row.namespace.clone(),
                    name: row.name.clone(),
                    from: row.installed_version.clone(),
                    to: version.clone(),
                });
            }
        }
    }
    // The core provider first.
    out.sort_by_key(|m| m.kind != ProviderKind::Core);
    Ok(out)
}

/// The core provider's contract after the moves: the contract asked for, else that of the
/// core provider's new version, else its contract now.
pub(crate) async fn target_contract(
    core: &ProviderRow,
    wanted: &Wanted,
    moves: &[Move],
    repositories: &Repositories,
) -> Result<Option<String>, String> {
    if let Wanted::Contract(c) = wanted {
        return Ok(Some(c.clone()));
    }
    let Some(core_move) = moves.iter().find(|m| m.kind == ProviderKind::Core) else {
        return Ok(core.contract.clone());
    };
    let repo = repositories.of(core)?;
    let version = Version::parse(&core_move.to, "the core provider's target").map_err(|e| e.to_string())?;
    Ok(Some(repo.contract_of(&version).await.map_err(|e| e.to_string())?))
}

/// Waits until the provider is Ready with its Deployments running (Ready while still held at 0
/// proves nothing), stopping at the operator's refusal.
pub(crate) async fn wait_ready(client: &kube::Client, m: &Move, waits: Waits) -> Result<(), String> {
    wait_for(client, m, "Ready", waits, |r| condition_true(r, "Ready") && !condition_true(r, "Paused")).await
}
