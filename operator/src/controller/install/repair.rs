//! Whether a drift repair may be made. The objects of a provider being deleted go away by the
//! operator's own hand, or with their namespace by the namespace controller's: that a cache
//! saw the Deployment go before the provider's (or the namespace's) deletion timestamp is no
//! reason to write them again. A repair reads both live first; the rest of the install path
//! never needs to.

use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;

use crate::controller::ProviderObject;
use crate::controller::context::Context;
use crate::controller::vocabulary::ProviderKey;

/// Kubernetes' refusal of a create in a namespace being deleted (NamespaceLifecycle).
pub const NAMESPACE_TERMINATING: &str = "because it is being terminated";

/// Why no repair is made now: the provider or its namespace is being deleted (read live).
/// A read that fails (a rule not granted, the server not answering) lets the repair go on:
/// it is what the operator did before it asked.
pub async fn deletion_under_way<K: ProviderObject>(
    ctx: &Context,
    object: &K,
    key: &ProviderKey,
) -> Option<String> {
    let name = object.meta().name.clone().unwrap_or_default();
    let providers: Api<K> = Api::namespaced(ctx.client.clone(), &key.namespace);
    match providers.get_opt(&name).await {
        Ok(None) => return Some(format!("{key} is gone")),
        Ok(Some(live)) if live.meta().deletion_timestamp.is_some() => {
            return Some(format!("{key} is being deleted"));
        }
        Ok(Some(_)) => {}
        Err(e) => tracing::debug!(provider = %key, "reading the provider before a repair: {e}"),
    }
    let namespaces: Api<Namespace> = Api::all(ctx.client.clone());
    match namespaces.get_opt(&key.namespace).await {
        Ok(Some(ns)) if ns.metadata.deletion_timestamp.is_none() => None,
        Ok(_) => Some(format!("its namespace {} is being deleted", key.namespace)),
        Err(e) => {
            tracing::debug!(provider = %key, "reading the namespace before a repair: {e}");
            None
        }
    }
}
