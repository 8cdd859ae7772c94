//! Where the controller reads Secrets: by name, and only in namespaces where its ServiceAccount
//! is bound to the ClusterRole `butler-controller-secrets` (`get` on Secrets). The Team
//! controller binds it in each team namespace (where ProviderConfigs keep their credentials and
//! TenantClusters their kubeconfigs), the components bind it in the controller's own namespace
//! (platform ProviderConfigs, the webhook certificate), and a platform binds it wherever else
//! it keeps such Secrets. No rule lets the controller list or watch Secrets, or read them
//! across the cluster, so a Secret nobody named stays out of its reach.

use butler_runtime::error::describe;
use k8s_openapi::api::rbac::v1::{RoleRef, Subject};

/// The controller's own access to Secrets: the ClusterRole it binds in team namespaces and the
/// ServiceAccount it binds it to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretReader {
    /// The ClusterRole granting `get` on Secrets (the components ship
    /// [`SecretReader::DEFAULT_ROLE`]; the controller may bind it and no other of its kind).
    pub cluster_role: String,
    /// The namespace of the controller's ServiceAccount.
    pub namespace: String,
    /// The controller's ServiceAccount.
    pub service_account: String,
}

impl SecretReader {
    /// The components' ClusterRole, and the name of its binding in each team namespace.
    pub const DEFAULT_ROLE: &'static str = "butler-controller-secrets";
    pub const BINDING: &'static str = "butler-controller-secrets";

    /// The binding's role.
    pub fn role_ref(&self) -> RoleRef {
        crate::team::rbac::role_ref("ClusterRole", &self.cluster_role)
    }

    /// The binding's subject: the controller's ServiceAccount.
    pub fn subjects(&self) -> Vec<Subject> {
        vec![Subject {
            api_group: None,
            kind: "ServiceAccount".into(),
            name: self.service_account.clone(),
            namespace: Some(self.namespace.clone()),
        }]
    }

    /// Why a Secret of `namespace` could not be read: the API server's answer and, when it
    /// refused, where the controller may read and how to let it read there.
    pub fn cannot_read(&self, namespace: &str, error: &kube::Error) -> String {
        let answer = describe(error);
        match error {
            kube::Error::Api(status) if status.code == 403 => format!(
                "{answer}; the controller reads Secrets only where its ServiceAccount {}/{} is bound to the ClusterRole {}: the Team controller binds it in team namespaces, the components in {}; to keep this Secret in {namespace}, bind it there: kubectl -n {namespace} create rolebinding {} --clusterrole={} --serviceaccount={}:{}",
                self.namespace,
                self.service_account,
                self.cluster_role,
                self.namespace,
                Self::BINDING,
                self.cluster_role,
                self.namespace,
                self.service_account,
            ),
            _ => answer,
        }
    }
}

impl Default for SecretReader {
    fn default() -> Self {
        SecretReader {
            cluster_role: Self::DEFAULT_ROLE.into(),
            namespace: "butler-system".into(),
            service_account: "butler-controller".into(),
        }
    }
}

/// The label and type Cluster API gives the kubeconfig Secret it makes for a cluster.
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
pub const CLUSTER_SECRET_TYPE: &str = "cluster.x-k8s.io/secret";

/// The name of a cluster's kubeconfig Secret.
pub fn kubeconfig_name(cluster: &str) -> String {
    format!("{cluster}-kubeconfig")
}

/// Whether `secret` is the kubeconfig Cluster API made for `cluster` (its type and its
/// cluster-name label), not another Secret that merely has its name: a TenantCluster named
/// `harvester` must not open `harvester-kubeconfig`, a ProviderConfig's credentials. Writing
/// that label and type takes write access to the namespace's Secrets, which a team's operators
/// and viewers lack (its admins hold it, and may read every Secret there anyway).
pub fn owns_kubeconfig(secret: &k8s_openapi::api::core::v1::Secret, cluster: &str) -> bool {
    let labelled =
        secret.metadata.labels.as_ref().and_then(|l| l.get(CLUSTER_NAME_LABEL)).map(String::as_str);
    secret.metadata.name.as_deref() == Some(kubeconfig_name(cluster).as_str())
        && secret.type_.as_deref() == Some(CLUSTER_SECRET_TYPE)
        && labelled == Some(cluster)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(code: u16) -> kube::Error {
        let reason = if code == 403 { "Forbidden" } else { "InternalError" };
        kube::Error::Api(Box::new(
            kube::core::Status::failure("secrets \"c\" is forbidden", reason).with_code(code),
        ))
    }

    #[test]
    fn a_refused_read_says_where_the_controller_reads_and_how_to_bind_it() {
        let reader = SecretReader::default();
        let message = reader.cannot_read("platform", &refusal(403));
        assert!(message.starts_with("secrets \"c\" is forbidden (Forbidden, HTTP 403); "), "{message}");
        assert!(
            message.ends_with(
                "kubectl -n platform create rolebinding butler-controller-secrets --clusterrole=butler-controller-secrets --serviceaccount=butler-system:butler-controller"
            ),
            "{message}"
        );
        assert_eq!(
            reader.cannot_read("platform", &refusal(500)),
            "secrets \"c\" is forbidden (InternalError, HTTP 500)"
        );
        assert_eq!(reader.subjects()[0].namespace.as_deref(), Some("butler-system"));
        assert_eq!(reader.role_ref().name, "butler-controller-secrets");
    }
}
