//! Reaching a cluster as kubectl does: `--kubeconfig` (else `$KUBECONFIG`, else
//! `~/.kube/config`) and `--context` (else the current context).

use std::path::Path;

use kube::config::{KubeConfigOptions, Kubeconfig};

/// A client for the cluster the flags name; the error says which file and context failed.
pub async fn client(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Client, String> {
    let file = match kubeconfig {
        Some(path) => Kubeconfig::read_from(path)
            .map_err(|e| format!("cannot read the kubeconfig {}: {e}", path.display()))?,
        None => Kubeconfig::read().map_err(|e| {
            format!("cannot read a kubeconfig ($KUBECONFIG, else ~/.kube/config): {e}; give one with --kubeconfig FILE")
        })?,
    };
    let options = KubeConfigOptions { context: context.map(String::from), ..Default::default() };
    let config = kube::Config::from_custom_kubeconfig(file, &options).await.map_err(|e| match context {
        Some(c) => format!("cannot use the context {c:?} of the kubeconfig: {e}"),
        None => format!("cannot use the current context of the kubeconfig: {e}; choose one with --context"),
    })?;
    kube::Client::try_from(config).map_err(|e| format!("cannot make a client for the cluster: {e}"))
}
