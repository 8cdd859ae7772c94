//! References between Butler objects and to Secrets.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A reference to an object by name, in the namespace that the context gives.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct LocalObjectReference {
    /// Name of the referenced object.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// A reference to an object by name and namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct NamespacedObjectReference {
    /// Name of the referenced object.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the referenced object.
    #[schemars(length(min = 1))]
    pub namespace: String,
}

/// A reference to a Secret, optionally to one key inside it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct SecretReference {
    /// Name of the Secret.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Namespace of the Secret. When empty, the namespace of the object that holds this reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A single key inside the Secret's data to read. When empty, the keys that the provider type
    /// expects are read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}
