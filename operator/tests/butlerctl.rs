//! `butlerctl generate` run as a user runs it: the binary, a clusterctl config file and a local
//! provider repository in a temp folder, stdout, stderr and the exit code.

use std::path::Path;
use std::process::Command;

const METADATA: &str = "apiVersion: clusterctl.cluster.x-k8s.io/v1alpha3\nkind: Metadata\nreleaseSeries:\n- major: 1\n  minor: 0\n  contract: v1beta1\n- major: 1\n  minor: 1\n  contract: v1beta1\n";

const COMPONENTS: &str = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: demo-system\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: demo-credentials\n  namespace: demo-system\nstringData:\n  region: ${DEMO_REGION}\n  token: ${DEMO_TOKEN:=none}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: demo-controller\n  namespace: demo-system\nspec:\n  selector:\n    matchLabels: {app: demo}\n  template:\n    metadata:\n      labels: {app: demo}\n    spec:\n      containers:\n      - name: manager\n        image: ghcr.io/butlerdotdev/demo:${DEMO_VERSION:=v1.1.0}\n";

const TEMPLATE: &str = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: Cluster\nmetadata:\n  name: ${CLUSTER_NAME}\nspec:\n  topology:\n    class: quick\n    version: ${KUBERNETES_VERSION}\n    controlPlane:\n      replicas: ${CONTROL_PLANE_MACHINE_COUNT}\n    workers:\n      machineDeployments:\n      - {class: worker, name: md-0, replicas: ${WORKER_MACHINE_COUNT}}\n    variables:\n    - name: region\n      value: ${DEMO_REGION}\n";

const ELASTIC: &str = "apiVersion: butler.butlerlabs.dev/v1alpha1\nkind: TenantCluster\nmetadata:\n  name: ${CLUSTER_NAME}\nspec:\n  kubernetesVersion: ${KUBERNETES_VERSION:=v1.30.4}\n  workers:\n    replicas: ${WORKER_MACHINE_COUNT}\n  networking:\n    lbPoolSize: ${LB_POOL_SIZE:=4}\n";

const CLUSTERCLASS: &str = "apiVersion: cluster.x-k8s.io/v1beta1\nkind: ClusterClass\nmetadata:\n  name: quick\nspec:\n  controlPlane:\n    ref: {apiVersion: v1, kind: ConfigMap, name: quick-cp}\n";

/// A temp folder with a local repository of the infrastructure provider `demo` and a config.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(config_extra: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        for (version, files) in [
            ("v1.0.0", vec![("metadata.yaml", METADATA), ("infrastructure-components.yaml", COMPONENTS)]),
            (
                "v1.1.0",
                vec![
                    ("metadata.yaml", METADATA),
                    ("infrastructure-components.yaml", COMPONENTS),
                    ("cluster-template.yaml", TEMPLATE),
                    ("cluster-template-elastic.yaml", ELASTIC),
                    ("clusterclass-quick.yaml", CLUSTERCLASS),
                ],
            ),
        ] {
            let folder = dir.path().join("repo/infrastructure-demo").join(version);
            std::fs::create_dir_all(&folder).unwrap();
            for (name, body) in files {
                std::fs::write(folder.join(name), body).unwrap();
            }
        }
        let config = format!(
            "providers:\n- name: demo\n  type: InfrastructureProvider\n  url: {}/repo/infrastructure-demo/latest/infrastructure-components.yaml\nimages:\n  infrastructure-demo:\n    repository: mirror.internal/demo\nDEMO_REGION: from-config\n{config_extra}",
            dir.path().display()
        );
        std::fs::write(dir.path().join("clusterctl.yaml"), config).unwrap();
        Setup { dir }
    }

    fn config(&self) -> String {
        self.dir.path().join("clusterctl.yaml").display().to_string()
    }

    /// Runs butlerctl with a clean environment plus `env`.
    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
        let output = Command::new(env!("CARGO_BIN_EXE_butlerctl"))
            .args(args)
            .env_clear()
            .env("HOME", self.dir.path())
            .env("GOPROXY", "off")
            .envs(env.iter().copied())
            .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
            .output()
            .unwrap();
        (
            output.status.code().unwrap_or(-1),
            String::from_utf8(output.stdout).unwrap(),
            String::from_utf8(output.stderr).unwrap(),
        )
    }
}

fn documents(yaml: &str) -> Vec<serde_json::Value> {
    serde_saphyr::from_multiple::<serde_json::Value>(yaml)
        .unwrap()
        .into_iter()
        .filter(|d| !d.is_null())
        .collect()
}

#[test]
fn generate_provider_processes_the_latest_components() {
    let setup = Setup::new("");
    let (code, stdout, stderr) =
        setup.run(&["generate", "provider", "--infrastructure", "demo", "--config", &setup.config()], &[]);
    assert_eq!(code, 0, "{stderr}");
    let objects = documents(&stdout);
    assert_eq!(objects.len(), 3);
    assert_eq!(objects[1]["stringData"], serde_json::json!({"region": "from-config", "token": "none"}));
    assert_eq!(objects[1]["metadata"]["labels"]["cluster.x-k8s.io/provider"], "infrastructure-demo");
    let image = &objects[2]["spec"]["template"]["spec"]["containers"][0]["image"];
    assert_eq!(image, "mirror.internal/demo/demo:v1.1.0");

    // The environment wins over the file, a given version and namespace are used.
    let (code, stdout, stderr) = setup.run(
        &["generate", "provider", "-i", "demo:v1.0.0", "-n", "butler-system", "--config", &setup.config()],
        &[("DEMO_REGION", "from-env"), ("DEMO_VERSION", "v1.0.0")],
    );
    assert_eq!(code, 0, "{stderr}");
    let objects = documents(&stdout);
    assert_eq!(objects[0]["metadata"]["name"], "butler-system");
    assert_eq!(objects[1]["metadata"]["namespace"], "butler-system");
    assert_eq!(objects[1]["stringData"]["region"], "from-env");
    assert_eq!(
        objects[2]["spec"]["template"]["spec"]["containers"][0]["image"],
        "mirror.internal/demo/demo:v1.0.0"
    );

    // cluster-api-operator's forms: NAME:NAMESPACE:VERSION and NAME::VERSION.
    let env = [("DEMO_REGION", "from-env"), ("DEMO_VERSION", "v1.0.0")];
    let (code, stdout, stderr) = setup
        .run(&["generate", "provider", "-i", "demo:capd-system:v1.0.0", "--config", &setup.config()], &env);
    assert_eq!(code, 0, "{stderr}");
    let objects = documents(&stdout);
    assert_eq!(objects[1]["metadata"]["namespace"], "capd-system");
    assert!(
        objects[2]["spec"]["template"]["spec"]["containers"][0]["image"]
            .as_str()
            .unwrap()
            .ends_with(":v1.0.0")
    );
    let (code, stdout, stderr) =
        setup.run(&["generate", "provider", "-i", "demo::v1.0.0", "--config", &setup.config()], &env);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("mirror.internal/demo/demo:v1.0.0"), "{stdout}");
    let (code, _, stderr) =
        setup.run(&["generate", "provider", "-i", "demo:a:b:c", "--config", &setup.config()], &env);
    assert_eq!(code, 2, "a command-line error");
    assert!(stderr.contains("NAME:NAMESPACE:VERSION or NAME::VERSION"), "{stderr}");
}

#[test]
fn list_variables_prints_what_clusterctl_prints() {
    let setup = Setup::new("");
    let (code, stdout, _) = setup.run(
        &[
            "generate",
            "provider",
            "--infrastructure",
            "demo",
            "--list-variables",
            "--config",
            &setup.config(),
        ],
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(
        stdout,
        "Required Variables:\n  - DEMO_REGION\n\nOptional Variables:\n  - DEMO_TOKEN   (defaults to \"none\")\n  - DEMO_VERSION (defaults to \"v1.1.0\")\n\n"
    );

    let (code, stdout, stderr) = setup.run(
        &[
            "generate",
            "cluster",
            "dev",
            "--infrastructure",
            "demo",
            "--list-variables",
            "--config",
            &setup.config(),
        ],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(
        stdout,
        "Required Variables:\n  - DEMO_REGION\n  - KUBERNETES_VERSION\n\nOptional Variables:\n  - CLUSTER_NAME                (defaults to \"dev\")\n  - CONTROL_PLANE_MACHINE_COUNT (defaults to 1)\n  - WORKER_MACHINE_COUNT        (defaults to 0)\n\n"
    );
}

#[test]
fn generate_cluster_expands_the_template_and_adds_its_cluster_class() {
    let setup = Setup::new("");
    let args = [
        "generate",
        "cluster",
        "prod-1",
        "-i",
        "demo",
        "-n",
        "team-a",
        "--kubernetes-version",
        "v1.30.4",
        "--worker-machine-count",
        "3",
    ];
    let (code, stdout, stderr) = setup.run(&[&args[..], &["--config", &setup.config()]].concat(), &[]);
    assert_eq!(code, 0, "{stderr}");
    let objects = documents(&stdout);
    assert_eq!(objects[0]["kind"], "ClusterClass", "the ClusterClass comes first");
    assert_eq!(objects[0]["metadata"]["namespace"], "team-a");
    assert_eq!(objects[1]["metadata"], serde_json::json!({"name": "prod-1", "namespace": "team-a"}));
    assert_eq!(objects[1]["spec"]["topology"]["version"], "v1.30.4");
    assert_eq!(objects[1]["spec"]["topology"]["controlPlane"]["replicas"], 1);
    assert_eq!(objects[1]["spec"]["topology"]["workers"]["machineDeployments"][0]["replicas"], 3);

    let (code, stdout, stderr) = setup.run(
        &["generate", "cluster", "small", "-i", "demo", "--flavor", "elastic", "--config", &setup.config()],
        &[],
    );
    assert_eq!(code, 0, "{stderr}");
    let objects = documents(&stdout);
    assert_eq!(objects[0]["spec"]["networking"]["lbPoolSize"], 4);
    assert_eq!(objects[0]["metadata"]["namespace"], "default");

    let file = setup.dir.path().join("mine.yaml");
    std::fs::write(&file, ELASTIC).unwrap();
    let (code, stdout, _) = setup.run(
        &["generate", "cluster", "own", "--from", file.to_str().unwrap(), "--config", &setup.config()],
        &[],
    );
    assert_eq!(code, 0);
    assert_eq!(documents(&stdout)[0]["metadata"]["name"], "own");
}

#[test]
fn errors_go_to_stderr_with_a_failing_exit_code() {
    let setup = Setup::new("");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["generate", "provider", "--infrastructure", "nonesuch"],
            "Error: no InfrastructureProvider named \"nonesuch\" is known",
        ),
        (
            vec!["generate", "cluster", "Bad_Name", "-i", "demo"],
            "Error: generate cluster: the cluster name \"Bad_Name\" is not valid",
        ),
        (
            vec!["generate", "cluster", "ok"],
            "Error: name the infrastructure provider with --infrastructure NAME[:VERSION], or give a template with --from",
        ),
        (
            vec!["generate", "cluster", "ok", "-i", "demo", "--control-plane-machine-count", "0"],
            "Error: generate cluster: the control-plane machine count must be at least 1, not 0",
        ),
        (
            vec!["generate", "cluster", "ok", "-i", "demo", "--flavor", "huge"],
            "Error: cluster-template-huge.yaml was not found in the local repository",
        ),
        (
            vec!["generate", "provider", "-i", "demo:v9.9.9"],
            "Error: infrastructure-components.yaml was not found",
        ),
    ];
    for (args, expect) in cases {
        let (code, stdout, stderr) = setup.run(&[&args[..], &["--config", &setup.config()]].concat(), &[]);
        // A command line that names no provider is wrong as typed: 2, as for clap's own errors.
        let wanted = if expect.starts_with("Error: name the infrastructure provider") { 2 } else { 1 };
        assert_eq!(code, wanted, "{args:?}");
        assert!(stdout.is_empty(), "{args:?}: {stdout}");
        assert!(stderr.starts_with(expect), "{args:?}: {stderr}");
    }
    let no_region = Setup::new("");
    std::fs::write(no_region.dir.path().join("clusterctl.yaml"), format!("providers:\n- name: demo\n  type: InfrastructureProvider\n  url: {}/repo/infrastructure-demo/latest/infrastructure-components.yaml\n", no_region.dir.path().display())).unwrap();
    let (code, _, stderr) =
        no_region.run(&["generate", "provider", "-i", "demo", "--config", &no_region.config()], &[]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr,
        "Error: the variable DEMO_REGION is not set; set it in the environment or in the clusterctl config file\n"
    );
}

#[test]
fn publish_pushes_a_release_that_generate_reads_back_from_the_registry() {
    // Over HTTPS with the registry's own CA: credentials never travel over plain HTTP.
    let registry = butler_e2e::registry::Registry::start_tls(Some(("ci", "registry-secret")));
    let ca = registry.ca_pem.clone().expect("a CA");
    let setup = Setup::new("");
    let env = [("OCI_USERNAME", "ci"), ("OCI_PASSWORD", "registry-secret"), ("OCI_CA_CERT", &ca)];
    let release = setup.dir.path().join("repo/infrastructure-demo/v1.1.0");
    let target = format!("oci://{}/capi/infrastructure-demo:v1.1.0", registry.addr);
    let (code, stdout, stderr) = setup.run(
        &["publish", &target, "--provider", "infrastructure-demo", "--from", &release.display().to_string()],
        &env,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with(&format!("infrastructure-demo {target}@sha256:")), "{stdout}");

    // Generate from the registry, the credentials in the config file this time, and compare
    // with what the local repository gives.
    let config = setup.dir.path().join("oci.yaml");
    std::fs::write(
        &config,
        format!(
            "providers:\n- name: demo\n  type: InfrastructureProvider\n  url: oci://{}/capi/infrastructure-demo\nOCI_USERNAME: ci\nOCI_PASSWORD: registry-secret\nDEMO_REGION: from-config\n",
            registry.addr
        ),
    )
    .unwrap();
    let (code, from_registry, stderr) = setup.run(
        &["generate", "provider", "-i", "demo", "--config", &config.display().to_string()],
        &[("OCI_CA_CERT", &ca)],
    );
    assert_eq!(code, 0, "{stderr}");
    let local = setup.dir.path().join("local.yaml");
    let url = format!("{}/infrastructure-components.yaml", release.display()).replace("/v1.1.0/", "/latest/");
    std::fs::write(&local, format!("providers:\n- name: demo\n  type: InfrastructureProvider\n  url: {url}\nDEMO_REGION: from-config\n")).unwrap();
    let (code, from_folder, stderr) =
        setup.run(&["generate", "provider", "-i", "demo", "--config", &local.display().to_string()], &[]);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(from_registry, from_folder);

    // Every provider of this build at once; without credentials the registry refuses.
    let prefix = format!("oci://{}/butler:{}", registry.addr, butler_repository::EMBEDDED_VERSION);
    let (code, stdout, stderr) = setup.run(&["publish", &prefix, "--all"], &env);
    assert_eq!(code, 0, "{stderr}");
    assert_eq!(stdout.lines().count(), butler_repository::embedded_providers().len(), "{stdout}");
    assert!(stdout.contains(&format!(
        "infrastructure-harvester oci://{}/butler/infrastructure-harvester:",
        registry.addr
    )));
    let (code, _, stderr) = setup.run(&["publish", &prefix, "--all"], &[("OCI_CA_CERT", &ca)]);
    assert_eq!(code, 1);
    assert!(stderr.contains("set OCI_USERNAME and OCI_PASSWORD"), "{stderr}");
}

#[test]
fn migrate_from_file_converts_their_objects_without_a_cluster() {
    let setup = Setup::new("");
    // Their quick start names no versions: refused, naming each and how to fill them in.
    let (code, _, stderr) =
        setup.run(&["migrate", "--from-file", "tests/capi-operator-objects/quick-start.yaml"], &[]);
    assert_ne!(code, 0, "{stderr}");
    assert!(
        stderr.contains("these provider objects say no version: CoreProvider capi-system/cluster-api")
            && stderr.contains("--versions-from-cluster"),
        "{stderr}"
    );
    let (code, stdout, stderr) =
        setup.run(&["migrate", "--from-file", "tests/capi-operator-objects/v1alpha1.yaml"], &[]);
    assert_eq!(code, 0, "{stderr}");
    let out = documents(&stdout);
    assert!(
        out.iter()
            .all(|d| !d["apiVersion"].as_str().unwrap_or_default().starts_with("operator.cluster.x-k8s.io"))
    );
    assert!(stderr.contains("3 provider objects converted"), "{stderr}");
}

#[test]
fn the_kubeconfig_context_flag_has_clusterctls_name_too() {
    let setup = Setup::new("");
    let kubeconfig = setup.dir.path().join("kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\nclusters:\n- name: a\n  cluster: {server: 'https://127.0.0.1:1'}\ncontexts:\n- name: a\n  context: {cluster: a, user: a}\ncurrent-context: a\nusers:\n- name: a\n  user: {token: t}\n").unwrap();
    let kubeconfig = kubeconfig.to_str().unwrap();
    for flag in ["--context", "--kubeconfig-context"] {
        let (code, _, stderr) =
            setup.run(&["describe", "providers", "--kubeconfig", kubeconfig, flag, "elsewhere"], &[]);
        assert_ne!(code, 0);
        assert!(stderr.contains("cannot use the context \"elsewhere\""), "{flag}: {stderr}");
    }
}
