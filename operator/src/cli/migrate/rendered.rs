//! Each carried-over provider rendered before anything changes, as this operator will install it
//! after the move, from the release it will read (the ConfigMap cluster-api-operator cached, or
//! the one the object names; no network): a customisation this operator refuses (a patch that
//! matches nothing, an `additionalDeployments` name the release lacks, a pod run as an account
//! the release does not ship) stops the move while nothing has changed, and the pod template of
//! each Deployment it renders is compared with the one that runs, naming the pods that would
//! restart.

use butler_repository::{ClusterctlConfig, ImageOverrides, RemoteOptions, Version};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use serde_json::Value;

use super::carry::OldProvider;
use super::restarts;
use crate::api::{KindNames, ProviderKind, ProviderSpec};
use crate::controller::wanted::config::{self, IMAGES_KEY};
use crate::controller::wanted::fetch;

/// What rendering one carried-over object found.
#[derive(Debug, Default)]
pub struct Checked {
    /// Lines of the plan (the pods that restart, or that none does).
    pub lines: Vec<String>,
    /// What stops the move.
    pub blockers: Vec<String>,
    /// The objects rendered, when the release could be read and rendered.
    pub objects: Vec<Value>,
}

/// The carried-over `object` of `old` at `version`, rendered with the variables of the Secret
/// `secret` (namespace, name: the one it names, or the source of the copy migrate will make)
/// and the image overrides the move gives it (`mounted`, unless that Secret has its own).
pub async fn check(
    client: &kube::Client,
    old: &OldProvider,
    object: &Value,
    version: &str,
    secret: Option<(String, String)>,
    mounted: Option<&ImageOverrides>,
) -> Result<Checked, String> {
    let mut checked = Checked::default();
    let who = old.describe();
    let Some(kind) = ProviderKind::from_kind(object["kind"].as_str().unwrap_or_default()) else {
        return Ok(checked);
    };
    let spec: ProviderSpec = match serde_json::from_value(object["spec"].clone()) {
        Ok(spec) => spec,
        Err(e) => {
            checked.blockers.push(format!("{who}: the carried-over spec does not read: {e}"));
            return Ok(checked);
        }
    };
    if spec.fetch_config.as_ref().and_then(|f| f.selector.as_ref()).is_none() {
        checked.lines.push(format!(
            "{who}: its release is fetched when this operator installs it, so it is not rendered before the move (migrate reaches no network); its pods may restart"
        ));
        return Ok(checked);
    }
    let (namespace, name) = (&old.namespace, &old.name);
    let repo = fetch::repository(
        client,
        kind,
        namespace,
        name,
        &spec,
        &RemoteOptions::default(),
        &ClusterctlConfig::default(),
        None,
    )?;
    let release = Version::parse(version, "spec.version").map_err(|e| e.to_string())?;
    let text = match repo.components(&release).await {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) => {
            checked.blockers.push(format!(
                "{who}: its release {version} cannot be read where the carried-over object reads it: {e}"
            ));
            return Ok(checked);
        }
    };
    let variables = match &secret {
        Some((ns, name)) => match Api::<Secret>::namespaced(client.clone(), ns).get_opt(name).await {
            Ok(Some(found)) => config::variables(&found).unwrap_or_default(),
            // Said by the checks of config Secrets.
            Ok(None) | Err(_) => return Ok(checked),
        },
        None => Default::default(),
    };
    // (An `images` key that does not read is said by the operator, as its config Secret's.)
    let images = match variables.get(IMAGES_KEY) {
        Some(text) => config::images(text).unwrap_or_default(),
        None => mounted.cloned().unwrap_or_default(),
    };
    let lookup = |key: &str| variables.get(key).cloned();
    let label = kind.label(name);
    let objects = match crate::upgrade::changes::render_text(
        &text, &spec, &label, namespace, version, &images, &lookup,
    ) {
        Ok(objects) => objects,
        Err(e) => {
            checked.blockers.push(format!(
                "{who}: rendered as this operator would install it after the move, it fails: {e}; change the object (or its cluster-api-operator original) and run migrate again"
            ));
            return Ok(checked);
        }
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    for rendered in objects.iter().filter(|o| o["kind"] == "Deployment") {
        let name = rendered["metadata"]["name"].as_str().unwrap_or_default();
        let running = deployments.get_opt(name).await.map_err(|e| {
            format!("reading Deployment {namespace}/{name}: {}", butler_runtime::error::describe(&e))
        })?;
        let Some(running) = running else {
            checked.lines.push(format!("Deployment {namespace}/{name}: not running; it will be created"));
            continue;
        };
        let running = serde_json::to_value(running.spec.map(|s| s.template)).unwrap_or_default();
        let differ = restarts::differences(&rendered["spec"]["template"], &running);
        checked.lines.push(match differ.is_empty() {
            true => format!("Deployment {namespace}/{name}: the same pod template; its pods keep running"),
            false => format!(
                "Deployment {namespace}/{name}: its pods will restart: this operator renders another {}",
                differ.join(", ")
            ),
        });
    }
    checked.objects = objects;
    Ok(checked)
}
