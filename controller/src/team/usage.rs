//! What a team uses and how that compares with its limits (spec/001, "Resource Usage
//! Calculation"): CPU, memory and storage are the machine template's times the worker replicas,
//! summed over the team's TenantClusters; each utilisation is a percentage of its limit, only
//! where a limit is set. The same effective sizes serve the admission webhook, so a cluster
//! that leaves a size empty counts with the default the mutating webhook gives it.

use butler_core::api::{QuotaStatus, Team, TeamResourceUsage, TenantCluster};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube_quantity::ParsedQuantity;

/// The default worker count when neither the cluster, the team's cluster defaults nor its
/// `defaultNodeCount` say (the schema default of `defaultNodeCount`).
pub const DEFAULT_NODE_COUNT: i32 = 3;

/// Above this percentage of a limit, the quota status is Warning.
const WARNING_PERCENT: i64 = 80;

/// The size of a cluster's workers as it counts against the team's limits.
#[derive(Debug, Clone, Default)]
pub struct Footprint {
    pub replicas: i32,
    pub cpu: Option<ParsedQuantity>,
    pub memory: Option<ParsedQuantity>,
    pub storage: Option<ParsedQuantity>,
}

fn parse(q: Option<&Quantity>) -> Option<ParsedQuantity> {
    q.and_then(|q| ParsedQuantity::try_from(q).ok())
}

fn gi(n: Option<i32>) -> Option<ParsedQuantity> {
    n.and_then(|n| ParsedQuantity::try_from(format!("{n}Gi")).ok())
}

/// Parsed quantities by their text: the clusters of a team mostly share a few sizes, and
/// parsing dominates the cost of summing a thousand of them.
#[derive(Default)]
pub struct Parsed(std::collections::HashMap<String, Option<ParsedQuantity>>);

impl Parsed {
    fn get(&mut self, q: Option<&Quantity>) -> Option<ParsedQuantity> {
        let q = q?;
        if let Some(known) = self.0.get(&q.0) {
            return known.clone();
        }
        let parsed = parse(Some(q));
        self.0.insert(q.0.clone(), parsed.clone());
        parsed
    }
}

/// The replicas and machine sizes of a cluster, each falling back to the team's cluster
/// defaults, then to its per-node defaults.
pub fn footprint(cluster: &TenantCluster, team: Option<&Team>) -> Footprint {
    footprint_with(cluster, team, &mut Parsed::default())
}

fn footprint_with(cluster: &TenantCluster, team: Option<&Team>, parsed: &mut Parsed) -> Footprint {
    let workers = cluster.spec.workers.as_ref();
    let machine = workers.and_then(|w| w.machine_template.as_ref());
    let defaults = team.and_then(|t| t.spec.cluster_defaults.as_ref());
    let limits = team.and_then(|t| t.spec.resource_limits.as_ref());
    Footprint {
        replicas: workers
            .and_then(|w| w.replicas)
            .or(defaults.and_then(|d| d.worker_count))
            .or(limits.and_then(|l| l.default_node_count))
            .unwrap_or(DEFAULT_NODE_COUNT),
        cpu: parsed
            .get(machine.and_then(|m| m.cpu.as_ref()))
            .or_else(|| parsed.get(defaults.and_then(|d| d.worker_cpu.as_ref())))
            .or_else(|| parsed.get(limits.and_then(|l| l.default_cpu_per_node.as_ref()))),
        memory: parsed
            .get(machine.and_then(|m| m.memory.as_ref()))
            .or_else(|| gi(defaults.and_then(|d| d.worker_memory_gi)))
            .or_else(|| parsed.get(limits.and_then(|l| l.default_memory_per_node.as_ref()))),
        storage: parsed
            .get(machine.and_then(|m| m.disk_size.as_ref()))
            .or_else(|| gi(defaults.and_then(|d| d.worker_disk_gi))),
    }
}

/// What a set of clusters uses together.
#[derive(Debug, Clone, Default)]
pub struct Totals {
    pub clusters: i32,
    pub nodes: i64,
    /// Sums start from the first size, so that they keep its form (`64Gi`, not bytes).
    pub cpu: Option<ParsedQuantity>,
    pub memory: Option<ParsedQuantity>,
    pub storage: Option<ParsedQuantity>,
    /// The largest worker count of one cluster, and that cluster's name.
    pub largest: Option<(i32, String)>,
}

impl Totals {
    /// Adds one cluster's footprint.
    pub fn add(&mut self, name: &str, f: &Footprint) {
        let sum = |total: &mut Option<ParsedQuantity>, size: &Option<ParsedQuantity>| {
            if let Some(size) = size.clone().map(|q| q * f.replicas) {
                *total = Some(match total.take() {
                    Some(t) => t + size,
                    None => size,
                });
            }
        };
        self.clusters += 1;
        self.nodes += i64::from(f.replicas);
        sum(&mut self.cpu, &f.cpu);
        sum(&mut self.memory, &f.memory);
        sum(&mut self.storage, &f.storage);
        if self.largest.as_ref().is_none_or(|(n, _)| f.replicas > *n) {
            self.largest = Some((f.replicas, name.to_string()));
        }
    }

    /// The totals of the team's clusters, those being deleted too: they run until they are
    /// gone (and a team's own finalizer could hold one there for ever).
    pub fn of(team: &Team, clusters: &[&TenantCluster]) -> Totals {
        let mut totals = Totals::default();
        let mut parsed = Parsed::default();
        for cluster in clusters {
            let name = cluster.metadata.name.as_deref().unwrap_or_default();
            totals.add(name, &footprint_with(cluster, Some(team), &mut parsed));
        }
        totals
    }
}

/// `used` as a whole percentage of `limit` (rounded down); `None` for a limit of zero.
pub fn percent(used: f64, limit: f64) -> Option<i64> {
    (limit > 0.0).then(|| ((used * 100.0) / limit).floor() as i64)
}

fn text(q: &Option<ParsedQuantity>) -> String {
    q.as_ref().map_or_else(|| "0".to_string(), ParsedQuantity::to_string)
}

fn number(q: &Option<ParsedQuantity>) -> f64 {
    q.as_ref().and_then(ParsedQuantity::to_bytes_f64).unwrap_or_default()
}

/// One dimension measured against its limit.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    /// The limit's field name, for messages (`maxCPUCores`).
    pub limit_name: &'static str,
    pub used: String,
    pub limit: String,
    /// `None` when the limit is zero.
    pub percent: Option<i64>,
    pub exceeded: bool,
}

/// The status of a team's usage: the usage block, the quota status and its message.
#[derive(Debug, Clone, PartialEq)]
pub struct Assessment {
    pub usage: TeamResourceUsage,
    pub status: QuotaStatus,
    pub message: String,
}

/// Measures the totals against the team's limits.
pub fn assess(team: &Team, totals: &Totals) -> Assessment {
    let limits = team.spec.resource_limits.clone().unwrap_or_default();
    let mut measures = Vec::new();
    let mut measure =
        |limit_name: &'static str, used: f64, used_text: String, limit: Option<(f64, String)>| {
            let (limit, limit_text) = limit?;
            let percent = percent(used, limit);
            measures.push(Measure {
                limit_name,
                used: used_text,
                limit: limit_text,
                percent,
                exceeded: used > limit,
            });
            percent
        };
    let count = |n: Option<i32>| n.map(|n| (f64::from(n), n.to_string()));
    let size = |q: Option<&Quantity>| parse(q).map(|p| (number(&Some(p.clone())), p.to_string()));
    let cluster_utilization = measure(
        "maxClusters",
        f64::from(totals.clusters),
        totals.clusters.to_string(),
        count(limits.max_clusters),
    );
    let node_utilization = measure(
        "maxTotalNodes",
        totals.nodes as f64,
        totals.nodes.to_string(),
        count(limits.max_total_nodes),
    );
    let cpu_utilization =
        measure("maxCPUCores", number(&totals.cpu), text(&totals.cpu), size(limits.max_cpu_cores.as_ref()));
    let memory_utilization =
        measure("maxMemory", number(&totals.memory), text(&totals.memory), size(limits.max_memory.as_ref()));
    measure("maxStorage", number(&totals.storage), text(&totals.storage), size(limits.max_storage.as_ref()));
    if let (Some(max), Some((largest, name))) = (limits.max_nodes_per_cluster, &totals.largest) {
        let used = format!("{largest} (TenantCluster {name})");
        measure("maxNodesPerCluster", f64::from(*largest), used, Some((f64::from(max), max.to_string())));
    }
    let clamp = |p: Option<i64>| p.map(|p| p.clamp(0, i64::from(i32::MAX)) as i32);
    let usage = TeamResourceUsage {
        clusters: Some(totals.clusters),
        total_nodes: Some(i32::try_from(totals.nodes).unwrap_or(i32::MAX)),
        total_cpu: Some(Quantity(text(&totals.cpu))),
        total_memory: Some(Quantity(text(&totals.memory))),
        total_storage: Some(Quantity(text(&totals.storage))),
        cluster_utilization: clamp(cluster_utilization),
        node_utilization: clamp(node_utilization),
        cpu_utilization: clamp(cpu_utilization),
        memory_utilization: clamp(memory_utilization),
    };
    let describe = |m: &Measure| match m.percent {
        Some(p) => format!("{} of {} {} ({p}%)", m.used, m.limit_name, m.limit),
        None => format!("{} of {} {}", m.used, m.limit_name, m.limit),
    };
    let exceeded: Vec<String> = measures.iter().filter(|m| m.exceeded).map(describe).collect();
    let warning: Vec<String> = measures
        .iter()
        .filter(|m| !m.exceeded && m.percent.is_some_and(|p| p > WARNING_PERCENT))
        .map(describe)
        .collect();
    let (status, message) = if !exceeded.is_empty() {
        (
            QuotaStatus::Exceeded,
            format!(
                "over the limit: {}; remove or shrink clusters, or raise the Team's resourceLimits",
                exceeded.join(", ")
            ),
        )
    } else if !warning.is_empty() {
        (QuotaStatus::Warning, format!("above {WARNING_PERCENT}% of a limit: {}", warning.join(", ")))
    } else if measures.is_empty() {
        (QuotaStatus::Ok, "no resource limits are set".to_string())
    } else {
        (QuotaStatus::Ok, "every resource is within its limits".to_string())
    };
    Assessment { usage, status, message }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(limits: &str) -> Team {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {{name: t}}\nspec:\n  access: {{}}\n{limits}"
        ))
        .unwrap()
    }

    fn cluster(name: &str, workers: &str) -> TenantCluster {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: team-t}}\nspec:\n  kubernetesVersion: 1.30.4\n{workers}"
        ))
        .unwrap()
    }

    #[test]
    fn usage_multiplies_sizes_by_replicas_and_defaults_fill_the_gaps() {
        let t = team(
            "  resourceLimits: {maxClusters: 5, maxTotalNodes: 30, maxCPUCores: '120', maxMemory: 480Gi, maxStorage: 2Ti, defaultNodeCount: 2}\n  clusterDefaults: {workerCPU: '2', workerMemoryGi: 8}\n",
        );
        let a = cluster(
            "a",
            "  workers: {replicas: 3, machineTemplate: {cpu: '4', memory: 16Gi, diskSize: 100Gi}}\n",
        );
        let b = cluster("b", "");
        let totals = Totals::of(&t, &[&a, &b]);
        assert_eq!((totals.clusters, totals.nodes), (2, 5), "b has the team's defaultNodeCount of 2");
        let assessment = assess(&t, &totals);
        let usage = &assessment.usage;
        assert_eq!(usage.total_cpu, Some(Quantity("16".into())), "3 x 4 + 2 x 2");
        assert_eq!(usage.total_memory, Some(Quantity("64Gi".into())), "3 x 16Gi + 2 x 8Gi");
        assert_eq!(usage.total_storage, Some(Quantity("300Gi".into())));
        assert_eq!(
            (
                usage.cluster_utilization,
                usage.node_utilization,
                usage.cpu_utilization,
                usage.memory_utilization
            ),
            (Some(40), Some(16), Some(13), Some(13))
        );
        assert_eq!(assessment.status, QuotaStatus::Ok);
    }

    #[test]
    fn above_eighty_percent_is_a_warning_and_above_the_limit_exceeded() {
        let t = team("  resourceLimits: {maxClusters: 2, maxCPUCores: '10', maxNodesPerCluster: 4}\n");
        let a = cluster("a", "  workers: {replicas: 3, machineTemplate: {cpu: '3'}}\n");
        let warning = assess(&t, &Totals::of(&t, &[&a]));
        assert_eq!(warning.status, QuotaStatus::Warning);
        assert_eq!(warning.message, "above 80% of a limit: 9 of maxCPUCores 10 (90%)");
        assert_eq!(warning.usage.cluster_utilization, Some(50));

        let b = cluster("b", "  workers: {replicas: 5, machineTemplate: {cpu: '1'}}\n");
        let c = cluster("c", "  workers: {replicas: 1}\n");
        let exceeded = assess(&t, &Totals::of(&t, &[&a, &b, &c]));
        assert_eq!(exceeded.status, QuotaStatus::Exceeded);
        assert!(exceeded.message.contains("3 of maxClusters 2 (150%)"), "{}", exceeded.message);
        assert!(exceeded.message.contains("14 of maxCPUCores 10 (140%)"), "{}", exceeded.message);
        assert!(
            exceeded.message.contains("5 (TenantCluster b) of maxNodesPerCluster 4"),
            "{}",
            exceeded.message
        );
        assert_eq!(exceeded.usage.cpu_utilization, Some(140));
        assert_eq!(exceeded.usage.memory_utilization, None, "no limit, no percentage");
    }

    #[test]
    fn clusters_being_deleted_and_teams_without_limits() {
        let t = team("");
        let mut going = cluster("a", "  workers: {replicas: 3}\n");
        going.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(jiff::Timestamp::UNIX_EPOCH));
        let totals = Totals::of(&t, &[&going]);
        assert_eq!((totals.clusters, totals.nodes), (1, 3), "it runs until it is gone");
        let a = assess(&t, &totals);
        assert_eq!((a.status, a.message.as_str()), (QuotaStatus::Ok, "no resource limits are set"));
        let none = assess(&t, &Totals::of(&t, &[]));
        assert_eq!(none.usage.total_cpu, Some(Quantity("0".into())));
        let zero = team("  resourceLimits: {maxClusters: 0}\n");
        let one = cluster("one", "");
        let z = assess(&zero, &Totals::of(&zero, &[&one]));
        assert_eq!((z.status, z.usage.cluster_utilization), (QuotaStatus::Exceeded, None));
    }
}
