//! One finalizer, added before a controller creates anything for an object and removed once
//! what it created is gone. JSON patches with a `test` make both safe against concurrent
//! writers: a patch built from a stale copy fails instead of dropping another's finalizer, and
//! one built from an object deleted and made again under its name fails too.

use std::fmt::Debug;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, RemoveOperation, TestOperation};
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::not_found_ok;

fn pointer(path: &str) -> PointerBuf {
    PointerBuf::parse(path).expect("the finalizer paths are valid JSON pointers")
}

/// Adds `finalizer` to the object; returns the object as written. A copy from a cache may lag
/// behind the object (the finalizer a moment ago added, another's since): when its test fails,
/// the object is read live once, and the finalizer added to that, unless it is there already.
/// An object made again under the name is never written from the old one's copy.
pub async fn add<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<K, kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let stale = match add_to(api, object, finalizer).await {
        Err(kube::Error::Api(status)) if status.code == 422 => kube::Error::Api(status),
        done => return done,
    };
    let live = api.get(&object.name_any()).await?;
    if live.meta().uid != object.meta().uid {
        return Err(stale);
    }
    match has(&live, finalizer) {
        true => Ok(live),
        false => add_to(api, &live, finalizer).await,
    }
}

/// One JSON patch that adds `finalizer` to the object as `object` has it.
async fn add_to<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<K, kube::Error>
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
                value: json!([finalizer]),
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
                value: json!(finalizer),
            }),
        ]
    };
    let operations = crate::precondition::same_uid(object).into_iter().chain(operations).collect();
    api.patch(&object.name_any(), &PatchParams::default(), &Patch::Json::<()>(json_patch::Patch(operations)))
        .await
}

/// Removes `finalizer`, if the object still has it where it was; an object that is gone
/// already is fine.
pub async fn remove<K>(api: &Api<K>, object: &K, finalizer: &str) -> Result<(), kube::Error>
where
    K: Resource + Clone + DeserializeOwned + Serialize + Debug,
{
    let Some(index) = object.finalizers().iter().position(|f| f == finalizer) else { return Ok(()) };
    let path = format!("/metadata/finalizers/{index}");
    let operations = crate::precondition::same_uid(object)
        .into_iter()
        .chain([
            PatchOperation::Test(TestOperation { path: pointer(&path), value: json!(finalizer) }),
            PatchOperation::Remove(RemoveOperation { path: pointer(&path) }),
        ])
        .collect();
    let patch = Patch::Json::<()>(json_patch::Patch(operations));
    not_found_ok(api.patch(&object.name_any(), &PatchParams::default(), &patch).await).map(|_| ())
}

/// Whether the object carries `finalizer`.
pub fn has<K: Resource>(object: &K, finalizer: &str) -> bool {
    object.finalizers().iter().any(|f| f == finalizer)
}
