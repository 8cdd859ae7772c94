//! The repository sources against servers that answer like the real ones: wiremock on
//! 127.0.0.1 for GitHub (GitLab's, over plain HTTP, are the source's own unit tests), temp
//! folders for local repositories, and the in-memory API server for ConfigMaps.

mod configmap;
mod fake_github;
mod github;
mod local;
mod oci;
mod oci_refresh;
mod support;
