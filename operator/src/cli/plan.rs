//! `butlerctl upgrade plan`: for the core provider's contract and every newer one its metadata
//! names, the version each provider would move to, in clusterctl's layout, then the command
//! that applies it. Read from the provider objects and their repositories alone.

use std::fmt::Write;

use butler_repository::{ClusterctlConfig, RemoteOptions, Repository, Version};

use crate::api::ProviderKind;
use crate::controller::wanted::config::{self, SecretCache};
use crate::controller::wanted::fetch;
use crate::upgrade::changes;
use crate::upgrade::providers::{self, ProviderRow};

/// One provider in one contract's plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanRow {
    pub label: String,
    pub namespace: String,
    pub type_: String,
    pub current: Option<String>,
    pub next: Next,
    /// With `--diff`: what the step does to the provider's objects.
    pub diff: Option<changes::ObjectDiff>,
}

/// Where a provider goes within a contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Next {
    UpToDate,
    To(String),
    /// The provider has no release of this contract: the contract cannot be applied.
    NoRelease,
}

/// The plan of one contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContractPlan {
    pub contract: String,
    pub rows: Vec<PlanRow>,
}

/// The contracts at or after `current`, in the order the release series list them (by
/// version), each once.
pub fn contracts_from(series: &[butler_repository::ReleaseSeries], current: &str) -> Vec<String> {
    let mut sorted: Vec<&butler_repository::ReleaseSeries> = series.iter().collect();
    sorted.sort_by_key(|s| (s.major, s.minor));
    let mut contracts: Vec<String> = Vec::new();
    for s in sorted {
        if !contracts.contains(&s.contract) {
            contracts.push(s.contract.clone());
        }
    }
    match contracts.iter().position(|c| c == current) {
        Some(at) => contracts.split_off(at),
        None => vec![current.to_string()],
    }
}

/// clusterctl's layout: a block per contract, then the command, or that all is up to date.
pub fn render_plan(plans: &[ContractPlan]) -> String {
    let mut out = String::new();
    for plan in plans {
        let _ = writeln!(out, "Latest release available for the {} contract:\n", plan.contract);
        let widths = [
            plan.rows.iter().map(|r| r.label.len()).max().unwrap_or(0).max(4),
            plan.rows.iter().map(|r| r.namespace.len()).max().unwrap_or(0).max(9),
            plan.rows.iter().map(|r| r.type_.len()).max().unwrap_or(0).max(4),
            plan.rows.iter().map(|r| r.current.as_deref().unwrap_or("-").len()).max().unwrap_or(0).max(15),
        ];
        let line = |cells: [&str; 5]| {
            format!(
                "{:<w0$}   {:<w1$}   {:<w2$}   {:<w3$}   {}",
                cells[0],
                cells[1],
                cells[2],
                cells[3],
                cells[4],
                w0 = widths[0],
                w1 = widths[1],
                w2 = widths[2],
                w3 = widths[3]
            )
        };
        let _ = writeln!(out, "{}", line(["NAME", "NAMESPACE", "TYPE", "CURRENT VERSION", "NEXT VERSION"]));
        for row in &plan.rows {
            let next = match &row.next {
                Next::UpToDate => "Already up to date".to_string(),
                Next::To(v) => v.clone(),
                Next::NoRelease => format!("no release for {}", plan.contract),
            };
            let _ = writeln!(
                out,
                "{}",
                line([&row.label, &row.namespace, &row.type_, row.current.as_deref().unwrap_or("-"), &next])
                    .trim_end()
            );
        }
        out.push('\n');
        for row in &plan.rows {
            let (Some(d), Next::To(to)) = (&row.diff, &row.next) else { continue };
            let _ = writeln!(out, "{} {} -> {}:", row.label, row.current.as_deref().unwrap_or("-"), to);
            if d.added.is_empty() && d.changed.is_empty() && d.deleted.is_empty() {
                out.push_str("  no object changes\n");
            }
            for (sign, list) in [("+", &d.added), ("~", &d.changed), ("-", &d.deleted)] {
                for object in list {
                    let _ = writeln!(out, "  {sign} {object}");
                }
            }
            for crd in &d.kept {
                let _ = writeln!(out, "  = {crd} (dropped by the release, kept with its objects)");
            }
            out.push('\n');
        }
        let blocked: Vec<&str> =
            plan.rows.iter().filter(|r| r.next == Next::NoRelease).map(|r| r.label.as_str()).collect();
        if !blocked.is_empty() {
            let _ = writeln!(
                out,
                "The {} contract cannot be applied yet: {} {} no release of it.\n",
                plan.contract,
                blocked.join(", "),
                if blocked.len() == 1 { "has" } else { "have" }
            );
        } else if plan.rows.iter().any(|r| matches!(r.next, Next::To(_))) {
            let _ = writeln!(
                out,
                "You can now apply the upgrade by executing the following command:\n\nbutlerctl upgrade apply --contract {}\n",
                plan.contract
            );
        } else {
            out.push_str("You are already up to date!\n\n");
        }
    }
    out
}

/// A provider's repository, with the credentials of its config Secret.
pub(super) async fn repository(
    client: &kube::Client,
    row: &ProviderRow,
    base: &RemoteOptions,
    config: &ClusterctlConfig,
) -> Result<Repository, String> {
    let remote = config::load(client, &SecretCache::default(), &row.namespace, &row.spec, base)
        .await
        .map_err(|e| e.0)?
        .remote;
    fetch::repository(client, row.provider_kind, &row.namespace, &row.name, &row.spec, &remote, config, None)
}

/// Where `row` goes within `contract`.
async fn next_for(repo: &Repository, row: &ProviderRow, contract: &str) -> Result<Next, String> {
    match crate::upgrade::moves::latest_accepted(repo, row.provider_kind, contract).await {
        Ok(latest) => {
            let current = row.installed_version.as_deref().and_then(|v| Version::parse(v, "status").ok());
            Ok(match current {
                Some(current) if current >= latest => Next::UpToDate,
                _ => Next::To(latest.to_string()),
            })
        }
        Err(butler_repository::RepositoryError::NoVersionForContract { .. }) => Ok(Next::NoRelease),
        Err(e) => Err(format!("{} {}/{}: {e}", row.kind, row.namespace, row.name)),
    }
}

/// The plan of every contract from the core provider's on, for the providers of `namespace`
/// (an operator limited to it) or of the whole cluster.
pub async fn upgrade_plan(
    client: &kube::Client,
    namespace: Option<&str>,
    config: &ClusterctlConfig,
    base: &RemoteOptions,
    with_diff: bool,
) -> Result<Vec<ContractPlan>, String> {
    let rows = providers::list(client, namespace).await?;
    let core = rows.iter().find(|r| r.provider_kind == ProviderKind::Core).ok_or(
        "no CoreProvider in the cluster: there is nothing to upgrade; install the providers first (butlerctl init)",
    )?;
    let current = core.contract.clone().ok_or_else(|| {
        format!(
            "the CoreProvider {}/{} is not installed yet (no contract in its status); see butlerctl describe providers",
            core.namespace, core.name
        )
    })?;
    let mut repos = Vec::new();
    for row in &rows {
        repos.push(repository(client, row, base, config).await?);
    }
    let core_repo = &repos[rows.iter().position(|r| std::ptr::eq(r, core)).expect("core is a row")];
    let newest = core_repo.versions().await.map_err(|e| e.to_string())?.into_iter().next();
    let series = match newest {
        Some(v) => core_repo.metadata(&v).await.map_err(|e| e.to_string())?.release_series,
        None => Vec::new(),
    };
    let mut plans = Vec::new();
    for contract in contracts_from(&series, &current) {
        let mut plan_rows = Vec::new();
        for (row, repo) in rows.iter().zip(&repos) {
            let next = next_for(repo, row, &contract).await?;
            let diff = match (&next, &row.installed_version) {
                (Next::To(to), Some(current)) if with_diff => {
                    let before = changes::render(client, row, repo, current, config).await?;
                    let after = changes::render(client, row, repo, to, config).await?;
                    Some(changes::diff(&before, &after))
                }
                _ => None,
            };
            plan_rows.push(PlanRow {
                label: row.label(),
                namespace: row.namespace.clone(),
                type_: row.kind.clone(),
                current: row.installed_version.clone(),
                next,
                diff,
            });
        }
        plans.push(ContractPlan { contract, rows: plan_rows });
    }
    Ok(plans)
}

#[cfg(test)]
mod tests {
    use super::*;
    use butler_repository::ReleaseSeries;

    #[test]
    fn contracts_from_the_current_one_in_series_order() {
        let s = |major, minor, contract: &str| ReleaseSeries { major, minor, contract: contract.into() };
        let series = [s(2, 0, "v1beta2"), s(1, 0, "v1beta1"), s(1, 1, "v1beta1"), s(3, 0, "v1")];
        assert_eq!(contracts_from(&series, "v1beta1"), ["v1beta1", "v1beta2", "v1"]);
        assert_eq!(contracts_from(&series, "v1beta2"), ["v1beta2", "v1"]);
        assert_eq!(contracts_from(&series, "v1alpha4"), ["v1alpha4"]);
    }

    #[test]
    fn the_plan_reads_as_clusterctl_prints_it() {
        let row = |label: &str, type_: &str, current: &str, next: Next| PlanRow {
            label: label.into(),
            namespace: "butler-system".into(),
            type_: type_.into(),
            current: Some(current.into()),
            next,
            diff: None,
        };
        let plans = [
            ContractPlan {
                contract: "v1beta1".into(),
                rows: vec![
                    row("butler", "CoreProvider", "v1.0.0", Next::UpToDate),
                    row(
                        "infrastructure-widget",
                        "InfrastructureProvider",
                        "v1.0.0",
                        Next::To("v1.1.0".into()),
                    ),
                ],
            },
            ContractPlan {
                contract: "v1beta2".into(),
                rows: vec![
                    row("butler", "CoreProvider", "v1.0.0", Next::To("v2.0.0".into())),
                    row("infrastructure-widget", "InfrastructureProvider", "v1.0.0", Next::NoRelease),
                ],
            },
        ];
        let expected = "\
Latest release available for the v1beta1 contract:

NAME                    NAMESPACE       TYPE                     CURRENT VERSION   NEXT VERSION
butler                  butler-system   CoreProvider             v1.0.0            Already up to date
infrastructure-widget   butler-system   InfrastructureProvider   v1.0.0            v1.1.0

You can now apply the upgrade by executing the following command:

butlerctl upgrade apply --contract v1beta1

Latest release available for the v1beta2 contract:

NAME                    NAMESPACE       TYPE                     CURRENT VERSION   NEXT VERSION
butler                  butler-system   CoreProvider             v1.0.0            v2.0.0
infrastructure-widget   butler-system   InfrastructureProvider   v1.0.0            no release for v1beta2

The v1beta2 contract cannot be applied yet: infrastructure-widget has no release of it.

";
        assert_eq!(render_plan(&plans), expected, "\n{}", render_plan(&plans));
    }
}
