//! The reference clients, a real kubectl (v1.35.2) and helm (v4.1.4) that no one here wrote,
//! run as a user runs them against a scenario's cluster. `make test-tools` puts them in the
//! build's `target/test-tools`; `BUTLER_TEST_TOOLS` names another folder. Under CI they must
//! be there (a missing client fails the test); elsewhere a test without them says so and skips.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::Cluster;

/// The folder of the reference clients.
pub fn folder() -> PathBuf {
    match std::env::var_os("BUTLER_TEST_TOOLS") {
        Some(folder) => PathBuf::from(folder),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-tools"),
    }
}

/// The path of one client (`kubectl` or `helm`), or `None` (with the reason printed) where it
/// is missing outside CI. Under CI a missing client is a failure.
pub fn find(name: &str) -> Option<PathBuf> {
    let path = folder().join(name);
    if path.is_file() {
        return Some(path);
    }
    let why = format!("{} is missing: `make test-tools` installs the reference clients", path.display());
    assert!(std::env::var_os("CI").is_none(), "{why}");
    eprintln!("skipped: {why}");
    None
}

/// A client run against `cluster`, in a folder of its own for its caches and configuration.
pub struct Client {
    binary: PathBuf,
    kubeconfig: PathBuf,
    home: PathBuf,
    /// HTTPS in front of the in-memory server: kubectl sends a token (`--token`, a
    /// ServiceAccount's) only to an HTTPS server, as client-go sends credentials.
    _front: Option<crate::tls::TlsFront>,
}

/// A kubeconfig for the in-memory server behind its HTTPS front, as an administrator's.
pub fn https_kubeconfig(address: &str, ca_pem: &str, token: &str) -> String {
    use base64::Engine;
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: memory\n  cluster:\n    server: https://{address}\n    certificate-authority-data: {ca}\ncontexts:\n- name: memory\n  context:\n    cluster: memory\n    user: admin\n    namespace: default\ncurrent-context: memory\nusers:\n- name: admin\n  user:\n    token: {token}\n"
    )
}

/// What a client run printed.
#[derive(Debug)]
pub struct Run {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Client {
    /// `name` (`kubectl` or `helm`) against `cluster`, or `None` where it is missing (see
    /// [`find`]). [`Client::run`] waits for the process: call it from a multi-thread runtime,
    /// so that the in-memory server and its HTTPS front go on answering meanwhile.
    pub async fn new(name: &str, cluster: &Cluster) -> Option<Client> {
        let binary = find(name)?;
        let home = std::env::temp_dir().join(format!("butler-{name}-{}", cluster.unique("home")));
        std::fs::create_dir_all(&home).expect("the temp folder is writable");
        let Some(server) = cluster.server() else {
            return Some(Client { binary, kubeconfig: cluster.kubeconfig(), home, _front: None });
        };
        let upstream = server.url().trim_start_matches("http://").parse().expect("the server's address");
        let front = crate::tls::TlsFront::start(upstream).await;
        let kubeconfig = home.join("kubeconfig");
        let text = https_kubeconfig(&front.addr, &front.ca_pem, &server.administrator_token());
        std::fs::write(&kubeconfig, text).expect("the temp folder is writable");
        Some(Client { binary, kubeconfig, home, _front: Some(front) })
    }

    /// Runs the client with `args` (and `input` on its standard input), as a user would.
    pub fn run(&self, args: &[&str], input: Option<&str>) -> Run {
        use std::io::Write;
        let mut command = Command::new(&self.binary);
        command
            .args(args)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("KUBECONFIG", &self.kubeconfig)
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .current_dir(&self.home)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("{}: {e}", self.binary.display()));
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(input.unwrap_or_default().as_bytes());
        }
        let Output { status, stdout, stderr } = child.wait_with_output().expect("the client ends");
        Run {
            success: status.success(),
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }

    /// Runs the client and fails the test, with what it printed, unless it succeeds.
    pub fn ok(&self, args: &[&str], input: Option<&str>) -> String {
        let run = self.run(args, input);
        assert!(
            run.success,
            "{} {}: failed\nstdout: {}\nstderr: {}",
            self.binary.display(),
            args.join(" "),
            run.stdout,
            run.stderr
        );
        run.stdout
    }

    /// The client's own folder (its HOME), where a test may write files it passes.
    pub fn home(&self) -> &Path {
        &self.home
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.home);
    }
}
