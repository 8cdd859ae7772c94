//! The Team controller (spec/001): observe the Team, its namespace, its TenantClusters and the
//! objects made for it; plan ([`plan`]); apply what differs; write the status when it changed.
//! Deletion ([`delete`]) removes the team's clusters, RBAC and namespace in that order.

pub mod delete;
pub mod plan;
pub mod quota;
pub mod rbac;
pub mod usage;

use std::sync::Arc;
use std::time::Duration;

use butler_core::api::labels::TEAM_FINALIZER;
use butler_core::api::{QuotaStatus, Team, TeamPhase, TeamStatus};
use butler_runtime::conditions::{self, Wanted};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType};
use kube::{Resource, ResourceExt};
use serde_json::json;

use crate::context::Context;
use crate::error::Error;
use plan::{Observed, Plan, namespace_of};

/// Every input is watched; this is only a safety net.
const RESYNC: Duration = Duration::from_secs(3600);

/// Reconciles one Team.
pub async fn reconcile(team: Arc<Team>, ctx: Arc<Context>) -> Result<Action, Error> {
    if !ctx.scope.holds(&plan::namespace_of(&team.name_any())) {
        return Ok(Action::await_change());
    }
    ctx.synced().await;
    let team_object = team.clone();
    let started = ctx.metrics.reconcile_started("Team");
    let result = async {
        if team.meta().deletion_timestamp.is_some() {
            return delete::cleanup(&team, &ctx).await;
        }
        // The finalizer goes on before anything is made for the team, so nothing is orphaned.
        let team = match butler_runtime::finalizer::has(team.as_ref(), TEAM_FINALIZER) {
            true => team,
            false => {
                let api: Api<Team> = Api::all(ctx.client.clone());
                let added =
                    butler_runtime::finalizer::add(&api, team.as_ref(), TEAM_FINALIZER).await.map_err(
                        |e| Error::kube(format!("adding the finalizer to Team {}", team.name_any()), e),
                    )?;
                Arc::new(added)
            }
        };
        reconcile_live(&team, &ctx).await
    }
    .await;
    ctx.finished(team_object.as_ref(), started, &result);
    result
}

async fn reconcile_live(team: &Team, ctx: &Context) -> Result<Action, Error> {
    // Observe.
    let ns = namespace_of(&team.name_any());
    let namespace = ctx.teams.namespaces.get(&kube::runtime::reflector::ObjectRef::new(&ns));
    let clusters = ctx.teams.clusters_in(&ns);
    let existing = |kind: &str, name: &str| ctx.teams.existing(&ns, kind, name);
    let kubeconfigs = owned_kubeconfigs(ctx, &ns, &clusters).await;
    // Plan.
    let plan = plan::plan(&Observed {
        team,
        roles: &ctx.team_roles,
        reader: &ctx.secret_reader,
        quota: &ctx.team_quota,
        namespace: namespace.as_deref(),
        clusters: clusters.iter().map(Arc::as_ref).collect(),
        kubeconfigs: &kubeconfigs,
        existing: &existing,
    });
    // Apply.
    if let Err(message) = apply(ctx, &plan, namespace.is_none()).await {
        let failed = [
            Wanted::new(conditions::READY, false, "ApplyFailed", message.clone()),
            Wanted::new(plan::RBAC_READY, false, "ApplyFailed", message.clone()),
        ];
        write_status(
            ctx,
            team,
            &plan,
            Some(TeamPhase::Failed),
            &failed,
            Some(("ApplyFailed", message.clone())),
        )
        .await?;
        return Err(Error::Apply(message));
    }
    // Status.
    let event = plan.refused.clone();
    write_status(ctx, team, &plan, plan.phase, &[], event).await?;
    Ok(Action::requeue(RESYNC))
}

/// The clusters of `namespace` whose kubeconfig Secret is Cluster API's for them, read live by
/// name (the controller may `get` Secrets of team namespaces, not list them). One not there
/// yet, or not readable yet (the controller's binding comes with the first apply), is left out
/// until a later reconcile finds it.
async fn owned_kubeconfigs(
    ctx: &Context,
    namespace: &str,
    clusters: &[Arc<butler_core::api::TenantCluster>],
) -> Vec<String> {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(ctx.client.clone(), namespace);
    let mut owned = Vec::new();
    for cluster in clusters {
        let name = cluster.name_any();
        match secrets.get_opt(&crate::secrets::kubeconfig_name(&name)).await {
            Ok(Some(secret)) if crate::secrets::owns_kubeconfig(&secret, &name) => owned.push(name),
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(namespace, cluster = %name, error = %e, "cannot read the kubeconfig Secret yet")
            }
        }
    }
    owned
}

/// Applies what the plan wants: bindings whose role changed are deleted first (made anew
/// below), what earlier versions made and this one does not is deleted last. A namespace that
/// does not exist is created, never applied: an apply would take over a namespace of that name
/// that someone made a moment ago.
async fn apply(ctx: &Context, plan: &Plan, create_namespace: bool) -> Result<(), String> {
    for replaced in &plan.replace {
        ctx.applier.delete(replaced).await?;
    }
    for object in &plan.apply {
        if object["kind"] == "Namespace" && create_namespace {
            let api: Api<Namespace> = Api::all(ctx.client.clone());
            let namespace: Namespace = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
            match api
                .create(
                    &PostParams {
                        field_manager: Some(butler_core::api::labels::FIELD_MANAGER.into()),
                        ..Default::default()
                    },
                    &namespace,
                )
                .await
            {
                Ok(_) => continue,
                // Made by someone else since the cache looked: the next reconcile sees whose.
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    return Err(format!(
                        "the namespace {} was created by someone else meanwhile",
                        namespace.name_any()
                    ));
                }
                Err(e) => {
                    return Err(format!(
                        "creating the namespace {}: {}",
                        namespace.name_any(),
                        butler_runtime::error::describe(&e)
                    ));
                }
            }
        }
        // A binding of the Team's name that someone else made with another role is never
        // replaced: the apply fails and RBACReady says so.
        ctx.applier.apply_in_place(object).await?;
    }
    for retired in &plan.retire {
        ctx.applier.delete(retired).await?;
    }
    Ok(())
}

/// Writes the Team's status when it differs from what it has, with the plan's conditions and
/// `extra` ones over them, and publishes `event` (a Warning) if it did.
async fn write_status(
    ctx: &Context,
    team: &Team,
    plan: &Plan,
    phase: Option<TeamPhase>,
    extra: &[Wanted],
    event: Option<(&'static str, String)>,
) -> Result<(), Error> {
    let uid = team.meta().uid.clone().unwrap_or_default();
    let written = ctx.team_statuses.lock().expect("not poisoned").get(&uid).cloned();
    let existing = written.or_else(|| team.status.clone()).unwrap_or_default();
    let generation = team.meta().generation;
    let mut wanted = plan.conditions.clone();
    wanted.retain(|w| !extra.iter().any(|e| e.type_ == w.type_));
    wanted.extend_from_slice(extra);
    let now = Time(jiff::Timestamp::now());
    let assessment = plan.assessment.as_ref();
    let status = TeamStatus {
        conditions: conditions::merge(&existing.conditions, &wanted, generation, &now, plan::ORDER),
        phase,
        namespace: plan.namespace.clone(),
        observed_generation: generation,
        cluster_count: assessment.and_then(|a| a.usage.clusters),
        member_count: Some(rbac::member_count(team)),
        resource_usage: assessment.map(|a| a.usage.clone()),
        quota_status: assessment.map(|a| a.status),
        quota_message: assessment.map(|a| a.message.clone()),
    };
    if status == existing {
        return Ok(());
    }
    let api: Api<Team> = Api::all(ctx.client.clone());
    api.patch_status(&team.name_any(), &PatchParams::default(), &Patch::Merge(json!({ "status": status })))
        .await
        .map_err(|e| Error::kube(format!("writing the status of Team {}", team.name_any()), e))?;
    let newly_exceeded =
        status.quota_status == Some(QuotaStatus::Exceeded) && existing.quota_status != status.quota_status;
    ctx.team_statuses.lock().expect("not poisoned").insert(uid, status.clone());
    let mut events: Vec<(&str, String)> = event.into_iter().collect();
    if newly_exceeded {
        events.push(("QuotaExceeded", status.quota_message.clone().unwrap_or_default()));
    }
    for (reason, note) in events {
        publish(ctx, team, EventType::Warning, reason, note).await;
    }
    Ok(())
}

/// Publishes an event; one that cannot be written does not fail the reconcile.
pub(crate) async fn publish(ctx: &Context, team: &Team, type_: EventType, reason: &str, note: String) {
    let event =
        Event { type_, reason: reason.into(), note: Some(note), action: "Reconcile".into(), secondary: None };
    if let Err(e) = ctx.recorder.publish(&event, &team.object_ref(&())).await {
        tracing::warn!(team = %team.name_any(), error = %e, "cannot publish an event");
    }
}
