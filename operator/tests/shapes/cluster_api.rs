//! Cluster API's own releases, in the shapes its release process renders them (written here
//! from those facts, never copied): a core over 1 MiB, two dozen CRDs with conversion webhooks
//! whose CA cert-manager injects, cert-manager Issuers and Certificates, webhook
//! configurations, an aggregated manager ClusterRole with `rules: []`, a provider that renames
//! its kinds between two releases, and one that stays on v1beta1 under a v1beta2 core. Pure
//! text: the lifecycle scenarios publish them, and the memory benchmark installs them.

/// The plural of a kind, as Cluster API's CRDs name theirs.
pub fn plural_of(kind: &str) -> String {
    format!("{}s", kind.to_ascii_lowercase())
}

/// A CRD as Cluster API's releases ship one: labelled with its provider and the contract it
/// abides by, its CA injected by cert-manager from the provider's serving certificate
/// (`cert-manager.io/inject-ca-from`), conversion by the provider's webhook Service, two
/// versions (the older served, the newer stored) whose spec schemas describe `properties`
/// fields at the length controller-gen describes them (none: any fields).
pub fn converted_crd(provider: &str, group: &str, kind: &str, contract: &str, properties: usize) -> String {
    let plural = plural_of(kind);
    let singular = kind.to_ascii_lowercase();
    let spec = match properties {
        0 => "            spec: {type: object, x-kubernetes-preserve-unknown-fields: true}\n".to_string(),
        n => {
            let fields: String = (0..n)
                .map(|i| {
                    format!(
                        "                    field{i:03}:\n                      type: string\n                      description: Field {i} of the {kind} spec, described at the length Cluster API's generated schemas describe theirs, with the defaults, the validation and what the controller does with it when it changes ({group}).\n"
                    )
                })
                .collect();
            format!("            spec:\n              type: object\n              properties:\n{fields}")
        }
    };
    let version = |name: &str, storage: bool| {
        format!(
            "    - name: {name}
      served: true
      storage: {storage}
      subresources: {{status: {{}}}}
      schema:
        openAPIV3Schema:
          type: object
          properties:
{spec}            status:
              type: object
              x-kubernetes-preserve-unknown-fields: true
"
        )
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: {plural}.{group}
  annotations:
    cert-manager.io/inject-ca-from: {provider}-system/{provider}-serving-cert
    controller-gen.kubebuilder.io/version: v0.17.2
  labels:
    cluster.x-k8s.io/provider: {provider}
    cluster.x-k8s.io/{contract}: {contract}
spec:
  group: {group}
  scope: Namespaced
  names: {{kind: {kind}, listKind: {kind}List, plural: {plural}, singular: {singular}, categories: [cluster-api]}}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1, v1beta1]
      clientConfig:
        service: {{name: {provider}-webhook-service, namespace: {provider}-system, path: /convert}}
  versions:
{}{}",
        version("v1alpha4", false),
        version("v1beta1", true)
    )
}

/// Cluster API's series: 1.10 abides by v1beta1, 1.11 by v1beta2.
pub const CAPI_METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
kind: Metadata
releaseSeries:
  - {major: 1, minor: 10, contract: v1beta1}
  - {major: 1, minor: 11, contract: v1beta2}
";

/// An infrastructure provider still on v1beta1 (as Azure's was through v1.26).
pub const LAGGING_METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3
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
pub const DOCKER_OLD: &[&str] =
    &["DockerCluster", "DockerClusterTemplate", "DockerMachine", "DockerMachineTemplate"];
pub const DOCKER_NEW: &[&str] = &["DevCluster", "DevClusterTemplate", "DevMachine", "DevMachineTemplate"];
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
    let resources: Vec<String> = kinds.iter().map(|k| plural_of(k)).collect();
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

/// One release of the fixture: the repository label it is published under, its components
/// file, version, components and metadata.
pub struct Release {
    pub label: &'static str,
    pub file: &'static str,
    pub version: &'static str,
    pub components: String,
    pub metadata: &'static str,
}

/// The four Cluster API providers (core, kubeadm bootstrap and control plane, Docker) at
/// v1.10.10 (contract v1beta1) and v1.11.0 (v1beta2), and Azure's lagging v1.26.0.
pub fn releases() -> Vec<Release> {
    let mut all = Vec::new();
    for (version, contract) in [("v1.10.10", "v1beta1"), ("v1.11.0", "v1beta2")] {
        let docker =
            Shape { short: "capd", group: "infrastructure.capd.test.io", kinds: &[], properties: 20 };
        let docker_kinds = if contract == "v1beta1" { DOCKER_OLD } else { DOCKER_NEW };
        let of = |label, file, shape: &Shape, kinds: &[&str]| Release {
            label,
            file,
            version,
            components: release(shape, kinds, version, contract),
            metadata: CAPI_METADATA,
        };
        all.push(of("cluster-api", "core-components.yaml", &CORE, CORE.kinds));
        all.push(of("bootstrap-kubeadm", "bootstrap-components.yaml", &BOOTSTRAP, BOOTSTRAP.kinds));
        all.push(of(
            "control-plane-kubeadm",
            "control-plane-components.yaml",
            &CONTROL_PLANE,
            CONTROL_PLANE.kinds,
        ));
        all.push(of("infrastructure-docker", "infrastructure-components.yaml", &docker, docker_kinds));
    }
    all.push(Release {
        label: "infrastructure-azure",
        file: "infrastructure-components.yaml",
        version: "v1.26.0",
        components: release(&LAGGING, LAGGING.kinds, "v1.26.0", "v1beta1"),
        metadata: LAGGING_METADATA,
    });
    all
}
