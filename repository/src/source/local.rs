//! A local repository: `{base}/{provider label}/{version}/{file}`.

use std::path::PathBuf;

use super::Source;
use crate::error::{RepositoryError, Result};
use crate::metadata::METADATA_FILE;
use crate::version::{self, Version};

pub struct LocalSource {
    base: PathBuf,
    label: String,
}

impl LocalSource {
    pub fn new(base: impl Into<PathBuf>, label: &str) -> LocalSource {
        LocalSource { base: base.into(), label: label.into() }
    }

    fn folder(&self) -> PathBuf {
        self.base.join(&self.label)
    }
}

impl Source for LocalSource {
    fn location(&self) -> String {
        format!("the local repository {}", self.folder().display())
    }

    /// Every sub-folder whose name is a semantic version.
    async fn versions(&self) -> Result<Vec<Version>> {
        let folder = self.folder();
        let entries = std::fs::read_dir(&folder)
            .map_err(|e| RepositoryError::Io { path: folder.clone(), message: e.to_string() })?;
        Ok(entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .filter_map(|e| Version::parse(&e.file_name().to_string_lossy(), "a folder name").ok())
            .collect())
    }

    /// The newest release that has its metadata file; a pre-release only when there is no
    /// release.
    async fn latest(&self) -> Result<Version> {
        let folder = self.folder();
        let complete: Vec<Version> = self
            .versions()
            .await?
            .into_iter()
            .filter(|v| v.spellings().iter().any(|s| folder.join(s).join(METADATA_FILE).is_file()))
            .collect();
        version::latest(&complete)
            .cloned()
            .ok_or_else(|| RepositoryError::NoVersions { location: self.location() })
    }

    async fn file(&self, version: &Version, name: &str) -> Result<Vec<u8>> {
        let folder = self.folder();
        // Folders may be named with or without the leading v.
        let path =
            version.spellings().iter().map(|v| folder.join(v).join(name)).find(|p| p.is_file()).ok_or_else(
                || RepositoryError::NotFound {
                    what: name.to_string(),
                    location: format!("{} {version}", self.location()),
                },
            )?;
        std::fs::read(&path).map_err(|e| RepositoryError::Io { path, message: e.to_string() })
    }
}
