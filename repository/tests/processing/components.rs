use butler_repository::{ComponentsOptions, ImageOverrides, ProcessError, process_components};
use serde_json::{Value, json};

const COMPONENTS: &str = r#"
apiVersion: v1
kind: Namespace
metadata:
  name: capx-system
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: xclusters.infrastructure.cluster.x-k8s.io
  annotations:
    cert-manager.io/inject-ca-from: capx-system/capx-serving-cert
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: XCluster, plural: xclusters}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig:
        service: {name: capx-webhook-service, namespace: capx-system, path: /convert}
  versions: []
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: xidentities.infrastructure.cluster.x-k8s.io
spec:
  group: infrastructure.cluster.x-k8s.io
  names: {kind: XIdentity, plural: xidentities}
  scope: Cluster
  versions: []
---
apiVersion: infrastructure.cluster.x-k8s.io/v1beta1
kind: XIdentity
metadata:
  name: default-identity
---
apiVersion: v1
kind: ServiceAccount
metadata:
  name: capx-manager
  namespace: capx-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: capx-manager
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: capx-manager}
subjects:
- {kind: ServiceAccount, name: capx-manager, namespace: capx-system}
- {kind: Group, name: admins, apiGroup: rbac.authorization.k8s.io}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: capx-controller-manager
  namespace: capx-system
spec:
  selector: {matchLabels: {app: capx}}
  template:
    metadata: {labels: {app: capx}}
    spec:
      initContainers:
      - {name: init, image: "busybox:1.36"}
      containers:
      - name: manager
        image: registry.k8s.io/capx/capx-controller:${CAPX_VERSION:=v1.0.0}
        args: ["--namespace=${WATCH_NAMESPACE:=}", "--creds=${CAPX_CREDENTIALS}"]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: capx-validating
  annotations:
    cert-manager.io/inject-ca-from: capx-system/capx-serving-cert
webhooks:
- name: validation.x.io
  clientConfig:
    service: {name: capx-webhook-service, namespace: capx-system, path: /validate}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: capx-serving-cert
  namespace: capx-system
spec:
  dnsNames:
  - capx-webhook-service.capx-system.svc
  - capx-webhook-service.capx-system.svc.cluster.local
  - example.com
  secretName: capx-webhook-service-cert
"#;

/// WATCH_NAMESPACE is set and empty: `${WATCH_NAMESPACE:=}` has no default in clusterctl, so
/// it must be set, and "" is a value.
fn vars(name: &str) -> Option<String> {
    match name {
        "CAPX_CREDENTIALS" => Some("c3VwZXI=".to_string()),
        "WATCH_NAMESPACE" => Some(String::new()),
        _ => None,
    }
}

fn options<'a>(target: Option<&'a str>, images: &'a ImageOverrides) -> ComponentsOptions<'a> {
    ComponentsOptions {
        what: "infrastructure-x v1.0.0",
        provider_label: "infrastructure-x",
        target_namespace: target,
        images,
        variables: &vars,
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("{kind} {name}"))
}

#[test]
fn the_namespace_of_the_yaml_applies_everywhere_and_everything_is_labelled() {
    let images = ImageOverrides::default();
    let components = process_components(COMPONENTS, &options(None, &images)).unwrap();
    assert_eq!(components.target_namespace, "capx-system");
    let objects = components.objects().unwrap();
    let kinds: Vec<&str> = objects.iter().map(|o| o["kind"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "Namespace",
            "CustomResourceDefinition",
            "CustomResourceDefinition",
            "XIdentity",
            "ServiceAccount",
            "ClusterRoleBinding",
            "Deployment",
            "ValidatingWebhookConfiguration",
            "Certificate"
        ],
        "Namespace first, CRDs next, the rest in input order"
    );
    for object in &objects {
        assert_eq!(object["metadata"]["labels"]["cluster.x-k8s.io/provider"], "infrastructure-x");
        assert_eq!(object["metadata"]["labels"]["clusterctl.cluster.x-k8s.io"], "");
    }
    assert!(
        find(&objects, "XIdentity", "default-identity")["metadata"].get("namespace").is_none(),
        "a CRD of the file made it cluster-scoped"
    );
    assert!(find(&objects, "ClusterRoleBinding", "capx-manager")["metadata"].get("namespace").is_none());
    let deployment = find(&objects, "Deployment", "capx-controller-manager");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.k8s.io/capx/capx-controller:v1.0.0");
    assert_eq!(container["args"], json!(["--namespace=", "--creds=c3VwZXI="]));
    assert!(components.warnings.is_empty(), "{:?}", components.warnings);
    let names: Vec<(&str, Option<&str>)> =
        components.variables.iter().map(|v| (v.name.as_str(), v.default.as_deref())).collect();
    assert_eq!(
        names,
        [("CAPX_CREDENTIALS", None), ("CAPX_VERSION", Some("v1.0.0")), ("WATCH_NAMESPACE", None)]
    );
}

#[test]
fn the_callers_namespace_wins_and_every_reference_follows() {
    let images: ImageOverrides = serde_saphyr::from_str(
        "all:\n  repository: mirror.internal/k8s\ninfrastructure-x/capx-controller:\n  tag: v1.0.1\n",
    )
    .unwrap();
    let components = process_components(COMPONENTS, &options(Some("butler-system"), &images)).unwrap();
    let objects = components.objects().unwrap();
    assert_eq!(
        find(&objects, "Namespace", "butler-system")["kind"],
        "Namespace",
        "the Namespace object is renamed"
    );
    assert_eq!(find(&objects, "ServiceAccount", "capx-manager")["metadata"]["namespace"], "butler-system");
    let crd = find(&objects, "CustomResourceDefinition", "xclusters.infrastructure.cluster.x-k8s.io");
    assert_eq!(crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"], "butler-system");
    assert_eq!(
        crd["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "butler-system/capx-serving-cert"
    );
    let binding = find(&objects, "ClusterRoleBinding", "capx-manager");
    assert_eq!(binding["subjects"][0]["namespace"], "butler-system");
    assert!(binding["subjects"][1].get("namespace").is_none(), "subjects without a namespace keep none");
    let webhook = find(&objects, "ValidatingWebhookConfiguration", "capx-validating");
    assert_eq!(webhook["webhooks"][0]["clientConfig"]["service"]["namespace"], "butler-system");
    assert_eq!(
        webhook["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
        "butler-system/capx-serving-cert"
    );
    let certificate = find(&objects, "Certificate", "capx-serving-cert");
    assert_eq!(
        certificate["spec"]["dnsNames"],
        json!([
            "capx-webhook-service.butler-system.svc",
            "capx-webhook-service.butler-system.svc.cluster.local",
            "example.com"
        ])
    );
    let pod = &find(&objects, "Deployment", "capx-controller-manager")["spec"]["template"]["spec"];
    assert_eq!(pod["containers"][0]["image"], "mirror.internal/k8s/capx-controller:v1.0.1");
    assert_eq!(
        pod["initContainers"][0]["image"], "mirror.internal/k8s/busybox:1.36",
        "short names are normalised, then overridden"
    );
}

#[test]
fn a_missing_namespace_object_is_added_and_refusals_name_the_case() {
    let images = ImageOverrides::default();
    let without = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n";
    let error = process_components(without, &options(None, &images)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "infrastructure-x v1.0.0 has no Namespace object, so the target namespace must be given (--target-namespace)"
    );
    let added = process_components(without, &options(Some("ns1"), &images)).unwrap().objects().unwrap();
    assert_eq!(
        (added[0]["kind"].as_str(), added[0]["metadata"]["name"].as_str()),
        (Some("Namespace"), Some("ns1"))
    );
    assert_eq!(added[1]["metadata"]["namespace"], "ns1");

    let two = "kind: Namespace\nmetadata: {name: a}\n---\nkind: Namespace\nmetadata: {name: b}\n";
    let error = process_components(two, &options(Some("x"), &images)).unwrap_err();
    assert_eq!(
        error.to_string(),
        "infrastructure-x v1.0.0 holds 2 Namespace objects (a, b); components may hold one at most"
    );

    let error =
        process_components("kind: ConfigMap\nmetadata:\n  name: ${A}-${B}\n", &options(Some("x"), &images))
            .unwrap_err();
    assert!(matches!(error, ProcessError::MissingVariables(_)));
    assert_eq!(
        error.to_string(),
        "the variables A, B are not set; set them in the environment or in the clusterctl config file"
    );

    let error =
        process_components("kind: X\nmetadata: [1]\n", &options(Some("x"), &images)).unwrap_err().to_string();
    assert_eq!(error, "infrastructure-x v1.0.0: X: metadata is not an object");
    let error = process_components("a: [\n", &options(Some("x"), &images)).unwrap_err().to_string();
    assert!(error.starts_with("document 1 of infrastructure-x v1.0.0 is not valid YAML"), "{error}");
}

#[test]
fn contract_departures_are_reported() {
    let images = ImageOverrides::default();
    let text = "kind: Namespace\nmetadata: {name: capx-system}\n---\nkind: Deployment\nmetadata: {name: d, namespace: kube-system}\nspec:\n  template:\n    spec:\n      containers: [{name: controller, image: x:1}]\n";
    let components = process_components(text, &options(None, &images)).unwrap();
    assert_eq!(
        components.warnings,
        [
            "Deployment d was in namespace kube-system, outside the components' namespace; it is moved to capx-system",
            "Deployment d has no container named manager (it has controller); the clusterctl contract names the controller container manager",
        ]
    );
}

#[test]
fn large_crds_are_processed_from_their_outline_with_the_same_result() {
    // A CRD large enough to be outlined, and the same text made small enough to be parsed
    // whole must come out as the same object.
    let schema: String = (0..600).map(|i| format!("              field{i}:\n                type: string\n                description: field number {i}\n")).collect();
    let crd = format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bigs.x.io\n  annotations:\n    cert-manager.io/inject-ca-from: capx-system/cert\nspec:\n  group: x.io\n  names:\n    kind: Big\n    plural: bigs\n  scope: Namespaced\n  conversion:\n    strategy: Webhook\n    webhook:\n      clientConfig:\n        service:\n          name: svc\n          namespace: capx-system\n  versions:\n  - name: v1\n    served: true\n    storage: true\n    schema:\n      openAPIV3Schema:\n        type: object\n        properties:\n          spec:\n            type: object\n            properties:\n{schema}"
    );
    let images = ImageOverrides::default();
    let text = format!("kind: Namespace\nmetadata: {{name: capx-system}}\n---\n{crd}");
    let processed = process_components(&text, &options(Some("target"), &images)).unwrap();
    assert!(processed.documents[1].is_outlined());
    let outlined = processed.objects().unwrap().remove(1);
    let mut expected: Value = serde_saphyr::from_str(&crd).unwrap();
    expected["metadata"]["labels"] =
        json!({"cluster.x-k8s.io/provider": "infrastructure-x", "clusterctl.cluster.x-k8s.io": ""});
    expected["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] = json!("target/cert");
    expected["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"] = json!("target");
    assert_eq!(outlined, expected);
}

#[test]
fn the_cluster_scoped_kinds_of_clusterctl_get_no_namespace() {
    // clusterctl's list of cluster-level kinds: never put in the target namespace.
    let kinds = [
        ("certificates.k8s.io/v1", "CertificateSigningRequest"),
        ("storage.k8s.io/v1", "VolumeAttachment"),
        ("storage.k8s.io/v1", "CSINode"),
        ("policy/v1beta1", "PodSecurityPolicy"),
        ("scheduling.k8s.io/v1", "PriorityClass"),
    ];
    let mut text = String::from("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: capx-system\n");
    for (api_version, kind) in kinds {
        text.push_str(&format!("---\napiVersion: {api_version}\nkind: {kind}\nmetadata:\n  name: x\n"));
    }
    let images = ImageOverrides::default();
    let objects = process_components(&text, &options(Some("elsewhere"), &images)).unwrap().objects().unwrap();
    for (_, kind) in kinds {
        assert!(find(&objects, kind, "x")["metadata"].get("namespace").is_none(), "{kind} got a namespace");
    }
}

/// A CRD of the release that names its cluster-scoped kind `Deployment` (in its own group) makes
/// no `apps/v1` Deployment cluster-scoped: that one still goes to the target namespace, not the
/// namespace it names (it once stayed in kube-system).
#[test]
fn a_decoy_kind_by_the_name_of_a_namespaced_kind_keeps_nothing_out_of_the_target_namespace() {
    let text = "apiVersion: v1
kind: Namespace
metadata: {name: capx-system}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: deployments.decoy.example.com}
spec:
  group: decoy.example.com
  scope: Cluster
  names: {kind: Deployment, plural: deployments}
  versions: [{name: v1, served: true, storage: true}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: runs-as-gc, namespace: kube-system}
spec: {template: {spec: {serviceAccountName: generic-garbage-collector}}}
---
apiVersion: decoy.example.com/v1
kind: Deployment
metadata: {name: decoy}
";
    let images = ImageOverrides::default();
    let processed = process_components(text, &options(Some("elsewhere"), &images)).unwrap();
    let objects = processed.objects().unwrap();
    let real = objects.iter().find(|o| o["apiVersion"] == "apps/v1").unwrap();
    assert_eq!(real["metadata"]["namespace"], "elsewhere");
    let decoy = objects.iter().find(|o| o["apiVersion"] == "decoy.example.com/v1").unwrap();
    assert!(decoy["metadata"].get("namespace").is_none(), "the decoy kind is cluster-scoped: {decoy}");
}

#[test]
fn an_admission_policy_follows_the_namespace_its_expressions_name() {
    let text = "apiVersion: v1
kind: Namespace
metadata: {name: butler-system}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: confinement}
spec:
  matchConditions:
  - name: the-controller
    expression: \"request.userInfo.username == 'system:serviceaccount:butler-system:butler-controller'\"
  validations:
  - expression: \"object.subjects.all(s, s.__namespace__ == 'butler-system' && s.name != 'butler-system-x')\"
    message: \"binds butler-system/butler-controller only, not butler-system-x\"
";
    let images = ImageOverrides::default();
    let objects = process_components(text, &options(Some("platform"), &images)).unwrap().objects().unwrap();
    let policy = find(&objects, "ValidatingAdmissionPolicy", "confinement");
    assert_eq!(
        policy["spec"]["matchConditions"][0]["expression"],
        "request.userInfo.username == 'system:serviceaccount:platform:butler-controller'"
    );
    assert_eq!(
        policy["spec"]["validations"][0]["expression"],
        "object.subjects.all(s, s.__namespace__ == 'platform' && s.name != 'butler-system-x')",
        "the quoted namespace alone moves"
    );
    assert_eq!(
        policy["spec"]["validations"][0]["message"],
        "binds platform/butler-controller only, not butler-system-x",
        "and a message's namespace/name"
    );
}
