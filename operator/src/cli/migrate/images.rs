//! The image overrides of cluster-api-operator's own clusterctl.yaml (mounted into its pod, at
//! `/config/clusterctl.yaml` as its chart does), which it applied to every provider: without
//! them the carried-over providers would render other images, restart, and in an air-gapped
//! cluster pull from where it cannot reach. Here each provider carries them in its config
//! Secret's `images` key (the same `images:` YAML), added to its Secret or in a Secret of its
//! own; a Secret that has an `images` key already keeps it. Its `providers:` entries, which
//! moved a provider to another URL there (a mirror, a fork), move the carried-over provider's
//! `fetchConfig.url` alike.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use crate::controller::wanted::config::IMAGES_KEY;

/// The file cluster-api-operator reads its clusterctl config from.
const CONFIG_FILE: &str = "clusterctl.yaml";

/// The label on a Secret migrate made to hold a provider's image overrides.
pub const IMAGES_FROM: &str = "operator.butlerlabs.dev/images-from";

/// The `images:` of the clusterctl.yaml mounted into cluster-api-operator's pod, and where it
/// was read.
#[derive(Debug, Clone, PartialEq)]
pub struct Mounted {
    /// `ConfigMap {namespace}/{name}` (or Secret).
    pub source: String,
    /// The `images:` section, as YAML, if it has one.
    pub images: Option<String>,
    /// Its `providers:` entries.
    pub providers: Vec<butler_repository::ProviderEntry>,
}

impl Mounted {
    /// The URL its `providers:` give the provider `name` of `type_`, when one does.
    pub fn url_of(&self, type_: butler_repository::ProviderType, name: &str) -> Option<&str> {
        self.providers.iter().find(|p| p.type_ == type_ && p.name == name).map(|p| p.url.as_str())
    }
}

/// Where the mounted clusterctl.yaml comes from: (`ConfigMap` or `Secret`, name, key), from the
/// pod's volumes and mounts.
fn config_volume(deployment: &Deployment) -> Option<(&'static str, String, String)> {
    let pod = deployment.spec.as_ref()?.template.spec.as_ref()?;
    let mounted: Vec<(String, Option<String>)> = pod
        .containers
        .iter()
        .flat_map(|c| c.volume_mounts.iter().flatten())
        .filter(|m| m.mount_path == "/config" || m.mount_path.ends_with(&format!("/{CONFIG_FILE}")))
        .map(|m| (m.name.clone(), m.sub_path.clone().filter(|s| !s.is_empty())))
        .collect();
    for volume in pod.volumes.iter().flatten() {
        let Some((_, sub_path)) = mounted.iter().find(|(name, _)| *name == volume.name) else { continue };
        // The key: the item projected to clusterctl.yaml, else the subPath, else the file name.
        let key = |items: Option<&Vec<k8s_openapi::api::core::v1::KeyToPath>>| {
            items
                .and_then(|items| items.iter().find(|i| i.path == CONFIG_FILE).map(|i| i.key.clone()))
                .or_else(|| sub_path.clone())
                .unwrap_or_else(|| CONFIG_FILE.to_string())
        };
        if let Some(source) = &volume.config_map {
            return Some(("ConfigMap", source.name.clone(), key(source.items.as_ref())));
        }
        if let Some(source) = &volume.secret {
            return Some(("Secret", source.secret_name.clone()?, key(source.items.as_ref())));
        }
    }
    None
}

/// The `images:` section of a clusterctl.yaml, as YAML; `None` when it has none.
fn images_of(text: &str) -> Result<Option<String>, String> {
    let config: Value = serde_saphyr::from_str(text).map_err(|e| format!("not YAML: {e}"))?;
    match config.get("images").filter(|i| i.as_object().is_some_and(|m| !m.is_empty())) {
        Some(images) => serde_saphyr::to_string(images).map(Some).map_err(|e| e.to_string()),
        None => Ok(None),
    }
}

/// The image overrides of cluster-api-operator's mounted clusterctl.yaml, if it has any.
pub async fn mounted(client: &kube::Client, deployment: &Deployment) -> Result<Option<Mounted>, String> {
    let Some((kind, name, key)) = config_volume(deployment) else { return Ok(None) };
    let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
    let source = format!("{kind} {namespace}/{name}");
    let failed = |e: kube::Error| {
        format!(
            "reading {source}, cluster-api-operator's clusterctl.yaml: {}",
            butler_runtime::error::describe(&e)
        )
    };
    let text = match kind {
        "ConfigMap" => Api::<ConfigMap>::namespaced(client.clone(), &namespace)
            .get_opt(&name)
            .await
            .map_err(failed)?
            .and_then(|c| c.data.and_then(|mut d| d.remove(&key))),
        _ => Api::<Secret>::namespaced(client.clone(), &namespace)
            .get_opt(&name)
            .await
            .map_err(failed)?
            .and_then(|s| s.data.and_then(|mut d| d.remove(&key)))
            .and_then(|b| String::from_utf8(b.0).ok()),
    };
    let Some(text) = text else { return Ok(None) };
    let images = images_of(&text).map_err(|e| format!("{source}, key {key}: {e}"))?;
    let config = butler_repository::ClusterctlConfig::parse(&text, std::path::Path::new(CONFIG_FILE))
        .map_err(|e| format!("{source}, key {key}: {e}"))?;
    Ok(Some(Mounted { source, images, providers: config.providers }))
}

/// What becomes of one provider's image overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Carry {
    /// Its config Secret gets the `images` key.
    AddKey { namespace: String, name: String },
    /// Its config Secret has an `images` key already: it stays.
    Keep { namespace: String, name: String },
    /// It names no config Secret: one of its own holds them, and it names that.
    NewSecret { namespace: String, name: String },
}

impl Carry {
    /// The line of the report.
    pub fn describe(&self, source: &str) -> String {
        match self {
            Carry::AddKey { namespace, name } => {
                format!("Secret {namespace}/{name}: add the key images, the image overrides of {source}")
            }
            Carry::Keep { namespace, name } => {
                format!("Secret {namespace}/{name}: keeps its own images key (not the overrides of {source})")
            }
            Carry::NewSecret { namespace, name } => {
                format!(
                    "Secret {namespace}/{name}: make it with the image overrides of {source}, as the provider's config Secret"
                )
            }
        }
    }

    /// Writes it.
    pub async fn make(&self, client: &kube::Client, mounted: &Mounted) -> Result<(), String> {
        let failed = |e: kube::Error| {
            format!("{}: {}", self.describe(&mounted.source), butler_runtime::error::describe(&e))
        };
        let params = PostParams { field_manager: Some("butlerctl".into()), ..Default::default() };
        match self {
            Carry::Keep { .. } => Ok(()),
            Carry::AddKey { namespace, name } => {
                let images = mounted.images.clone().unwrap_or_default();
                let patch = json!({"data": {IMAGES_KEY: k8s_openapi::ByteString(images.into_bytes())}});
                Api::<Secret>::namespaced(client.clone(), namespace)
                    .patch(name, &PatchParams::default(), &Patch::Merge(patch))
                    .await
                    .map(|_| ())
                    .map_err(failed)
            }
            Carry::NewSecret { namespace, name } => {
                let api = Api::<Secret>::namespaced(client.clone(), namespace);
                if api.get_opt(name).await.map_err(failed)?.is_some() {
                    return Ok(());
                }
                let secret: Secret = serde_json::from_value(json!({
                    "metadata": {"name": name, "namespace": namespace,
                                 "labels": {IMAGES_FROM: mounted.source.replace([' ', '/'], ".")}},
                    "type": "Opaque",
                    "stringData": {IMAGES_KEY: mounted.images},
                }))
                .map_err(|e| e.to_string())?;
                api.create(&params, &secret).await.map(|_| ()).map_err(failed)
            }
        }
    }
}

/// What to do for a provider whose carried-over object names `secret` (in `namespace`, holding
/// the keys `keys` when it exists), or none.
pub fn plan(namespace: &str, label: &str, secret: Option<(&str, Option<Vec<String>>)>) -> Carry {
    match secret {
        Some((name, Some(keys))) if keys.iter().any(|k| k == IMAGES_KEY) => {
            Carry::Keep { namespace: namespace.into(), name: name.into() }
        }
        Some((name, _)) => Carry::AddKey { namespace: namespace.into(), name: name.into() },
        None => Carry::NewSecret { namespace: namespace.into(), name: format!("{label}-images") },
    }
}

/// The mounted overrides as clusterctl's `images:` map, when the file has them.
pub fn overrides(mounted: &Mounted) -> Result<Option<butler_repository::ImageOverrides>, String> {
    let Some(text) = &mounted.images else { return Ok(None) };
    serde_saphyr::from_str(text).map(Some).map_err(|e| format!("the images: of {}: {e}", mounted.source))
}

/// cluster-api-operator applies its mounted overrides last, after a provider's own `imageUrl`s
/// and patches; this operator applies a config Secret's before them. So each `imageUrl` of the
/// carried-over `object` (its own Deployment's containers and those of
/// `additionalDeployments`) is written as it ended up there, overridden, and the pods keep
/// their image. The lines of the plan, one for each `imageUrl` changed.
pub fn late(object: &mut Value, label: &str, overrides: &butler_repository::ImageOverrides) -> Vec<String> {
    let mut notes = Vec::new();
    let Some(spec) = object.get_mut("spec") else { return notes };
    if let Some(own) = spec.get_mut("deployment") {
        overridden(own, "spec.deployment", label, overrides, &mut notes);
    }
    if let Some(map) = spec.get_mut("additionalDeployments").and_then(Value::as_object_mut) {
        for (name, extra) in map.iter_mut() {
            let field = format!("spec.additionalDeployments.{name}.deployment");
            if let Some(deployment) = extra.get_mut("deployment") {
                overridden(deployment, &field, label, overrides, &mut notes);
            }
        }
    }
    // The images the patches write (applied before the overrides there too).
    if let Some(patches) = spec.get_mut("manifestPatches").and_then(Value::as_array_mut) {
        for (i, text) in patches.iter_mut().enumerate() {
            patched(text, &format!("spec.manifestPatches[{i}]"), label, overrides, &mut notes);
        }
    }
    if let Some(patches) = spec.get_mut("patches").and_then(Value::as_array_mut) {
        for (i, patch) in patches.iter_mut().enumerate() {
            if let Some(text) = patch.get_mut("patch") {
                patched(text, &format!("spec.patches[{i}].patch"), label, overrides, &mut notes);
            }
        }
    }
    notes.sort();
    notes
}

/// A patch (YAML text: a merge patch, or RFC 6902 operations) with the images it writes
/// overridden: a container's `image` in a merge patch or in an operation's value, or an
/// operation's value at a path ending `/image`. Written back as YAML when one changed.
fn patched(
    text: &mut Value,
    field: &str,
    label: &str,
    overrides: &butler_repository::ImageOverrides,
    notes: &mut Vec<String>,
) {
    let Some(mut patch) = text.as_str().and_then(|t| serde_saphyr::from_str::<Value>(t).ok()) else { return };
    let mut changed = Vec::new();
    let mut alter = |image: &mut Value| {
        let Some(written) = image.as_str().map(String::from) else { return };
        if let Ok(after) = overrides.apply(label, &written)
            && after != written
        {
            changed.push(format!("{written} becomes {after}"));
            *image = json!(after);
        }
    };
    match &mut patch {
        Value::Array(operations) => {
            for operation in operations.iter_mut() {
                let at_image = operation["path"].as_str().is_some_and(|p| p.ends_with("/image"));
                match operation.get_mut("value") {
                    Some(value) if at_image => alter(value),
                    Some(value) => container_images(value, &mut alter),
                    None => {}
                }
            }
        }
        other => container_images(other, &mut alter),
    }
    if changed.is_empty() {
        return;
    }
    if let Ok(written) = serde_saphyr::to_string(&patch) {
        notes.push(format!(
            "{field}: the image it writes as cluster-api-operator's image overrides made it ({})",
            changed.join(", ")
        ));
        *text = json!(written);
    }
}

/// Calls `alter` on the `image` of every container and init container under `value` (a pod
/// template anywhere in it, or containers themselves).
fn container_images(value: &mut Value, alter: &mut dyn FnMut(&mut Value)) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map.iter_mut() {
                match (key.as_str(), inner) {
                    ("containers" | "initContainers", Value::Array(list)) => {
                        for container in list.iter_mut() {
                            if let Some(image) = container.get_mut("image") {
                                alter(image);
                            }
                        }
                    }
                    (_, inner) => container_images(inner, alter),
                }
            }
            // A container itself (an operation's value at `/containers/0`).
            if map.contains_key("name")
                && !map.contains_key("spec")
                && let Some(image) = map.get_mut("image").filter(|i| i.is_string())
            {
                alter(image);
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|v| container_images(v, alter)),
        _ => {}
    }
}

/// The `imageUrl`s of one `deployment` setting, overridden; a note for each changed.
fn overridden(
    deployment: &mut Value,
    field: &str,
    label: &str,
    overrides: &butler_repository::ImageOverrides,
    notes: &mut Vec<String>,
) {
    let containers = deployment.get_mut("containers").and_then(Value::as_array_mut);
    for (i, container) in containers.into_iter().flatten().enumerate() {
        let Some(url) = container["imageUrl"].as_str().map(String::from) else { continue };
        if let Ok(after) = overrides.apply(label, &url)
            && after != url
        {
            notes.push(format!(
                "{field}.containers[{i}].imageUrl: {after}, as cluster-api-operator's image overrides made {url}"
            ));
            container["imageUrl"] = json!(after);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mounted_config_is_found_by_its_volume_and_its_images_read() {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "capi-operator-cluster-api-operator", "namespace": "capi-operator-system"},
            "spec": {"selector": {}, "template": {"spec": {
                "containers": [{"name": "manager", "volumeMounts": [{"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"},
                                                                     {"name": "clusterctl", "mountPath": "/config"}]}],
                "volumes": [{"name": "cert", "secret": {"secretName": "capi-operator-webhook-service-cert"}},
                            {"name": "clusterctl", "configMap": {"name": "clusterctl-config", "items": [{"key": "clusterctl", "path": "clusterctl.yaml"}]}}],
            }}},
        }))
        .unwrap();
        assert_eq!(
            config_volume(&deployment),
            Some(("ConfigMap", "clusterctl-config".into(), "clusterctl".into()))
        );
        let images =
            images_of("providers: []\nimages:\n  all: {repository: mirror.local/capi}\n").unwrap().unwrap();
        let parsed: butler_repository::ImageOverrides = serde_saphyr::from_str(&images).unwrap();
        assert_eq!(
            parsed
                .apply("cluster-api", "registry.k8s.io/cluster-api/cluster-api-controller:v1.10.4")
                .unwrap(),
            "mirror.local/capi/cluster-api-controller:v1.10.4"
        );
        assert_eq!(images_of("providers: []\n").unwrap(), None);
    }

    #[test]
    fn image_urls_are_carried_as_the_overrides_applied_after_them_left_them() {
        let overrides: butler_repository::ImageOverrides =
            serde_saphyr::from_str("all: {repository: mirror.local/capi}\n").unwrap();
        let mut object = json!({"spec": {
            "deployment": {"containers": [{"name": "manager", "imageUrl": "registry.example.com/capz/manager:v1.20.0"},
                                          {"name": "sidecar"}]},
            "additionalDeployments": {"azureserviceoperator-controller-manager": {"deployment": {"containers": [
                {"name": "manager", "imageUrl": "mcr.microsoft.com/k8s/azureserviceoperator:v2.9.0"}]}}},
        }});
        let notes = late(&mut object, "infrastructure-azure", &overrides);
        assert_eq!(
            object["spec"]["deployment"]["containers"][0]["imageUrl"],
            "mirror.local/capi/manager:v1.20.0"
        );
        assert_eq!(object["spec"]["deployment"]["containers"][1].get("imageUrl"), None);
        assert_eq!(
            object["spec"]["additionalDeployments"]["azureserviceoperator-controller-manager"]["deployment"]
                ["containers"][0]["imageUrl"],
            "mirror.local/capi/azureserviceoperator:v2.9.0"
        );
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(
            notes[1]
                .starts_with("spec.deployment.containers[0].imageUrl: mirror.local/capi/manager:v1.20.0, as"),
            "{notes:?}"
        );
        // Overrides that do not touch it change nothing.
        let none: butler_repository::ImageOverrides =
            serde_saphyr::from_str("infrastructure-aws: {repository: mirror.local/capa}\n").unwrap();
        assert!(late(&mut object, "infrastructure-azure", &none).is_empty());
    }

    #[test]
    fn images_the_patches_write_are_carried_as_the_overrides_left_them() {
        let overrides: butler_repository::ImageOverrides =
            serde_saphyr::from_str("all: {repository: mirror.local/capi}\n").unwrap();
        let merge = "kind: Deployment\nmetadata: {name: capi-controller-manager}\nspec:\n  template:\n    spec:\n      containers:\n        - {name: manager, image: registry.example.com/capi/manager:v1.10.9}\n";
        let operations = "- {op: replace, path: /spec/template/spec/containers/0/image, value: registry.example.com/capi/manager:v1.10.9}\n- {op: add, path: /spec/template/spec/initContainers/0, value: {name: init, image: registry.example.com/capi/init:v1}}\n- {op: replace, path: /spec/replicas, value: 2}\n";
        let mut object = json!({"spec": {"manifestPatches": [merge], "patches": [{"patch": operations}]}});
        let notes = late(&mut object, "cluster-api", &overrides);
        assert_eq!(notes.len(), 2, "{notes:?}");
        let merged: Value =
            serde_saphyr::from_str(object["spec"]["manifestPatches"][0].as_str().unwrap()).unwrap();
        assert_eq!(
            merged["spec"]["template"]["spec"]["containers"][0]["image"],
            "mirror.local/capi/manager:v1.10.9"
        );
        let ops: Value =
            serde_saphyr::from_str(object["spec"]["patches"][0]["patch"].as_str().unwrap()).unwrap();
        assert_eq!(ops[0]["value"], "mirror.local/capi/manager:v1.10.9");
        assert_eq!(ops[1]["value"]["image"], "mirror.local/capi/init:v1");
        assert_eq!(ops[2]["value"], 2, "what is no image is left as it was");
        // A patch that writes no image is left as written.
        let mut plain = json!({"spec": {"manifestPatches": ["kind: Deployment\nspec: {replicas: 2}\n"]}});
        assert!(late(&mut plain, "cluster-api", &overrides).is_empty());
        assert_eq!(plain["spec"]["manifestPatches"][0], "kind: Deployment\nspec: {replicas: 2}\n");
    }

    #[test]
    fn each_provider_gets_the_overrides_in_its_config_secret_or_one_of_its_own() {
        let keys = |k: &[&str]| Some(k.iter().map(|s| s.to_string()).collect());
        assert_eq!(
            plan("capa-system", "infrastructure-aws", Some(("aws-variables", keys(&["AWS_REGION"])))),
            Carry::AddKey { namespace: "capa-system".into(), name: "aws-variables".into() }
        );
        assert_eq!(
            plan("capa-system", "infrastructure-aws", Some(("aws-variables", keys(&["images"])))),
            Carry::Keep { namespace: "capa-system".into(), name: "aws-variables".into() }
        );
        assert_eq!(
            plan("capi-system", "cluster-api", None),
            Carry::NewSecret { namespace: "capi-system".into(), name: "cluster-api-images".into() }
        );
    }
}
