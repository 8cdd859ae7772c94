//! Fetching a provider from an OCI registry on 127.0.0.1 (Debian's docker-registry): resolve
//! the latest version, then its metadata and components, as the operator does for a new
//! provider. Cold: an empty cache each time; warm: a new process with the cache of the last.
//! A summary prints both times and the requests each made (the registry's access log).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use butler_e2e::registry::Registry;
use butler_repository::oci::{self, OciOptions};
use butler_repository::{
    Cache, EMBEDDED_VERSION, HttpOptions, ProviderUrl, RemoteOptions, Repository, Version, embedded_provider,
};
use criterion::Criterion;

const LABEL: &str = "infrastructure-harvester";

fn options(cache: &std::path::Path, registry: &Registry) -> RemoteOptions {
    RemoteOptions {
        http: HttpOptions {
            cache: Some(Cache::new(cache, Duration::from_secs(3600))),
            timeout: Duration::from_secs(10),
            ..Default::default()
        },
        oci: OciOptions { insecure: vec![registry.addr.clone()], ..Default::default() },
        ..Default::default()
    }
}

async fn fetch(url: &ProviderUrl, options: &RemoteOptions) -> usize {
    let repo = Repository::from_url(LABEL, url, options).unwrap();
    let version = repo.resolve(None).await.unwrap();
    repo.contract_of(&version).await.unwrap();
    repo.components(&version).await.unwrap().len()
}

fn mean_ms(id: &str) -> Option<f64> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join(format!("criterion/{id}/new/estimates.json"));
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64().map(|ns| ns / 1e6)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let registry = Registry::start(None);
    let files: BTreeMap<String, Vec<u8>> = embedded_provider(LABEL)
        .unwrap()
        .files()
        .into_iter()
        .map(|(name, text)| (name, text.into_bytes()))
        .collect();
    let version = Version::parse(EMBEDDED_VERSION, "the embedded repository").unwrap();
    let publish = OciOptions { insecure: vec![registry.addr.clone()], ..Default::default() };
    runtime
        .block_on(oci::publish(
            &registry.addr,
            "butler/infrastructure-harvester",
            false,
            LABEL,
            &version,
            &files,
            &publish,
        ))
        .unwrap();
    let url =
        ProviderUrl::parse(&format!("oci://{}/butler/infrastructure-harvester", registry.addr)).unwrap();

    // Requests of one cold and one warm fetch, counted once outside the measurement.
    let warm_cache = tempfile::tempdir().unwrap();
    let before = registry.requests();
    let bytes = runtime.block_on(fetch(&url, &options(warm_cache.path(), &registry)));
    let cold_requests = registry.requests() - before;
    let before = registry.requests();
    runtime.block_on(fetch(&url, &options(warm_cache.path(), &registry)));
    let warm_requests = registry.requests() - before;
    if std::env::var_os("OCI_FETCH_LOG").is_some() {
        eprintln!("{}", registry.log_tail(cold_requests + warm_requests));
    }

    let mut criterion = Criterion::default().configure_from_args();
    criterion.bench_function("oci_fetch/cold", |b| {
        b.iter(|| {
            let cache = tempfile::tempdir().unwrap();
            runtime.block_on(fetch(&url, &options(cache.path(), &registry)))
        })
    });
    criterion.bench_function("oci_fetch/warm", |b| {
        b.iter(|| runtime.block_on(fetch(&url, &options(warm_cache.path(), &registry))))
    });
    criterion.final_summary();
    match (mean_ms("oci_fetch_cold"), mean_ms("oci_fetch_warm")) {
        (Some(cold), Some(warm)) => println!(
            "\nfetch {LABEL} (latest, metadata, components: {bytes} bytes) from a local registry: cold {cold:.2} ms with {cold_requests} requests; repeated with the cache {warm:.2} ms with {warm_requests} requests"
        ),
        _ => println!("\n(no estimate written: run with `cargo bench`)"),
    }
}
