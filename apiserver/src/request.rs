//! One write as admission sees it (webhooks, policies and their CEL): what is written, where,
//! and by whom.

/// One write, as the webhooks see it.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    pub operation: &'static str,
    pub group: String,
    pub version: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub kind: String,
    pub namespaced: bool,
    pub namespace: Option<String>,
    pub name: String,
    /// Who writes, as authenticated, and the groups the API server gives them.
    pub user: String,
    pub groups: Vec<String>,
    pub dry_run: bool,
}
