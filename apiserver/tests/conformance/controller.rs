//! A kube-runtime Controller with a finalizer, driven end to end: create, reconcile, update,
//! delete.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use butler_e2e::Cluster;
use futures::StreamExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, ResourceExt};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::finalizer::{Event, finalizer};
use kube::runtime::watcher;
use kube::{CustomResource, CustomResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::support::eventually;

const FINALIZER: &str = "e2e.butlerlabs.dev/cleanup";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "ctl.e2e.butlerlabs.dev",
    version = "v1",
    kind = "Gadget",
    namespaced,
    status = "GadgetStatus"
)]
pub struct GadgetSpec {
    pub text: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GadgetStatus {
    pub shout: String,
    pub observed_generation: i64,
}

struct Context {
    api: Api<Gadget>,
    cleaned: Mutex<Vec<String>>,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Failed(String);

async fn reconcile(gadget: Arc<Gadget>, ctx: Arc<Context>) -> Result<Action, Failed> {
    let api = ctx.api.clone();
    finalizer(&api, FINALIZER, gadget, |event| async {
        match event {
            Event::Apply(g) => {
                let status = json!({"status": {"shout": g.spec.text.to_uppercase(), "observedGeneration": g.metadata.generation}});
                api.patch_status(&g.name_any(), &PatchParams::default(), &Patch::Merge(status))
                    .await
                    .map_err(|e| Failed(e.to_string()))?;
                Ok(Action::await_change())
            }
            Event::Cleanup(g) => {
                ctx.cleaned.lock().unwrap().push(g.name_any());
                Ok(Action::await_change())
            }
        }
    })
    .await
    .map_err(|e: kube::runtime::finalizer::Error<Failed>| Failed(e.to_string()))
}

fn error_policy(_: Arc<Gadget>, _: &Failed, _: Arc<Context>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

#[tokio::test]
async fn a_controller_with_a_finalizer_runs_end_to_end() {
    let cluster = Cluster::connect().await;
    cluster.install_crd(&Gadget::crd()).await;
    let ns = cluster.namespace("ctl").await;
    let api: Api<Gadget> = Api::namespaced(cluster.client(), &ns);
    let ctx = Arc::new(Context { api: api.clone(), cleaned: Mutex::new(Vec::new()) });
    let running = tokio::spawn(
        Controller::new(api.clone(), watcher::Config::default())
            .run(reconcile, error_policy, ctx.clone())
            .for_each(|_| async {}),
    );

    api.create(&PostParams::default(), &Gadget::new("g", GadgetSpec { text: "hello".into() })).await.unwrap();
    let reconciled = eventually("the first reconcile", || async {
        let g = api.get("g").await.unwrap();
        g.status.as_ref().filter(|s| s.observed_generation == 1).map(|_| g.clone())
    })
    .await;
    assert_eq!(reconciled.status.unwrap().shout, "HELLO");
    assert_eq!(reconciled.metadata.finalizers, Some(vec![FINALIZER.to_string()]));

    api.patch("g", &PatchParams::default(), &Patch::Merge(json!({"spec": {"text": "again"}}))).await.unwrap();
    let updated = eventually("the reconcile of the update", || async {
        api.get("g").await.unwrap().status.filter(|s| s.observed_generation == 2)
    })
    .await;
    assert_eq!(updated.shout, "AGAIN");

    api.delete("g", &DeleteParams::default()).await.unwrap();
    eventually("the finalizer to run and the object to go", || async {
        api.get_opt("g").await.unwrap().is_none().then_some(())
    })
    .await;
    assert_eq!(*ctx.cleaned.lock().unwrap(), ["g"]);
    running.abort();
}
