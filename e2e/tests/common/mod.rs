//! An in-memory server on a thread and runtime of its own, playing a real cluster: scenarios
//! reach it only through its kubeconfig, as they reach a real one.

use std::path::PathBuf;
use std::sync::mpsc;

use butler_apiserver::MemoryApiServer;

pub struct RealCluster {
    pub kubeconfig: PathBuf,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RealCluster {
    pub fn start() -> RealCluster {
        let (path_tx, path_rx) = mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime =
                tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
            runtime.block_on(async move {
                let server = MemoryApiServer::start().await;
                path_tx.send(server.kubeconfig().to_path_buf()).unwrap();
                let _ = stop_rx.await;
            });
        });
        let kubeconfig = path_rx.recv().unwrap();
        RealCluster { kubeconfig, stop: Some(stop), thread: Some(thread) }
    }
}

impl Drop for RealCluster {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
