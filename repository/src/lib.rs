//! `butler-repository`: a clusterctl-compatible provider repository client.
//!
//! It reads provider repositories (GitHub releases, GitLab generic packages, local folders and
//! in-cluster ConfigMaps) and turns components YAML and cluster templates into objects the way
//! clusterctl does. It knows nothing of the operator.
