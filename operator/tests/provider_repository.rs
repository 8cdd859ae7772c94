//! Butler's own provider repository: every provider's components and templates, read back
//! through the repository crate from each release shape and from the embedded source, process
//! without error and keep the clusterctl contract; the book lists each provider's variables.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use butler_apiserver::MemoryApiServer;
use butler_operator::release::{CONFIGMAP_PROVIDER_LABEL, write_release};
use butler_repository::{
    ClusterVariables, ComponentsOptions, ConfigMapSource, EMBEDDED_VERSION, EmbeddedProvider, EmbeddedSource,
    GitHubOptions, GitHubSource, GoProxy, Http, HttpOptions, ImageOverrides, LocalSource, ProviderType,
    Repository, Source, embedded_providers, process_components, process_template, template_variables,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn init() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A value for every variable the texts require (the rest keep their defaults).
fn required_values(name: &str) -> Option<String> {
    let value = match name {
        "AWS_REGION" => "us-east-1",
        "HARVESTER_NETWORK_NAME" => "default/vlan40",
        "NETWORK_POOL" => "lab-pool",
        "NUTANIX_ENDPOINT" | "PROXMOX_ENDPOINT" => "https://infra.example.com",
        "NUTANIX_CLUSTER_UUID" | "NUTANIX_SUBNET_UUID" | "NUTANIX_IMAGE_UUID" => {
            "a1b2c3d4-e5f6-7890-abcd-ef1234567890"
        }
        "PROXMOX_NODE" => "pve-1",
        "AZURE_SUBSCRIPTION_ID" => "12345678-abcd-efgh-ijkl-1234567890ab",
        "AZURE_RESOURCE_GROUP" => "rg",
        "AWS_VPC_ID" => "vpc-1",
        "AWS_SUBNET_ID" => "subnet-1",
        "AWS_SECURITY_GROUP_ID" => "sg-1",
        "AZURE_VNET_NAME" | "AZURE_SUBNET_NAME" => "net",
        "GCP_PROJECT" => "my-project",
        "GCP_NETWORK" | "GCP_SUBNETWORK" => "vpc",
        "KUBERNETES_VERSION" => "v1.30.4",
        _ => return None,
    };
    Some(value.to_string())
}

/// Serves a release's `github/` folder as GitHub serves release downloads.
struct GitHubDownloads(PathBuf);

impl Respond for GitHubDownloads {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let parts: Vec<&str> = request.url.path().trim_matches('/').split('/').collect();
        let ["butlerdotdev", repo, "releases", "download", _tag, file] = parts.as_slice() else {
            return ResponseTemplate::new(404);
        };
        let label = match repo.strip_prefix("butler-provider-") {
            Some(name) => format!("infrastructure-{name}"),
            None => repo.to_string(),
        };
        match std::fs::read(self.0.join(label).join(file)) {
            Ok(bytes) => ResponseTemplate::new(200).set_body_bytes(bytes),
            Err(_) => ResponseTemplate::new(404),
        }
    }
}

fn github_repo(provider: &EmbeddedProvider) -> String {
    match provider.type_ {
        ProviderType::Core => "butler".to_string(),
        _ => format!("butler-provider-{}", provider.name),
    }
}

/// Checks processed components against the clusterctl contract (spec/003).
fn check_components(what: &str, objects: &[Value], label: &str) {
    let namespaces: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Namespace").collect();
    assert_eq!(namespaces.len(), 1, "{what}: one Namespace");
    assert_eq!(objects[0]["kind"], "Namespace", "{what}: the Namespace comes first");
    let target = namespaces[0]["metadata"]["name"].as_str().unwrap();
    for object in objects {
        let kind = object["kind"].as_str().unwrap();
        assert_eq!(
            object["metadata"]["labels"]["cluster.x-k8s.io/provider"], label,
            "{what}: {kind} labelled"
        );
        assert_eq!(
            object["metadata"]["labels"]["clusterctl.cluster.x-k8s.io"], "",
            "{what}: {kind} labelled"
        );
        if !butler_repository::known_cluster_scoped(object["apiVersion"].as_str().unwrap_or_default(), kind) {
            assert_eq!(object["metadata"]["namespace"], target, "{what}: {kind} in the target namespace");
        }
    }
    let deployments: Vec<&Value> = objects.iter().filter(|o| o["kind"] == "Deployment").collect();
    assert_eq!(deployments.len(), 1, "{what}: one controller Deployment");
    let containers = deployments[0]["spec"]["template"]["spec"]["containers"].as_array().unwrap();
    let manager = containers
        .iter()
        .find(|c| c["name"] == "manager")
        .unwrap_or_else(|| panic!("{what}: a container named manager"));
    let args: Vec<&str> = manager["args"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    if label.starts_with("infrastructure-") {
        assert!(args.iter().any(|a| a.starts_with("--namespace=")), "{what}: the manager takes --namespace");
    } else {
        // butler-controller serves the cluster-scoped Teams and every team namespace: no watch
        // namespace, and its `run` subcommand first.
        assert_eq!(args.first(), Some(&"run"), "{what}: butler-controller run");
    }
    assert!(args.contains(&"--leader-elect"), "{what}: leader election");
    assert!(
        manager["image"].as_str().unwrap().ends_with(&format!(":{EMBEDDED_VERSION}")),
        "{what}: the image of this version"
    );
}

async fn check_provider<S: Source>(
    repo: &Repository<S>,
    provider: &EmbeddedProvider,
    requested: Option<&str>,
    templates: bool,
) -> Vec<Value> {
    let what = format!("{} from {}", provider.label(), repo.source().location());
    let version = repo.resolve(requested).await.unwrap_or_else(|e| panic!("{what}: {e}"));
    assert_eq!(version.to_string(), EMBEDDED_VERSION, "{what}");
    assert_eq!(repo.contract_of(&version).await.unwrap(), "v1beta1", "{what}");
    let text = String::from_utf8(repo.components(&version).await.unwrap()).unwrap();
    let images = ImageOverrides::default();
    let options = ComponentsOptions {
        what: &what,
        provider_label: &provider.label(),
        target_namespace: None,
        images: &images,
        variables: &required_values,
    };
    let components = process_components(&text, &options).unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(components.warnings.is_empty(), "{what}: {:?}", components.warnings);
    check_components(&what, &components.objects().unwrap(), &provider.label());

    let mut template_objects = Vec::new();
    if templates && provider.type_ == ProviderType::Infrastructure {
        let names: Vec<String> = provider
            .files()
            .into_iter()
            .map(|(n, _)| n)
            .filter(|n| n.starts_with("cluster-template"))
            .collect();
        assert!(names.len() >= 2, "{what}: a default template and a flavor");
        for name in names {
            let text = String::from_utf8(repo.file(&version, &name).await.unwrap()).unwrap();
            let common = ClusterVariables {
                cluster_name: "c1".into(),
                namespace: "team-a".into(),
                kubernetes_version: Some("v1.30.4".into()),
                control_plane_machine_count: 1,
                worker_machine_count: 2,
            }
            .validate()
            .unwrap();
            let names: Vec<String> = template_variables(&text).into_iter().map(|v| v.name).collect();
            for common_name in ["CLUSTER_NAME", "KUBERNETES_VERSION", "WORKER_MACHINE_COUNT"] {
                assert!(names.contains(&common_name.to_string()), "{what} {name} uses {common_name}");
            }
            let lookup = |n: &str| common.get(n).cloned().or_else(|| required_values(n));
            let template = process_template(&name, &text, Some("team-a"), &lookup)
                .unwrap_or_else(|e| panic!("{what} {name}: {e}"));
            template_objects.extend(template.objects().unwrap());
        }
    }
    template_objects
}

#[tokio::test]
async fn every_provider_reads_back_from_every_release_shape() {
    init();
    let out = tempfile::tempdir().unwrap();
    write_release(out.path(), EMBEDDED_VERSION).unwrap();
    let cache = tempfile::tempdir().unwrap();
    let http = || {
        Http::new(HttpOptions {
            cache: Some(butler_repository::Cache::new(cache.path(), std::time::Duration::from_secs(60))),
            ..Default::default()
        })
    };

    let github = MockServer::start().await;
    Mock::given(wiremock::matchers::method("GET"))
        .respond_with(GitHubDownloads(out.path().join("github")))
        .mount(&github)
        .await;

    let server = MemoryApiServer::start().await;
    let configmaps: Api<ConfigMap> = Api::namespaced(server.client(), "default");
    for entry in std::fs::read_dir(out.path().join("configmaps")).unwrap() {
        let cm: ConfigMap =
            serde_saphyr::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        configmaps.create(&PostParams::default(), &cm).await.unwrap();
    }

    let mut template_objects = Vec::new();
    for provider in embedded_providers() {
        let label = provider.label();
        let file = provider.components_file();
        template_objects.extend(
            check_provider(
                &Repository::new(&label, EmbeddedSource::new(&label).unwrap(), file),
                provider,
                None,
                true,
            )
            .await,
        );
        check_provider(
            &Repository::new(&label, LocalSource::new(out.path().join("local"), &label), file),
            provider,
            None,
            true,
        )
        .await;
        let options = GitHubOptions {
            api_base: github.uri(),
            web_base: github.uri(),
            token: None,
            goproxy: GoProxy::Disabled,
        };
        let source = GitHubSource::new("butlerdotdev", &github_repo(provider), options, http()).unwrap();
        check_provider(&Repository::new(&label, source, file), provider, Some(EMBEDDED_VERSION), true).await;
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([(CONFIGMAP_PROVIDER_LABEL.to_string(), label.clone())])),
            ..Default::default()
        };
        check_provider(
            &Repository::new(
                &label,
                ConfigMapSource::new(server.client(), "default", &selector).unwrap(),
                file,
            ),
            provider,
            None,
            false,
        )
        .await;
    }

    // The templates' objects are what Butler's API accepts.
    let crds: Api<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    > = Api::all(server.client());
    for crd in butler_core::api::crds() {
        crds.create(&PostParams::default(), &crd).await.unwrap();
    }
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(server.client());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "team-a"}})).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(template_objects.len(), 24, "a ProviderConfig and a TenantCluster in each of 12 templates");
    for (i, mut object) in template_objects.into_iter().enumerate() {
        let kind = object["kind"].as_str().unwrap().to_string();
        let plural = if kind == "ProviderConfig" { "providerconfigs" } else { "tenantclusters" };
        object["metadata"]["name"] = Value::String(format!("obj-{i}"));
        let resource = ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("butler.butlerlabs.dev", "v1alpha1", &kind),
            plural,
        );
        let api: Api<DynamicObject> = Api::namespaced_with(server.client(), "team-a", &resource);
        let dynamic: DynamicObject = serde_json::from_value(object.clone()).unwrap();
        api.create(&PostParams::default(), &dynamic)
            .await
            .unwrap_or_else(|e| panic!("{kind} of a template refused: {e}\n{object:#}"));
    }
}

#[test]
fn the_repository_is_consistent_with_this_build() {
    // Every Butler CRD of crds/ is in the core components, once.
    let core = embedded_providers().iter().find(|p| p.type_ == ProviderType::Core).unwrap().components();
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for entry in std::fs::read_dir(root.join("crds")).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().to_string();
        if let Some(rest) = name.strip_prefix("butler.butlerlabs.dev_") {
            let crd_name = format!("name: {}.butler.butlerlabs.dev\n", rest.trim_end_matches(".yaml"));
            assert_eq!(core.matches(&crd_name).count(), 1, "{name} in the core components");
        }
    }
    // metadata.yaml has a release series for this version, one series per minor version.
    let metadata =
        butler_repository::Metadata::parse("butler", &std::fs::read(root.join("metadata.yaml")).unwrap())
            .unwrap();
    let version: butler_repository::Version = EMBEDDED_VERSION.parse().unwrap();
    assert!(metadata.series_of(&version).is_some());
    let mut minors: Vec<(u64, u64)> = metadata.release_series.iter().map(|s| (s.major, s.minor)).collect();
    let count = minors.len();
    minors.dedup();
    assert_eq!(minors.len(), count, "one series per minor version");
}

/// The provider variables of the book's page of Butler's repository, as `butlerctl generate
/// provider --list-variables` prints them; `make docs-generate` rewrites them.
#[tokio::test]
async fn the_book_lists_every_providers_variables() {
    init();
    let config = tempfile::NamedTempFile::new().unwrap();
    let mut section = String::from("<!-- provider-variables:start (generated by `make docs-generate`) -->\n");
    for provider in embedded_providers() {
        let mut which = butler_operator::cli::ProviderChoice::default();
        match provider.type_ {
            ProviderType::Core => which.core = Some(provider.name.into()),
            _ => which.infrastructure = Some(provider.name.into()),
        }
        let args = butler_operator::cli::ProviderArgs {
            which,
            target_namespace: None,
            list_variables: true,
            config: Some(config.path().into()),
        };
        let listing = butler_operator::cli::generate_provider(&args).await.unwrap().stdout;
        let flag = if provider.type_ == ProviderType::Core { "--core" } else { "--infrastructure" };
        section.push_str(&format!(
            "\n`butlerctl generate provider {flag} {} --list-variables`:\n\n```text\n{}```\n",
            provider.name,
            listing.trim_end().to_string() + "\n"
        ));
    }
    section.push_str("<!-- provider-variables:end -->");
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/src/repositories/butler.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let start = readme
        .find("<!-- provider-variables:start")
        .expect("the book's page of Butler's repository has the provider variables section");
    let end = readme.find("<!-- provider-variables:end -->").expect("the page has the end of the section")
        + "<!-- provider-variables:end -->".len();
    if std::env::var_os("BUTLER_UPDATE_DOCS").is_some() {
        std::fs::write(&path, format!("{}{section}{}", &readme[..start], &readme[end..])).unwrap();
        return;
    }
    assert_eq!(
        &readme[start..end],
        section,
        "the provider variables of docs/src/repositories/butler.md are stale; run `make docs-generate`"
    );
}
