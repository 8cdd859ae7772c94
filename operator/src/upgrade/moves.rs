//! The moves of an upgrade: what is asked for ([`Wanted`]), each provider's move to its target
//! read from the providers' repositories (the core provider first), the contract they end at,
//! and what a provider's conditions say of a move (installed, refused).

use butler_repository::Version;

use super::providers::ProviderRow;
use crate::api::{KindNames, ProviderKind};

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
    /// `Kind namespace/name`, for messages.
    pub fn describe(&self) -> String {
        format!("{} {}/{}", self.kind.kind(), self.namespace, self.name)
    }
}

/// The operator's refusal, if the provider shows one for its current generation.
pub fn refusal(row: &ProviderRow) -> Option<String> {
    row.conditions.iter().find(|c| c.status == "False" && REFUSALS.contains(&c.reason.as_str())).map(|c| {
        format!("{} {}/{}: {} ({}): {}", row.kind, row.namespace, row.name, c.type_, c.reason, c.message)
    })
}

pub fn condition_true(row: &ProviderRow, type_: &str) -> bool {
    row.condition(type_).is_some_and(|c| c.status == "True")
}

pub fn installed(row: &ProviderRow, version: &str) -> bool {
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
pub struct Repositories(Vec<((ProviderKind, String, String), butler_repository::Repository)>);

impl Repositories {
    /// The providers whose repositories `wanted` reads.
    pub fn needed<'a>(rows: &'a [ProviderRow], wanted: &Wanted) -> Vec<&'a ProviderRow> {
        match wanted {
            Wanted::Contract(_) => rows.iter().collect(),
            Wanted::Versions(_) => rows.iter().filter(|r| r.provider_kind == ProviderKind::Core).collect(),
        }
    }

    pub fn add(&mut self, row: &ProviderRow, repository: butler_repository::Repository) {
        self.0.push(((row.provider_kind, row.namespace.clone(), row.name.clone()), repository));
    }

    pub fn of(&self, row: &ProviderRow) -> Result<&butler_repository::Repository, String> {
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
pub async fn latest_accepted(
    repo: &butler_repository::Repository,
    kind: ProviderKind,
    contract: &str,
) -> Result<Version, butler_repository::RepositoryError> {
    match kind {
        ProviderKind::Core => repo.latest_for_contract(contract).await,
        _ => latest_under_core(repo, contract).await,
    }
}

/// The newest release of a provider (not the core) that a core provider of `core` accepts, as
/// clusterctl chooses one when no version is given: of the core's contract, else of an earlier
/// contract the core still supports.
pub async fn latest_under_core(
    repo: &butler_repository::Repository,
    core: &str,
) -> Result<Version, butler_repository::RepositoryError> {
    let mut first_error = None;
    for c in butler_repository::supported_contracts(core) {
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
pub async fn moves(
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
pub async fn target_contract(
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

#[cfg(test)]
mod tests {
    use super::*;
    use butler_repository::{AnySource, LocalSource, Repository};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    fn condition(type_: &str, status: &str, reason: &str) -> Condition {
        serde_json::from_value(serde_json::json!({"type": type_, "status": status, "reason": reason,
            "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z"}))
        .unwrap()
    }

    /// A local repository of `label` with a release per (version, contract), `minor` its series.
    fn repository(base: &std::path::Path, label: &str, releases: &[(&str, &str)]) -> Repository {
        let series: Vec<String> = releases
            .iter()
            .map(|(v, contract)| {
                let version = Version::parse(v, "test").unwrap();
                format!(
                    "- major: {}\n  minor: {}\n  contract: {contract}\n",
                    version.major(),
                    version.minor()
                )
            })
            .collect();
        let metadata = format!(
            "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n{}",
            series.concat()
        );
        let file =
            if label == "cluster-api" { "core-components.yaml" } else { "infrastructure-components.yaml" };
        for (v, _) in releases {
            let folder = base.join(label).join(v);
            std::fs::create_dir_all(&folder).unwrap();
            std::fs::write(folder.join("metadata.yaml"), &metadata).unwrap();
            std::fs::write(folder.join(file), "").unwrap();
        }
        Repository::new(label, AnySource::Local(LocalSource::new(base, label)), file)
    }

    fn rows() -> Vec<ProviderRow> {
        vec![
            ProviderRow::sample(ProviderKind::Infrastructure, "aws", "v2.8.0", vec![]),
            ProviderRow::sample(ProviderKind::Core, "cluster-api", "v1.10.0", vec![]),
        ]
    }

    #[tokio::test]
    async fn a_contract_moves_the_core_first_and_keeps_a_provider_the_new_core_still_accepts() {
        let base = tempfile::tempdir().unwrap();
        let rows = rows();
        let mut repositories = Repositories::default();
        let core = [("v1.10.0", "v1beta1"), ("v1.11.0", "v1beta2"), ("v1.12.0", "v1beta2")];
        repositories.add(&rows[1], repository(base.path(), "cluster-api", &core));
        // No release of the infrastructure provider for v1beta2 yet: a v1beta2 core runs v1beta1 ones.
        let aws = [("v2.8.0", "v1beta1"), ("v2.9.0", "v1beta1")];
        repositories.add(&rows[0], repository(base.path(), "infrastructure-aws", &aws));
        let wanted = Wanted::Contract("v1beta2".into());
        let planned = moves(&rows, &wanted, &repositories).await.unwrap();
        let summary: Vec<(ProviderKind, Option<&str>, &str)> =
            planned.iter().map(|m| (m.kind, m.from.as_deref(), m.to.as_str())).collect();
        assert_eq!(
            summary,
            [
                (ProviderKind::Core, Some("v1.10.0"), "v1.12.0"),
                (ProviderKind::Infrastructure, Some("v2.8.0"), "v2.9.0")
            ]
        );
        let contract = target_contract(&rows[1], &wanted, &planned, &repositories).await.unwrap();
        assert_eq!(contract.as_deref(), Some("v1beta2"));
    }

    #[tokio::test]
    async fn named_versions_end_at_the_contract_of_the_core_providers_new_version() {
        let base = tempfile::tempdir().unwrap();
        let rows = rows();
        let mut repositories = Repositories::default();
        let core = [("v1.10.0", "v1beta1"), ("v1.11.0", "v1beta2")];
        repositories.add(&rows[1], repository(base.path(), "cluster-api", &core));
        let wanted = Wanted::Versions(vec![("cluster-api".into(), "v1.11.0".into())]);
        assert_eq!(Repositories::needed(&rows, &wanted).len(), 1, "only the core provider's is read");
        let planned = moves(&rows, &wanted, &repositories).await.unwrap();
        assert_eq!(planned[0].describe(), "CoreProvider butler-system/cluster-api");
        let contract = target_contract(&rows[1], &wanted, &planned, &repositories).await.unwrap();
        assert_eq!(contract.as_deref(), Some("v1beta2"));
        let unknown = Wanted::Versions(vec![("infrastructure-gcp".into(), "v1.0.0".into())]);
        let error = moves(&rows, &unknown, &repositories).await.unwrap_err();
        assert!(
            error.contains("no provider infrastructure-gcp") && error.contains("infrastructure-aws"),
            "{error}"
        );
        let bad = Wanted::Versions(vec![("infrastructure-aws".into(), "latest".into())]);
        assert!(moves(&rows, &bad, &repositories).await.is_err(), "a version is a semantic version");
    }

    #[tokio::test]
    async fn a_provider_with_no_version_under_a_newer_core_takes_its_newest_accepted_release() {
        let base = tempfile::tempdir().unwrap();
        // Only v1beta1 releases, under a v1beta2 core: clusterctl takes the newest v1beta1 one.
        let aws = [("v2.8.0", "v1beta1"), ("v2.9.1", "v1beta1")];
        let repo = repository(base.path(), "infrastructure-aws", &aws);
        assert_eq!(latest_under_core(&repo, "v1beta2").await.unwrap().to_string(), "v2.9.1");
        // A core provider takes its own contract only.
        assert!(latest_accepted(&repo, ProviderKind::Core, "v1beta2").await.is_err());
        // No contract the core accepts: the refusal names the core's.
        let old = repository(base.path(), "infrastructure-old", &[("v0.3.0", "v1alpha3")]);
        let refused = latest_under_core(&old, "v1beta2").await.unwrap_err().to_string();
        assert!(refused.contains("has no version for contract v1beta2"), "{refused}");
    }

    #[test]
    fn a_refusal_is_a_false_condition_of_a_refusing_reason_and_installed_needs_the_condition() {
        let refused = ProviderRow::sample(
            ProviderKind::Core,
            "cluster-api",
            "v1.10.0",
            vec![condition("Ready", "False", "ContractChangeNeedsPause")],
        );
        assert!(refusal(&refused).unwrap().contains("ContractChangeNeedsPause"));
        let waiting = ProviderRow::sample(
            ProviderKind::Core,
            "cluster-api",
            "v1.10.0",
            vec![condition("Ready", "False", "Progressing")],
        );
        assert_eq!(refusal(&waiting), None, "waiting is not refusing");
        let done = ProviderRow::sample(
            ProviderKind::Core,
            "cluster-api",
            "v1.10.0",
            vec![condition("ProviderInstalled", "True", "Installed")],
        );
        assert!(installed(&done, "1.10.0"), "with or without the leading v");
        assert!(!installed(&done, "v1.11.0"));
        assert!(!installed(&waiting, "v1.10.0"), "not without ProviderInstalled True");
    }
}
