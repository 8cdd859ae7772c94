//! `butlerctl migrate`: moves a cluster from cluster-api-operator to this operator without
//! restarting a provider. It reads cluster-api-operator's provider objects, says what it will
//! do (all of it with `--dry-run`), stops when anything would be lost, scales the old operator
//! to 0, makes this operator's provider objects (which take over the installed objects, see
//! `controller::install::adopt`), waits until each is Ready, then removes each old object without its
//! finalizer and orphaning its dependents. Every step is read back from the cluster, so a run
//! after an interruption, or a second run, goes on from where things stand.

pub mod cached;
pub mod carry;
pub mod files;
pub mod gitops;
pub mod images;
pub mod needs;
mod old;
pub mod reach;
pub mod rendered;
pub mod restarts;
pub mod secrets;
pub mod webhooks;

use kube::api::{Api, Patch, PatchParams};
use serde_json::{Value, json};

use self::carry::{Carried, MIGRATED_FROM, OldProvider, carry};
use self::old::{
    create, existing, old_operator, old_providers, remove_old, replicas, scale_down, set_version,
};
use super::apply::{Waits, wait_ready};
use crate::api::{KindNames, ProviderKind};
use crate::upgrade::moves::Move;

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
    /// The GitOps tools that manage cluster-api-operator or its provider objects (Argo CD,
    /// Flux) are paused: the move may go on although their labels are there.
    pub gitops_paused: bool,
    pub waits: Waits,
}

/// One old provider and what becomes of it.
struct Step {
    old: OldProvider,
    carried: Carried,
    /// Carried over by an earlier run: the new object exists with this one's mark.
    made: bool,
    /// Made so but with no `spec.version` (converted from Git by `--from-file`, whose files
    /// know no running version): set to the version that runs before the operator honours it.
    unversioned: bool,
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
        let mut unversioned = false;
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
                    unversioned = found.data["spec"]["version"].as_str().is_none_or(str::is_empty);
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
        blockers.extend(secrets::manifests_elsewhere(&old.object["spec"], &old.namespace, &old.describe()));
        steps.push(Step { old, carried, made, unversioned });
    }
    // cluster-api-operator's own image overrides, which it applied to every provider.
    let mounted = match &operator {
        Some(deployment) => images::mounted(client, deployment).await?,
        None => None,
    };
    let mut image_carries = Vec::new();
    if let Some(mounted) = &mounted {
        for step in steps.iter_mut().filter(|s| s.carried.object.is_some()) {
            report.extend(moved_url(step, mounted));
        }
    }
    if let Some(mounted) = mounted.as_ref().filter(|m| m.images.is_some()) {
        for step in steps.iter_mut().filter(|s| s.carried.object.is_some()) {
            let carry = carry_images(client, step, &copies).await?;
            report.push(carry.describe(&mounted.source));
            image_carries.push(carry);
        }
    }
    // There, the mounted overrides came after the providers' own imageUrls.
    let late = match &mounted {
        Some(mounted) => images::overrides(mounted)?,
        None => None,
    };
    if let Some(overrides) = &late {
        for step in steps.iter_mut().filter(|s| !s.made) {
            let who = step.old.describe();
            let label =
                ProviderKind::from_kind(&step.old.kind).map(|k| k.label(&step.old.name)).unwrap_or_default();
            if let Some(object) = step.carried.object.as_mut() {
                report.extend(
                    images::late(object, &label, overrides).into_iter().map(|n| format!("{who}: {n}")),
                );
            }
        }
    }
    let operators = super::honoured::operators(client).await;
    // Asks discovery once for each group version of every release.
    let applier = butler_runtime::apply::Applier::new(client.clone(), crate::api::FIELD_MANAGER);
    // Each object rendered as this operator will install it, and what its release needs.
    for step in steps.iter().filter(|s| !s.made) {
        let (Some(object), Some(version)) = (&step.carried.object, &step.carried.version) else { continue };
        let who = step.old.describe();
        // The operator that honours the namespace, or will once migrate labels it.
        let operator = operators.as_ref().and_then(|o| {
            o.honouring(&step.old.namespace)
                .or_else(|| o.found.iter().find(|f| f.label.is_some() && f.namespaces.is_some()))
        });
        if let Some(operator) = operator {
            blockers.extend(reach::refusals(&who, &object["spec"], &reach::Reach::of(operator)).await);
        }
        let secret = secret_read(step, &copies, &image_carries);
        let checked = rendered::check(client, &step.old, object, version, secret, late.as_ref()).await?;
        report.extend(checked.lines);
        blockers.extend(checked.blockers);
        if checked.objects.is_empty() {
            continue;
        }
        if let Some(operator) = operator {
            let missing =
                needs::missing_writes(client, &applier, &operator.account, &checked.objects).await?;
            blockers.extend(needs::describe_missing(&who, &operator.account, &missing));
            let refused =
                needs::refused_roles(client, operator, &checked.objects, &step.old.namespace).await?;
            blockers.extend(refused.map(|why| format!("{who}: {why}")));
        }
        // As the operator checks it before its first write.
        let unserved = applier.unserved(&checked.objects).await;
        if !unserved.is_empty() {
            blockers.push(format!(
                "{who}: its release ships what this cluster does not serve: {} (cert-manager for cert-manager.io; cluster-api-operator's chart may have installed it and take it along when uninstalled); then run migrate again",
                unserved.join("; ")
            ));
        }
    }
    let targets = steps.iter().filter(|s| s.carried.object.is_some()).map(|s| s.old.namespace.as_str());
    let (labels, unhonoured) = match &operators {
        Some(operators) => to_label(operators, targets),
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
    // A GitOps tool that manages the old operator or its objects would undo the move.
    if !options.gitops_paused {
        let old_operator = operator.as_ref().map(|d| {
            let meta = serde_json::to_value(&d.metadata).unwrap_or_default();
            (
                format!(
                    "cluster-api-operator's Deployment {}/{}",
                    d.metadata.namespace.as_deref().unwrap_or_default(),
                    d.metadata.name.as_deref().unwrap_or_default()
                ),
                meta,
            )
        });
        let objects = steps.iter().map(|s| (s.old.describe(), s.old.object["metadata"].clone()));
        for (what, metadata) in old_operator.into_iter().chain(objects) {
            if let Some(owner) = gitops::owner(&metadata) {
                blockers.push(format!(
                    "{what} is managed by {owner}, which would undo the move (it would put back what the move scales down and prune what it makes); {} first, then run migrate again with --gitops-paused",
                    gitops::how_to_pause(&owner)
                ));
            }
        }
    }
    // Copies made by an earlier run whose source changed since are made again.
    if options.copy_secrets {
        copies.extend(secrets::stale(client, options.namespace.as_deref()).await?);
    }
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
    if options.dry_run {
        report.push("dry run: nothing was changed".into());
        return Ok(report.join("\n") + "\n");
    }
    if steps.is_empty() {
        for copy in &copies {
            secrets::make(client, copy).await?;
        }
        return Ok(report.join("\n") + "\n");
    }
    for line in &report {
        progress(line);
    }

    // cluster-api-operator stops first: objects Git applied are taken over only once nothing
    // else acts on them.
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
        // (Only carries made above, where the file has images.)
        for carry in &image_carries {
            progress(&format!("{}...", carry.describe(&mounted.source)));
            carry.make(client, mounted).await?;
        }
    }
    // Objects Git made without a version get the one that runs, before this operator honours
    // their namespace: else it would install the newest release, across contracts unpaused.
    for step in steps.iter().filter(|s| s.unversioned) {
        let (Some(object), Some(version)) = (&step.carried.object, &step.carried.version) else { continue };
        progress(&format!("Setting {} to {version}, the version that runs...", describe_new(object)));
        set_version(client, object, version).await?;
    }
    for (namespace, label) in &labels {
        progress(&format!("Labelling namespace {namespace} {label}=true..."));
        label_namespace(client, namespace, label).await?;
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
        (Some(_), true) if step.unversioned => format!(
            "{}: carried over already (from a file), with no version: set to {version}, the version that runs",
            step.old.describe()
        ),
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

/// A provider that cluster-api-operator fetched by name (no `fetchConfig` of its own) from a URL
/// its mounted clusterctl.yaml gave it: the carried-over object fetches from there too. One
/// that reads the release cluster-api-operator cached keeps reading it, and the note of what to
/// set to follow new releases names that URL. The line of the plan, when it moves.
fn moved_url(step: &mut Step, mounted: &images::Mounted) -> Option<String> {
    if step.old.object["spec"].get("fetchConfig").is_some() {
        return None;
    }
    let type_ = ProviderKind::from_kind(&step.old.kind)?;
    let url = mounted.url_of(type_, &step.old.name)?.to_string();
    let object = step.carried.object.as_mut()?;
    let follow = format!("to follow new releases, set spec.fetchConfig to {{url: {url}}}");
    if object.pointer("/spec/fetchConfig/selector").is_some() {
        for note in step.carried.notes.iter_mut() {
            if let Some((head, _)) = note.split_once("; to follow new releases") {
                *note = format!("{head}; {follow} (from {})", mounted.source);
            }
        }
        return None;
    }
    object["spec"]["fetchConfig"] = json!({"url": url});
    step.carried.notes.retain(|n| !n.starts_with(carry::UPSTREAM_URL_NOTE));
    Some(format!(
        "{}: spec.fetchConfig.url set to {url}, where {}'s providers: moved it",
        step.old.describe(),
        mounted.source
    ))
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

/// The Secret whose variables the carried-over object will read, as (namespace, name): the
/// source of a copy migrate makes, none for a Secret migrate makes for image overrides alone.
fn secret_read(step: &Step, copies: &[secrets::Copy], carries: &[images::Carry]) -> Option<(String, String)> {
    let name = step.carried.object.as_ref()?.pointer("/spec/configSecret/name")?.as_str()?.to_string();
    let namespace = step.old.namespace.clone();
    if let Some(copy) = copies.iter().find(|c| c.into == namespace && c.name == name) {
        return Some((copy.namespace.clone(), copy.name.clone()));
    }
    let made = carries.iter().any(
        |c| matches!(c, images::Carry::NewSecret { namespace: n, name: m } if *n == namespace && *m == name),
    );
    (!made).then_some((namespace, name))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn step(spec: Value, object_spec: Value) -> Step {
        let old = OldProvider {
            api_version: "operator.cluster.x-k8s.io/v1alpha2".into(),
            kind: "InfrastructureProvider".into(),
            namespace: "capd-system".into(),
            name: "docker".into(),
            uid: "u".into(),
            object: json!({"spec": spec}),
        };
        let carried = Carried {
            object: Some(json!({"spec": object_spec})),
            version: Some("v1.10.0".into()),
            dropped: Vec::new(),
            notes: vec!["spec.fetchConfig.selector: reads v1.10.0 from ConfigMap x; to follow new releases, set spec.fetchConfig to {url: https://github.com/kubernetes-sigs/cluster-api/releases/latest/infrastructure-components-development.yaml}".into()],
        };
        Step { old, carried, made: false, unversioned: false }
    }

    #[test]
    fn a_url_their_clusterctl_yaml_moved_moves_the_carried_provider() {
        let url = "https://mirror.local/capd/releases/latest/infrastructure-components-development.yaml";
        let mounted = images::Mounted {
            source: "ConfigMap capi/clusterctl".into(),
            images: None,
            providers: vec![butler_repository::ProviderEntry {
                name: "docker".into(),
                type_: ProviderKind::Infrastructure,
                url: url.into(),
            }],
        };
        // Fetched by name there: fetched from the mirror here.
        let mut by_name = step(json!({"version": "v1.10.0"}), json!({"version": "v1.10.0"}));
        let line = moved_url(&mut by_name, &mounted).unwrap();
        assert!(line.contains(&format!("spec.fetchConfig.url set to {url}")), "{line}");
        assert_eq!(by_name.carried.object.unwrap()["spec"]["fetchConfig"], json!({"url": url}));
        // Reading the cached release: it goes on reading it; the note names the mirror.
        let cached = json!({"fetchConfig": {"selector": {"matchLabels": {"a": "b"}}}});
        let mut reading = step(json!({}), cached.clone());
        assert_eq!(moved_url(&mut reading, &mounted), None);
        assert_eq!(reading.carried.object.unwrap()["spec"], cached);
        assert!(
            reading.carried.notes[0].ends_with(&format!("{{url: {url}}} (from ConfigMap capi/clusterctl)"))
        );
        // Its own fetchConfig there: left as it is.
        let mut own = step(json!({"fetchConfig": {"url": "https://x/y.yaml"}}), json!({}));
        assert_eq!(moved_url(&mut own, &mounted), None);
    }
}
