//! What the controller's benchmarks share: an in-memory API server with Butler's CRDs, and the
//! controllers running in this process.

use std::sync::Arc;

use butler_apiserver::{MemoryApiServer, ServerOptions};
use butler_runtime::metrics::Metrics;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};

/// An in-memory API server with Butler's CRDs established.
pub async fn cluster() -> MemoryApiServer {
    let server = MemoryApiServer::start_with(ServerOptions::named("butler-bench")).await;
    let crds: Api<CustomResourceDefinition> = Api::all(server.client());
    for crd in butler_core::api::crds() {
        let crd = butler_runtime::crds::tidy(crd);
        let name = crd.name_any();
        crds.patch(&name, &PatchParams::apply("bench").force(), &Patch::Apply(&crd)).await.unwrap();
        await_condition(crds.clone(), &name, conditions::is_crd_established()).await.unwrap();
    }
    server
}

/// The controllers in this process, their requests counted under `agent`: their metrics, the
/// switch that stops them, and their task.
#[allow(dead_code)] // not every benchmark runs the controllers in process
pub fn controllers(
    server: &MemoryApiServer,
    agent: &str,
) -> (Arc<Metrics>, tokio::sync::watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (stop, shutdown) = butler_runtime::shutdown::shutdown_switch();
    let metrics = Arc::new(Metrics::new("butler_controller", |_| {}));
    let controllers = butler_controller::start(
        server.client_as(agent),
        metrics.clone(),
        butler_controller::Options::in_process("bench"),
        shutdown,
    );
    (metrics, stop, tokio::spawn(controllers.run))
}
