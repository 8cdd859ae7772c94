use butler_repository::{
    ClusterVariables, LocalSource, Repository, clusterclass_file, process_template, template_file,
    template_variables,
};
use serde_json::json;

const TEMPLATE: &str = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: ${CLUSTER_NAME}\nspec:\n  topology:\n    class: quick-start\n    version: ${KUBERNETES_VERSION}\n    controlPlane:\n      replicas: ${CONTROL_PLANE_MACHINE_COUNT}\n    workers:\n      machineDeployments:\n      - class: default-worker\n        name: md-0\n        replicas: ${WORKER_MACHINE_COUNT}\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: ${CLUSTER_NAME}-creds\n  namespace: somewhere-else\nstringData:\n  script: |\n    #!/bin/sh\n    echo $HOME ${SSH_KEY:=none}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: ${CLUSTER_NAME}-reader\n";

#[test]
fn templates_are_expanded_and_put_in_the_target_namespace() {
    let common = ClusterVariables {
        cluster_name: "prod-1".into(),
        namespace: "team-a".into(),
        kubernetes_version: Some("v1.30.4".into()),
        control_plane_machine_count: 3,
        worker_machine_count: 2,
    }
    .validate()
    .unwrap();
    let lookup = |name: &str| common.get(name).cloned();
    let template = process_template("cluster-template.yaml", TEMPLATE, Some("team-a"), &lookup).unwrap();
    let objects = template.objects().unwrap();
    assert_eq!(objects[0]["metadata"], json!({"name": "prod-1", "namespace": "team-a"}));
    assert_eq!(objects[0]["spec"]["topology"]["controlPlane"]["replicas"], 3);
    assert_eq!(objects[0]["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"], 2);
    assert_eq!(objects[1]["metadata"]["namespace"], "team-a", "every object goes to the target namespace");
    assert_eq!(
        objects[1]["stringData"]["script"], "#!/bin/sh\necho $HOME none\n",
        "a bare $VAR of a script is left alone"
    );
    assert!(objects[2]["metadata"].get("namespace").is_none(), "cluster-scoped objects get no namespace");
    assert_eq!(template.classes(), ["quick-start"]);
    let names: Vec<String> = template_variables(TEMPLATE).into_iter().map(|v| v.name).collect();
    assert_eq!(
        names,
        [
            "CLUSTER_NAME",
            "CONTROL_PLANE_MACHINE_COUNT",
            "KUBERNETES_VERSION",
            "SSH_KEY",
            "WORKER_MACHINE_COUNT"
        ]
    );

    let error = process_template("t", TEMPLATE, Some("team-a"), &|_| None).unwrap_err().to_string();
    assert_eq!(
        error,
        "the variables CLUSTER_NAME, CONTROL_PLANE_MACHINE_COUNT, KUBERNETES_VERSION, WORKER_MACHINE_COUNT are not set; set them in the environment or in the clusterctl config file"
    );
    assert_eq!(
        (template_file(None), template_file(Some("elastic"))),
        ("cluster-template.yaml".into(), "cluster-template-elastic.yaml".into())
    );
    assert_eq!(clusterclass_file("quick-start"), "clusterclass-quick-start.yaml");
}

/// A template that carries its own namespace and the references to it that clusterctl
/// follows for components.
const WITH_REFERENCES: &str = r#"apiVersion: v1
kind: Namespace
metadata:
  name: demo
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: reader
  namespace: demo
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: reader}
subjects:
- {kind: ServiceAccount, name: agent, namespace: demo}
- {kind: Group, name: auditors}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: demo-webhook
  annotations:
    cert-manager.io/inject-ca-from: demo/demo-cert
webhooks:
- name: v.demo.io
  clientConfig:
    service: {name: demo-svc, namespace: demo, path: /validate}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata:
  name: demo-cert
  namespace: demo
spec:
  dnsNames: [demo-svc.demo.svc, demo-svc.demo.svc.cluster.local, example.com]
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.demo.io
spec:
  group: demo.io
  names: {kind: Widget, plural: widgets}
  scope: Cluster
  conversion:
    strategy: Webhook
    webhook:
      clientConfig:
        service: {name: demo-svc, namespace: demo, path: /convert}
---
apiVersion: demo.io/v1
kind: Widget
metadata:
  name: w
"#;

#[test]
fn templates_follow_the_target_namespace_as_components_do_and_only_when_one_is_given() {
    let template = process_template("t", WITH_REFERENCES, Some("team-a"), &|_| None).unwrap();
    let o = template.objects().unwrap();
    assert_eq!(o[0]["metadata"]["name"], "team-a", "the Namespace object is renamed");
    assert_eq!(o[1]["metadata"]["namespace"], "team-a");
    assert_eq!(
        o[1]["subjects"],
        json!([{"kind": "ServiceAccount", "name": "agent", "namespace": "team-a"}, {"kind": "Group", "name": "auditors"}])
    );
    assert_eq!(o[2]["webhooks"][0]["clientConfig"]["service"]["namespace"], "team-a");
    assert_eq!(o[2]["metadata"]["annotations"]["cert-manager.io/inject-ca-from"], "team-a/demo-cert");
    assert!(o[2]["metadata"].get("namespace").is_none());
    assert_eq!(
        o[3]["spec"]["dnsNames"],
        json!(["demo-svc.team-a.svc", "demo-svc.team-a.svc.cluster.local", "example.com"])
    );
    assert_eq!(o[4]["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"], "team-a");
    assert!(o[5]["metadata"].get("namespace").is_none(), "a kind its CRD declares cluster-scoped");

    let untouched = process_template("t", WITH_REFERENCES, None, &|_| None).unwrap().objects().unwrap();
    let written: Vec<serde_json::Value> = serde_saphyr::from_multiple(WITH_REFERENCES).unwrap();
    assert_eq!(untouched, written, "no target namespace, no change");
}

#[test]
fn the_common_variables_are_validated() {
    let good = ClusterVariables {
        cluster_name: "a.b-c".into(),
        namespace: "ns".into(),
        kubernetes_version: None,
        control_plane_machine_count: 1,
        worker_machine_count: 0,
    };
    let vars = good.validate().unwrap();
    assert_eq!(vars["CONTROL_PLANE_MACHINE_COUNT"], "1");
    assert_eq!(vars["WORKER_MACHINE_COUNT"], "0");
    assert!(
        !vars.contains_key("KUBERNETES_VERSION"),
        "unset, it comes from the environment or the config file"
    );
    let cases = [
        (
            ClusterVariables { cluster_name: "Prod".into(), ..good.clone() },
            "the cluster name \"Prod\" is not valid",
        ),
        (ClusterVariables { namespace: "a.b".into(), ..good.clone() }, "the namespace \"a.b\" is not valid"),
        (
            ClusterVariables { kubernetes_version: Some("1.30".into()), ..good.clone() },
            "the Kubernetes version \"1.30\" is not a semantic version",
        ),
        (
            ClusterVariables { control_plane_machine_count: 0, ..good.clone() },
            "the control-plane machine count must be at least 1, not 0",
        ),
        (
            ClusterVariables { worker_machine_count: -1, ..good.clone() },
            "the worker machine count must be at least 0, not -1",
        ),
    ];
    for (vars, expect) in cases {
        let error = vars.validate().unwrap_err().to_string();
        assert!(error.starts_with(&format!("generate cluster: {expect}")), "{error}");
    }
}

#[tokio::test]
async fn an_overrides_folder_replaces_fetched_files() {
    let repo_dir = tempfile::tempdir().unwrap();
    let overrides = tempfile::tempdir().unwrap();
    for (base, body) in [(repo_dir.path(), "original"), (overrides.path(), "overridden")] {
        let folder = base.join("infrastructure-x").join("v1.0.0");
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(folder.join("infrastructure-components.yaml"), body).unwrap();
    }
    let source = LocalSource::new(repo_dir.path(), "infrastructure-x");
    let repo = Repository::new("infrastructure-x", source, "infrastructure-components.yaml")
        .with_overrides(Some(overrides.path().to_path_buf()));
    assert_eq!(repo.components(&"v1.0.0".parse().unwrap()).await.unwrap(), b"overridden");
}
