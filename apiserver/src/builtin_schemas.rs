//! The schemas of the built-in kinds the server serves, as k8s-openapi carries them: one list,
//! read by the field checks ([`crate::fields`]) and the OpenAPI documents ([`crate::openapi`]).

use std::collections::BTreeMap;
use std::sync::OnceLock;

use schemars::{JsonSchema, SchemaGenerator};
use serde_json::Value;

/// One built-in kind: its group and kind, and its schema's definition name.
pub struct Kind {
    pub group: &'static str,
    pub kind: &'static str,
    pub definition: String,
}

/// Every built-in kind's schema, with the definitions they refer to, at `definitions_path`.
pub struct Schemas {
    pub kinds: Vec<Kind>,
    /// Definitions by name, their `$ref`s pointing into the same map.
    pub definitions: BTreeMap<String, Value>,
}

impl Schemas {
    /// The definition of a built-in kind.
    pub fn of(&self, group: &str, kind: &str) -> Option<(&Kind, &Value)> {
        let entry = self.kinds.iter().find(|k| k.group == group && k.kind == kind)?;
        Some((entry, self.definitions.get(&entry.definition)?))
    }
}

fn add<T: JsonSchema>(
    generator: &mut SchemaGenerator,
    kinds: &mut Vec<Kind>,
    group: &'static str,
    kind: &'static str,
) {
    generator.subschema_for::<T>();
    kinds.push(Kind { group, kind, definition: T::schema_name().into_owned() });
}

/// The schemas with `$ref`s of the form `#/{prefix}{name}` (`$defs/`, `components/schemas/`,
/// `definitions/`).
fn generate(definitions_path: &str) -> Schemas {
    use k8s_openapi::api::{
        admissionregistration as adm, apps, authentication, authorization, autoscaling, batch, coordination,
        core, events, policy, rbac,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut settings = schemars::generate::SchemaSettings::openapi3();
    settings.definitions_path = definitions_path.to_string().into();
    settings.transforms.clear();
    let mut generator = settings.into_generator();
    let mut kinds = Vec::new();
    let g = &mut generator;
    let k = &mut kinds;
    add::<core::v1::Namespace>(g, k, "", "Namespace");
    add::<core::v1::ConfigMap>(g, k, "", "ConfigMap");
    add::<core::v1::Secret>(g, k, "", "Secret");
    add::<core::v1::ResourceQuota>(g, k, "", "ResourceQuota");
    add::<core::v1::Service>(g, k, "", "Service");
    add::<core::v1::ServiceAccount>(g, k, "", "ServiceAccount");
    add::<core::v1::Event>(g, k, "", "Event");
    add::<core::v1::Pod>(g, k, "", "Pod");
    add::<apps::v1::Deployment>(g, k, "apps", "Deployment");
    add::<apps::v1::DaemonSet>(g, k, "apps", "DaemonSet");
    add::<apps::v1::ReplicaSet>(g, k, "apps", "ReplicaSet");
    add::<apps::v1::StatefulSet>(g, k, "apps", "StatefulSet");
    add::<batch::v1::Job>(g, k, "batch", "Job");
    add::<policy::v1::PodDisruptionBudget>(g, k, "policy", "PodDisruptionBudget");
    add::<rbac::v1::Role>(g, k, "rbac.authorization.k8s.io", "Role");
    add::<rbac::v1::RoleBinding>(g, k, "rbac.authorization.k8s.io", "RoleBinding");
    add::<rbac::v1::ClusterRole>(g, k, "rbac.authorization.k8s.io", "ClusterRole");
    add::<rbac::v1::ClusterRoleBinding>(g, k, "rbac.authorization.k8s.io", "ClusterRoleBinding");
    let admission = "admissionregistration.k8s.io";
    add::<adm::v1::ValidatingWebhookConfiguration>(g, k, admission, "ValidatingWebhookConfiguration");
    add::<adm::v1::MutatingWebhookConfiguration>(g, k, admission, "MutatingWebhookConfiguration");
    add::<adm::v1::ValidatingAdmissionPolicy>(g, k, admission, "ValidatingAdmissionPolicy");
    add::<adm::v1::ValidatingAdmissionPolicyBinding>(g, k, admission, "ValidatingAdmissionPolicyBinding");
    add::<coordination::v1::Lease>(g, k, "coordination.k8s.io", "Lease");
    add::<events::v1::Event>(g, k, "events.k8s.io", "Event");
    add::<CustomResourceDefinition>(g, k, "apiextensions.k8s.io", "CustomResourceDefinition");
    add::<autoscaling::v1::Scale>(g, k, "autoscaling", "Scale");
    add::<authentication::v1::TokenReview>(g, k, "authentication.k8s.io", "TokenReview");
    add::<authentication::v1::SelfSubjectReview>(g, k, "authentication.k8s.io", "SelfSubjectReview");
    add::<authentication::v1::TokenRequest>(g, k, "authentication.k8s.io", "TokenRequest");
    add::<authorization::v1::SubjectAccessReview>(g, k, "authorization.k8s.io", "SubjectAccessReview");
    add::<authorization::v1::SelfSubjectAccessReview>(
        g,
        k,
        "authorization.k8s.io",
        "SelfSubjectAccessReview",
    );
    add::<authorization::v1::SelfSubjectRulesReview>(g, k, "authorization.k8s.io", "SelfSubjectRulesReview");
    let definitions = generator.take_definitions(true).into_iter().collect();
    Schemas { kinds, definitions }
}

/// The schemas with `$ref: #/$defs/{name}`.
pub fn json_schema() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| generate("/$defs"))
}

/// The schemas with `$ref: #/components/schemas/{name}` (OpenAPI v3).
pub fn openapi_v3() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| generate("/components/schemas"))
}

/// The schemas with `$ref: #/definitions/{name}` (OpenAPI v2).
pub fn openapi_v2() -> &'static Schemas {
    static SCHEMAS: OnceLock<Schemas> = OnceLock::new();
    SCHEMAS.get_or_init(|| generate("/definitions"))
}
