//! The provider finalizer, added before anything is applied and removed once the provider's
//! objects are gone. JSON patches with a `test` make both safe against concurrent writers.

use std::fmt::Debug;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::Error;
use crate::api::PROVIDER_FINALIZER;

fn pointer(path: &str) -> PointerBuf {
    PointerBuf::parse(path).expect("the finalizer paths are valid JSON pointers")
}

/// Adds the finalizer; returns the object as written.
pub async fn add<K>(api: &Api<K>, object: &K) -> Result<K, Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let current = object.finalizers();
    let operations = if current.is_empty() {
        vec![
            PatchOperation::Test(TestOperation {
                path: pointer("/metadata/finalizers"),
                value: serde_json::Value::Null,
            }),
            PatchOperation::Add(AddOperation {
                path: pointer("/metadata/finalizers"),
                value: json!([PROVIDER_FINALIZER]),
            }),
        ]
    } else {
        vec![
            PatchOperation::Test(TestOperation {
                path: pointer("/metadata/finalizers"),
                value: json!(current),
            }),
            PatchOperation::Add(AddOperation {
                path: pointer("/metadata/finalizers/-"),
                value: json!(PROVIDER_FINALIZER),
            }),
        ]
    };
    api.patch(&object.name_any(), &PatchParams::default(), &Patch::Json::<()>(json_patch::Patch(operations)))
        .await
        .map_err(|e| Error::kube(format!("adding the finalizer to {}", object.name_any()), e))
}

/// Removes the finalizer, if the object still has it where it was.
pub async fn remove<K>(api: &Api<K>, object: &K) -> Result<(), Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let Some(index) = object.finalizers().iter().position(|f| f == PROVIDER_FINALIZER) else { return Ok(()) };
    let path = format!("/metadata/finalizers/{index}");
    let operations = vec![
        PatchOperation::Test(TestOperation { path: pointer(&path), value: json!(PROVIDER_FINALIZER) }),
        PatchOperation::Remove(RemoveOperation { path: pointer(&path) }),
    ];
    match api
        .patch(&object.name_any(), &PatchParams::default(), &Patch::Json::<()>(json_patch::Patch(operations)))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(e) => Err(Error::kube(format!("removing the finalizer of {}", object.name_any()), e)),
    }
}

/// Whether the object carries the finalizer.
pub fn has<K: Resource>(object: &K) -> bool {
    object.finalizers().iter().any(|f| f == PROVIDER_FINALIZER)
}
