//! What the operator's configuration allows beyond a provider's own objects ([`Policy`], from
//! its flags): the namespaces whose provider objects it honours, the ClusterRoles, webhook
//! groups and URLs a release may use, the CRD groups a provider may take over, where local
//! repositories and the operator's credentials may go. [`super::admission`] checks rendered
//! objects against it.

/// What the operator's configuration allows beyond a provider's own objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// ClusterRoles outside the components that their bindings may name.
    pub cluster_roles: Vec<String>,
    /// Kinds beyond those providers ship that a release may create (`GROUP/KIND`, `KIND` for
    /// the core group).
    pub kinds: Vec<String>,
    /// The powers a release's roles may grant ([`super::admission::ceiling::Power`] by its
    /// flag name: `escalate`, `bind`, `impersonate`, `token`, `nodes-proxy`, `wildcard`).
    pub role_powers: Vec<String>,
    /// The ClusterRole whose rules every rule of a release's roles must stay within
    /// (`--role-ceiling`), read live; `None`: every rule but the powers.
    pub role_ceiling: Option<String>,
    /// Whether a release's pods may go beyond Pod Security's baseline (privileged, host
    /// namespaces, paths and ports, added capabilities).
    pub privileged_pods: bool,
    /// API groups outside the provider's CRDs that its webhook configurations may intercept.
    pub webhook_groups: Vec<String>,
    /// URLs (or prefixes ending in `/`) that webhook configurations may call instead of a
    /// Service.
    pub webhook_urls: Vec<String>,
    /// API groups (and the groups under them) besides Cluster API's and Butler's whose CRDs,
    /// made by someone else, a provider may take over.
    pub adopt_crd_groups: Vec<String>,
    /// Where provider objects may name local folders as repositories (none: nowhere).
    pub local_root: Option<std::path::PathBuf>,
    /// Where the operator's own credentials may go for a provider object that names its
    /// repository (`github.com`, `github.com/{owner}`, a GitLab host, a registry).
    pub credential_hosts: Vec<String>,
    /// The namespaces whose provider objects the operator honours; `None`: every namespace.
    /// Whoever may write a provider object has the operator install what it names, with the
    /// operator's rights: the namespaces where only the platform's administrators write.
    pub provider_namespaces: Option<Vec<String>>,
    /// A label that honours a namespace besides [`Policy::provider_namespaces`] when it is
    /// `true` on it (`butlerctl init` and `migrate` set it): who may label namespaces is who
    /// may patch them, the cluster's administrators.
    pub namespace_label: Option<String>,
}

/// The default of `--provider-namespace-label`.
pub const NAMESPACE_LABEL: &str = "operator.butlerlabs.dev/providers";

impl Policy {
    /// Whether provider objects of `namespace` are honoured (`labelled`: it carries
    /// [`Policy::namespace_label`] set to `true`); else why not, for their status.
    pub fn honours(&self, namespace: &str, labelled: bool) -> Result<(), String> {
        let Some(list) = &self.provider_namespaces else { return Ok(()) };
        if list.iter().any(|n| n == namespace) || (labelled && self.namespace_label.is_some()) {
            return Ok(());
        }
        let by_label = match &self.namespace_label {
            Some(label) => format!(
                "label the namespace {label}=true (kubectl label namespace {namespace} {label}=true), "
            ),
            None => String::new(),
        };
        Err(format!(
            "this operator honours provider objects in {} only; create the provider there, {by_label}or start the operator with --provider-namespace {namespace}",
            self.honoured_text()
        ))
    }

    /// The namespaces honoured, in words.
    fn honoured_text(&self) -> String {
        let list = self.provider_namespaces.as_deref().unwrap_or_default().join(", ");
        match &self.namespace_label {
            Some(label) => format!("{list} and namespaces labelled {label}=true"),
            None => list,
        }
    }

    /// The label selector of the namespaces honoured by label, when some are.
    pub fn labelled_selector(&self) -> Option<String> {
        self.provider_namespaces.as_ref()?;
        self.namespace_label.as_ref().map(|label| format!("{label}=true"))
    }
}

/// The namespaces whose provider objects an operator honours (`None`: every one), from its
/// flags: `--provider-namespace` (`*`: every one), else the `--namespace` it manages, else its
/// own (`POD_NAMESPACE`), else every one.
pub fn honoured_namespaces(
    given: &[String],
    managed: Option<&str>,
    own: Option<&str>,
) -> Option<Vec<String>> {
    if given.iter().any(|n| n == "*") {
        return None;
    }
    if !given.is_empty() {
        return Some(given.to_vec());
    }
    managed.or(own).filter(|n| !n.is_empty()).map(|n| vec![n.to_string()])
}

/// The groups (with the groups under them) whose CRDs made outside this operator a provider
/// takes over, as clusterctl does on a move from another installer.
pub const ADOPTABLE_GROUPS: &[&str] = &["cluster.x-k8s.io", "butlerlabs.dev"];

impl Policy {
    /// Whether a provider may take over the CRD `name` of `group` that someone outside this
    /// operator made; else why not.
    pub fn may_adopt(&self, name: &str, group: &str) -> Result<(), String> {
        let under = |root: &str| group == root || group.ends_with(&format!(".{root}"));
        // The operator's own API: a provider that held it could read and rewrite every
        // provider object. No flag widens this.
        if under(crate::api::GROUP) {
            return Err(format!(
                "CustomResourceDefinition {name} is of the operator's own group {}, which no provider takes over; it is left alone",
                crate::api::GROUP
            ));
        }
        let allowed = self.adopt_crd_groups.iter().map(String::as_str);
        if ADOPTABLE_GROUPS.iter().copied().chain(allowed).any(under) {
            return Ok(());
        }
        Err(format!(
            "CustomResourceDefinition {name} exists already, made outside this operator, and its group {group} is not one a provider takes over ({} and the groups under them, or a group --adopt-crd-group names); it is left alone: delete it if the provider should make it, or start the operator with --adopt-crd-group {group}",
            ADOPTABLE_GROUPS.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crds_made_elsewhere_are_taken_over_in_cluster_apis_and_butlers_groups_only() {
        let policy = Policy { adopt_crd_groups: vec!["azure.com".into()], ..Policy::default() };
        for group in [
            "cluster.x-k8s.io",
            "infrastructure.cluster.x-k8s.io",
            "butler.butlerlabs.dev",
            "resources.azure.com",
        ] {
            assert_eq!(policy.may_adopt("things.x", group), Ok(()), "{group}");
        }
        for group in ["cert-manager.io", "evilcluster.x-k8s.io", "x-k8s.io", "notbutlerlabs.dev"] {
            assert!(policy.may_adopt("things.x", group).is_err(), "{group}");
        }
        // Under butlerlabs.dev, and named by the flag: still never the operator's own API.
        let wide = Policy { adopt_crd_groups: vec!["operator.butlerlabs.dev".into()], ..Policy::default() };
        for group in ["operator.butlerlabs.dev", "x.operator.butlerlabs.dev"] {
            assert!(wide.may_adopt("coreproviders.operator.butlerlabs.dev", group).is_err(), "{group}");
        }
        assert_eq!(
            Policy::default().may_adopt("certificates.cert-manager.io", "cert-manager.io").unwrap_err(),
            "CustomResourceDefinition certificates.cert-manager.io exists already, made outside this operator, and its group cert-manager.io is not one a provider takes over (cluster.x-k8s.io, butlerlabs.dev and the groups under them, or a group --adopt-crd-group names); it is left alone: delete it if the provider should make it, or start the operator with --adopt-crd-group cert-manager.io"
        );
    }

    #[test]
    fn provider_objects_are_honoured_in_the_configured_namespaces_only() {
        let everywhere = Policy::default();
        assert_eq!(everywhere.honours("anywhere", false), Ok(()));
        assert_eq!(everywhere.labelled_selector(), None, "every namespace: no label is watched");
        let own = Policy { provider_namespaces: Some(vec!["butler-system".into()]), ..Default::default() };
        assert_eq!(own.honours("butler-system", false), Ok(()));
        assert_eq!(
            own.honours("team-a", true).unwrap_err(),
            "this operator honours provider objects in butler-system only; create the provider there, or start the operator with --provider-namespace team-a"
        );
    }

    #[test]
    fn a_namespace_labelled_for_providers_is_honoured_when_the_operator_selects_the_label() {
        let labelled = Policy {
            provider_namespaces: Some(vec!["butler-system".into()]),
            namespace_label: Some(NAMESPACE_LABEL.into()),
            ..Default::default()
        };
        assert_eq!(labelled.labelled_selector().as_deref(), Some("operator.butlerlabs.dev/providers=true"));
        assert_eq!(labelled.honours("capi-system", true), Ok(()));
        assert_eq!(labelled.honours("butler-system", false), Ok(()));
        assert_eq!(
            labelled.honours("capi-system", false).unwrap_err(),
            "this operator honours provider objects in butler-system and namespaces labelled operator.butlerlabs.dev/providers=true only; create the provider there, label the namespace operator.butlerlabs.dev/providers=true (kubectl label namespace capi-system operator.butlerlabs.dev/providers=true), or start the operator with --provider-namespace capi-system"
        );
    }
}
