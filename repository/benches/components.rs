//! Processing a components file shaped like the Cluster API core provider's: about 1.4 MB, 30
//! CRDs with large schemas, RBAC, a Deployment, webhooks, cert-manager objects and 10
//! variables. Goal: 20 ms or less. A summary line prints the measured mean and the goal.

use std::hint::black_box;
use std::path::PathBuf;

use butler_repository::{ComponentsOptions, ImageOverrides, process_components};
use criterion::Criterion;

/// A CRD with `fields` schema properties, each with a description, like controller-gen's.
fn crd(index: usize, fields: usize) -> String {
    let mut properties = String::new();
    for f in 0..fields {
        properties.push_str(&format!(
            "                  field{f}:\n                    description: |-\n                      Field{f} is one of the many settings of this resource; the controller reads it on\n                      every reconcile and reports what it did in status.conditions.\n                    type: string\n"
        ));
    }
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  annotations:\n    cert-manager.io/inject-ca-from: capi-system/capi-serving-cert\n    controller-gen.kubebuilder.io/version: v0.16.1\n  labels:\n    cluster.x-k8s.io/provider: cluster-api\n  name: kind{index}s.cluster.x-k8s.io\nspec:\n  conversion:\n    strategy: Webhook\n    webhook:\n      clientConfig:\n        service:\n          name: capi-webhook-service\n          namespace: capi-system\n          path: /convert\n      conversionReviewVersions:\n      - v1\n      - v1beta1\n  group: cluster.x-k8s.io\n  names:\n    categories:\n    - cluster-api\n    kind: Kind{index}\n    listKind: Kind{index}List\n    plural: kind{index}s\n    singular: kind{index}\n  scope: Namespaced\n  versions:\n  - name: v1beta1\n    served: true\n    storage: true\n    subresources:\n      status: {{}}\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n              template:\n                type: object\n                properties:\n{properties}"
    )
}

fn components_file() -> String {
    let mut docs = vec!["apiVersion: v1\nkind: Namespace\nmetadata:\n  labels:\n    control-plane: controller-manager\n  name: capi-system\n".to_string()];
    for i in 0..30 {
        docs.push(crd(i, 158));
    }
    docs.push(
        "apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: capi-manager\n  namespace: capi-system\n"
            .into(),
    );
    let rules: String = (0..40).map(|i| format!("- apiGroups:\n  - group{i}.x-k8s.io\n  resources:\n  - things{i}\n  - things{i}/status\n  verbs:\n  - get\n  - list\n  - watch\n  - patch\n")).collect();
    docs.push(format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: capi-manager-role\nrules:\n{rules}"));
    docs.push("apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata:\n  name: capi-manager-rolebinding\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: ClusterRole\n  name: capi-manager-role\nsubjects:\n- kind: ServiceAccount\n  name: capi-manager\n  namespace: capi-system\n".into());
    docs.push("apiVersion: v1\nkind: Service\nmetadata:\n  name: capi-webhook-service\n  namespace: capi-system\nspec:\n  ports:\n  - port: 443\n    targetPort: webhook-server\n  selector:\n    cluster.x-k8s.io/provider: cluster-api\n".into());
    docs.push("apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: capi-controller-manager\n  namespace: capi-system\nspec:\n  replicas: 1\n  selector:\n    matchLabels:\n      cluster.x-k8s.io/provider: cluster-api\n  template:\n    metadata:\n      labels:\n        cluster.x-k8s.io/provider: cluster-api\n    spec:\n      containers:\n      - args:\n        - --leader-elect\n        - --diagnostics-address=${CAPI_DIAGNOSTICS_ADDRESS:=:8443}\n        - --insecure-diagnostics=${CAPI_INSECURE_DIAGNOSTICS:=false}\n        - --feature-gates=MachinePool=${EXP_MACHINE_POOL:=true},ClusterResourceSet=${EXP_CLUSTER_RESOURCE_SET:=true},ClusterTopology=${CLUSTER_TOPOLOGY:=false},RuntimeSDK=${EXP_RUNTIME_SDK:=false},MachineSetPreflightChecks=${EXP_MACHINE_SET_PREFLIGHT_CHECKS:=true},MachineWaitForVolumeDetachConsiderVolumeAttachments=${EXP_MACHINE_WAITFORVOLUMEDETACH_CONSIDER_VOLUMEATTACHMENTS:=true},PriorityQueue=${EXP_PRIORITY_QUEUE:=false}\n        - --bootstrap-token-ttl=${CAPI_BOOTSTRAP_TOKEN_TTL:=15m}\n        command:\n        - /manager\n        image: registry.k8s.io/cluster-api/cluster-api-controller:v1.10.0\n        name: manager\n        ports:\n        - containerPort: 9443\n          name: webhook-server\n      serviceAccountName: capi-manager\n".into());
    docs.push("apiVersion: cert-manager.io/v1\nkind: Certificate\nmetadata:\n  name: capi-serving-cert\n  namespace: capi-system\nspec:\n  dnsNames:\n  - capi-webhook-service.capi-system.svc\n  - capi-webhook-service.capi-system.svc.cluster.local\n  issuerRef:\n    kind: Issuer\n    name: capi-selfsigned-issuer\n  secretName: capi-webhook-service-cert\n".into());
    docs.push("apiVersion: cert-manager.io/v1\nkind: Issuer\nmetadata:\n  name: capi-selfsigned-issuer\n  namespace: capi-system\nspec:\n  selfSigned: {}\n".into());
    let webhooks: String = (0..20).map(|i| format!("- admissionReviewVersions:\n  - v1\n  clientConfig:\n    service:\n      name: capi-webhook-service\n      namespace: capi-system\n      path: /validate-kind{i}\n  failurePolicy: Fail\n  name: validation.kind{i}.cluster.x-k8s.io\n  rules:\n  - apiGroups:\n    - cluster.x-k8s.io\n    apiVersions:\n    - v1beta1\n    operations:\n    - CREATE\n    - UPDATE\n    resources:\n    - kind{i}s\n  sideEffects: None\n")).collect();
    for kind in ["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"] {
        docs.push(format!("apiVersion: admissionregistration.k8s.io/v1\nkind: {kind}\nmetadata:\n  annotations:\n    cert-manager.io/inject-ca-from: capi-system/capi-serving-cert\n  name: capi-{}\nwebhooks:\n{webhooks}", kind.to_lowercase()));
    }
    docs.iter().map(|d| format!("---\n{d}")).collect()
}

fn mean_ms() -> Option<f64> {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target"));
    let path = target.join("criterion/process_components_core_1_4mb/new/estimates.json");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    json["mean"]["point_estimate"].as_f64().map(|ns| ns / 1e6)
}

fn main() {
    let text = components_file();
    let images: ImageOverrides = serde_saphyr::from_str("all:\n  repository: mirror.internal/k8s\n").unwrap();
    let none = |_: &str| None;
    let options = ComponentsOptions {
        what: "cluster-api v1.10.0",
        provider_label: "cluster-api",
        target_namespace: Some("capi-system"),
        images: &images,
        variables: &none,
    };
    let processed = process_components(&text, &options).expect("the benchmark file processes");
    let crds = processed.documents.iter().filter(|d| d.is_outlined()).count();
    assert_eq!(processed.variables.len(), 10);

    let mut criterion = Criterion::default().configure_from_args();
    criterion.bench_function("process_components/core_1_4mb", |b| {
        b.iter(|| process_components(black_box(&text), &options).unwrap().to_yaml())
    });
    criterion.bench_function("process_components/core_1_4mb_objects", |b| {
        b.iter(|| process_components(black_box(&text), &options).unwrap().objects().unwrap())
    });
    criterion.final_summary();
    match mean_ms() {
        Some(ms) => println!(
            "\nprocess a {:.2} MB components file ({} objects, {crds} outlined CRDs, 10 variables) and write YAML: {ms:.2} ms (goal: 20 ms or less: {})",
            text.len() as f64 / 1e6,
            processed.documents.len(),
            if ms <= 20.0 { "met" } else { "NOT met" }
        ),
        None => println!("\n(no estimate written: run with `cargo bench`)"),
    }
}
