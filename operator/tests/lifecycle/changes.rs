//! Changes from outside the provider object: its config Secret, a core provider that comes
//! later, and hands that edit or delete what the operator applied.

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::fixtures::{components, publish};
use crate::support::{Scenario, is, reason};
use crate::upgrade;

fn region(d: &Deployment) -> Option<String> {
    let container = &d.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
    container.env.iter().flatten().find(|e| e.name == "AWS_REGION").and_then(|e| e.value.clone())
}

#[tokio::test]
async fn a_provider_created_first_installs_once_the_core_provider_is_there() {
    let mut s = Scenario::new("order").await;
    s.start_operator();
    s.create::<InfrastructureProvider>("gcp", "").await;
    s.wait_for::<InfrastructureProvider>("gcp", "waiting", |p| {
        reason(p, "PreflightCheckPassed", "WaitingForCoreProvider")
    })
    .await;
    s.create::<CoreProvider>("butler", "").await;
    s.wait_for::<InfrastructureProvider>("gcp", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    s.stop_operator().await;
}

/// What a cluster-api-operator user writes under `manager` installs, emitted as
/// cluster-api-operator emits it (it was refused as InvalidCustomization).
#[tokio::test]
async fn cluster_api_operators_manager_fields_install_as_it_emits_them() {
    let mut s = Scenario::new("capi-manager").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.secret("aws-variables", &[("AWS_REGION", "eu-west-1")]).await;
    let spec = "configSecret: {name: aws-variables}
manager:
  leaderElection: {leaderElect: true, resourceLock: leases, resourceName: capa, resourceNamespace: capa-system}
  gracefulShutDown: 30s
  webhook: {host: 0.0.0.0}
  controller: {groupKindConcurrency: {AWSCluster.infrastructure.cluster.x-k8s.io: 4}}
  additionalArgs: {--kube-api-qps: '40'}
  featureGates: {EKS: false}
";
    s.create::<InfrastructureProvider>("aws", spec).await;
    s.wait_for::<InfrastructureProvider>("aws", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let deployment = &s.deployments("InfrastructureProvider", "aws").await[0];
    let pod = deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    let manager = pod.containers.iter().find(|c| c.name == "manager").expect("a manager container");
    let args = manager.args.clone().unwrap_or_default();
    for wanted in [
        "--leader-elect=true",
        "--leader-election-id=capa-system/capa",
        "--awscluster.infrastructure.cluster.x-k8s.io-concurrency=4",
        "--webhook-host=0.0.0.0",
        "--kube-api-qps=40",
    ] {
        assert!(args.iter().any(|a| a == wanted), "{wanted} in {args:?}");
    }
    assert!(args.iter().any(|a| a.starts_with("--feature-gates=") && a.contains("EKS=false")), "{args:?}");
    assert!(!args.iter().any(|a| a.starts_with("----")), "{args:?}");
    s.stop_operator().await;
}

/// cluster-api-operator's Deployment fields reach the provider's manager Deployment, and only
/// it: a second Deployment of the components is applied as it ships.
#[tokio::test]
async fn deployment_fields_change_the_manager_deployment_only_and_additional_deployments_the_others() {
    let mut s = Scenario::new("capi-deployment").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let helper = "---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: twin-helper
  namespace: twin-system
spec:
  selector:
    matchLabels: {app: twin-helper}
  template:
    metadata:
      labels: {app: twin-helper}
    spec:
      containers:
        - name: manager
          image: registry.example.com/twin-helper:v1.0.0
";
    let twin = format!("{}{helper}", components("twin", "v1.0.0", &[]));
    publish(&s, "infrastructure-twin", "infrastructure-components.yaml", "v1.0.0", &twin).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &upgrade::spec("butler", "v1.0.0")).await;
    let mut spec: serde_json::Value =
        serde_json::from_str(&upgrade::spec("infrastructure-twin", "v1.0.0")).unwrap();
    spec["deployment"] = json!({
        "serviceAccountName": "twin-other",
        "imagePullSecrets": [{"name": "mirror"}],
        "containers": [{"name": "manager", "imageUrl": "mirror.local/twin:v1.0.0", "command": ["/manager"]}],
    });
    spec["manager"] = json!({"verbosity": 3});
    s.create::<InfrastructureProvider>("twin", &spec.to_string()).await;
    s.wait_for::<InfrastructureProvider>("twin", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let api: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    let pod = |d: &Deployment| d.spec.clone().unwrap().template.spec.unwrap();
    let manager = pod(&api.get("twin-controller-manager").await.unwrap());
    assert_eq!(manager.service_account_name.as_deref(), Some("twin-other"));
    assert_eq!(manager.image_pull_secrets.unwrap()[0].name, "mirror");
    assert_eq!(manager.containers[0].image.as_deref(), Some("mirror.local/twin:v1.0.0"));
    assert_eq!(manager.containers[0].command, Some(vec!["/manager".to_string()]));
    assert!(manager.containers[0].args.clone().unwrap_or_default().contains(&"--v=3".to_string()));
    let helper = pod(&api.get("twin-helper").await.unwrap());
    assert_eq!(helper.containers[0].image.as_deref(), Some("registry.example.com/twin-helper:v1.0.0"));
    assert_eq!((helper.containers[0].command.clone(), helper.containers[0].args.clone()), (None, None));
    assert_eq!(helper.service_account_name, None);

    // cluster-api-operator's additionalDeployments change another Deployment by its name.
    let extra = json!({"twin-helper": {
        "deployment": {"containers": [{"name": "manager", "imageUrl": "mirror.local/twin-helper:v1.0.0"}]},
        "manager": {"verbosity": 2}}});
    s.patch_spec::<InfrastructureProvider>("twin", json!({"additionalDeployments": extra})).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let helper = pod(&api.get("twin-helper").await.unwrap());
        let container = &helper.containers[0];
        if container.image.as_deref() == Some("mirror.local/twin-helper:v1.0.0") {
            assert_eq!(container.args, Some(vec!["--v=2".to_string()]));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the helper Deployment was not changed");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let typo = json!({"twin-helpr": {"deployment": {"replicas": 2}}});
    s.patch_spec::<InfrastructureProvider>("twin", json!({"additionalDeployments": typo})).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("twin", "refused", |p| {
            reason(p, "ProviderInstalled", "InvalidCustomization")
        })
        .await;
    let message = &crate::support::condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("spec.additionalDeployments.twin-helpr: the components have no Deployment"),
        "{message}"
    );
    s.stop_operator().await;
}

/// The `images` key of a config Secret rewrites the provider's images as clusterctl's
/// `images:` config does; one that does not read as such is named.
#[tokio::test]
async fn a_config_secrets_images_key_rewrites_the_images() {
    let mut s = Scenario::new("secret-images").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.secret("aws-variables", &[("AWS_REGION", "eu-west-1"), ("images", "all: 5")]).await;
    s.create::<InfrastructureProvider>("aws", "configSecret: {name: aws-variables}").await;
    let refused = s
        .wait_for::<InfrastructureProvider>("aws", "refused", |p| {
            reason(p, "PreflightCheckPassed", "ConfigSecretUnreadable")
        })
        .await;
    let message = &crate::support::condition(&refused, "PreflightCheckPassed").unwrap().message;
    assert!(message.contains("key \"images\" of the Secret"), "{message}");
    let images = "all: {repository: mirror.local/capi}\ninfrastructure-aws: {tag: v0.1.1}\n";
    s.secret("aws-variables", &[("AWS_REGION", "eu-west-1"), ("images", images)]).await;
    s.wait_for::<InfrastructureProvider>("aws", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let deployment = &s.deployments("InfrastructureProvider", "aws").await[0];
    let pod = deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod.containers[0].image.as_deref(), Some("mirror.local/capi/butler-provider-aws:v0.1.1"));
    s.stop_operator().await;
}

/// A config Secret in another namespace is refused before anything reads it, saying where it
/// must be.
#[tokio::test]
async fn a_config_secret_elsewhere_is_refused_saying_where_it_must_be() {
    let mut s = Scenario::new("secret-elsewhere").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("aws", "configSecret: {name: aws-variables, namespace: kube-system}")
        .await;
    let refused = s
        .wait_for::<InfrastructureProvider>("aws", "refused", |p| {
            reason(p, "PreflightCheckPassed", "ConfigSecretUnreadable")
        })
        .await;
    let message = &crate::support::condition(&refused, "PreflightCheckPassed").unwrap().message;
    assert!(
        message.contains(&format!(
            "spec.configSecret.namespace \"kube-system\" is not the provider's namespace \"{}\"; the config Secret must be in the provider's namespace",
            s.namespace
        )),
        "{message}"
    );
    assert!(s.deployments("InfrastructureProvider", "aws").await.is_empty(), "nothing installed");
    s.stop_operator().await;
}

/// A ConfigMap a provider reads its release from is watched: a release published again under
/// the same version renders within seconds (it waited for the 10-minute resync).
#[tokio::test]
async fn a_release_configmap_that_changes_renders_the_provider_again() {
    use crate::fixtures::Part;
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut s = Scenario::new("cm-watch").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let file = "infrastructure-components.yaml";
    publish(&s, "infrastructure-watched", file, "v1.0.0", &components("watched", "v1.0.0", &[])).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &upgrade::spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("watched", &upgrade::spec("infrastructure-watched", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("watched", "installed", |p| is(p, "ProviderInstalled", "True"))
        .await;
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    assert!(configmaps.get_opt("watched-settings").await.unwrap().is_none());
    let again = components("watched", "v1.0.0", &[Part::Settings]);
    publish(&s, "infrastructure-watched", file, "v1.0.0", &again).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while configmaps.get_opt("watched-settings").await.unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the release published again was not rendered");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    s.stop_operator().await;
}

/// cluster-api-operator's additionalManifests: the YAML of a ConfigMap beside the provider is
/// applied with it, follows the ConfigMap's changes, and what leaves it is pruned.
#[tokio::test]
async fn additional_manifests_are_applied_with_the_provider_and_pruned_with_it() {
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut s = Scenario::new("extras").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let file = "infrastructure-components.yaml";
    publish(&s, "infrastructure-extra", file, "v1.0.0", &components("extra", "v1.0.0", &[])).await;
    let configmaps: Api<ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    let extras = |manifests: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": "extras"}, "data": {"manifests": manifests}}))
            .unwrap()
    };
    let two = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra-a}\ndata: {greeting: '${GREETING:=hello}'}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra-b}\n";
    configmaps.create(&Default::default(), &extras(two)).await.unwrap();
    s.start_operator();
    s.create::<CoreProvider>("butler", &upgrade::spec("butler", "v1.0.0")).await;
    let mut spec: serde_json::Value =
        serde_json::from_str(&upgrade::spec("infrastructure-extra", "v1.0.0")).unwrap();
    spec["additionalManifests"] = json!({"name": "extras"});
    // Patches reach them too, as in cluster-api-operator.
    spec["manifestPatches"] =
        json!(["apiVersion: v1\nkind: ConfigMap\nmetadata: {annotations: {patched: by-merge}}\n"]);
    s.create::<InfrastructureProvider>("extra", &spec.to_string()).await;
    s.wait_for::<InfrastructureProvider>("extra", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let a = configmaps.get("extra-a").await.unwrap();
    assert_eq!(
        a.metadata.annotations.as_ref().unwrap()["patched"],
        "by-merge",
        "patched as the components are"
    );
    assert_eq!(a.data.unwrap()["greeting"], "hello", "processed as the components are");
    assert_eq!(a.metadata.labels.unwrap()["operator.butlerlabs.dev/provider-name"], "extra");
    assert!(configmaps.get_opt("extra-b").await.unwrap().is_some());

    // extra-b leaves the ConfigMap: pruned, without waiting for the resync.
    let one = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: extra-a}\n";
    configmaps
        .replace("extras", &Default::default(), &{
            let mut c = configmaps.get("extras").await.unwrap();
            c.data = extras(one).data;
            c
        })
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while configmaps.get_opt("extra-b").await.unwrap().is_some() {
        assert!(std::time::Instant::now() < deadline, "extra-b was not pruned");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(configmaps.get_opt("extra-a").await.unwrap().is_some());

    // One elsewhere is refused, as the config Secret is.
    s.patch_spec::<InfrastructureProvider>(
        "extra",
        json!({"additionalManifests": {"namespace": "kube-system"}}),
    )
    .await;
    let refused = s
        .wait_for::<InfrastructureProvider>("extra", "refused", |p| {
            reason(p, "ProviderInstalled", "RenderFailed")
        })
        .await;
    let message = &crate::support::condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message
            .contains("spec.additionalManifests.namespace \"kube-system\" is not the provider's namespace"),
        "{message}"
    );
    s.stop_operator().await;
}

/// cluster-api-operator's manifestPatches and patches change the rendered objects; one that
/// does not apply is named and nothing is applied.
#[tokio::test]
async fn manifest_patches_and_targeted_patches_change_what_is_applied() {
    use k8s_openapi::api::core::v1::ServiceAccount;
    let mut s = Scenario::new("patched").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let file = "infrastructure-components.yaml";
    publish(&s, "infrastructure-patched", file, "v1.0.0", &components("patched", "v1.0.0", &[])).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &upgrade::spec("butler", "v1.0.0")).await;
    let mut spec: serde_json::Value =
        serde_json::from_str(&upgrade::spec("infrastructure-patched", "v1.0.0")).unwrap();
    spec["manifestPatches"] =
        json!(["apiVersion: v1\nkind: ServiceAccount\nmetadata: {annotations: {patched: by-merge}}\n"]);
    spec["patches"] = json!([{"target": {"group": "apps", "kind": "Deployment"},
        "patch": "- {op: replace, path: /spec/replicas, value: 3}\n"}]);
    s.create::<InfrastructureProvider>("patched", &spec.to_string()).await;
    s.wait_for::<InfrastructureProvider>("patched", "installed", |p| is(p, "ProviderInstalled", "True"))
        .await;
    let accounts: Api<ServiceAccount> = Api::namespaced(s.client.clone(), &s.namespace);
    let account = accounts.get("patched-manager").await.unwrap();
    assert_eq!(account.metadata.annotations.unwrap()["patched"], "by-merge");
    let deployment = &s.deployments("InfrastructureProvider", "patched").await[0];
    assert_eq!(deployment.spec.as_ref().unwrap().replicas, Some(3));

    let broken =
        json!([{"target": {"kind": "Deployment"}, "patch": "- {op: remove, path: /spec/nothing}\n"}]);
    s.patch_spec::<InfrastructureProvider>("patched", json!({"patches": broken, "manifestPatches": null}))
        .await;
    let refused = s
        .wait_for::<InfrastructureProvider>("patched", "refused", |p| {
            reason(p, "ProviderInstalled", "InvalidCustomization")
        })
        .await;
    let message = &crate::support::condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("spec.patches[0] does not apply to Deployment patched-controller-manager"),
        "{message}"
    );
    let account = accounts.get("patched-manager").await.unwrap();
    assert_eq!(account.metadata.annotations.unwrap()["patched"], "by-merge", "nothing was applied");
    s.stop_operator().await;
}

/// A name of clusterctl's built-in list of public providers (here `vsphere`) needs no
/// fetchConfig: it resolves to that provider's GitHub releases, as with cluster-api-operator
/// (offline here, so the fetch says which URL it wanted, touching no network).
#[tokio::test]
async fn an_upstream_providers_name_resolves_through_clusterctls_list() {
    let mut s = Scenario::new("upstream-name").await;
    s.start_operator_with_options(|o| o.remote.http.offline = true);
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("vsphere", "").await;
    let failed = s
        .wait_for::<InfrastructureProvider>("vsphere", "fetched", |p| {
            reason(p, "ProviderInstalled", "FetchFailed")
        })
        .await;
    let message = &crate::support::condition(&failed, "ProviderInstalled").unwrap().message;
    assert!(message.contains("kubernetes-sigs/cluster-api-provider-vsphere"), "{message}");
    assert!(!reason(&failed, "PreflightCheckPassed", "UnknownProvider"));
    s.stop_operator().await;
}

#[tokio::test]
async fn a_change_to_the_config_secret_renders_the_provider_again() {
    let mut s = Scenario::new("secret").await;
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    // The Secret comes after the provider: the provider waits for it, and says so.
    s.create::<InfrastructureProvider>("aws", "configSecret: {name: aws-variables}").await;
    s.wait_for::<InfrastructureProvider>("aws", "the missing Secret reported", |p| {
        reason(p, "PreflightCheckPassed", "ConfigSecretUnreadable")
    })
    .await;
    s.secret("aws-variables", &[("AWS_REGION", "eu-west-1")]).await;
    s.wait_for::<InfrastructureProvider>("aws", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let deployment = &s.deployments("InfrastructureProvider", "aws").await[0];
    assert_eq!(region(deployment).as_deref(), Some("eu-west-1"));

    s.secret("aws-variables", &[("AWS_REGION", "us-east-2")]).await;
    let api: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    let name = deployment.name_any();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while region(&api.get(&name).await.unwrap()).as_deref() != Some("us-east-2") {
        assert!(std::time::Instant::now() < deadline, "the new region never reached the Deployment");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let aws = s.api::<InfrastructureProvider>().get("aws").await.unwrap();
    let status = serde_json::to_string(&aws.status).unwrap();
    assert!(
        !status.contains("us-east-2") && !status.contains("eu-west-1"),
        "values never reach the status: {status}"
    );
    s.stop_operator().await;
}

/// The operator running with the core provider and proxmox installed: the Deployments and
/// the name of proxmox's.
async fn proxmox_installed(s: &mut Scenario) -> (Api<Deployment>, String) {
    s.start_operator();
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("proxmox", "").await;
    s.wait_for::<InfrastructureProvider>("proxmox", "installed", |p| is(p, "ProviderInstalled", "True"))
        .await;
    let api: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    let name = s.deployments("InfrastructureProvider", "proxmox").await[0].name_any();
    (api, name)
}

#[tokio::test]
async fn drift_of_applied_objects_is_put_right_by_watching_them() {
    let mut s = Scenario::new("drift").await;
    let (api, name) = proxmox_installed(&mut s).await;

    // Someone scales the Deployment by hand: it comes back to what the provider says.
    api.patch(
        &name,
        &PatchParams::apply("someone").force(),
        &Patch::Apply(json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name}, "spec": {"replicas": 5}
        })),
    )
    .await
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while api.get(&name).await.unwrap().spec.unwrap().replicas != Some(1) {
        assert!(std::time::Instant::now() < deadline, "the replicas were not put right");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }

    // Someone deletes a ClusterRole of the provider: it comes back.
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(s.client.clone());
    roles.delete("butler-provider-proxmox", &DeleteParams::default()).await.unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while roles.get_opt("butler-provider-proxmox").await.unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the ClusterRole did not come back");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    s.stop_operator().await;
}

#[tokio::test]
async fn a_deletion_while_the_watches_were_down_and_expired_is_put_right() {
    let mut s = Scenario::new("expired").await;
    if !s.cluster.is_in_memory() {
        println!("skipped on a real cluster: its watches cannot be interrupted on demand");
        return;
    }
    let (api, name) = proxmox_installed(&mut s).await;

    let server = s.cluster.server().expect("in memory");
    // The watches go down; meanwhile the Deployment is deleted and more changes happen than the
    // server keeps, so every watcher comes back to 410 Expired and has to list again.
    server.interrupt_watches();
    api.delete(&name, &DeleteParams::background()).await.unwrap();
    let noise: Api<k8s_openapi::api::core::v1::ConfigMap> = Api::namespaced(s.client.clone(), &s.namespace);
    for i in 0..120 {
        let cm = serde_json::from_value(json!({"metadata": {"name": format!("noise-{i}")}})).unwrap();
        noise.create(&Default::default(), &cm).await.unwrap();
    }
    let before = server.requests_from(crate::support::OPERATOR_AGENT).len();
    server.resume_watches();

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while api.get_opt(&name).await.unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the Deployment deleted in the gap did not come back");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // It came back through a list: the watch from the old resourceVersion had expired.
    let since = server.requests_from(crate::support::OPERATOR_AGENT).split_off(before);
    assert!(
        since.iter().any(|(m, p)| m == "GET" && p.contains("/deployments") && !p.contains("watch=")),
        "no list of Deployments after the watches resumed: {since:?}"
    );
    s.stop_operator().await;
}

#[tokio::test]
async fn the_operator_config_file_moves_providers_to_a_mirror_and_overrides_images() {
    let mut s = Scenario::new("config").await;
    let dir = tempfile::tempdir().unwrap();
    butler_operator::release::write_release(dir.path(), butler_repository::EMBEDDED_VERSION).unwrap();
    let components = dir.path().join("local/infrastructure-harvester/v0.1.0/infrastructure-components.yaml");
    let config = dir.path().join("butler-operator.yaml");
    std::fs::write(
        &config,
        format!(
            "providers:\n- name: harvester\n  type: InfrastructureProvider\n  url: {}\nimages:\n  all:\n    repository: mirror.internal/butler\nHARVESTER_VM_NAMESPACE: vms\nproviderVariables:\n  infrastructure-harvester: [HARVESTER_VM_NAMESPACE]\n",
            components.display()
        ),
    )
    .unwrap();
    s.start_operator_with(Some(config));
    s.create::<CoreProvider>("butler", "").await;
    s.create::<InfrastructureProvider>("harvester", "").await;
    s.wait_for::<InfrastructureProvider>("harvester", "installed", |p| is(p, "ProviderInstalled", "True"))
        .await;
    let deployment = &s.deployments("InfrastructureProvider", "harvester").await[0];
    let container = &deployment.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0];
    assert_eq!(container.image.as_deref(), Some("mirror.internal/butler/butler-provider-harvester:v0.1.0"));
    assert!(
        container.args.iter().flatten().any(|a| a == "--default-vm-namespace=vms"),
        "{:?}",
        container.args
    );
    s.stop_operator().await;
}

#[tokio::test]
async fn values_of_the_config_secret_never_reach_conditions_or_events_even_when_quoted_back() {
    let mut s = Scenario::new("redact").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    // A Gadget whose `size` must be digits: the API server rejects the Secret's text and
    // quotes it in its answer.
    let mut leaky = components("leaky", "v1.0.0", &[]);
    leaky.push_str(
        "---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.leaky.test.io
spec:
  group: leaky.test.io
  scope: Namespaced
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec: {type: object, properties: {size: {type: string, pattern: '^[0-9]+$'}}}
---
apiVersion: leaky.test.io/v1
kind: Gadget
metadata:
  name: default
  namespace: leaky-system
spec:
  size: ${GADGET_PASSWORD}
",
    );
    publish(&s, "infrastructure-leaky", "infrastructure-components.yaml", "v1.0.0", &leaky).await;
    s.secret("leaky-variables", &[("GADGET_PASSWORD", "hunter2-hunter2")]).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &upgrade::spec("butler", "v1.0.0")).await;
    let mut spec: serde_json::Value =
        serde_json::from_str(&upgrade::spec("infrastructure-leaky", "v1.0.0")).unwrap();
    spec["configSecret"] = json!({"name": "leaky-variables"});
    s.create::<InfrastructureProvider>("leaky", &spec.to_string()).await;
    let leaky = s
        .wait_for::<InfrastructureProvider>("leaky", "the apply refused", |p| {
            reason(p, "ProviderInstalled", "ApplyFailed")
        })
        .await;
    // It waited for the core provider first; that condition does not stay behind.
    assert!(is(&leaky, "PreflightCheckPassed", "True"), "{:?}", leaky.status);
    let status = serde_json::to_string(&leaky.status).unwrap();
    assert!(status.contains("<redacted GADGET_PASSWORD>"), "the message says which value it hid: {status}");
    assert!(!status.contains("hunter2"), "the value never reaches the status: {status}");
    let events: Api<Event> = Api::namespaced(s.client.clone(), &s.namespace);
    let notes: Vec<String> =
        events.list(&ListParams::default()).await.unwrap().items.into_iter().filter_map(|e| e.note).collect();
    assert!(notes.iter().any(|n| n.contains("<redacted GADGET_PASSWORD>")), "{notes:?}");
    assert!(notes.iter().all(|n| !n.contains("hunter2")), "{notes:?}");
    s.stop_operator().await;
}

#[tokio::test]
async fn a_kind_that_is_served_after_the_operator_started_is_found_and_nothing_is_half_applied() {
    let mut s = Scenario::new("late").await;
    // A provider whose components hold an object of a kind that nothing serves yet (one that
    // another installer's CRD defines, as prometheus-operator's ServiceMonitor): a kind beyond
    // those providers ship, which the platform allows.
    let group = format!("{}.late.example.com", s.cluster.unique("k").replace('-', ""));
    let allowed = format!("{group}/Widget");
    s.start_operator_with_options(move |o| o.policy.kinds = vec![allowed]);
    s.create::<CoreProvider>("butler", "").await;
    let text = format!(
        "{}---\napiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: default-widget\n  namespace: late-system\n",
        components("late", "v1.0.0", &[])
    );
    publish(&s, "infrastructure-late", "infrastructure-components.yaml", "v1.0.0", &text).await;
    s.create::<InfrastructureProvider>("late", &crate::fixtures::selector("infrastructure-late")).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("late", "refused", |p| {
            reason(p, "ProviderInstalled", "ApplyFailed")
        })
        .await;
    let message = &refused
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == "ProviderInstalled")
        .unwrap()
        .message;
    assert!(message.contains(&format!("{group}/v1 Widget is not served by the cluster")), "{message}");
    assert!(s.deployments("InfrastructureProvider", "late").await.is_empty(), "nothing was written");

    // The kind comes: the provider installs without a restart.
    let crd: k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition =
        serde_json::from_value(json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("widgets.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        }))
        .unwrap();
    s.cluster.install_own_crd(&crd).await;
    s.wait_for::<InfrastructureProvider>("late", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    assert_eq!(s.deployments("InfrastructureProvider", "late").await.len(), 1);
    s.stop_operator().await;
}

/// Cluster API Provider Azure's release holds Azure Service Operator's Deployment
/// (`azureserviceoperator-controller-manager`, container `manager`) beside its own: the
/// provider's manager and deployment settings reach its own manager Deployment only, as in
/// cluster-api-operator (`ca*-controller-manager`), never the other one's image, flags or account.
#[tokio::test]
async fn manager_settings_reach_the_providers_own_deployment_and_not_another_in_its_release() {
    use k8s_openapi::api::apps::v1::Deployment;
    let mut s = Scenario::new("two-managers").await;
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    let aso = "---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: azureserviceoperator-controller-manager
  namespace: capz-system
spec:
  replicas: 1
  selector: {matchLabels: {control-plane: aso}}
  template:
    metadata: {labels: {control-plane: aso}}
    spec:
      serviceAccountName: capz-manager
      containers:
      - name: manager
        image: mcr.microsoft.com/k8s/azureserviceoperator:v2.9.0
        args: [--enable-leader-election]
";
    let release = format!("{}{aso}", components("capz", "v1.0.0", &[]));
    publish(&s, "infrastructure-azure", "infrastructure-components.yaml", "v1.0.0", &release).await;
    s.start_operator();
    s.create::<CoreProvider>("butler", &upgrade::spec("butler", "v1.0.0")).await;
    let mut spec: serde_json::Value =
        serde_json::from_str(&upgrade::spec("infrastructure-azure", "v1.0.0")).unwrap();
    spec["manager"] = json!({"verbosity": 4});
    spec["deployment"] = json!({"containers": [{"name": "manager", "imageUrl": "mirror.local/capz:v1.0.0"}]});
    s.create::<InfrastructureProvider>("azure", &spec.to_string()).await;
    s.wait_for::<InfrastructureProvider>("azure", "installed", |p| is(p, "ProviderInstalled", "True")).await;
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), &s.namespace);
    let container = |d: Deployment| d.spec.unwrap().template.spec.unwrap().containers[0].clone();
    let own = container(deployments.get("capz-controller-manager").await.unwrap());
    assert_eq!(own.image.as_deref(), Some("mirror.local/capz:v1.0.0"));
    assert!(own.args.unwrap_or_default().contains(&"--v=4".to_string()));
    let other = container(deployments.get("azureserviceoperator-controller-manager").await.unwrap());
    assert_eq!(other.image.as_deref(), Some("mcr.microsoft.com/k8s/azureserviceoperator:v2.9.0"));
    assert_eq!(other.args.unwrap_or_default(), ["--enable-leader-election"], "left as the release has it");
    s.stop_operator().await;
}
