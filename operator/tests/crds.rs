//! The provider CRDs as an API server sees them, and the `crds/` folder kept in step with the code.

use std::path::Path;

use butler_operator::api::{KindNames, ProviderKind};
use butler_operator::crds::{all, providers, stale_files};
use butler_runtime::crds::{check_structural, undocumented_fields};

#[test]
fn crds_folder_matches_the_code() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../crds");
    let stale = stale_files(&dir).expect("crds/ is readable");
    assert!(
        stale.is_empty(),
        "crds/ is out of date with the API types: {stale:?}\nrun `make crds` to regenerate it"
    );
}

#[test]
fn the_books_api_reference_matches_the_code() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/reference/api.md");
    let found = std::fs::read_to_string(&path).unwrap_or_default();
    let wanted = butler_operator::reference::api_reference(&all());
    assert!(found == wanted, "docs/src/reference/api.md is out of date with the API types: run `make crds`");
    for field in [
        "`spec.upgradePolicy.maintenanceWindow.schedule`",
        "`spec.network.poolRefs[].name`",
        "## ProviderUpgrade",
    ] {
        assert!(wanted.contains(field), "{field} is missing from the reference");
    }
}

#[test]
fn every_crd_of_the_workspace_is_structural() {
    let crds = all();
    assert_eq!(crds.len(), 13);
    for crd in &crds {
        let errors = check_structural(crd);
        assert!(errors.is_empty(), "{}", errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"));
    }
}

#[test]
fn provider_crds_share_one_shape_and_differ_only_in_names() {
    let crds = providers();
    assert_eq!(
        crds.iter().map(|c| c.spec.names.kind.as_str()).collect::<Vec<_>>(),
        ProviderKind::ALL.map(|k| k.kind())
    );
    let shorts: Vec<String> =
        crds.iter().flat_map(|c| c.spec.names.short_names.clone().unwrap_or_default()).collect();
    // Each ours, then cluster-api-operator's, which its users type.
    assert_eq!(
        shorts,
        [
            "coreprov",
            "cacp",
            "infraprov",
            "caip",
            "bootprov",
            "cabp",
            "cplaneprov",
            "cacpp",
            "addonprov",
            "caap",
            "ipamprov",
            "caipamp",
            "rtextprov",
            "carep"
        ]
    );
    let spec_schema = |i: usize| {
        let schema = serde_json::to_value(&crds[i].spec.versions[0].schema).unwrap();
        schema["openAPIV3Schema"]["properties"].clone()
    };
    for (i, crd) in crds.iter().enumerate() {
        assert_eq!(spec_schema(i), spec_schema(0), "{} differs from CoreProvider", crd.spec.names.kind);
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(crd.spec.names.plural, ProviderKind::ALL[i].plural());
        assert!(crd.spec.versions[0].subresources.as_ref().and_then(|s| s.status.as_ref()).is_some());
        assert_eq!(undocumented_fields(crd), Vec::<String>::new(), "{}", crd.spec.names.kind);
        let columns: Vec<&str> = crd.spec.versions[0]
            .additional_printer_columns
            .iter()
            .flatten()
            .map(|c| c.name.as_str())
            .collect();
        // cluster-api-operator's column name of the installed version, which its users read.
        assert_eq!(columns, ["Version", "InstalledVersion", "Contract", "Paused", "Ready", "Age"]);
    }
}

#[test]
fn spec_has_every_manager_and_deployment_field_of_the_proposal() {
    let schema = serde_json::to_value(&providers()[0].spec.versions[0].schema).unwrap();
    let spec = &schema["openAPIV3Schema"]["properties"]["spec"]["properties"];
    let keys = |v: &serde_json::Value| -> Vec<String> {
        v["properties"].as_object().unwrap().keys().cloned().collect()
    };
    let mut top: Vec<String> = spec.as_object().unwrap().keys().cloned().collect();
    top.sort();
    assert_eq!(
        top,
        [
            "additionalDeployments",
            "additionalManifests",
            "configSecret",
            "crdDeletionPolicy",
            "deployment",
            "fetchConfig",
            "manager",
            "manifestPatches",
            "patches",
            "paused",
            "upgradePolicy",
            "version"
        ]
    );
    assert_eq!(
        keys(&spec["manager"]),
        [
            "additionalArgs",
            "cacheNamespace",
            "controller",
            "debug",
            "featureGates",
            "gracefulShutDown",
            "health",
            "leaderElection",
            "maxConcurrentReconciles",
            "metrics",
            "profilerAddress",
            "syncPeriod",
            "verbosity",
            "webhook"
        ]
    );
    assert_eq!(
        keys(&spec["manager"]["properties"]["health"]),
        ["healthProbeBindAddress", "livenessEndpointName", "readinessEndpointName"]
    );
    assert_eq!(keys(&spec["manager"]["properties"]["webhook"]), ["certDir", "host", "port"]);
    assert_eq!(
        keys(&spec["manager"]["properties"]["metrics"]),
        ["bindAddress", "diagnosticsAddress", "insecureDiagnostics"]
    );
    assert_eq!(
        keys(&spec["manager"]["properties"]["controller"]),
        ["cacheSyncTimeout", "groupKindConcurrency", "recoverPanic"]
    );
    assert_eq!(
        keys(&spec["manager"]["properties"]["leaderElection"]),
        [
            "leaderElect",
            "leaseDuration",
            "renewDeadline",
            "resourceLock",
            "resourceName",
            "resourceNamespace",
            "retryPeriod"
        ]
    );
    assert_eq!(
        keys(&spec["deployment"]),
        [
            "affinity",
            "containers",
            "imagePullSecrets",
            "nodeSelector",
            "replicas",
            "serviceAccountName",
            "tolerations"
        ]
    );
    assert_eq!(
        keys(&spec["deployment"]["properties"]["containers"]["items"]),
        ["args", "command", "env", "image", "imageUrl", "name", "resources"]
    );
    assert_eq!(
        keys(&spec["deployment"]["properties"]["containers"]["items"]["properties"]["image"]),
        ["name", "repository", "tag"]
    );
    assert_eq!(keys(&spec["configSecret"]), ["name", "namespace"]);
    let fetch = &spec["fetchConfig"];
    assert_eq!(
        keys(fetch),
        ["oci", "selector", "sha256", "url"],
        "cluster-api-operator's three sources, and pins"
    );
    assert_eq!(
        fetch["x-kubernetes-validations"][0]["rule"],
        "(has(self.url) ? 1 : 0) + (has(self.oci) ? 1 : 0) + (has(self.selector) ? 1 : 0) == 1"
    );
    let status = &schema["openAPIV3Schema"]["properties"]["status"];
    assert_eq!(keys(status), ["conditions", "contract", "installedVersion", "observedGeneration"]);
}

/// An in-memory API server named `name` serving the CoreProvider CRD.
async fn with_the_core_crd(name: &str) -> butler_apiserver::MemoryApiServer {
    use kube::api::{Api, Patch, PatchParams};
    use kube::runtime::wait::{await_condition, conditions};
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server =
        butler_apiserver::MemoryApiServer::start_with(butler_apiserver::ServerOptions::named(name)).await;
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(server.client());
    let crd = providers().into_iter().next().expect("the core provider's CRD");
    let crd_name = crd.metadata.name.clone().unwrap();
    crds.patch(&crd_name, &PatchParams::apply("test").force(), &Patch::Apply(&crd)).await.unwrap();
    await_condition(crds, &crd_name, conditions::is_crd_established()).await.unwrap();
    server
}

/// cluster-api-operator's quick starts write a provider with a name alone: the API server takes
/// it and stores the spec at its defaults, which reads as a provider with no field set.
#[tokio::test]
async fn a_provider_without_a_spec_is_taken_at_its_defaults() {
    use butler_operator::api::CoreProvider;
    use kube::api::{Api, DynamicObject, PostParams};
    let server = with_the_core_crd("no-spec").await;
    let bare: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "CoreProvider",
        "metadata": {"name": "cluster-api", "namespace": "default"},
    }))
    .unwrap();
    let resource = kube::api::ApiResource::erase::<CoreProvider>(&());
    let dynamic: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &resource);
    let made =
        dynamic.create(&PostParams::default(), &bare).await.expect("a provider without a spec is taken");
    assert_eq!(made.data["spec"], serde_json::json!({}));
    let typed = Api::<CoreProvider>::namespaced(server.client(), "default").get("cluster-api").await.unwrap();
    assert_eq!(typed.spec, Default::default());
}

/// cluster-api-operator writes `controller.cacheSyncTimeout` as its Go type serializes it, an
/// integer of nanoseconds; Butler's docs write a Go duration. Both are taken and read the same;
/// what is neither is refused at the API server, not dropped by the operator's watch.
#[tokio::test]
async fn a_cache_sync_timeout_is_taken_in_nanoseconds_or_as_a_duration() {
    use butler_operator::api::CoreProvider;
    use kube::api::{Api, DynamicObject, PostParams};
    let server = with_the_core_crd("nanos").await;
    let resource = kube::api::ApiResource::erase::<CoreProvider>(&());
    let dynamic: Api<DynamicObject> = Api::namespaced_with(server.client(), "default", &resource);
    let with = |name: &str, timeout: serde_json::Value| -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "operator.butlerlabs.dev/v1alpha1", "kind": "CoreProvider",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"manager": {"verbosity": 1, "controller": {"cacheSyncTimeout": timeout}}},
        }))
        .unwrap()
    };
    dynamic
        .create(&PostParams::default(), &with("nanos", serde_json::json!(120_000_000_000u64)))
        .await
        .unwrap();
    dynamic.create(&PostParams::default(), &with("text", serde_json::json!("2m"))).await.unwrap();
    let refused =
        dynamic.create(&PostParams::default(), &with("words", serde_json::json!("two minutes"))).await;
    assert!(
        matches!(&refused, Err(kube::Error::Api(e)) if e.code == 422 && e.message.contains("cacheSyncTimeout")),
        "{refused:?}"
    );
    let typed = Api::<CoreProvider>::namespaced(server.client(), "default");
    let timeout = |p: CoreProvider| -> std::time::Duration {
        p.spec.manager.clone().unwrap().controller.unwrap().cache_sync_timeout.unwrap().0.into()
    };
    let nanos = timeout(typed.get("nanos").await.unwrap());
    assert_eq!(nanos, std::time::Duration::from_secs(120));
    assert_eq!(nanos, timeout(typed.get("text").await.unwrap()));
}
