//! What the controller reads of a tenant's answers, decoded straight into the few fields it
//! uses and counted as it goes. A tenant is the team's: its API server may send anything, and
//! an answer decoded whole amplifies (`{"items":[{},{},…]}` makes a Service of every 3 bytes;
//! a pool's `[{},{},…]` a map of each). Lists are read a page at a time, a page of more items
//! than asked is refused, every list in an object has a bound, and what is not read is skipped
//! unread.

use std::fmt;
use std::marker::PhantomData;
use std::net::IpAddr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::{Deserializer, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use super::elastic::Service;

/// Items a page of the tenant's Services holds at most (the page size asked for).
pub const PAGE: usize = 500;
/// Pages of Services read at most: 32,000 Services.
pub const MAX_PAGES: usize = 64;
/// Ingress addresses of one Service read at most.
const MAX_INGRESS: usize = 16;
/// Addresses of one MetalLB pool read at most (the pool Butler writes lists a cluster's blocks).
pub const MAX_POOL_ADDRESSES: usize = 1024;

/// A list of at most `N` items, refused past that as it is read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(transparent)]
pub struct Bounded<T, const N: usize>(pub Vec<T>);

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Bounded<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Items<T, const N: usize>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for Items<T, N> {
            type Value = Bounded<T, N>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                write!(f, "a list of at most {N} items")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element()? {
                    if items.len() == N {
                        return Err(serde::de::Error::custom(format!("more than {N} items")));
                    }
                    items.push(item);
                }
                Ok(Bounded(items))
            }
        }
        d.deserialize_seq(Items::<T, N>(PhantomData))
    }
}

/// One item of a list of Services, as far as it is read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct ServiceItem {
    metadata: ItemMeta,
    spec: ServiceSpec,
    status: ServiceStatus,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ItemMeta {
    name: String,
    namespace: String,
    creation_timestamp: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ServiceSpec {
    #[serde(rename = "type")]
    type_: Option<String>,
    load_balancer_class: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ServiceStatus {
    load_balancer: LoadBalancerStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LoadBalancerStatus {
    ingress: Bounded<Ingress, MAX_INGRESS>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Ingress {
    ip: Option<String>,
}

impl ServiceItem {
    /// The Service as elastic IPAM reads it, if the tenant's MetalLB serves it: a LoadBalancer
    /// Service of no `loadBalancerClass` (one of another class waits for another load balancer).
    fn served(self) -> Option<Service> {
        if self.spec.type_.as_deref() != Some("LoadBalancer") || self.spec.load_balancer_class.is_some() {
            return None;
        }
        let created = self.metadata.creation_timestamp.and_then(|t| t.parse().ok());
        Some(Service {
            name: format!("{}/{}", self.metadata.namespace, self.metadata.name),
            created: created.unwrap_or(jiff::Timestamp::UNIX_EPOCH),
            addresses: self
                .status
                .load_balancer
                .ingress
                .0
                .iter()
                .filter_map(|i| i.ip.as_ref()?.parse::<IpAddr>().ok())
                .collect(),
        })
    }
}

/// One page of the tenant's Services: those its MetalLB serves (the others dropped as they are
/// read), the token of the next page and the list's resourceVersion.
#[derive(Debug, Default)]
pub struct ServicePage {
    pub services: Vec<Service>,
    pub next: Option<String>,
    pub version: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ListMeta {
    #[serde(rename = "continue")]
    next: Option<String>,
    resource_version: Option<String>,
}

impl<'de> Deserialize<'de> for ServicePage {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        /// The items of a page: each read into the fields used, kept only if served.
        struct Served(Vec<Service>);
        impl<'de> Deserialize<'de> for Served {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct Items;
                impl<'de> Visitor<'de> for Items {
                    type Value = Served;
                    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                        write!(f, "a list of at most {PAGE} Services")
                    }
                    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Served, A::Error> {
                        let (mut kept, mut read) = (Vec::new(), 0usize);
                        while let Some(item) = seq.next_element::<ServiceItem>()? {
                            read += 1;
                            if read > PAGE {
                                return Err(serde::de::Error::custom(format!(
                                    "a page of more than the {PAGE} Services asked for"
                                )));
                            }
                            kept.extend(item.served());
                        }
                        Ok(Served(kept))
                    }
                }
                d.deserialize_seq(Items)
            }
        }
        #[derive(Deserialize, Default)]
        #[serde(default)]
        struct Page {
            metadata: ListMeta,
            items: Option<Served>,
        }
        let page = Page::deserialize(d)?;
        Ok(ServicePage {
            services: page.items.map(|s| s.0).unwrap_or_default(),
            next: page.metadata.next.filter(|n| !n.is_empty()),
            version: page.metadata.resource_version,
        })
    }
}

/// The metadata of a pool as far as it is read: name, namespace, resourceVersion (its labels,
/// annotations and managed fields are skipped unread).
fn narrow_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Meta {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
    }
    let meta = Meta::deserialize(d)?;
    Ok(ObjectMeta {
        name: meta.name,
        namespace: meta.namespace,
        resource_version: meta.resource_version,
        ..ObjectMeta::default()
    })
}

/// A MetalLB IPAddressPool as the controller reads it.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct MetalLbPool {
    #[serde(deserialize_with = "narrow_meta")]
    pub metadata: ObjectMeta,
    pub spec: PoolSpec,
    pub status: PoolStatus,
}

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default)]
pub struct PoolSpec {
    pub addresses: Bounded<String, MAX_POOL_ADDRESSES>,
}

/// What MetalLB 0.14+ reports of a pool's free addresses.
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(default, rename_all = "camelCase")]
pub struct PoolStatus {
    #[serde(rename = "availableIPv4")]
    pub available_ipv4: Option<i64>,
    #[serde(rename = "availableIPv6")]
    pub available_ipv6: Option<i64>,
}

/// An object of a watch event, as far as it is read: its resourceVersion.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Seen {
    pub metadata: SeenMeta,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct SeenMeta {
    pub resource_version: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_keeps_the_services_metallb_serves_and_refuses_more_than_asked() {
        let page: ServicePage = serde_json::from_str(
            r#"{"metadata": {"continue": "t", "resourceVersion": "7"}, "items": [
                {"metadata": {"name": "web", "namespace": "a", "creationTimestamp": "2026-11-28T10:00:00Z", "annotations": {"x": "y"}},
                 "spec": {"type": "LoadBalancer"}, "status": {"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}}},
                {"metadata": {"name": "other", "namespace": "a"}, "spec": {"type": "LoadBalancer", "loadBalancerClass": "x"}},
                {"metadata": {"name": "plain", "namespace": "a"}, "spec": {"type": "ClusterIP"}},
                {}]}"#,
        )
        .unwrap();
        assert_eq!((page.next.as_deref(), page.version.as_deref()), (Some("t"), Some("7")));
        assert_eq!(page.services.len(), 1);
        assert_eq!(page.services[0].name, "a/web");
        assert_eq!(page.services[0].addresses, ["10.0.0.1".parse::<IpAddr>().unwrap()]);
        // The 8 MiB answer of empty items that made a Service of every 3 bytes: refused past a page.
        let amplifying = format!("{{\"items\": [{}]}}", vec!["{}"; PAGE + 1].join(","));
        let refused = serde_json::from_str::<ServicePage>(&amplifying).unwrap_err();
        assert!(refused.to_string().contains("a page of more than the 500 Services asked for"), "{refused}");
        let ingress = format!(
            "{{\"items\": [{{\"spec\": {{\"type\": \"LoadBalancer\"}}, \"status\": {{\"loadBalancer\": {{\"ingress\": [{}]}}}}}}]}}",
            vec!["{}"; 17].join(",")
        );
        assert!(serde_json::from_str::<ServicePage>(&ingress).is_err(), "ingress lists are bounded too");
    }

    #[test]
    fn a_pool_reads_its_addresses_and_free_counts_and_nothing_else() {
        let pool: MetalLbPool = serde_json::from_str(
            r#"{"apiVersion": "metallb.io/v1beta1", "kind": "IPAddressPool",
                "metadata": {"name": "default-pool", "namespace": "metallb-system", "resourceVersion": "3",
                    "labels": {"a": "b"}, "managedFields": [{"manager": "x", "fieldsV1": {"f:spec": {}}}]},
                "spec": {"addresses": ["10.0.0.0-10.0.0.3"], "autoAssign": true},
                "status": {"availableIPv4": 0}}"#,
        )
        .unwrap();
        assert_eq!(pool.spec.addresses.0, ["10.0.0.0-10.0.0.3"]);
        assert_eq!((pool.status.available_ipv4, pool.status.available_ipv6), (Some(0), None));
        assert_eq!(pool.metadata.resource_version.as_deref(), Some("3"));
        assert!(pool.metadata.labels.is_none() && pool.metadata.managed_fields.is_none());
        // A pool answer that grew 30 times as a tree: a list of maps, or too many addresses.
        assert!(serde_json::from_str::<MetalLbPool>(r#"{"spec": {"addresses": [{}, {}]}}"#).is_err());
        let many =
            format!("{{\"spec\": {{\"addresses\": [{}]}}}}", vec!["\"a\""; MAX_POOL_ADDRESSES + 1].join(","));
        assert!(serde_json::from_str::<MetalLbPool>(&many).is_err());
    }
}
