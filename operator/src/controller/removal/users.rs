//! Who still uses a provider: the workload clusters that keep it from being deleted.

use butler_core::api::{Platform, ProviderConfig, Team, TenantCluster};
use kube::ResourceExt;

/// The platform an infrastructure provider of this name serves, if it is one of Butler's own.
pub fn butler_platform(name: &str) -> Option<Platform> {
    Platform::ALL.into_iter().find(|t| t.as_str() == name)
}

/// The TenantClusters (as `TenantCluster {namespace}/{name}`) that run on `platform`: those
/// whose ProviderConfig, named by the cluster or by its team's default, is for that platform.
/// A cluster whose ProviderConfig cannot be found counts as a user of every provider, since
/// nothing proves it does not need this one.
pub fn tenant_cluster_users(
    platform: Platform,
    clusters: &[TenantCluster],
    configs: &[ProviderConfig],
    teams: &[Team],
) -> Vec<String> {
    let mut users: Vec<String> = clusters
        .iter()
        .filter(|cluster| {
            let namespace = cluster.namespace().unwrap_or_default();
            let reference = match &cluster.spec.provider_config_ref {
                Some(r) => Some((r.namespace.clone().unwrap_or_else(|| namespace.clone()), r.name.clone())),
                None => teams
                    .iter()
                    .find(|t| {
                        t.status.as_ref().and_then(|s| s.namespace.as_deref()) == Some(namespace.as_str())
                    })
                    .and_then(|t| t.spec.provider_config_ref.as_ref())
                    .map(|r| (namespace.clone(), r.name.clone())),
            };
            let config = reference.and_then(|(ns, name)| {
                configs.iter().find(|c| c.namespace().as_deref() == Some(ns.as_str()) && c.name_any() == name)
            });
            config.is_none_or(|c| c.spec.provider == platform)
        })
        .map(|c| format!("TenantCluster {}/{}", c.namespace().unwrap_or_default(), c.name_any()))
        .collect();
    users.sort();
    users
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from_yaml<T: serde::de::DeserializeOwned>(text: &str) -> T {
        serde_saphyr::from_str(text).expect("fixture parses")
    }

    fn cluster(namespace: &str, name: &str, config: Option<&str>) -> TenantCluster {
        let reference = config.map(|c| format!("  providerConfigRef: {{name: {c}}}\n")).unwrap_or_default();
        from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n{reference}  kubernetesVersion: 1.30.4\n"
        ))
    }

    fn config(namespace: &str, name: &str, provider: &str) -> ProviderConfig {
        from_yaml(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: {name}, namespace: {namespace}}}\nspec:\n  provider: {provider}\n  credentialsRef: {{name: creds}}\n"
        ))
    }

    #[test]
    fn clusters_count_through_their_config_or_their_teams_default() {
        let team: Team = from_yaml(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: Team\nmetadata: {name: a}\nspec:\n  access: {}\n  providerConfigRef: {name: team-default}\nstatus: {namespace: team-a}\n",
        );
        let configs = [config("team-a", "harv", "harvester"), config("team-a", "team-default", "aws")];
        let clusters = [
            cluster("team-a", "c1", Some("harv")),
            cluster("team-a", "c2", None),
            cluster("team-a", "c3", Some("gone")),
        ];
        let teams = [team];
        assert_eq!(
            tenant_cluster_users(Platform::Harvester, &clusters, &configs, &teams),
            ["TenantCluster team-a/c1", "TenantCluster team-a/c3"]
        );
        assert_eq!(
            tenant_cluster_users(Platform::Aws, &clusters, &configs, &teams),
            ["TenantCluster team-a/c2", "TenantCluster team-a/c3"]
        );
        assert!(tenant_cluster_users(Platform::Gcp, &clusters[..2], &configs, &teams).is_empty());
        assert_eq!(butler_platform("nutanix"), Some(Platform::Nutanix));
        assert_eq!(butler_platform("vsphere"), None);
    }

    #[test]
    fn every_butler_infrastructure_provider_is_a_platform_and_back() {
        let providers = butler_repository::butler_infrastructure();
        assert!(providers.iter().all(|name| butler_platform(name).is_some()), "{providers:?}");
        assert_eq!(providers.len(), Platform::ALL.len(), "{providers:?}");
    }
}
