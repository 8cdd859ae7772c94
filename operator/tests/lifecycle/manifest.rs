//! The install manifest of `make release` applies to a cluster as it is.

use butler_operator::manifest;
use butler_runtime::apply::Applier;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;

use butler_operator::api::{CoreProvider, InfrastructureProvider};
use kube::api::DeleteParams;
use serde_json::json;

use crate::support::{Scenario, reason};
use crate::upgrade::{installed, publish_releases, spec};

#[tokio::test]
async fn the_install_manifest_applies_and_runs_the_operator_with_probes() {
    let s = Scenario::new("manifest").await;
    if !s.cluster.is_in_memory() {
        println!("skipped: the manifest would install the operator into the real cluster");
        return;
    }
    let text = manifest::render("v0.1.0");
    let objects: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).expect("the manifest is YAML");
    assert_eq!(objects.len(), manifest::objects("v0.1.0").len());
    let applier = Applier::new(s.client.clone(), "butler-operator");
    for object in &objects {
        applier.apply(object, false).await.unwrap_or_else(|e| panic!("{e}"));
    }
    let deployments: Api<Deployment> = Api::namespaced(s.client.clone(), manifest::NAMESPACE);
    let operator = deployments.get("butler-operator").await.unwrap();
    let container = &operator.spec.unwrap().template.spec.unwrap().containers[0];
    assert_eq!(
        container.args.as_deref(),
        Some(
            &[
                "run".to_string(),
                "--provider-namespace=butler-system".to_string(),
                "--provider-namespace-label=operator.butlerlabs.dev/providers".to_string(),
                format!("--role-ceiling={}", manifest::ROLE_CEILING),
            ][..]
        )
    );
    assert_eq!(container.image.as_deref(), Some("ghcr.io/butlerdotdev/butler-operator:v0.1.0"));
    assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
}

#[tokio::test]
async fn the_manifests_rbac_is_enough_to_install_upgrade_pause_and_delete_providers() {
    let mut s = Scenario::new("rbac").await;
    let Some(account) = s.shipped_account().await else {
        println!("skipped: the manifest would install the operator into the real cluster");
        return;
    };

    // The account may do what the book says, and not more: no Secrets written, no Nodes read.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(account.clone(), &s.namespace);
    let refused = secrets
        .create(
            &Default::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": "x"}})).unwrap(),
        )
        .await;
    assert!(matches!(&refused, Err(kube::Error::Api(e)) if e.code == 403), "{refused:?}");
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(account.clone());
    let refused = nodes.list(&Default::default()).await;
    assert!(matches!(&refused, Err(kube::Error::Api(e)) if e.code == 403), "{refused:?}");

    // Every step: install, an upgrade that deletes what it dropped, a contract change by
    // pause-upgrade-unpause, and deletion.
    publish_releases(&s).await;
    s.start_operator_as(account);
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("widget", &spec("infrastructure-widget", "v1.0.0")).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.0.0 installed", installed("v1.0.0")).await;
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v1.1.0"})).await;
    s.wait_for::<InfrastructureProvider>("widget", "v1.1.0 installed", installed("v1.1.0")).await;
    s.patch_spec::<InfrastructureProvider>("widget", json!({"paused": true})).await;
    s.patch_spec::<CoreProvider>("butler", json!({"paused": true, "version": "v2.0.0"})).await;
    s.wait_for::<CoreProvider>("butler", "v2.0.0 installed", installed("v2.0.0")).await;
    s.patch_spec::<InfrastructureProvider>("widget", json!({"version": "v2.0.0", "paused": false})).await;
    s.patch_spec::<CoreProvider>("butler", json!({"paused": false})).await;
    s.wait_for::<InfrastructureProvider>("widget", "v2.0.0 running", |p| {
        installed("v2.0.0")(p) && reason(p, "Paused", "Running")
    })
    .await;
    s.wait_for::<CoreProvider>("butler", "running", |p| reason(p, "Paused", "Running")).await;
    s.api::<InfrastructureProvider>().delete("widget", &DeleteParams::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("widget").await;
    s.stop_operator().await;
}

/// `butlerctl init --output` writes one set that a GitOps tool applies as it is, wave by wave
/// (Argo CD's sync waves; Flux applies CRDs first by itself): the API server takes every object.
#[tokio::test]
async fn the_gitops_set_of_init_applies_wave_by_wave() {
    let s = Scenario::new("gitops").await;
    if !s.cluster.is_in_memory() {
        println!("skipped: the set would install the operator into the real cluster");
        return;
    }
    let args = butler_operator::cli::init::InitArgs {
        providers: vec![(butler_repository::ProviderType::Infrastructure, "harvester".into())],
        target_namespace: Some(s.namespace.clone()),
        ..Default::default()
    };
    let plan = butler_operator::cli::init::plan(&args, &Default::default(), false).await.unwrap();
    let objects: Vec<serde_json::Value> = serde_saphyr::from_multiple(&plan.to_gitops_yaml()).unwrap();
    let wave = |o: &serde_json::Value| {
        o["metadata"]["annotations"]["argocd.argoproj.io/sync-wave"].as_str().map(String::from)
    };
    assert!(objects.iter().all(|o| wave(o).is_some()), "every object has its wave");
    let core = objects.iter().find(|o| o["kind"] == "CoreProvider").unwrap();
    let infra = objects.iter().find(|o| o["kind"] == "InfrastructureProvider").unwrap();
    assert_eq!((wave(core).as_deref(), wave(infra).as_deref()), (Some("1"), Some("2")));
    let applier = Applier::new(s.client.clone(), "gitops");
    for w in ["0", "1", "2"] {
        for object in objects.iter().filter(|o| wave(o).as_deref() == Some(w)) {
            applier.apply(object, false).await.unwrap_or_else(|e| panic!("wave {w}: {e}"));
        }
    }
    s.api::<InfrastructureProvider>().get("harvester").await.unwrap();
}

/// Without --target-namespace, `butlerctl init` puts each provider in the namespace its
/// components declare, as clusterctl lays providers out: none shares a namespace (and with it
/// the ServiceAccounts a token Secret could be made for) with another.
#[tokio::test]
async fn init_puts_each_provider_in_a_namespace_of_its_own() {
    let args = butler_operator::cli::init::InitArgs {
        providers: vec![(butler_repository::ProviderType::Infrastructure, "harvester".into())],
        ..Default::default()
    };
    let plan = butler_operator::cli::init::plan(&args, &Default::default(), false).await.unwrap();
    let at = |kind: &str| {
        let object = plan.objects.iter().find(|o| o["kind"] == kind).unwrap();
        object["metadata"]["namespace"].as_str().unwrap().to_string()
    };
    assert_eq!(at("CoreProvider"), "butler-system");
    assert_eq!(at("InfrastructureProvider"), "butler-harvester-system");
    assert!(plan.notes.is_empty(), "harvester is Butler's alone: {:?}", plan.notes);
    let namespaces: Vec<&str> = plan
        .objects
        .iter()
        .filter(|o| o["kind"] == "Namespace")
        .map(|o| o["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(namespaces, ["butler-system", "butler-harvester-system"], "each made and labelled");
    // A Butler name that is Cluster API's too, without a version, is said to be Butler's.
    let aws = butler_operator::cli::init::InitArgs {
        providers: vec![(butler_repository::ProviderType::Infrastructure, "aws".into())],
        explicit: [("AWS_REGION".to_string(), "eu-west-1".to_string())].into(),
        ..Default::default()
    };
    let noted = butler_operator::cli::init::plan(&aws, &Default::default(), false).await.unwrap();
    assert_eq!(noted.notes.len(), 1, "{:?}", noted.notes);
    assert!(
        noted.notes[0].starts_with("aws names Butler's own InfrastructureProvider aws; Cluster API's"),
        "{:?}",
        noted.notes
    );
    // --config-secret: every provider names the user's own Secret (in its namespace unless
    // given), and init writes no Secret of variables nor asks for any (AWS's credentials).
    let own = butler_operator::cli::init::InitArgs {
        providers: vec![(butler_repository::ProviderType::Infrastructure, "aws".into())],
        config_secret: Some(("capa-variables".into(), None)),
        ..Default::default()
    };
    let planned = butler_operator::cli::init::plan(&own, &Default::default(), false).await.unwrap();
    assert!(planned.objects.iter().all(|o| o["kind"] != "Secret"), "no Secret of variables written");
    let provider = planned.objects.iter().find(|o| o["kind"] == "InfrastructureProvider").unwrap();
    assert_eq!(
        provider["spec"]["configSecret"],
        json!({"name": "capa-variables", "namespace": provider["metadata"]["namespace"]})
    );
    // --target-namespace still puts every provider in one.
    let one = butler_operator::cli::init::InitArgs { target_namespace: Some("platform".into()), ..args };
    let plan = butler_operator::cli::init::plan(&one, &Default::default(), false).await.unwrap();
    assert!(
        plan.objects
            .iter()
            .filter(|o| o["kind"] != "Namespace")
            .all(|o| o["metadata"]["namespace"] == "platform")
    );
}

/// `butlerctl init` makes the providers' namespaces with Pod Security's baseline enforced (as
/// release admission holds providers' pods to it); a namespace that exists only gets the
/// operator's label, its own Pod Security labels left as its owner set them.
#[tokio::test]
async fn init_makes_provider_namespaces_with_baseline_enforced_and_keeps_an_existing_ones_labels() {
    use butler_operator::cli::init::{InitPlan, apply, providers_namespace};
    use k8s_openapi::api::core::v1::Namespace;
    let s = Scenario::new("init-pod-security").await;
    let made = s.cluster.unique("init-made");
    s.cluster.clean_up_namespace(&made);
    let existing = s.cluster.namespace("init-existing").await;
    let namespaces: Api<Namespace> = Api::all(s.client.clone());
    let privileged = json!({"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "privileged"}}});
    namespaces
        .patch(&existing, &kube::api::PatchParams::default(), &kube::api::Patch::Merge(&privileged))
        .await
        .unwrap();
    let plan = InitPlan {
        operator: Vec::new(),
        objects: vec![providers_namespace(&made), providers_namespace(&existing)],
        notes: Vec::new(),
    };
    apply(&s.client, &plan, None, &|_| {}).await.unwrap();
    let labels = |ns: Namespace| ns.metadata.labels.unwrap_or_default();
    let made = labels(namespaces.get(&made).await.unwrap());
    assert_eq!(made.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("baseline"));
    assert_eq!(made.get("operator.butlerlabs.dev/providers").map(String::as_str), Some("true"));
    let existing = labels(namespaces.get(&existing).await.unwrap());
    assert_eq!(existing.get("pod-security.kubernetes.io/enforce").map(String::as_str), Some("privileged"));
    assert_eq!(existing.get("operator.butlerlabs.dev/providers").map(String::as_str), Some("true"));
}

/// A CRD of cert-manager's kind `kind` (`plural`), any fields allowed.
fn cert_manager_crd(kind: &str, plural: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.cert-manager.io")},
        "spec": {"group": "cert-manager.io", "scope": "Namespaced",
            "names": {"kind": kind, "plural": plural, "singular": kind.to_lowercase(), "listKind": format!("{kind}List")},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    })
}

/// An upstream provider ships webhook configurations, cert-manager objects and a Secret: the
/// manifest's least-privilege grants refuse them, naming what is missing, and the upstream
/// grants of the release (`operator/butler-operator-upstream-rbac.yaml`, or `butlerctl init
/// --upstream-rbac`) let it install under the manifest's ServiceAccount.
#[tokio::test]
async fn an_upstream_provider_installs_under_the_manifests_account_with_the_upstream_grants() {
    use crate::fixtures::{Part, components, publish};
    let mut s = Scenario::new("upstream").await;
    let Some(account) = s.shipped_account().await else {
        println!("skipped: the manifest would install the operator into the real cluster");
        return;
    };
    let admin = Applier::new(s.client.clone(), "scenario");
    for crd in [cert_manager_crd("Issuer", "issuers"), cert_manager_crd("Certificate", "certificates")] {
        admin.apply(&crd, true).await.unwrap_or_else(|e| panic!("{e}"));
    }
    let ns = s.namespace.clone();
    let extra = format!(
        "---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: upstream-{ns}
webhooks:
- name: gadgets.upstream.test.io
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  clientConfig:
    service: {{name: upstream-webhook, namespace: {ns}, path: /validate}}
  rules:
  - {{apiGroups: [upstream.test.io], apiVersions: [v1], operations: [CREATE], resources: [gadgets]}}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {{name: upstream-selfsigned, namespace: upstream-system}}
spec: {{selfSigned: {{}}}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {{name: upstream-serving-cert, namespace: upstream-system}}
spec: {{secretName: upstream-webhook-cert, issuerRef: {{name: upstream-selfsigned}}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: upstream-bootstrap-credentials, namespace: upstream-system}}
stringData: {{credentials: none}}
"
    );
    let release = format!("{}{extra}", components("upstream", "v1.0.0", &[Part::Crd]));
    publish(&s, "butler", "core-components.yaml", "v1.0.0", &components("butler", "v1.0.0", &[])).await;
    publish(&s, "infrastructure-upstream", "infrastructure-components.yaml", "v1.0.0", &release).await;
    s.start_operator_as(account);
    s.create::<CoreProvider>("butler", &spec("butler", "v1.0.0")).await;
    s.create::<InfrastructureProvider>("upstream", &spec("infrastructure-upstream", "v1.0.0")).await;
    let refused = s
        .wait_for::<InfrastructureProvider>("upstream", "refused", |p| {
            reason(p, "ProviderInstalled", "ApplyFailed")
        })
        .await;
    let message = &crate::support::condition(&refused, "ProviderInstalled").unwrap().message;
    assert!(message.contains("is forbidden"), "{message}");
    // The refusal is read back into the rule to add, at once (the first: every object of the
    // set is read before anything is written).
    assert!(
        message.contains("the operator may not get ") && message.contains("add the rule {apiGroups: ["),
        "{message}"
    );

    for object in manifest::extra_rbac("v0.1.0", &manifest::upstream_rules()) {
        admin.apply(&object, false).await.unwrap_or_else(|e| panic!("{e}"));
    }
    s.wait_for::<InfrastructureProvider>("upstream", "installed", |p| {
        reason(p, "ProviderInstalled", "Installed")
    })
    .await;
    let issuers = kube::api::ApiResource::from_gvk(&kube::api::GroupVersionKind::gvk(
        "cert-manager.io",
        "v1",
        "Issuer",
    ));
    let issuers: Api<kube::api::DynamicObject> = Api::namespaced_with(s.client.clone(), &ns, &issuers);
    assert!(issuers.get_opt("upstream-selfsigned").await.unwrap().is_some());

    // Deleting its CRDs lists their objects first, which the upstream rules allow only in
    // Cluster API's groups: the refusal is on the provider from the first try (it once hung
    // with a log line and Ready True), naming the rule, and the deletion goes on within
    // seconds of the rule being added.
    s.patch_spec::<InfrastructureProvider>("upstream", json!({"crdDeletionPolicy": "Delete"})).await;
    s.api::<InfrastructureProvider>().delete("upstream", &DeleteParams::default()).await.unwrap();
    let failed = s
        .wait_for::<InfrastructureProvider>("upstream", "its deletion refused", |p| {
            reason(p, "Deleting", "DeletionFailed")
        })
        .await;
    let message = &crate::support::condition(&failed, "Deleting").unwrap().message;
    let rule = r#"{apiGroups: ["upstream.test.io"], resources: ["gadgets"], verbs: ["list"]}"#;
    assert!(
        message
            .contains("the operator may not list gadgets in API group upstream.test.io at the cluster scope")
            && message.contains(rule),
        "{message}"
    );
    assert!(reason(&failed, "Ready", "Deleting"), "{:?}", failed.status);
    let mut rules = manifest::upstream_rules();
    rules.push(serde_json::to_value(serde_saphyr::from_str::<serde_json::Value>(rule).unwrap()).unwrap());
    for object in manifest::extra_rbac("v0.1.0", &rules) {
        admin.apply(&object, false).await.unwrap_or_else(|e| panic!("{e}"));
    }
    s.wait_gone::<InfrastructureProvider>("upstream").await;
    s.stop_operator().await;
    for object in manifest::extra_rbac("v0.1.0", &[]) {
        let _ = admin.delete(&butler_runtime::objects::ObjectRef::of(&object)).await;
    }
}
