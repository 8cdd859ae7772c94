//! clusterctl's built-in list of public Cluster API providers (the `defaults` of its providers
//! client, as clusterctl v1.14 lists them with `clusterctl config repositories`, and the few it
//! listed before), so that a provider named as clusterctl and cluster-api-operator users name it
//! (`kubeadm`, `vsphere`, `metal3`, ...) is found here too. Where Butler's embedded repository
//! has the name (`aws`, `azure`, `gcp`, `nutanix`, `proxmox`), Butler's wins: the upstream one
//! is reached with its URL (`fetchConfig.url`, or `providers:` of the config file).

use crate::provider::{ProviderEntry, ProviderType};

const GITHUB: &str = "https://github.com";

/// (name, type, `owner/repository`, file of `releases/latest/`).
const UPSTREAM: &[(&str, ProviderType, &str, &str)] = &[
    ("cluster-api", ProviderType::Core, "kubernetes-sigs/cluster-api", "core-components.yaml"),
    (
        "linode-linode",
        ProviderType::Infrastructure,
        "linode/cluster-api-provider-linode",
        "infrastructure-components.yaml",
    ),
    (
        "aws",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-aws",
        "infrastructure-components.yaml",
    ),
    (
        "azure",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-azure",
        "infrastructure-components.yaml",
    ),
    (
        "docker",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api",
        "infrastructure-components-development.yaml",
    ),
    (
        "cloudstack",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-cloudstack",
        "infrastructure-components.yaml",
    ),
    (
        "digitalocean",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-digitalocean",
        "infrastructure-components.yaml",
    ),
    (
        "gcp",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-gcp",
        "infrastructure-components.yaml",
    ),
    (
        "packet",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-packet",
        "infrastructure-components.yaml",
    ),
    (
        "tinkerbell-tinkerbell",
        ProviderType::Infrastructure,
        "tinkerbell/cluster-api-provider-tinkerbell",
        "infrastructure-components.yaml",
    ),
    (
        "metal3",
        ProviderType::Infrastructure,
        "metal3-io/cluster-api-provider-metal3",
        "infrastructure-components.yaml",
    ),
    (
        "nested",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-nested",
        "infrastructure-components.yaml",
    ),
    (
        "oci",
        ProviderType::Infrastructure,
        "oracle/cluster-api-provider-oci",
        "infrastructure-components.yaml",
    ),
    (
        "openstack",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-openstack",
        "infrastructure-components.yaml",
    ),
    ("sidero", ProviderType::Infrastructure, "siderolabs/sidero", "infrastructure-components.yaml"),
    (
        "vcd",
        ProviderType::Infrastructure,
        "vmware/cluster-api-provider-cloud-director",
        "infrastructure-components.yaml",
    ),
    (
        "vsphere",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-vsphere",
        "infrastructure-components.yaml",
    ),
    (
        "maas",
        ProviderType::Infrastructure,
        "spectrocloud/cluster-api-provider-maas",
        "infrastructure-components.yaml",
    ),
    (
        "coxedge",
        ProviderType::Infrastructure,
        "coxedge/cluster-api-provider-coxedge",
        "infrastructure-components.yaml",
    ),
    (
        "byoh",
        ProviderType::Infrastructure,
        "vmware-tanzu/cluster-api-provider-bringyourownhost",
        "infrastructure-components.yaml",
    ),
    (
        "hetzner",
        ProviderType::Infrastructure,
        "syself/cluster-api-provider-hetzner",
        "infrastructure-components.yaml",
    ),
    (
        "hivelocity-hivelocity",
        ProviderType::Infrastructure,
        "hivelocity/cluster-api-provider-hivelocity",
        "infrastructure-components.yaml",
    ),
    (
        "outscale",
        ProviderType::Infrastructure,
        "outscale/cluster-api-provider-outscale",
        "infrastructure-components.yaml",
    ),
    (
        "ibmcloud",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-ibmcloud",
        "infrastructure-components.yaml",
    ),
    (
        "in-memory",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api",
        "infrastructure-components-in-memory-development.yaml",
    ),
    (
        "nutanix",
        ProviderType::Infrastructure,
        "nutanix-cloud-native/cluster-api-provider-nutanix",
        "infrastructure-components.yaml",
    ),
    ("kubekey", ProviderType::Infrastructure, "kubesphere/kubekey", "infrastructure-components.yaml"),
    (
        "kubevirt",
        ProviderType::Infrastructure,
        "kubernetes-sigs/cluster-api-provider-kubevirt",
        "infrastructure-components.yaml",
    ),
    (
        "vcluster",
        ProviderType::Infrastructure,
        "loft-sh/cluster-api-provider-vcluster",
        "infrastructure-components.yaml",
    ),
    (
        "virtink",
        ProviderType::Infrastructure,
        "smartxworks/cluster-api-provider-virtink",
        "infrastructure-components.yaml",
    ),
    (
        "proxmox",
        ProviderType::Infrastructure,
        "ionos-cloud/cluster-api-provider-proxmox",
        "infrastructure-components.yaml",
    ),
    (
        "k0sproject-k0smotron",
        ProviderType::Infrastructure,
        "k0sproject/k0smotron",
        "infrastructure-components.yaml",
    ),
    (
        "ionoscloud-ionoscloud",
        ProviderType::Infrastructure,
        "ionos-cloud/cluster-api-provider-ionoscloud",
        "infrastructure-components.yaml",
    ),
    (
        "vultr-vultr",
        ProviderType::Infrastructure,
        "vultr/cluster-api-provider-vultr",
        "infrastructure-components.yaml",
    ),
    ("kubeadm", ProviderType::Bootstrap, "kubernetes-sigs/cluster-api", "bootstrap-components.yaml"),
    ("kubekey-k3s", ProviderType::Bootstrap, "kubesphere/kubekey", "bootstrap-components.yaml"),
    (
        "talos",
        ProviderType::Bootstrap,
        "siderolabs/cluster-api-bootstrap-provider-talos",
        "bootstrap-components.yaml",
    ),
    (
        "microk8s",
        ProviderType::Bootstrap,
        "canonical/cluster-api-bootstrap-provider-microk8s",
        "bootstrap-components.yaml",
    ),
    ("ocne", ProviderType::Bootstrap, "verrazzano/cluster-api-provider-ocne", "bootstrap-components.yaml"),
    ("rke2", ProviderType::Bootstrap, "rancher/cluster-api-provider-rke2", "bootstrap-components.yaml"),
    ("k0sproject-k0smotron", ProviderType::Bootstrap, "k0sproject/k0smotron", "bootstrap-components.yaml"),
    ("kubeadm", ProviderType::ControlPlane, "kubernetes-sigs/cluster-api", "control-plane-components.yaml"),
    ("kubekey-k3s", ProviderType::ControlPlane, "kubesphere/kubekey", "control-plane-components.yaml"),
    (
        "talos",
        ProviderType::ControlPlane,
        "siderolabs/cluster-api-control-plane-provider-talos",
        "control-plane-components.yaml",
    ),
    (
        "microk8s",
        ProviderType::ControlPlane,
        "canonical/cluster-api-control-plane-provider-microk8s",
        "control-plane-components.yaml",
    ),
    (
        "nested",
        ProviderType::ControlPlane,
        "kubernetes-sigs/cluster-api-provider-nested",
        "control-plane-components.yaml",
    ),
    (
        "ocne",
        ProviderType::ControlPlane,
        "verrazzano/cluster-api-provider-ocne",
        "control-plane-components.yaml",
    ),
    (
        "kamaji",
        ProviderType::ControlPlane,
        "clastix/cluster-api-control-plane-provider-kamaji",
        "control-plane-components.yaml",
    ),
    (
        "rke2",
        ProviderType::ControlPlane,
        "rancher/cluster-api-provider-rke2",
        "control-plane-components.yaml",
    ),
    (
        "k0sproject-k0smotron",
        ProviderType::ControlPlane,
        "k0sproject/k0smotron",
        "control-plane-components.yaml",
    ),
    (
        "in-cluster",
        ProviderType::Ipam,
        "kubernetes-sigs/cluster-api-ipam-provider-in-cluster",
        "ipam-components.yaml",
    ),
    (
        "nutanix",
        ProviderType::Ipam,
        "nutanix-cloud-native/cluster-api-ipam-provider-nutanix",
        "ipam-components.yaml",
    ),
    ("helm", ProviderType::Addon, "kubernetes-sigs/cluster-api-addon-provider-helm", "addon-components.yaml"),
    (
        "canonical-kubernetes",
        ProviderType::Bootstrap,
        "canonical/cluster-api-k8s",
        "bootstrap-components.yaml",
    ),
    (
        "canonical-kubernetes",
        ProviderType::ControlPlane,
        "canonical/cluster-api-k8s",
        "control-plane-components.yaml",
    ),
    (
        "hosted-control-plane",
        ProviderType::ControlPlane,
        "teutonet/cluster-api-provider-hosted-control-plane",
        "control-plane-components.yaml",
    ),
    (
        "cloudscale-ch-cloudscale",
        ProviderType::Infrastructure,
        "cloudscale-ch/cluster-api-provider-cloudscale",
        "infrastructure-components.yaml",
    ),
    (
        "harvester-harvester",
        ProviderType::Infrastructure,
        "rancher-sandbox/cluster-api-provider-harvester",
        "infrastructure-components.yaml",
    ),
    (
        "huawei",
        ProviderType::Infrastructure,
        "HuaweiCloudDeveloper/cluster-api-provider-huawei",
        "infrastructure-components.yaml",
    ),
    (
        "kubeswift-io",
        ProviderType::Infrastructure,
        "kubeswift-io/cluster-api-provider-kubeswift",
        "infrastructure-components.yaml",
    ),
    (
        "metal-stack",
        ProviderType::Infrastructure,
        "metal-stack/cluster-api-provider-metal-stack",
        "infrastructure-components.yaml",
    ),
    (
        "opennebula",
        ProviderType::Infrastructure,
        "OpenNebula/cluster-api-provider-opennebula",
        "infrastructure-components.yaml",
    ),
    (
        "oxide",
        ProviderType::Infrastructure,
        "oxidecomputer/cluster-api-provider-oxide",
        "infrastructure-components.yaml",
    ),
    (
        "scaleway",
        ProviderType::Infrastructure,
        "scaleway/cluster-api-provider-scaleway",
        "infrastructure-components.yaml",
    ),
    ("metal3", ProviderType::Ipam, "metal3-io/ip-address-manager", "ipam-components.yaml"),
    ("eitco-cdk8s", ProviderType::Addon, "eitco/cluster-api-addon-provider-cdk8s", "addon-components.yaml"),
    (
        "rancher-fleet",
        ProviderType::Addon,
        "rancher/cluster-api-addon-provider-fleet",
        "addon-components.yaml",
    ),
    (
        "nutanix",
        ProviderType::RuntimeExtension,
        "nutanix-cloud-native/cluster-api-runtime-extensions-nutanix",
        "runtime-extensions-components.yaml",
    ),
];

/// clusterctl's built-in providers, with their GitHub release URLs.
pub fn upstream_providers() -> Vec<ProviderEntry> {
    UPSTREAM
        .iter()
        .map(|(name, type_, repository, file)| ProviderEntry {
            name: name.to_string(),
            type_: *type_,
            url: format!("{GITHUB}/{repository}/releases/latest/{file}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clusterctl_v1_14s_names_are_known_once_each() {
        let providers = upstream_providers();
        let mut seen = std::collections::BTreeSet::new();
        for p in &providers {
            assert!(seen.insert((p.type_, p.name.clone())), "{} {} is listed twice", p.type_, p.name);
        }
        let url = |t: ProviderType, name: &str| {
            providers.iter().find(|p| p.type_ == t && p.name == name).map(|p| p.url.clone())
        };
        for (t, name) in [
            (ProviderType::Bootstrap, "canonical-kubernetes"),
            (ProviderType::ControlPlane, "canonical-kubernetes"),
            (ProviderType::ControlPlane, "hosted-control-plane"),
            (ProviderType::Infrastructure, "cloudscale-ch-cloudscale"),
            (ProviderType::Infrastructure, "harvester-harvester"),
            (ProviderType::Infrastructure, "huawei"),
            (ProviderType::Infrastructure, "kubeswift-io"),
            (ProviderType::Infrastructure, "metal-stack"),
            (ProviderType::Infrastructure, "opennebula"),
            (ProviderType::Infrastructure, "oxide"),
            (ProviderType::Infrastructure, "scaleway"),
            (ProviderType::Ipam, "metal3"),
            (ProviderType::Addon, "eitco-cdk8s"),
            (ProviderType::Addon, "rancher-fleet"),
            (ProviderType::RuntimeExtension, "nutanix"),
        ] {
            assert!(url(t, name).is_some(), "{t} {name} is missing");
        }
        assert_eq!(
            url(ProviderType::Ipam, "metal3").unwrap(),
            "https://github.com/metal3-io/ip-address-manager/releases/latest/ipam-components.yaml"
        );
        assert_eq!(
            url(ProviderType::RuntimeExtension, "nutanix").unwrap(),
            "https://github.com/nutanix-cloud-native/cluster-api-runtime-extensions-nutanix/releases/latest/runtime-extensions-components.yaml"
        );
    }
}
