use std::path::Path;

use butler_repository::{LocalSource, ProviderUrl, RemoteOptions, Repository, Source};

use crate::support::{METADATA, init};

fn write(base: &Path, version: &str, files: &[(&str, &str)]) {
    let folder = base.join("infrastructure-x").join(version);
    std::fs::create_dir_all(&folder).unwrap();
    for (name, body) in files {
        std::fs::write(folder.join(name), body).unwrap();
    }
}

#[tokio::test]
async fn versions_are_semver_folders_and_latest_needs_metadata() {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "v1.0.0",
        &[("metadata.yaml", METADATA), ("infrastructure-components.yaml", "kind: Namespace\n")],
    );
    write(dir.path(), "v1.1.0", &[("infrastructure-components.yaml", "no metadata here\n")]);
    write(dir.path(), "v1.2.0-rc.0", &[("metadata.yaml", METADATA)]);
    write(dir.path(), "notes", &[]);
    let source = LocalSource::new(dir.path(), "infrastructure-x");
    let mut versions: Vec<String> = source.versions().await.unwrap().iter().map(|v| v.to_string()).collect();
    versions.sort();
    assert_eq!(versions, ["v1.0.0", "v1.1.0", "v1.2.0-rc.0"]);
    assert_eq!(
        source.latest().await.unwrap().to_string(),
        "v1.0.0",
        "v1.1.0 has no metadata; the rc is a pre-release"
    );

    let only_rc = tempfile::tempdir().unwrap();
    write(only_rc.path(), "v2.0.0-rc.1", &[("metadata.yaml", METADATA)]);
    assert_eq!(
        LocalSource::new(only_rc.path(), "infrastructure-x").latest().await.unwrap().to_string(),
        "v2.0.0-rc.1"
    );

    init();
    let repo = latest_in(&dir);
    let url = format!("{}/infrastructure-x/latest/infrastructure-components.yaml", dir.path().display());
    let version = repo.resolve(None).await.unwrap();
    assert_eq!(repo.components(&version).await.unwrap(), b"kind: Namespace\n");
    // A folder named after another provider is refused, as clusterctl refuses it.
    let other = Repository::from_url(
        "infrastructure-y",
        &ProviderUrl::parse(&url).unwrap(),
        &RemoteOptions::default(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(other.contains("is not infrastructure-y's"), "{other}");
    let error = repo.file(&version, "cluster-template.yaml").await.unwrap_err().to_string();
    assert!(error.starts_with("cluster-template.yaml was not found in the local repository"), "{error}");

    let empty = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(empty.path().join("infrastructure-x")).unwrap();
    let error = LocalSource::new(empty.path(), "infrastructure-x").latest().await.unwrap_err().to_string();
    assert!(error.ends_with("has no versions"), "{error}");
}

#[tokio::test]
async fn latest_for_a_contract_skips_a_tag_whose_release_is_not_there_yet() {
    init();
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "v1.0.0",
        &[("metadata.yaml", METADATA), ("infrastructure-components.yaml", "kind: Namespace\n")],
    );
    write(
        dir.path(),
        "v1.1.0",
        &[("metadata.yaml", METADATA), ("infrastructure-components.yaml", "kind: Namespace\n")],
    );
    // v1.2.0 is tagged, its release (metadata and components) not published yet.
    write(dir.path(), "v1.2.0", &[]);
    let repo = latest_in(&dir);
    assert_eq!(repo.latest_for_contract("v1beta1").await.unwrap().to_string(), "v1.1.0");
    let none = repo.latest_for_contract("v1beta2").await.unwrap_err().to_string();
    assert!(none.contains("v1beta2"), "{none}");
}

/// The local repository of `infrastructure-x` in `dir`, as a URL naming latest reads it.
fn latest_in(dir: &tempfile::TempDir) -> Repository {
    let url = format!("{}/infrastructure-x/latest/infrastructure-components.yaml", dir.path().display());
    Repository::from_url("infrastructure-x", &ProviderUrl::parse(&url).unwrap(), &RemoteOptions::default())
        .unwrap()
}
