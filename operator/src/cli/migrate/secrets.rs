//! Config Secrets in another namespace than the provider's, as cluster-api-operator's chart and
//! plugin make them: this operator never reads across namespaces (the Secret holds
//! credentials), so `migrate --copy-secrets` copies each into the provider's namespace, under
//! the same name, and the carried-over object names its own copy. The copies are snapshots;
//! each run of `migrate --copy-secrets` (also once nothing is left to move) brings every copy
//! it made up to its source again. An `additionalManifests`
//! ConfigMap of another namespace stops the move, naming how to bring it beside the provider.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;

/// The label that says where a copied Secret came from (`{namespace}.{name}`).
pub const COPIED_FROM: &str = "operator.butlerlabs.dev/copied-from";

/// A config Secret to copy: from `namespace/name` into `into/name`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Copy {
    pub namespace: String,
    pub name: String,
    pub into: String,
}

impl Copy {
    /// Where the copy comes from, as the value of [`COPIED_FROM`].
    pub fn origin(&self) -> String {
        format!("{}.{}", self.namespace, self.name)
    }

    /// The line of the report.
    pub fn describe(&self) -> String {
        format!("copy Secret {}/{} into {}/{}", self.namespace, self.name, self.into, self.name)
    }
}

/// The config Secret of an old provider in `provider_namespace`'s spec, when it lies in
/// another namespace.
pub fn elsewhere(spec: &Value, provider_namespace: &str) -> Option<Copy> {
    let secret = spec.get("configSecret")?;
    let namespace =
        secret.get("namespace")?.as_str().filter(|ns| !ns.is_empty() && *ns != provider_namespace)?;
    Some(Copy {
        namespace: namespace.to_string(),
        name: secret.get("name")?.as_str()?.to_string(),
        into: provider_namespace.to_string(),
    })
}

/// Why the old provider cannot move as it is when its `additionalManifests` ConfigMap lies in
/// another namespace: this operator reads ConfigMaps beside the provider only (whoever may write
/// a provider object would otherwise read any ConfigMap of the cluster with its rights).
pub fn manifests_elsewhere(spec: &Value, provider_namespace: &str, what: &str) -> Option<String> {
    let manifests = spec.get("additionalManifests")?;
    let namespace =
        manifests.get("namespace")?.as_str().filter(|ns| !ns.is_empty() && *ns != provider_namespace)?;
    let name = manifests.get("name")?.as_str().unwrap_or_default();
    Some(format!(
        "{what}: its spec.additionalManifests ConfigMap {namespace}/{name} is in another namespace, and this operator reads only those beside the provider; copy it into {provider_namespace} (kubectl get configmap {name} -n {namespace} -o yaml, with the namespace changed) and set spec.additionalManifests.namespace to {provider_namespace} (or leave it out), then run migrate again"
    ))
}

/// The copy of `source` for `copy`: its data and type, labelled with where it came from.
fn copy_of(source: &Secret, copy: &Copy) -> Secret {
    let labels = BTreeMap::from([(COPIED_FROM.to_string(), copy.origin())]);
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(copy.name.clone()),
            namespace: Some(copy.into.clone()),
            labels: Some(labels),
            ..Default::default()
        },
        data: source.data.clone(),
        type_: source.type_.clone(),
        immutable: None,
        string_data: None,
    }
}

/// Why `copy` cannot be made, read before anything changes: the source is missing, or a Secret
/// of that name with other data is in the provider's namespace already.
pub async fn check(client: &kube::Client, copy: &Copy) -> Result<Option<String>, String> {
    let read = |ns: &str| -> Api<Secret> { Api::namespaced(client.clone(), ns) };
    let failed =
        |e: kube::Error| format!("reading the Secret to copy: {}", butler_runtime::error::describe(&e));
    let Some(source) = read(&copy.namespace).get_opt(&copy.name).await.map_err(failed)? else {
        return Ok(Some(format!(
            "Secret {}/{} is not there to copy; create it, or set the provider's spec.configSecret",
            copy.namespace, copy.name
        )));
    };
    match read(&copy.into).get_opt(&copy.name).await.map_err(failed)? {
        Some(there) if there.data != source.data && !made_from(&there, copy) => Ok(Some(format!(
            "Secret {}/{} exists already with other data than {}/{}; rename or remove one of them",
            copy.into, copy.name, copy.namespace, copy.name
        ))),
        _ => Ok(None),
    }
}

/// Whether `secret` is the copy migrate made of `copy`'s source.
fn made_from(secret: &Secret, copy: &Copy) -> bool {
    secret.metadata.labels.as_ref().and_then(|l| l.get(COPIED_FROM)) == Some(&copy.origin())
}

/// Makes the copy: a copy there already with the same data is kept, one migrate made of the
/// same source with older data gets the source's.
pub async fn make(client: &kube::Client, copy: &Copy) -> Result<(), String> {
    let failed = |e: kube::Error| format!("{}: {}", copy.describe(), butler_runtime::error::describe(&e));
    let source =
        Api::<Secret>::namespaced(client.clone(), &copy.namespace).get(&copy.name).await.map_err(failed)?;
    let target: Api<Secret> = Api::namespaced(client.clone(), &copy.into);
    let params = PostParams { field_manager: Some("butlerctl".into()), ..Default::default() };
    match target.get_opt(&copy.name).await.map_err(failed)? {
        Some(there) if there.data == source.data => Ok(()),
        // Replaced at the version read: a change made meanwhile is not overwritten unseen.
        Some(mut there) if made_from(&there, copy) => {
            there.data = source.data.clone();
            target.replace(&copy.name, &params, &there).await.map(|_| ()).map_err(failed)
        }
        _ => target.create(&params, &copy_of(&source, copy)).await.map(|_| ()).map_err(failed),
    }
}

/// The copies migrate made (in `namespace`, or every one) whose source has other data now.
pub async fn stale(client: &kube::Client, namespace: Option<&str>) -> Result<Vec<Copy>, String> {
    let api: Api<Secret> = match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    let failed = |e: kube::Error| {
        format!("reading the Secrets migrate copied: {}", butler_runtime::error::describe(&e))
    };
    let copies = api.list(&ListParams::default().labels(COPIED_FROM)).await.map_err(failed)?;
    let mut out = Vec::new();
    for copied in copies.items {
        let origin =
            copied.metadata.labels.as_ref().and_then(|l| l.get(COPIED_FROM)).cloned().unwrap_or_default();
        // A namespace has no dot: the first one ends it.
        let Some((source_ns, source_name)) = origin.split_once('.') else { continue };
        let copy = Copy {
            namespace: source_ns.to_string(),
            name: source_name.to_string(),
            into: copied.metadata.namespace.clone().unwrap_or_default(),
        };
        if copied.metadata.name.as_deref() != Some(source_name) {
            continue;
        }
        let source = Api::<Secret>::namespaced(client.clone(), source_ns)
            .get_opt(source_name)
            .await
            .map_err(failed)?;
        if source.is_some_and(|s| s.data != copied.data) {
            out.push(copy);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn additional_manifests_of_another_namespace_stop_the_move_naming_the_fix() {
        let spec = serde_json::json!({"additionalManifests": {"name": "extra", "namespace": "shared"}});
        let why = manifests_elsewhere(&spec, "capi-system", "CoreProvider capi-system/cluster-api").unwrap();
        assert!(why.starts_with("CoreProvider capi-system/cluster-api: its spec.additionalManifests ConfigMap shared/extra is in another namespace"), "{why}");
        let beside =
            serde_json::json!({"additionalManifests": {"name": "extra", "namespace": "capi-system"}});
        assert_eq!(manifests_elsewhere(&beside, "capi-system", "x"), None);
        assert_eq!(
            manifests_elsewhere(
                &serde_json::json!({"additionalManifests": {"name": "extra"}}),
                "capi-system",
                "x"
            ),
            None
        );
    }
    use serde_json::json;

    #[test]
    fn a_config_secret_elsewhere_is_copied_into_the_providers_namespace_under_its_name() {
        let spec = json!({"configSecret": {"name": "aws-variables", "namespace": "capi-operator-system"}});
        let copy = elsewhere(&spec, "capa-system").unwrap();
        assert_eq!(
            copy.describe(),
            "copy Secret capi-operator-system/aws-variables into capa-system/aws-variables"
        );
        assert_eq!(
            elsewhere(&json!({"configSecret": {"name": "x", "namespace": "capa-system"}}), "capa-system"),
            None
        );
        assert_eq!(elsewhere(&json!({"configSecret": {"name": "x"}}), "capa-system"), None);
        let source = Secret {
            data: Some(BTreeMap::from([(
                "AWS_REGION".into(),
                k8s_openapi::ByteString(b"eu-west-1".to_vec()),
            )])),
            type_: Some("Opaque".into()),
            ..Default::default()
        };
        let made = copy_of(&source, &copy);
        assert_eq!(made.data, source.data);
        assert_eq!(made.metadata.namespace.as_deref(), Some("capa-system"));
        assert_eq!(made.metadata.labels.unwrap()[COPIED_FROM], "capi-operator-system.aws-variables");
    }
}
