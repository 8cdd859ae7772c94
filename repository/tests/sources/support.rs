use std::time::Duration;

use butler_repository::{Cache, HttpOptions};

pub const METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: 1\n  minor: 0\n  contract: v1beta1\n- major: 1\n  minor: 1\n  contract: v1beta1\n- major: 1\n  minor: 2\n  contract: v1beta2\n- major: 0\n  minor: 9\n  contract: v1alpha4\n";

pub fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Options for tests: a private cache folder, quick retries and a short timeout.
pub fn http_options(cache: &tempfile::TempDir) -> HttpOptions {
    init();
    HttpOptions {
        cache: Some(Cache::new(cache.path(), Duration::from_secs(3600))),
        offline: false,
        max_download: 1 << 20,
        retries: 2,
        backoff: Duration::from_millis(5),
        timeout: Duration::from_millis(500),
        network: Default::default(),
        proxy: Default::default(),
    }
}
