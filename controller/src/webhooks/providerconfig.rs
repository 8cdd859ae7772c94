//! The ProviderConfig admission rules of spec/000 ("Webhook Validation"), as pure functions.
//! Each refusal names the field and what to do.

use butler_core::api::{NetworkMode, Platform, ProviderConfig, ScopeType};

fn empty(text: &str) -> bool {
    text.trim().is_empty()
}

/// The rules of create and update.
pub fn validate(config: &ProviderConfig) -> Result<(), String> {
    let spec = &config.spec;
    let platform = spec.provider;
    let section_missing = || {
        Err(format!(
            "spec.{platform} is required when spec.provider is {platform}: add the {platform} settings"
        ))
    };
    let required = |fields: &[(&str, &str)]| -> Result<(), String> {
        let missing: Vec<String> =
            fields.iter().filter(|(_, v)| empty(v)).map(|(f, _)| format!("spec.{platform}.{f}")).collect();
        match missing.is_empty() {
            true => Ok(()),
            false => Err(format!("{} must be set for {platform}", missing.join(" and "))),
        }
    };
    match platform {
        Platform::Harvester => match &spec.harvester {
            None => return section_missing(),
            Some(h) => required(&[("networkName", &h.network_name)])?,
        },
        Platform::Nutanix => match &spec.nutanix {
            None => return section_missing(),
            Some(n) => required(&[
                ("endpoint", &n.endpoint),
                ("clusterUUID", &n.cluster_uuid),
                ("subnetUUID", &n.subnet_uuid),
            ])?,
        },
        Platform::Proxmox => match &spec.proxmox {
            None => return section_missing(),
            Some(p) => {
                required(&[("endpoint", &p.endpoint), ("storage", &p.storage)])?;
                if p.nodes.iter().all(|n| empty(n)) {
                    return Err("spec.proxmox.nodes must name at least one Proxmox node".into());
                }
                if let Some(range) = &p.vmid_range
                    && let (Some(start), Some(end)) = (range.start, range.end)
                    && start > end
                {
                    return Err(format!(
                        "spec.proxmox.vmidRange: start {start} is after end {end}; swap them"
                    ));
                }
            }
        },
        Platform::Azure => match &spec.azure {
            None => return section_missing(),
            Some(a) => {
                required(&[("subscriptionID", &a.subscription_id), ("resourceGroup", &a.resource_group)])?
            }
        },
        Platform::Aws => match &spec.aws {
            None => return section_missing(),
            Some(a) => required(&[("region", &a.region)])?,
        },
        Platform::Gcp => match &spec.gcp {
            None => return section_missing(),
            Some(g) => required(&[("projectID", &g.project_id), ("region", &g.region)])?,
        },
    }
    if let Some(scope) = &spec.scope
        && scope.type_ == Some(ScopeType::Team)
        && scope.team_ref.as_ref().is_none_or(|r| empty(&r.name))
    {
        return Err("spec.scope.teamRef.name is required when spec.scope.type is team: name the Team".into());
    }
    // A team's ProviderConfig reads credentials of its own namespace only: the controller reads
    // them with its own rights, which reach the platform's and every team's namespaces.
    let own = config.metadata.namespace.clone().unwrap_or_default();
    let teams = crate::team::plan::team_of_namespace(&own).is_some()
        || spec.scope.as_ref().is_some_and(|s| s.type_ == Some(ScopeType::Team));
    if let Some(elsewhere) = spec.credentials_ref.namespace.as_deref().filter(|n| !n.is_empty() && *n != own)
        && teams
    {
        return Err(format!(
            "spec.credentialsRef.namespace {elsewhere}: a team's ProviderConfig reads credentials of its own namespace ({own}) only; put the Secret there and leave the namespace out"
        ));
    }
    if let Some(network) = &spec.network
        && network.mode == Some(NetworkMode::Ipam)
    {
        if !platform.is_on_premises() {
            return Err(format!(
                "spec.network.mode ipam is for the on-premises platforms (harvester, nutanix, proxmox); {platform} assigns addresses itself: use mode cloud"
            ));
        }
        if network.pool_refs.as_ref().is_none_or(|p| p.is_empty()) {
            return Err(
                "spec.network.poolRefs must name at least one NetworkPool when spec.network.mode is ipam"
                    .into(),
            );
        }
    }
    Ok(())
}

/// The rule of delete: refused while TenantClusters (`namespace/name`) reference it.
pub fn validate_delete(users: &[String]) -> Result<(), String> {
    match users {
        [] => Ok(()),
        _ => Err(format!(
            "TenantClusters use this ProviderConfig: {}; delete them or point them at another ProviderConfig first",
            users.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(spec: &str) -> ProviderConfig {
        serde_saphyr::from_str(&format!(
            "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc, namespace: butler-system}}\nspec:\n  credentialsRef: {{name: c}}\n{spec}"
        ))
        .unwrap()
    }

    #[test]
    fn a_teams_provider_config_reads_credentials_of_its_own_namespace_only() {
        let in_ns = |ns: &str, extra: &str| -> ProviderConfig {
            serde_saphyr::from_str(&format!(
                "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: ProviderConfig\nmetadata: {{name: pc, namespace: {ns}}}\nspec:\n  provider: aws\n  aws: {{region: r}}\n{extra}"
            ))
            .unwrap()
        };
        let elsewhere = "  credentialsRef: {name: c, namespace: butler-system}\n";
        let refused = validate(&in_ns("team-a", elsewhere)).unwrap_err();
        assert_eq!(
            refused,
            "spec.credentialsRef.namespace butler-system: a team's ProviderConfig reads credentials of its own namespace (team-a) only; put the Secret there and leave the namespace out"
        );
        let scoped = format!("{elsewhere}  scope: {{type: team, teamRef: {{name: a}}}}\n");
        assert!(validate(&in_ns("platform", &scoped)).is_err(), "team-scoped elsewhere");
        assert_eq!(validate(&in_ns("team-a", "  credentialsRef: {name: c, namespace: team-a}\n")), Ok(()));
        assert_eq!(validate(&in_ns("platform", elsewhere)), Ok(()), "the platform's may");
    }

    #[test]
    fn create_and_update_rules() {
        let cases: &[(&str, Result<(), &str>)] = &[
            ("  provider: aws\n  aws: {region: us-east-1}\n", Ok(())),
            (
                "  provider: aws\n",
                Err("spec.aws is required when spec.provider is aws: add the aws settings"),
            ),
            ("  provider: aws\n  aws: {region: ''}\n", Err("spec.aws.region must be set for aws")),
            (
                "  provider: azure\n  azure: {subscriptionID: s, resourceGroup: ' '}\n",
                Err("spec.azure.resourceGroup must be set for azure"),
            ),
            (
                "  provider: gcp\n  gcp: {projectID: '', region: ''}\n",
                Err("spec.gcp.projectID and spec.gcp.region must be set for gcp"),
            ),
            ("  provider: gcp\n  gcp: {projectID: p, region: us-central1}\n", Ok(())),
            ("  provider: harvester\n  harvester: {networkName: default/vlan40}\n", Ok(())),
            (
                "  provider: proxmox\n  proxmox: {endpoint: 'https://pve', nodes: [], storage: s}\n",
                Err("spec.proxmox.nodes must name at least one Proxmox node"),
            ),
            (
                "  provider: proxmox\n  proxmox: {endpoint: 'https://pve', nodes: [a], storage: s, vmidRange: {start: 900, end: 200}}\n",
                Err("spec.proxmox.vmidRange: start 900 is after end 200; swap them"),
            ),
            (
                "  provider: aws\n  aws: {region: r}\n  scope: {type: team}\n",
                Err("spec.scope.teamRef.name is required when spec.scope.type is team: name the Team"),
            ),
            ("  provider: aws\n  aws: {region: r}\n  scope: {type: team, teamRef: {name: a}}\n", Ok(())),
            (
                "  provider: aws\n  aws: {region: r}\n  network: {mode: ipam, poolRefs: [{name: p}]}\n",
                Err(
                    "spec.network.mode ipam is for the on-premises platforms (harvester, nutanix, proxmox); aws assigns addresses itself: use mode cloud",
                ),
            ),
            (
                "  provider: nutanix\n  nutanix: {endpoint: 'https://prism', clusterUUID: c, subnetUUID: s}\n  network: {mode: ipam}\n",
                Err(
                    "spec.network.poolRefs must name at least one NetworkPool when spec.network.mode is ipam",
                ),
            ),
            (
                "  provider: nutanix\n  nutanix: {endpoint: 'https://prism', clusterUUID: c, subnetUUID: s}\n  network: {mode: ipam, poolRefs: [{name: p}]}\n",
                Ok(()),
            ),
        ];
        for (spec, expected) in cases {
            assert_eq!(
                validate(&config(spec)).as_ref().map_err(String::as_str),
                expected.as_ref().map_err(|e| *e),
                "{spec}"
            );
        }
    }

    #[test]
    fn delete_is_refused_while_clusters_use_it() {
        assert_eq!(validate_delete(&[]), Ok(()));
        assert_eq!(
            validate_delete(&["team-a/web".into()]).unwrap_err(),
            "TenantClusters use this ProviderConfig: team-a/web; delete them or point them at another ProviderConfig first"
        );
    }
}
