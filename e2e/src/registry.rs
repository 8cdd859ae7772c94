//! A real OCI registry for tests: Debian's `docker-registry` (the reference distribution
//! server) on 127.0.0.1, with its own storage folder, optionally behind a user and password
//! and optionally over HTTPS with a CA of its own, stopped when dropped. `.ci/run` installs the package when it is missing.

use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const BINARY: &str = "docker-registry";

pub struct Registry {
    /// `127.0.0.1:{port}`.
    pub addr: String,
    /// The CA (PEM) of its serving certificate, when it serves HTTPS.
    pub ca_pem: Option<String>,
    child: Child,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry over plain HTTP; with `credentials`, every request needs them
    /// (htpasswd).
    pub fn start(credentials: Option<(&str, &str)>) -> Registry {
        Registry::start_with(credentials, false)
    }

    /// The same over HTTPS, its certificate for 127.0.0.1 signed by a CA of its own
    /// ([`Registry::ca_pem`]).
    pub fn start_tls(credentials: Option<(&str, &str)>) -> Registry {
        Registry::start_with(credentials, true)
    }

    fn start_with(credentials: Option<(&str, &str)>, tls: bool) -> Registry {
        let dir = tempfile::tempdir().expect("a temporary folder");
        let port = TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("a free port").port();
        let addr = format!("127.0.0.1:{port}");
        let auth = match credentials {
            Some((user, password)) => {
                let hash = bcrypt::hash(password, 4).expect("bcrypt hashes");
                let htpasswd = dir.path().join("htpasswd");
                std::fs::write(&htpasswd, format!("{user}:{hash}\n")).expect("htpasswd written");
                format!("auth:\n  htpasswd:\n    realm: test\n    path: {}\n", htpasswd.display())
            }
            None => String::new(),
        };
        let mut ca_pem = None;
        let mut tls_config = String::new();
        if tls {
            use butler_runtime::webhook::certificates::{issue, new_ca};
            let now = jiff::Timestamp::now();
            let ca = new_ca("test registry CA", now, 1).expect("a CA");
            let serving = issue(&ca, &["127.0.0.1".to_string()], now, 1).expect("a serving certificate");
            let (cert, key) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
            std::fs::write(&cert, &serving.cert).expect("certificate written");
            std::fs::write(&key, &serving.key).expect("key written");
            tls_config = format!("  tls:\n    certificate: {}\n    key: {}\n", cert.display(), key.display());
            ca_pem = Some(ca.cert);
        }
        let config = format!(
            "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: false\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n{tls_config}{auth}",
            dir.path().join("storage").display()
        );
        let config_path = dir.path().join("config.yml");
        std::fs::write(&config_path, config).expect("config written");
        let log = dir.path().join("registry.log");
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(BINARY)
            .arg("serve")
            .arg(&config_path)
            .stdout(out.try_clone().expect("log file"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start {BINARY} ({e}): install Debian's docker-registry package (.ci/run does)")
            });
        let mut registry = Registry { addr, ca_pem, child, log, _dir: dir };
        registry.wait_until_up();
        registry
    }

    fn wait_until_up(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{BINARY} exited ({status}): {}", self.log_text());
            }
            // Up when it accepts connections and says it listens (the probe speaks no TLS).
            if TcpStream::connect(&self.addr).is_ok() && self.log_text().contains("listening on") {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("{BINARY} did not answer on {} within 30 s: {}", self.addr, self.log_text());
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Requests so far whose request line contains `part` (`/blobs/`, `/manifests/`).
    pub fn requests_to(&self, part: &str) -> usize {
        self.log_text().lines().filter(|l| is_request(l) && l.contains(part)).count()
    }

    /// The last `n` requests of the access log, for messages.
    pub fn log_tail(&self, n: usize) -> String {
        let lines: Vec<String> =
            self.log_text().lines().filter(|l| is_request(l)).map(String::from).collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// Requests the registry has answered so far (its access log).
    pub fn requests(&self) -> usize {
        self.log_text().lines().filter(|l| is_request(l)).count()
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A line of the access log (the combined log format quotes the request line).
fn is_request(line: &str) -> bool {
    ["\"GET ", "\"HEAD ", "\"PUT ", "\"POST ", "\"PATCH ", "\"DELETE "].iter().any(|m| line.contains(m))
}
