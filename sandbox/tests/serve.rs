//! `make sandbox` as a user meets it: `butler-sandbox --serve` says where its kubeconfig is,
//! the `$ kubectl` lines of the README and the book run verbatim against it with a real
//! kubectl (those reading a tenant's kubeconfig aside), and SIGTERM (what `kill` and process
//! managers send) stops it as Ctrl-C does.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The `$ kubectl ...` lines of the README's console blocks.
fn readme_kubectl_lines() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).expect("the README");
    readme.lines().filter_map(|l| l.strip_prefix("$ kubectl ")).map(String::from).collect()
}

#[test]
fn the_sandbox_serves_kubectl_and_stops_on_sigterm() {
    let Some(kubectl) = butler_e2e::clients::find("kubectl") else { return };
    let mut child = Command::new(env!("CARGO_BIN_EXE_butler-sandbox"))
        .arg("--serve")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("the sandbox starts");
    let stdout = child.stdout.take().expect("its output");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(path) = line.split("its kubeconfig is ").nth(1) {
                let _ = tx.send(path.split(". In another shell").next().unwrap_or(path).trim().to_string());
            }
        }
    });
    let kubeconfig = match rx.recv_timeout(Duration::from_secs(240)) {
        Ok(path) => path,
        Err(_) => {
            let _ = child.kill();
            panic!("the sandbox never said where its kubeconfig is");
        }
    };
    let lines = readme_kubectl_lines();
    assert!(lines.len() >= 2, "the README's kubectl lines: {lines:?}");
    for line in &lines {
        let args: Vec<&str> = line.split_whitespace().collect();
        let out =
            Command::new(&kubectl).args(&args).env("KUBECONFIG", &kubeconfig).output().expect("kubectl runs");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "kubectl {line}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("NAME"), "kubectl {line} printed no table: {text}");
    }
    // The operator's kinds in a category of their own, as cluster-api-operator's are reachable
    // together (the book's resources page).
    let out = Command::new(&kubectl)
        .args(["get", "butler-providers", "-A"])
        .env("KUBECONFIG", &kubeconfig)
        .output()
        .expect("kubectl runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "get butler-providers: {}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("coreprovider.operator.butlerlabs.dev/")
            && text.contains("infrastructureprovider.operator.butlerlabs.dev/"),
        "{text}"
    );
    // SIGTERM, as a process manager stops it.
    let killed = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill runs");
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().expect("the sandbox's status") {
            assert!(status.success(), "the sandbox ended with {status} on SIGTERM");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the sandbox kept running after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
