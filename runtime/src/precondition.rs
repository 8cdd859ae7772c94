//! A write by name reaches whatever object holds the name now: one deleted and made again
//! under the same name is another object. A JSON patch that starts by testing the UID it read
//! is refused (422) by such an object, on the status subresource too (a merge patch's
//! `metadata.uid` is dropped there before anything is compared).

use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, TestOperation};
use kube::Resource;

/// The test that the object written is still `object` (none for an object without a UID, one
/// never stored).
pub fn same_uid<K: Resource>(object: &K) -> Option<PatchOperation> {
    let uid = object.meta().uid.clone()?;
    Some(PatchOperation::Test(TestOperation {
        path: PointerBuf::parse("/metadata/uid").expect("a valid JSON pointer"),
        value: serde_json::Value::String(uid),
    }))
}
