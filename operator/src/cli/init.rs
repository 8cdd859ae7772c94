//! `butlerctl init`: the operator installed when it is missing (its manifest from this
//! binary), then each provider object and its config Secret, made from the variables its
//! components use (flags, environment, config file, in clusterctl's order), applied so that a
//! second run changes nothing; then, with `--wait-providers`, each provider waited for until it
//! is Ready or says why not. Secret values are never printed.

use std::collections::BTreeMap;

use butler_repository::{ClusterctlConfig, ProviderType, Variables};
use butler_runtime::apply::{Applier, Made};
use serde_json::{Value, json};

use super::GenerateError;
use super::apply::{Waits, wait_ready};
use super::generate::{provider_ref, repository};
use crate::upgrade::moves::Move;

const FIELD_MANAGER: &str = "butlerctl";

/// What `init` was asked.
#[derive(Debug, Clone, Default)]
pub struct InitArgs {
    /// (type, `NAME[:VERSION]`); the core provider `butler` when no core is named.
    pub providers: Vec<(ProviderType, String)>,
    /// Every provider's namespace (`--target-namespace`); when `None`, each goes to the
    /// namespace its components declare, as clusterctl installs them (`butler-system` for
    /// Butler's core, `butler-harvester-system` for Harvester, `capa-system` for AWS's), else to
    /// [`DEFAULT_NAMESPACE`].
    pub target_namespace: Option<String>,
    /// An image for the operator instead of this build's.
    pub operator_image: Option<String>,
    /// Grants for the operator beyond Butler's providers (`manifest::extra_rbac`), installed
    /// with it.
    pub operator_rules: Vec<Value>,
    pub explicit: BTreeMap<String, String>,
    /// The CoreProviders the cluster has already (`namespace/name`): a cluster runs one core,
    /// so none is added, and naming one is refused (as clusterctl skips an installed core).
    pub existing_cores: Vec<String>,
    /// A config Secret every provider names (`--config-secret NAME[:NAMESPACE]`, as
    /// cluster-api-operator's plugin takes it), its namespace the provider's when not given:
    /// the user's own Secret of variables, so init writes none and asks for none.
    pub config_secret: Option<(String, Option<String>)>,
}

/// `NAME[:NAMESPACE]` of `--config-secret`, as cluster-api-operator's plugin reads it.
pub fn parse_config_secret(text: &str) -> Result<(String, Option<String>), String> {
    let parts: Vec<&str> = text.split(':').collect();
    match parts[..] {
        [name] if !name.is_empty() => Ok((name.to_string(), None)),
        [name, namespace] if !name.is_empty() && !namespace.is_empty() => {
            Ok((name.to_string(), Some(namespace.to_string())))
        }
        _ => Err(format!("{text:?} is not NAME or NAME:NAMESPACE (capi-variables:capi-system)")),
    }
}

/// Where a provider goes whose components declare no namespace and none is given.
pub const DEFAULT_NAMESPACE: &str = "butler-system";

/// What `init` would apply: the operator's manifest when it is missing, Secrets, providers.
#[derive(Debug, Clone, Default)]
pub struct InitPlan {
    pub operator: Vec<Value>,
    pub objects: Vec<Value>,
    /// What the user should know of the plan, a line each (a Butler name that shadows Cluster
    /// API's), printed on stderr.
    pub notes: Vec<String>,
}

impl InitPlan {
    /// The objects as YAML, Secret values masked.
    pub fn to_yaml(&self) -> String {
        self.operator
            .iter()
            .chain(&self.objects)
            .map(|o| {
                let mut shown = o.clone();
                if let Some(data) = shown.get_mut("stringData").and_then(Value::as_object_mut) {
                    for value in data.values_mut() {
                        *value = json!("<redacted>");
                    }
                }
                serde_saphyr::to_string(&shown).expect("objects serialize")
            })
            .collect::<Vec<_>>()
            .join("---\n")
    }
}

/// Argo CD's ordering annotation: the operator (its CRDs first) before the core provider,
/// before the other providers.
const SYNC_WAVE: &str = "argocd.argoproj.io/sync-wave";
/// Argo CD's dry run cannot know the kinds whose CRDs the same sync brings.
const SYNC_OPTIONS: &str = "argocd.argoproj.io/sync-options";

impl InitPlan {
    /// The config Secrets the provider objects name, each as `namespace/name` with its keys
    /// (never its values): what the GitOps set leaves out, for the user to create.
    pub fn secrets_to_create(&self) -> Vec<String> {
        self.objects
            .iter()
            .filter(|o| o["kind"] == "Secret")
            .map(|o| {
                let keys: Vec<&str> =
                    o["stringData"].as_object().into_iter().flatten().map(|(k, _)| k.as_str()).collect();
                format!(
                    "{}/{} with the keys {}",
                    o["metadata"]["namespace"].as_str().unwrap_or_default(),
                    o["metadata"]["name"].as_str().unwrap_or_default(),
                    keys.join(", ")
                )
            })
            .collect()
    }

    /// The whole set for a GitOps tool to apply as it is: the operator's manifest and the
    /// provider objects, in apply order and with the sync waves of Argo CD (Flux applies CRDs
    /// and Namespaces first by itself). The config Secrets are left out (their values do not
    /// belong in Git): the provider objects name them, [`InitPlan::secrets_to_create`] lists
    /// them.
    pub fn to_gitops_yaml(&self) -> String {
        let wave = |o: &Value| match (o["kind"].as_str(), o["apiVersion"].as_str()) {
            (Some("CoreProvider"), _) => "1",
            (_, Some(v)) if v.starts_with("operator.butlerlabs.dev/") => "2",
            _ => "0",
        };
        self.operator
            .iter()
            .chain(self.objects.iter().filter(|o| o["kind"] != "Secret"))
            .map(|o| {
                let mut shown = o.clone();
                shown["metadata"]["annotations"][SYNC_WAVE] = json!(wave(o));
                if o["apiVersion"].as_str().is_some_and(|v| v.starts_with("operator.butlerlabs.dev/")) {
                    shown["metadata"]["annotations"][SYNC_OPTIONS] =
                        json!("SkipDryRunOnMissingResource=true");
                }
                serde_saphyr::to_string(&shown).expect("objects serialize")
            })
            .collect::<Vec<_>>()
            .join("---\n")
    }
}

/// The component name of the operator in clusterctl's `images:` overrides.
pub const OPERATOR_COMPONENT: &str = "butler-operator";

/// The operator's manifest: its image `image` when given, else this build's with the config's
/// image overrides (`all`, or `butler-operator`), as providers' images get them.
fn operator_objects(image: Option<&str>, config: &ClusterctlConfig) -> Result<Vec<Value>, GenerateError> {
    let mut objects = crate::manifest::objects(butler_repository::EMBEDDED_VERSION);
    for o in objects.iter_mut().filter(|o| o["kind"] == "Deployment") {
        let containers = o.pointer_mut("/spec/template/spec/containers").and_then(Value::as_array_mut);
        for c in containers.into_iter().flatten() {
            let wanted = match image {
                Some(image) => image.to_string(),
                None => config
                    .images
                    .apply(OPERATOR_COMPONENT, c["image"].as_str().unwrap_or_default())
                    .map_err(|e| GenerateError::Usage(format!("the images of the config: {e}")))?,
            };
            c["image"] = json!(wanted);
        }
    }
    Ok(objects)
}

/// The Pod Security labels of a namespace made for providers: baseline enforced, as the
/// operator's release admission holds providers' pods to it (an operator started with
/// `--allow-privileged-pods` needs the namespace relabelled too).
pub const POD_SECURITY: [(&str, &str); 2] =
    [("pod-security.kubernetes.io/enforce", "baseline"), ("pod-security.kubernetes.io/warn", "baseline")];

/// A namespace that holds provider objects, labelled so that the operator honours them there
/// and Pod Security enforces baseline ([`POD_SECURITY`]); applied over an existing namespace,
/// only the operator's label is added ([`apply`]): its Pod Security labels are its owner's.
pub fn providers_namespace(name: &str) -> Value {
    let mut labels = json!({crate::controller::wanted::policy::NAMESPACE_LABEL: "true"});
    for (key, value) in POD_SECURITY {
        labels[key] = json!(value);
    }
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
}

/// What is applied of `object`: a Namespace that exists keeps its Pod Security labels.
fn over_existing(object: &Value) -> Value {
    let mut kept = object.clone();
    if let Some(labels) = kept.pointer_mut("/metadata/labels").and_then(Value::as_object_mut) {
        labels.retain(|key, _| !key.starts_with("pod-security.kubernetes.io/"));
    }
    kept
}

/// Builds what `init` applies; fails, before anything is applied, when a provider is unknown
/// or a variable its components need is not set.
pub async fn plan(
    args: &InitArgs,
    config: &ClusterctlConfig,
    operator_present: bool,
) -> Result<InitPlan, GenerateError> {
    let variables: Variables = config.variables(args.explicit.clone());
    let mut providers = args.providers.clone();
    let named_core = providers.iter().find(|(t, _)| *t == ProviderType::Core);
    match (named_core, args.existing_cores.is_empty()) {
        (Some((_, core)), false) => {
            return Err(GenerateError::Usage(format!(
                "the cluster has a core provider already ({}), and a cluster runs one: leave --core {core} out (the other providers join the one there), or delete that CoreProvider first",
                args.existing_cores.join(", ")
            )));
        }
        (None, true) => providers.insert(0, (ProviderType::Core, "butler".into())),
        _ => {}
    }
    providers.sort_by_key(|(t, _)| *t != ProviderType::Core);
    let mut objects = Vec::new();
    let mut missing = Vec::new();
    let mut notes = Vec::new();
    for (type_, text) in &providers {
        let named = provider_ref(text)?;
        let (name, version) = (named.name, named.version);
        let entry = config.provider(*type_, &name)?;
        let repo = repository(config, &variables, *type_, &name)?;
        let resolved = repo.resolve(version.as_deref()).await?;
        let components = String::from_utf8(repo.components(&resolved).await?).map_err(|_| {
            GenerateError::Usage(format!("{} {resolved}: the components are not UTF-8 text", repo.provider()))
        })?;
        // The namespace in the argument (NAME:NAMESPACE:VERSION), else --target-namespace, else
        // the components' own: each provider in a namespace of its own, as clusterctl lays them
        // out, so that none reaches another's ServiceAccounts through a shared namespace.
        let ns = named
            .namespace
            .clone()
            .or_else(|| args.target_namespace.clone())
            .or_else(|| butler_repository::declared_namespace(&components))
            .unwrap_or_else(|| DEFAULT_NAMESPACE.to_string());
        let object = providers_namespace(&ns);
        if !objects.contains(&object) {
            objects.push(object);
        }
        let ns = &ns;
        let label = type_.label(&name);
        let mut data = BTreeMap::new();
        // The user's own config Secret holds the variables: none are looked up or asked for.
        let own_secret = args.config_secret.as_ref();
        for used in
            butler_repository::list_variables(&components).into_iter().filter(|_| own_secret.is_none())
        {
            match (variables.lookup(&used.name), &used.default) {
                (Some(value), _) => {
                    data.insert(used.name.clone(), value);
                }
                (None, Some(_)) => {}
                (None, None) => missing.push(format!("{} ({label})", used.name)),
            }
        }
        let asked = crate::api::ProviderSpec { version: version.clone(), ..Default::default() };
        notes.extend(crate::controller::wanted::fetch::butler_name_shadows(*type_, &name, &asked, config));
        let mut spec = json!({});
        if let Some(v) = version {
            spec["version"] = json!(v);
        }
        // The operator knows Butler's providers; any other comes from where the config says.
        if !entry.url.starts_with("embedded:") {
            spec["fetchConfig"] = json!({"url": entry.url});
        }
        if let Some((secret, namespace)) = own_secret {
            spec["configSecret"] = json!({"name": secret, "namespace": namespace.as_deref().unwrap_or(ns)});
        } else if !data.is_empty() {
            let secret = format!("{label}-variables");
            objects.push(json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                "metadata": {"name": secret, "namespace": ns}, "stringData": data}));
            spec["configSecret"] = json!({"name": secret});
        }
        objects.push(json!({"apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": type_.type_name(),
            "metadata": {"name": name, "namespace": ns}, "spec": spec}));
    }
    if !missing.is_empty() {
        return Err(GenerateError::Usage(format!(
            "the variables {} are not set; set them in the environment or in the clusterctl config file",
            missing.join(", ")
        )));
    }
    let mut operator =
        if operator_present { Vec::new() } else { operator_objects(args.operator_image.as_deref(), config)? };
    if !args.operator_rules.is_empty() {
        operator
            .extend(crate::manifest::extra_rbac(butler_repository::EMBEDDED_VERSION, &args.operator_rules));
    }
    Ok(InitPlan { operator, objects, notes })
}

/// The CoreProviders of the cluster (`namespace/name`); none when the operator's CRDs are not
/// served yet.
pub async fn existing_cores(client: &kube::Client) -> Result<Vec<String>, GenerateError> {
    let api: kube::Api<crate::api::CoreProvider> = kube::Api::all(client.clone());
    match api.list_metadata(&Default::default()).await {
        Ok(list) => Ok(list
            .items
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or_default(),
                    c.metadata.name.as_deref().unwrap_or_default()
                )
            })
            .collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(e) => Err(GenerateError::Cluster(format!(
            "cannot list the CoreProviders: {}",
            butler_runtime::error::describe(&e)
        ))),
    }
}

/// Whether the operator is installed: the CoreProvider CRD is there.
pub async fn operator_present(client: &kube::Client) -> Result<bool, GenerateError> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    crds.get_opt("coreproviders.operator.butlerlabs.dev").await.map(|crd| crd.is_some()).map_err(|e| {
        GenerateError::Cluster(format!("cannot read the CRDs: {}", butler_runtime::error::describe(&e)))
    })
}

/// Applies the plan; with `waits`, waits until each provider is Ready.
pub async fn apply(
    client: &kube::Client,
    plan: &InitPlan,
    waits: Option<Waits>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, GenerateError> {
    let applier = Applier::new(client.clone(), FIELD_MANAGER);
    if !plan.operator.is_empty() {
        progress("Installing the operator...");
        for object in &plan.operator {
            applier.apply(object, true).await.map_err(GenerateError::Cluster)?;
        }
    }
    let mut done = String::new();
    for object in &plan.objects {
        let (kind, name) = (
            object["kind"].as_str().unwrap_or_default(),
            object["metadata"]["name"].as_str().unwrap_or_default(),
        );
        let what = match object["metadata"]["namespace"].as_str() {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        };
        progress(&format!("Applying {what}..."));
        // The CRDs of an operator just installed may take a moment to be served.
        if object["kind"] == "Namespace" && object["apiVersion"] == "v1" {
            // Made here with its Pod Security labels; one that exists gets the operator's label.
            let applied = match applier.create_only(object, false).await.map_err(GenerateError::Cluster)? {
                Made::Created(..) => None,
                Made::Exists(_) => Some(over_existing(object)),
                Made::Gone => Some(object.clone()),
            };
            if let Some(applied) = applied {
                applier.apply(&applied, false).await.map_err(GenerateError::Cluster)?;
            }
        } else {
            applier.apply(object, true).await.map_err(GenerateError::Cluster)?;
        }
        done.push_str(&format!("{what} applied\n"));
    }
    if let Some(waits) = waits {
        for object in plan.objects.iter().filter(|o| o["apiVersion"] == "operator.butlerlabs.dev/v1alpha1") {
            let kind = object["kind"]
                .as_str()
                .and_then(|k| k.parse::<ProviderType>().ok())
                .expect("a provider kind");
            let m = Move {
                kind,
                namespace: object["metadata"]["namespace"].as_str().unwrap_or_default().to_string(),
                name: object["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                from: None,
                to: String::new(),
            };
            progress(&format!("Waiting for {} {}/{} to be Ready...", kind.type_name(), m.namespace, m.name));
            wait_ready(client, &m, waits).await.map_err(GenerateError::Cluster)?;
        }
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_config_secret_is_named_as_cluster_api_operators_plugin_takes_it() {
        assert_eq!(parse_config_secret("vars"), Ok(("vars".into(), None)));
        assert_eq!(parse_config_secret("vars:capi-system"), Ok(("vars".into(), Some("capi-system".into()))));
        assert!(parse_config_secret("a:b:c").is_err());
        assert!(parse_config_secret(":ns").is_err());
    }

    #[test]
    fn the_gitops_set_names_the_config_secrets_and_holds_none_of_their_values() {
        let plan = InitPlan {
            operator: Vec::new(),
            objects: vec![
                providers_namespace("capa-system"),
                json!({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                    "metadata": {"name": "infrastructure-aws-variables", "namespace": "capa-system"},
                    "stringData": {"AWS_REGION": "eu-west-1", "AWS_B64ENCODED_CREDENTIALS": "c2VjcmV0"}}),
                json!({"apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "InfrastructureProvider",
                    "metadata": {"name": "aws", "namespace": "capa-system"},
                    "spec": {"configSecret": {"name": "infrastructure-aws-variables"}}}),
            ],
            notes: Vec::new(),
        };
        let yaml = plan.to_gitops_yaml();
        assert!(
            !yaml.contains("c2VjcmV0") && !yaml.contains("eu-west-1") && !yaml.contains("kind: Secret"),
            "{yaml}"
        );
        assert!(yaml.contains("name: infrastructure-aws-variables"), "the provider names it");
        assert_eq!(
            plan.secrets_to_create(),
            ["capa-system/infrastructure-aws-variables with the keys AWS_B64ENCODED_CREDENTIALS, AWS_REGION"]
        );
    }
}
