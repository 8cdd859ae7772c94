//! A Team being deleted, in the order of spec/001: its TenantClusters are deleted and waited
//! for (their own finalizers run), then its RBAC goes, then its namespace, then the finalizer.
//! Only what belongs to this Team (an owner reference with its UID) is ever deleted.

use std::time::Duration;

use butler_core::api::labels::TEAM_FINALIZER;
use butler_core::api::{Team, TeamPhase, TenantCluster};
use butler_runtime::conditions::{READY, Wanted};
use butler_runtime::error::not_found_ok;
use butler_runtime::objects::ObjectRef;
use kube::api::{Api, DeleteParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::plan::{Plan, desired_objects, namespace_of, owned_by};
use super::write_status;
use crate::context::Context;
use crate::error::Error;

/// How often a deletion that waits for clusters looks again (their deletion wakes it sooner).
const WAIT: Duration = Duration::from_secs(10);

/// Deletes what the Team has, in order, then lets it go.
pub async fn cleanup(team: &Team, ctx: &Context) -> Result<Action, Error> {
    if !butler_runtime::finalizer::has(team, TEAM_FINALIZER) {
        return Ok(Action::await_change());
    }
    let name = team.name_any();
    let ns = namespace_of(&name);
    let uid = team.meta().uid.clone().unwrap_or_default();
    let namespace = ctx.teams.existing(&ns, "Namespace", &ns);
    let ours = namespace.as_ref().is_some_and(|n| owned_by(n, &uid));

    // 1. The team's clusters, and wait until they are gone.
    let clusters = if ours { ctx.teams.clusters_in(&ns) } else { Vec::new() };
    if !clusters.is_empty() {
        let api: Api<TenantCluster> = Api::namespaced(ctx.client.clone(), &ns);
        for cluster in clusters.iter().filter(|c| c.meta().deletion_timestamp.is_none()) {
            not_found_ok(api.delete(&cluster.name_any(), &DeleteParams::background()).await)
                .map_err(|e| Error::kube(format!("deleting TenantCluster {ns}/{}", cluster.name_any()), e))?;
        }
        let names: Vec<String> = clusters.iter().map(|c| c.name_any()).collect();
        let message =
            format!("deleting the team: waiting for its TenantClusters to go: {}", names.join(", "));
        let terminating = Plan { namespace: Some(ns.clone()), ..Default::default() };
        let waiting = [Wanted::new(READY, false, "Terminating", message)];
        write_status(ctx, team, &terminating, Some(TeamPhase::Terminating), &waiting, None).await?;
        return Ok(Action::requeue(WAIT));
    }

    // 2. RBAC, then 3. the namespace: whatever of it this Team owns.
    let mut objects: Vec<Value> =
        desired_objects(team, &ctx.team_roles, &ctx.secret_reader, &ctx.team_quota, &[]);
    objects.rotate_left(1); // the namespace, first when made, goes last
    for object in objects {
        let r = ObjectRef::of(&object);
        let namespace_of_object = r.namespace.as_deref().unwrap_or_default();
        if r.namespace.is_some() && !ours {
            continue;
        }
        let Some(existing) = ctx.teams.existing(namespace_of_object, &r.kind, &r.name) else { continue };
        if !owned_by(&existing, &uid) {
            continue;
        }
        ctx.applier.delete(&r).await.map_err(Error::Apply)?;
    }

    // 4. The finalizer.
    let api: Api<Team> = Api::all(ctx.client.clone());
    butler_runtime::finalizer::remove(&api, team, TEAM_FINALIZER)
        .await
        .map_err(|e| Error::kube(format!("removing the finalizer of Team {name}"), e))?;
    tracing::info!(team = %name, "deleted the team's clusters, roles and namespace");
    Ok(Action::await_change())
}
