//! Cluster API's own releases, in the shapes its release process renders them (written here
//! from those facts): a core over 1 MiB that travels gzipped, two dozen CRDs with conversion
//! webhooks whose CA cert-manager injects, cert-manager Issuers and Certificates, webhook
//! configurations, an aggregated manager ClusterRole with `rules: []`, a provider that renames
//! its kinds between two releases, and one that stays on v1beta1 under a v1beta2 core. The
//! scenario installs them, moves the contract the natural way (every version bumped first, then
//! every provider paused), and deletes what renamed its CRDs with them.

use butler_operator::api::{BootstrapProvider, ControlPlaneProvider, CoreProvider, InfrastructureProvider};
use butler_operator::controller::ProviderObject;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use serde_json::json;

use crate::fixtures::{converted_crd, plural_of as plural, publish_with};
use crate::support::{OPERATOR_AGENT, Scenario, condition, is, reason};
use crate::upgrade::{installed, spec};

/// Cluster API's series: 1.10 abides by v1beta1, 1.11 by v1beta2.
const CAPI_METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
  - {major: 1, minor: 10, contract: v1beta1}
  - {major: 1, minor: 11, contract: v1beta2}
";

/// An infrastructure provider still on v1beta1 (as Azure's was through v1.26).
const LAGGING_METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
  - {major: 1, minor: 26, contract: v1beta1}
";

/// A provider of the fixture: its short name (`{short}-system` is its namespace in the
/// release), its API group and its kinds at a version.
struct Shape {
    short: &'static str,
    group: &'static str,
    kinds: &'static [&'static str],
    /// Properties per version of each CRD's schema: what makes the core's release large.
    properties: usize,
}

const CORE: Shape = Shape {
    short: "capi",
    group: "cluster.capi.test.io",
    kinds: &[
        "Cluster",
        "ClusterClass",
        "Machine",
        "MachineSet",
        "MachineDeployment",
        "MachinePool",
        "MachineHealthCheck",
        "MachineDrainRule",
        "ClusterResourceSet",
        "ClusterResourceSetBinding",
    ],
    properties: 260,
};
const BOOTSTRAP: Shape = Shape {
    short: "capi-kubeadm-bootstrap",
    group: "bootstrap.capi.test.io",
    kinds: &["KubeadmConfig", "KubeadmConfigTemplate"],
    properties: 20,
};
const CONTROL_PLANE: Shape = Shape {
    short: "capi-kubeadm-control-plane",
    group: "controlplane.capi.test.io",
    kinds: &["KubeadmControlPlane", "KubeadmControlPlaneTemplate"],
    properties: 20,
};
const DOCKER_OLD: &[&str] =
    &["DockerCluster", "DockerClusterTemplate", "DockerMachine", "DockerMachineTemplate"];
const DOCKER_NEW: &[&str] = &["DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate"];
const LAGGING: Shape = Shape {
    short: "capz",
    group: "infrastructure.capz.test.io",
    kinds: &["AzureCluster", "AzureMachine", "AzureMachineTemplate", "AzureClusterIdentity"],
    properties: 20,
};

/// A CRD of `shape` for `kind`, as Cluster API ships it.
fn crd(shape: &Shape, kind: &str, contract: &str) -> String {
    converted_crd(shape.short, shape.group, kind, contract, shape.properties)
}

/// The components of a provider's release: its namespace, CRDs, cert-manager objects, webhook
/// Service and configurations, RBAC with an aggregated manager role, and the manager.
fn release(shape: &Shape, kinds: &[&str], version: &str, contract: &str) -> String {
    let short = shape.short;
    let group = shape.group;
    let mut text = format!(
        "apiVersion: v1
kind: Namespace
metadata:
  name: {short}-system
  labels: {{cluster.x-k8s.io/provider: {short}, control-plane: controller-manager}}
"
    );
    for kind in kinds {
        text.push_str(&format!("---\n{}", crd(shape, kind, contract)));
    }
    let resources: Vec<String> = kinds.iter().map(|k| plural(k)).collect();
    let resources = resources.join(", ");
    text.push_str(&format!(
        "---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata:
  name: {short}-selfsigned-issuer
  namespace: {short}-system
spec:
  selfSigned: {{}}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: {short}-serving-cert
  namespace: {short}-system
spec:
  dnsNames:
    - {short}-webhook-service.{short}-system.svc
    - {short}-webhook-service.{short}-system.svc.cluster.local
  issuerRef: {{kind: Issuer, name: {short}-selfsigned-issuer}}
  secretName: {short}-webhook-service-cert
---
apiVersion: v1
kind: Service
metadata:
  name: {short}-webhook-service
  namespace: {short}-system
spec:
  ports: [{{port: 443, targetPort: webhook-server}}]
  selector: {{cluster.x-k8s.io/provider: {short}}}
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {short}-manager
  namespace: {short}-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {short}-aggregated-manager-role
aggregationRule:
  clusterRoleSelectors:
    - matchLabels:
        {group}/aggregate-to-manager: \"true\"
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: {short}-manager-role
  labels:
    {group}/aggregate-to-manager: \"true\"
rules:
  - apiGroups: [{group}]
    resources: [{resources}]
    verbs: [get, list, watch, patch, update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: {short}-manager-rolebinding
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: {short}-aggregated-manager-role}}
subjects:
  - {{kind: ServiceAccount, name: {short}-manager, namespace: {short}-system}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {short}-validating-webhook-configuration
  annotations:
    cert-manager.io/inject-ca-from: {short}-system/{short}-serving-cert
webhooks:
  - name: validation.{group}
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: Fail
    matchPolicy: Equivalent
    clientConfig:
      service: {{name: {short}-webhook-service, namespace: {short}-system, path: /validate}}
    rules:
      - apiGroups: [{group}]
        apiVersions: [v1beta1]
        operations: [CREATE, UPDATE]
        resources: [{resources}]
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {short}-controller-manager
  namespace: {short}-system
  labels: {{cluster.x-k8s.io/provider: {short}}}
spec:
  replicas: 1
  selector:
    matchLabels: {{cluster.x-k8s.io/provider: {short}}}
  template:
    metadata:
      labels: {{cluster.x-k8s.io/provider: {short}}}
    spec:
      serviceAccountName: {short}-manager
      containers:
        - name: manager
          image: registry.example.com/{short}-controller:{version}
          args: [--leader-elect, --diagnostics-address=:8443]
          ports: [{{containerPort: 9443, name: webhook-server, protocol: TCP}}]
          volumeMounts: [{{mountPath: /tmp/k8s-webhook-server/serving-certs, name: cert, readOnly: true}}]
      volumes:
        - name: cert
          secret: {{secretName: {short}-webhook-service-cert}}
"
    ));
    text
}

/// Publishes every release of the fixture; returns the core's components size.
async fn publish_all(s: &Scenario) -> usize {
    let mut core_size = 0;
    for (version, contract) in [("v1.10.10", "v1beta1"), ("v1.11.0", "v1beta2")] {
        let core = release(&CORE, CORE.kinds, version, contract);
        core_size = core_size.max(core.len());
        publish_with(s, "cluster-api", "core-components.yaml", version, &core, CAPI_METADATA).await;
        let bootstrap = release(&BOOTSTRAP, BOOTSTRAP.kinds, version, contract);
        publish_with(s, "bootstrap-kubeadm", "bootstrap-components.yaml", version, &bootstrap, CAPI_METADATA)
            .await;
        let control_plane = release(&CONTROL_PLANE, CONTROL_PLANE.kinds, version, contract);
        let file = "control-plane-components.yaml";
        publish_with(s, "control-plane-kubeadm", file, version, &control_plane, CAPI_METADATA).await;
        let docker =
            Shape { short: "capd", group: "infrastructure.capd.test.io", kinds: &[], properties: 20 };
        let kinds = if contract == "v1beta1" { DOCKER_OLD } else { DOCKER_NEW };
        let docker = release(&docker, kinds, version, contract);
        let file = "infrastructure-components.yaml";
        publish_with(s, "infrastructure-docker", file, version, &docker, CAPI_METADATA).await;
    }
    let lagging = release(&LAGGING, LAGGING.kinds, "v1.26.0", "v1beta1");
    publish_with(
        s,
        "infrastructure-azure",
        "infrastructure-components.yaml",
        "v1.26.0",
        &lagging,
        LAGGING_METADATA,
    )
    .await;
    core_size
}

async fn running<K: ProviderObject>(s: &Scenario, name: &str, version: &'static str) {
    s.wait_for::<K>(name, &format!("{version} installed and running"), |p| {
        installed(version)(p) && reason(p, "Paused", "Running")
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cluster_apis_releases_install_move_their_contract_and_go() {
    let mut s = Scenario::new("capi").await;
    let core_size = publish_all(&s).await;
    assert!(core_size > 1024 * 1024, "the core's components are over 1 MiB: {core_size}");
    let stored = Api::<ConfigMap>::namespaced(s.client.clone(), &s.namespace)
        .get("cluster-api-v1.10.10")
        .await
        .unwrap();
    assert!(stored.binary_data.is_some_and(|b| b.contains_key("components")), "the core travels gzipped");

    s.start_operator();
    s.create::<CoreProvider>("cluster-api", &spec("cluster-api", "v1.10.10")).await;
    s.create::<BootstrapProvider>("kubeadm", &spec("bootstrap-kubeadm", "v1.10.10")).await;
    s.create::<ControlPlaneProvider>("kubeadm", &spec("control-plane-kubeadm", "v1.10.10")).await;
    s.create::<InfrastructureProvider>("docker", &spec("infrastructure-docker", "v1.10.10")).await;
    s.create::<InfrastructureProvider>("azure", &spec("infrastructure-azure", "v1.26.0")).await;
    s.wait_for::<CoreProvider>("cluster-api", "installed", installed("v1.10.10")).await;
    s.wait_for::<BootstrapProvider>("kubeadm", "installed", installed("v1.10.10")).await;
    s.wait_for::<ControlPlaneProvider>("kubeadm", "installed", installed("v1.10.10")).await;
    s.wait_for::<InfrastructureProvider>("docker", "installed", installed("v1.10.10")).await;
    s.wait_for::<InfrastructureProvider>("azure", "installed", installed("v1.26.0")).await;
    let crds: Api<CustomResourceDefinition> = Api::all(s.client.clone());
    let listed = crds.list(&Default::default()).await.unwrap().items;
    let ours =
        listed.iter().filter(|c| c.spec.group.ends_with(".test.io") && c.spec.group.contains(".cap")).count();
    assert!(ours >= 22, "two dozen CRDs installed: {ours}");
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("docker", "Ready", |p| is(p, "Ready", "True")).await;

    // The contract move, the natural way: every Cluster API version bumped first...
    s.patch_spec::<CoreProvider>("cluster-api", json!({"version": "v1.11.0"})).await;
    s.patch_spec::<BootstrapProvider>("kubeadm", json!({"version": "v1.11.0"})).await;
    s.patch_spec::<ControlPlaneProvider>("kubeadm", json!({"version": "v1.11.0"})).await;
    s.patch_spec::<InfrastructureProvider>("docker", json!({"version": "v1.11.0"})).await;
    let core = s
        .wait_for::<CoreProvider>("cluster-api", "the move refused until paused", |p| {
            reason(p, "ProviderUpgraded", "ContractChangeNeedsPause")
        })
        .await;
    let message = &condition(&core, "ProviderUpgraded").unwrap().message;
    assert!(message.contains("pause every provider first"), "{message}");
    // ...then every provider paused: the move goes through, the core first.
    s.patch_spec::<CoreProvider>("cluster-api", json!({"paused": true})).await;
    s.patch_spec::<BootstrapProvider>("kubeadm", json!({"paused": true})).await;
    s.patch_spec::<ControlPlaneProvider>("kubeadm", json!({"paused": true})).await;
    s.patch_spec::<InfrastructureProvider>("docker", json!({"paused": true})).await;
    s.patch_spec::<InfrastructureProvider>("azure", json!({"paused": true})).await;
    s.wait_for::<CoreProvider>("cluster-api", "v1.11.0 installed", installed("v1.11.0")).await;
    s.wait_for::<BootstrapProvider>("kubeadm", "v1.11.0 installed", installed("v1.11.0")).await;
    s.wait_for::<ControlPlaneProvider>("kubeadm", "v1.11.0 installed", installed("v1.11.0")).await;
    s.wait_for::<InfrastructureProvider>("docker", "v1.11.0 installed", installed("v1.11.0")).await;
    let unpause = json!({"paused": false});
    let unpaused = std::time::Instant::now();
    let before = s.cluster.server().map(|server| server.requests_from(OPERATOR_AGENT).len());
    s.patch_spec::<CoreProvider>("cluster-api", unpause.clone()).await;
    s.patch_spec::<BootstrapProvider>("kubeadm", unpause.clone()).await;
    s.patch_spec::<ControlPlaneProvider>("kubeadm", unpause.clone()).await;
    s.patch_spec::<InfrastructureProvider>("docker", unpause.clone()).await;
    s.patch_spec::<InfrastructureProvider>("azure", unpause).await;
    running::<CoreProvider>(&s, "cluster-api", "v1.11.0").await;
    running::<BootstrapProvider>(&s, "kubeadm", "v1.11.0").await;
    running::<ControlPlaneProvider>(&s, "kubeadm", "v1.11.0").await;
    running::<InfrastructureProvider>(&s, "docker", "v1.11.0").await;
    println!("the four Cluster API providers unpaused in {:.2} s", unpaused.elapsed().as_secs_f64());
    if let (Some(server), Some(before)) = (s.cluster.server(), before) {
        // An unpause scales Deployments: a megabyte of unchanged CRDs is not applied again
        // (it was, and made one unpause take 14 s).
        let mut writes = server.requests_from(OPERATOR_AGENT).split_off(before);
        writes.retain(|(method, path)| method == "PATCH" && !path.contains("/apis/operator.butlerlabs.dev/"));
        let crds = writes.iter().filter(|(_, path)| path.contains("/customresourcedefinitions/")).count();
        assert_eq!(crds, 0, "CRDs applied again by an unpause: {writes:?}");
        assert!(writes.iter().any(|(_, path)| path.contains("/deployments/")), "{writes:?}");
    }
    let azure = s
        .wait_for::<InfrastructureProvider>("azure", "running on v1beta1", |p| reason(p, "Paused", "Running"))
        .await;
    let message = &condition(&azure, "ProviderInstalled").unwrap().message;
    assert!(
        message.contains("contract v1beta1, which the core provider's v1beta2 still supports"),
        "{message}"
    );
    s.mark_available().await;
    s.wait_for::<InfrastructureProvider>("azure", "Ready", |p| is(p, "Ready", "True")).await;

    // The Docker provider's old kinds stayed, and go with it.
    let docker_crds =
        DOCKER_OLD.iter().chain(DOCKER_NEW).map(|k| format!("{}.infrastructure.capd.test.io", plural(k)));
    let docker_crds: Vec<String> = docker_crds.collect();
    for name in &docker_crds {
        assert!(crds.get_opt(name).await.unwrap().is_some(), "{name} is there after the move");
    }
    s.patch_spec::<InfrastructureProvider>("docker", json!({"crdDeletionPolicy": "Delete"})).await;
    s.api::<InfrastructureProvider>().delete("docker", &Default::default()).await.unwrap();
    s.wait_gone::<InfrastructureProvider>("docker").await;
    for name in &docker_crds {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while crds.get_opt(name).await.unwrap().is_some() {
            assert!(std::time::Instant::now() < deadline, "{name} stays after the provider's deletion");
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }
    s.stop_operator().await;
}
