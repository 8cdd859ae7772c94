//! `butlerctl migrate`: moves a cluster from cluster-api-operator to this operator without
//! restarting a provider. It reads cluster-api-operator's provider objects, says what it will
//! do (all of it with `--dry-run`), stops when anything would be lost, scales the old operator
//! to 0, makes this operator's provider objects (which take over the installed objects, see
//! `controller::adopt`), waits until each is Ready, then removes each old object without its
//! finalizer and orphaning its dependents. Every step is read back from the cluster, so a run
//! after an interruption, or a second run, goes on from where things stand.

pub mod cached;
pub mod carry;
pub mod files;
pub mod images;
pub mod secrets;
pub mod webhooks;

use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, Preconditions,
    PropagationPolicy,
};
use serde_json::{Value, json};

use self::carry::{Carried, MIGRATED_FROM, OldProvider, carry};
use super::apply::{Move, Waits, provider_api, wait_ready};
use crate::api::{KindNames, ProviderKind};
use crate::controller::adopt::CAPI_OPERATOR_GROUP;

/// The label cluster-api-operator's chart puts on its Deployment.
pub const OLD_OPERATOR_LABEL: &str = "clusterctl.cluster.x-k8s.io/core=capi-operator";
/// The replicas the old operator had, kept on its Deployment to scale it back by hand.
pub const REPLICAS_BEFORE: &str = "operator.butlerlabs.dev/replicas-before-migration";
/// cluster-api-operator's finalizer on its provider objects.
const OLD_FINALIZER: &str = "provider.cluster.x-k8s.io";

/// What to move.
#[derive(Debug, Clone)]
pub struct Options {
    /// Only the providers of this namespace; every namespace by default.
    pub namespace: Option<String>,
    /// cluster-api-operator's Deployment (`NAMESPACE/NAME`); found by its chart's label when
    /// not given.
    pub old_operator: Option<(String, String)>,
    /// Print the plan, change nothing.
    pub dry_run: bool,
    /// Move what can move when some provider is of a kind this operator lacks; those stay
    /// with cluster-api-operator (scaled down, so unmanaged).
    pub leave_unsupported: bool,
    /// Copy config Secrets of other namespaces into the providers' (this operator reads only
    /// a provider's own).
    pub copy_secrets: bool,
    pub waits: Waits,
}

/// One old provider and what becomes of it.
struct Step {
    old: OldProvider,
    carried: Carried,
    /// Carried over by an earlier run: the new object exists with this one's mark.
    made: bool,
}

/// Runs the migration (or with `dry_run` only plans it); returns the report.
pub async fn migrate(
    client: &kube::Client,
    options: &Options,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<String, String> {
    let olds = old_providers(client, options.namespace.as_deref()).await?;
    let operator = old_operator(client, options.old_operator.as_ref()).await?;
    let schemas = spec_schemas()?;
    let mut report = Vec::new();
    let mut steps = Vec::new();
    let mut blockers = Vec::new();
    let mut copies: Vec<secrets::Copy> = Vec::new();
    for old in olds {
        let schema =
            schemas.iter().find(|(k, _)| k.kind() == old.kind).map(|(_, s)| s.clone()).unwrap_or_default();
        let carried = carry(&old, &schema);
        let made = match &carried.object {
            Some(object) => match existing(client, object).await? {
                None => false,
                // Made by an earlier run, or converted from a file of it (migrate --from-file).
                Some(found)
                    if found
                        .metadata
                        .annotations
                        .as_ref()
                        .and_then(|a| a.get(MIGRATED_FROM))
                        .is_some_and(|mark| *mark == old.mark() || *mark == old.file_mark()) =>
                {
                    true
                }
                Some(_) => {
                    blockers.push(format!(
                        "{}: this operator's {} {}/{} exists already, not made by a migration of it; delete or rename one of them",
                        old.describe(),
                        object["kind"].as_str().unwrap_or_default(),
                        old.namespace,
                        old.name
                    ));
                    false
                }
            },
            None if options.leave_unsupported => false,
            None => {
                blockers.push(format!(
                    "{}: this operator has no such kind; give --leave-unsupported to leave it to cluster-api-operator (scaled down, so nothing manages it)",
                    old.describe()
                ));
                false
            }
        };
        let mut carried = carried;
        if !made && old.object["spec"].get("fetchConfig").is_none() {
            use_cached_release(client, &old, &mut carried).await?;
        }
        if let Some(copy) = secrets::elsewhere(&old.object["spec"], &old.namespace) {
            match options.copy_secrets {
                true => {
                    own_secret(&mut carried, &copy);
                    copies.push(copy);
                }
                false => blockers.push(secret_elsewhere(&old, &copy)),
            }
        }
        steps.push(Step { old, carried, made });
    }
    // cluster-api-operator's own image overrides, which it applied to every provider.
    let mounted = match &operator {
        Some(deployment) => images::mounted(client, deployment).await?,
        None => None,
    };
    let mut image_carries = Vec::new();
    if let Some(mounted) = &mounted {
        for step in steps.iter_mut().filter(|s| s.carried.object.is_some()) {
            let carry = carry_images(client, step, &copies).await?;
            report.push(carry.describe(&mounted.source));
            image_carries.push(carry);
        }
    }
    let targets = steps.iter().filter(|s| s.carried.object.is_some()).map(|s| s.old.namespace.as_str());
    let (labels, unhonoured) = match super::honoured::operators(client).await {
        Some(operators) => to_label(&operators, targets),
        None => (
            Vec::new(),
            vec![format!(
                "cannot list the Deployments labelled app.kubernetes.io/name={} to know whether this operator honours {}; run migrate with rights to list Deployments",
                crate::api::FIELD_MANAGER,
                targets.collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>().join(", ")
            )],
        ),
    };
    blockers.extend(unhonoured);
    copies.sort_by_key(secrets::Copy::describe);
    copies.dedup();
    for copy in &copies {
        blockers.extend(secrets::check(client, copy).await?);
    }

    report.push(match &operator {
        Some(d) => format!(
            "cluster-api-operator {}/{}: {}",
            d.metadata.namespace.as_deref().unwrap_or_default(),
            d.metadata.name.as_deref().unwrap_or_default(),
            match replicas(d) {
                0 => "at 0 replicas".to_string(),
                n => format!("scale from {n} to 0 replicas"),
            }
        ),
        None => "cluster-api-operator: no Deployment of it found (nothing to scale down)".into(),
    });
    if steps.is_empty() {
        report.push("no cluster-api-operator provider objects left: nothing to move".into());
    }
    for step in &steps {
        report.extend(describe(step));
    }
    // Only its own webhooks (calling a Service of its namespace), and only when it is found.
    let closed = match (&operator, steps.iter().any(|s| s.carried.object.is_some())) {
        (Some(d), true) => {
            webhooks::find(client, d.metadata.namespace.as_deref().unwrap_or_default()).await?
        }
        _ => Vec::new(),
    };
    report.extend(closed.iter().map(webhooks::Closed::describe));
    report.extend(copies.iter().map(secrets::Copy::describe));
    report.extend(labels.iter().map(|(ns, label)| {
        format!("namespace {ns}: label it {label}=true, so that this operator honours its provider objects")
    }));
    if !blockers.is_empty() {
        report.push("nothing was changed; first:".into());
        report.extend(blockers.iter().map(|b| format!("  {b}")));
        return Err(report.join("\n"));
    }
    if options.dry_run || steps.is_empty() {
        if options.dry_run {
            report.push("dry run: nothing was changed".into());
        }
        return Ok(report.join("\n") + "\n");
    }
    for line in &report {
        progress(line);
    }

    for (namespace, label) in &labels {
        progress(&format!("Labelling namespace {namespace} {label}=true..."));
        label_namespace(client, namespace, label).await?;
    }
    if let Some(deployment) = &operator {
        scale_down(client, deployment, options.waits, progress).await?;
    }
    // Before any of its objects is written: its webhooks now call no one.
    for configuration in &closed {
        progress(&format!(
            "Setting the webhooks of {} {} to fail open...",
            configuration.kind, configuration.name
        ));
        webhooks::open(client, configuration).await?;
    }
    for copy in &copies {
        progress(&format!("{}...", copy.describe()));
        secrets::make(client, copy).await?;
    }
    if let Some(mounted) = &mounted {
        for carry in &image_carries {
            progress(&format!("{}...", carry.describe(&mounted.source)));
            carry.make(client, mounted).await?;
        }
    }
    let mut done = Vec::new();
    for step in steps.iter().filter(|s| s.carried.object.is_some()) {
        let object = step.carried.object.as_ref().expect("filtered");
        if !step.made {
            progress(&format!("Creating {} ...", describe_new(object)));
            create(client, object).await?;
        }
    }
    for step in steps.iter().filter(|s| s.carried.object.is_some()) {
        let object = step.carried.object.as_ref().expect("filtered");
        let kind = kind_of(object);
        let m = Move {
            kind,
            namespace: step.old.namespace.clone(),
            name: step.old.name.clone(),
            from: None,
            to: step.carried.version.clone().unwrap_or_default(),
        };
        progress(&format!("Waiting for {} to be Ready...", describe_new(object)));
        wait_ready(client, &m, options.waits).await.map_err(|e| {
            format!("{e}\ncluster-api-operator's {} is left as it is; run butlerctl migrate again once this is fixed", step.old.describe())
        })?;
        remove_old(client, &step.old, options.waits).await?;
        done.push(format!(
            "{}: Ready under this operator; cluster-api-operator's object removed",
            describe_new(object)
        ));
    }
    let mut out = report;
    out.extend(done);
    if let Some(d) = &operator {
        out.push(format!(
            "cluster-api-operator stays installed at 0 replicas ({}/{}): uninstall it once you are content",
            d.metadata.namespace.as_deref().unwrap_or_default(),
            d.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    Ok(out.join("\n") + "\n")
}

/// How to install the operator for a migration.
const INSTALL_ALONE: &str = "install the operator alone first (kubectl apply --server-side -f butler-operator.yaml of its release; not butlerctl init, which would also make Butler's core provider beside the one migrated)";

/// Of the namespaces the providers move into, those to label so that an operator honours them
/// (with the label), and why each that no operator would honour even so stays unhonoured.
fn to_label<'a>(
    operators: &super::honoured::Operators,
    namespaces: impl IntoIterator<Item = &'a str>,
) -> (Vec<(String, String)>, Vec<String>) {
    let (mut labels, mut refused) = (Vec::new(), Vec::new());
    for (namespace, why) in super::honoured::not_honoured(operators, namespaces) {
        match operators.label_for() {
            Some(label) => labels.push((namespace, label.to_string())),
            None if operators.found.is_empty() => refused.push(format!("{why}; {INSTALL_ALONE}")),
            None => {
                refused.push(format!("{why}; migrate moves providers only where an operator will serve them"))
            }
        }
    }
    (labels, refused)
}

/// Sets the operator's namespace label on `namespace` (a merge of that label alone).
async fn label_namespace(client: &kube::Client, namespace: &str, label: &str) -> Result<(), String> {
    let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client.clone());
    let patch = json!({"metadata": {"labels": {label: "true"}}});
    api.patch(namespace, &PatchParams::default(), &Patch::Merge(patch)).await.map(|_| ()).map_err(|e| {
        format!("labelling namespace {namespace} {label}=true: {}", butler_runtime::error::describe(&e))
    })
}

/// The kind of a carried-over object (only kinds of this operator are carried).
fn kind_of(object: &Value) -> ProviderKind {
    ProviderKind::from_kind(object["kind"].as_str().unwrap_or_default()).expect("carried kinds are ours")
}

fn describe_new(object: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    format!(
        "{} {}/{}",
        text(&object["kind"]),
        text(&object["metadata"]["namespace"]),
        text(&object["metadata"]["name"])
    )
}

/// The lines of the report about one provider.
fn describe(step: &Step) -> Vec<String> {
    let mut lines = Vec::new();
    let version = step.carried.version.as_deref().unwrap_or("the newest");
    lines.push(match (&step.carried.object, step.made) {
        (None, _) => format!("{}: left behind", step.old.describe()),
        (Some(_), true) => {
            format!("{}: carried over already (by an earlier run), {version}", step.old.describe())
        }
        (Some(o), false) => format!("{} {version}: carry over as {}", step.old.describe(), describe_new(o)),
    });
    lines.extend(step.carried.notes.iter().map(|n| format!("  changed: {n}")));
    lines.extend(step.carried.dropped.iter().map(|d| format!("  not carried: {d}")));
    lines
}

/// Why a config Secret in another namespace than the provider's stops the move without
/// `--copy-secrets`.
fn secret_elsewhere(old: &OldProvider, copy: &secrets::Copy) -> String {
    format!(
        "{}: its spec.configSecret {}/{} is in another namespace, and this operator reads only the provider's own (the config Secret holds credentials); give --copy-secrets to copy it into {}, or copy it yourself and set spec.configSecret.namespace to it (or leave it out)",
        old.describe(),
        copy.namespace,
        copy.name,
        old.namespace
    )
}

/// A provider that cluster-api-operator fetched from the network (no `fetchConfig`) reads the
/// release it cached of the version that runs, when it did.
async fn use_cached_release(
    client: &kube::Client,
    old: &OldProvider,
    carried: &mut Carried,
) -> Result<(), String> {
    let Some(version) = carried.version.clone() else { return Ok(()) };
    let Some((fetch, configmap)) = cached::find(client, &old.namespace, &old.name, &version).await? else {
        return Ok(());
    };
    let Some(object) = carried.object.as_mut() else { return Ok(()) };
    let url = object.pointer("/spec/fetchConfig/url").and_then(Value::as_str).map(String::from);
    object["spec"]["fetchConfig"] = fetch;
    let kind = ProviderKind::from_kind(&old.kind);
    let follow = url
        .or_else(|| {
            kind.and_then(|k| butler_repository::ClusterctlConfig::default().provider(k, &old.name).ok())
                .map(|p| p.url)
        })
        .map(|url| format!("; to follow new releases, set spec.fetchConfig to {{url: {url}}}"))
        .unwrap_or_default();
    carried.notes.retain(|n| !n.starts_with(carry::UPSTREAM_URL_NOTE));
    carried.notes.push(format!(
        "spec.fetchConfig.selector: reads {version} from ConfigMap {}/{configmap}, the release cluster-api-operator cached (no network needed){follow}",
        old.namespace
    ));
    Ok(())
}

/// Where a provider's image overrides go: its config Secret (a copy being made counts with the
/// keys of its source), else a Secret of its own that the carried-over object then names.
async fn carry_images(
    client: &kube::Client,
    step: &mut Step,
    copies: &[secrets::Copy],
) -> Result<images::Carry, String> {
    let namespace = step.old.namespace.clone();
    let label = ProviderKind::from_kind(&step.old.kind).map(|k| k.label(&step.old.name)).unwrap_or_default();
    let named = step
        .carried
        .object
        .as_ref()
        .and_then(|o| o.pointer("/spec/configSecret/name"))
        .and_then(Value::as_str)
        .map(String::from);
    let Some(name) = named else {
        let carry = images::plan(&namespace, &label, None);
        if let (images::Carry::NewSecret { name, .. }, Some(object)) = (&carry, step.carried.object.as_mut())
        {
            object["spec"]["configSecret"] = json!({"name": name});
            step.carried.notes.push(format!(
                "spec.configSecret: {name}, a Secret made to hold cluster-api-operator's image overrides"
            ));
        }
        return Ok(carry);
    };
    let (read_namespace, read_name) = match copies.iter().find(|c| c.into == namespace && c.name == name) {
        Some(copy) => (copy.namespace.clone(), copy.name.clone()),
        None => (namespace.clone(), name.clone()),
    };
    let secret = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &read_namespace)
        .get_opt(&read_name)
        .await
        .map_err(|e| {
            format!("reading Secret {read_namespace}/{read_name}: {}", butler_runtime::error::describe(&e))
        })?;
    let keys = secret.map(|s| s.data.unwrap_or_default().into_keys().collect());
    Ok(images::plan(&namespace, &label, Some((&name, keys))))
}

/// The carried-over object reads the copy of its config Secret, in its own namespace.
fn own_secret(carried: &mut Carried, copy: &secrets::Copy) {
    let Some(secret) = carried.object.as_mut().and_then(|o| o.pointer_mut("/spec/configSecret")) else {
        return;
    };
    if let Some(fields) = secret.as_object_mut() {
        fields.remove("namespace");
    }
    carried.notes.push(format!(
        "spec.configSecret: {}/{} copied into {} (this operator reads only the provider's own namespace)",
        copy.namespace, copy.name, copy.into
    ));
}

/// The openAPI schema of `spec` of each of this operator's kinds.
fn spec_schemas() -> Result<Vec<(ProviderKind, Value)>, String> {
    crate::crds::providers()
        .into_iter()
        .map(|crd| {
            let kind =
                ProviderKind::from_kind(&crd.spec.names.kind).ok_or("a provider CRD of an unknown kind")?;
            let schema = crd
                .spec
                .versions
                .first()
                .and_then(|v| v.schema.as_ref())
                .and_then(|s| s.open_api_v3_schema.as_ref());
            let schema = serde_json::to_value(schema).map_err(|e| e.to_string())?;
            Ok((kind, schema["properties"]["spec"].clone()))
        })
        .collect()
}

/// cluster-api-operator's provider objects, by kind, namespace and name; none when its API is
/// not served.
async fn old_providers(client: &kube::Client, namespace: Option<&str>) -> Result<Vec<OldProvider>, String> {
    let discovery =
        kube::Discovery::new(client.clone()).filter(&[CAPI_OPERATOR_GROUP]).run().await.map_err(|e| {
            format!("discovering {CAPI_OPERATOR_GROUP}: {}", butler_runtime::error::describe(&e))
        })?;
    let mut olds = Vec::new();
    for group in discovery.groups() {
        for (resource, _) in group.recommended_resources() {
            if !resource.kind.ends_with("Provider") {
                continue;
            }
            let api: Api<DynamicObject> = match namespace {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            let list = api.list(&ListParams::default()).await.map_err(|e| {
                format!(
                    "listing cluster-api-operator's {}: {}",
                    resource.plural,
                    butler_runtime::error::describe(&e)
                )
            })?;
            for item in list.items {
                olds.push(OldProvider {
                    api_version: resource.api_version.clone(),
                    kind: resource.kind.clone(),
                    namespace: item.metadata.namespace.clone().unwrap_or_default(),
                    name: item.metadata.name.clone().unwrap_or_default(),
                    uid: item.metadata.uid.clone().unwrap_or_default(),
                    object: serde_json::to_value(&item).map_err(|e| e.to_string())?,
                });
            }
        }
    }
    // The core provider first, as it was installed.
    olds.sort_by_key(|o| (o.kind != "CoreProvider", o.kind.clone(), o.namespace.clone(), o.name.clone()));
    Ok(olds)
}

/// cluster-api-operator's Deployment: the one named, else the one its chart labels.
async fn old_operator(
    client: &kube::Client,
    named: Option<&(String, String)>,
) -> Result<Option<Deployment>, String> {
    let read = |e: kube::Error| {
        format!("reading cluster-api-operator's Deployment: {}", butler_runtime::error::describe(&e))
    };
    if let Some((namespace, name)) = named {
        let found =
            Api::<Deployment>::namespaced(client.clone(), namespace).get_opt(name).await.map_err(read)?;
        return found.map(Some).ok_or_else(|| format!("no Deployment {namespace}/{name} (--old-operator)"));
    }
    let mut found = Api::<Deployment>::all(client.clone())
        .list(&ListParams::default().labels(OLD_OPERATOR_LABEL))
        .await
        .map_err(read)?
        .items;
    match found.len() {
        0 | 1 => Ok(found.pop()),
        _ => Err(format!(
            "more than one Deployment is labelled {OLD_OPERATOR_LABEL} ({}); name cluster-api-operator's with --old-operator NAMESPACE/NAME",
            found
                .iter()
                .map(|d| format!(
                    "{}/{}",
                    d.metadata.namespace.as_deref().unwrap_or_default(),
                    d.metadata.name.as_deref().unwrap_or_default()
                ))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// Scales the old operator to 0, keeping its replicas in an annotation, and waits until none
/// of its pods is left: a pod still running would fight this operator.
async fn scale_down(
    client: &kube::Client,
    deployment: &Deployment,
    waits: Waits,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<(), String> {
    let namespace = deployment.metadata.namespace.clone().unwrap_or_default();
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let failed = |e: kube::Error| {
        format!(
            "scaling cluster-api-operator {namespace}/{name} to 0: {}",
            butler_runtime::error::describe(&e)
        )
    };
    if replicas(deployment) != 0 {
        progress(&format!("Scaling cluster-api-operator {namespace}/{name} to 0..."));
        let body = json!({
            "metadata": {"annotations": {REPLICAS_BEFORE: replicas(deployment).to_string()}},
            "spec": {"replicas": 0},
        });
        api.patch(&name, &PatchParams::default(), &Patch::Merge(body)).await.map_err(failed)?;
    }
    let selector: Vec<String> = deployment
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
        .unwrap_or_default()
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let started = Instant::now();
    loop {
        let now = api.get(&name).await.map_err(failed)?;
        let counted = now.status.as_ref().and_then(|s| s.replicas).unwrap_or(0);
        let running = match selector.is_empty() {
            true => 0,
            false => pods
                .list(&ListParams::default().labels(&selector.join(",")))
                .await
                .map_err(failed)?
                .items
                .len(),
        };
        if counted == 0 && running == 0 {
            return Ok(());
        }
        if started.elapsed() > waits.timeout {
            return Err(format!(
                "cluster-api-operator {namespace}/{name} still has {running} pods after {:?}; nothing else was changed: run butlerctl migrate again once they are gone",
                waits.timeout
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}

/// This operator's provider object of the name `object` has, if any.
async fn existing(client: &kube::Client, object: &Value) -> Result<Option<DynamicObject>, String> {
    let kind = kind_of(object);
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    match provider_api(client, kind, namespace).get_opt(name).await {
        Ok(found) => Ok(found),
        Err(kube::Error::Api(status)) if status.code == 404 => {
            Err(format!("this operator's {} are not served here: {INSTALL_ALONE}", kind.plural()))
        }
        Err(e) => Err(format!("reading {}: {}", describe_new(object), butler_runtime::error::describe(&e))),
    }
}

async fn create(client: &kube::Client, object: &Value) -> Result<(), String> {
    let kind = kind_of(object);
    let namespace = object["metadata"]["namespace"].as_str().unwrap_or_default();
    let wanted: DynamicObject = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    let params = PostParams { field_manager: Some("butlerctl".into()), ..Default::default() };
    provider_api(client, kind, namespace)
        .create(&params, &wanted)
        .await
        .map(|_| ())
        .map_err(|e| format!("creating {}: {}", describe_new(object), butler_runtime::error::describe(&e)))
}

/// Removes cluster-api-operator's object: its finalizer first (its operator is down, and must
/// not delete what this operator now runs), then the object, orphaning what it owned, and
/// waits until it is gone: the garbage collector disowns its dependents and lets it go a
/// moment after the delete answers.
async fn remove_old(client: &kube::Client, old: &OldProvider, waits: Waits) -> Result<(), String> {
    let (group, version) = old.api_version.split_once('/').unwrap_or_default();
    let gvk = kube::api::GroupVersionKind::gvk(group, version, &old.kind);
    let resource = kube::api::ApiResource::from_gvk(&gvk);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &old.namespace, &resource);
    let failed = |e: kube::Error| {
        format!("removing cluster-api-operator's {}: {}", old.describe(), butler_runtime::error::describe(&e))
    };
    let Some(now) = api.get_opt(&old.name).await.map_err(failed)? else { return Ok(()) };
    if now.metadata.uid.as_deref() != Some(old.uid.as_str()) {
        return Ok(());
    }
    let finalizers = now.metadata.finalizers.clone().unwrap_or_default();
    if let Some(index) = finalizers.iter().position(|f| f == OLD_FINALIZER) {
        let ops = json!([
            {"op": "test", "path": "/metadata/uid", "value": old.uid},
            {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": OLD_FINALIZER},
            {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
        ]);
        let patch: json_patch::Patch = serde_json::from_value(ops).expect("a JSON patch");
        api.patch(&old.name, &PatchParams::default(), &Patch::<()>::Json(patch)).await.map_err(failed)?;
    }
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        preconditions: Some(Preconditions { uid: Some(old.uid.clone()), resource_version: None }),
        ..Default::default()
    };
    match api.delete(&old.name, &params).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
        Err(e) => return Err(failed(e)),
    }
    let deadline = tokio::time::Instant::now() + waits.timeout;
    loop {
        let remaining = api.get_opt(&old.name).await.map_err(failed)?;
        let Some(still) = remaining.filter(|o| o.metadata.uid.as_deref() == Some(old.uid.as_str())) else {
            return Ok(());
        };
        if tokio::time::Instant::now() >= deadline {
            let finalizers = still.metadata.finalizers.unwrap_or_default();
            return Err(format!(
                "cluster-api-operator's {} is still there {:?} after its deletion, held by the finalizers {finalizers:?}; the garbage collector (kube-controller-manager) removes `orphan` once it has disowned the dependents: check that it runs, then run butlerctl migrate again",
                old.describe(),
                waits.timeout
            ));
        }
        tokio::time::sleep(waits.poll).await;
    }
}
