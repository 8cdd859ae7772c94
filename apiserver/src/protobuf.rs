//! Request bodies in Kubernetes' protobuf encoding, read into the JSON the rest of the server
//! handles. kubectl's typed commands send protobuf (`auth can-i`, `auth whoami`, `create
//! token`, `create serviceaccount|role|rolebinding|namespace|configmap|secret`): the body is
//! `k8s\0` and a `runtime.Unknown` envelope naming the kind, whose `raw` is the object; helm's
//! release Secrets and their DeleteOptions come the same way.
//! Answers stay JSON, which clients accept as the second choice they list.
//!
//! Only the kinds above are described (field numbers as Kubernetes' `generated.proto` gives
//! them); another kind is refused with 415 and a message that says to send JSON.

use base64::Engine;
use serde_json::{Map, Value, json};

/// How one field is read.
enum Field {
    Text(&'static str),
    Int(&'static str),
    Bool(&'static str),
    Message(&'static str, &'static [(u32, Field)]),
    Texts(&'static str),
    Messages(&'static str, &'static [(u32, Field)]),
    TextMap(&'static str),
    BytesMap(&'static str),
}

use Field::*;

const OBJECT_META: &[(u32, Field)] = &[
    (1, Text("name")),
    (2, Text("generateName")),
    (3, Text("namespace")),
    (6, Text("resourceVersion")),
    (11, TextMap("labels")),
    (12, TextMap("annotations")),
    (14, Texts("finalizers")),
];
const RESOURCE_ATTRIBUTES: &[(u32, Field)] = &[
    (1, Text("namespace")),
    (2, Text("verb")),
    (3, Text("group")),
    (4, Text("version")),
    (5, Text("resource")),
    (6, Text("subresource")),
    (7, Text("name")),
];
const NON_RESOURCE_ATTRIBUTES: &[(u32, Field)] = &[(1, Text("path")), (2, Text("verb"))];
const SELF_ACCESS_SPEC: &[(u32, Field)] = &[
    (1, Message("resourceAttributes", RESOURCE_ATTRIBUTES)),
    (2, Message("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES)),
];
const SELF_ACCESS: &[(u32, Field)] =
    &[(1, Message("metadata", OBJECT_META)), (2, Message("spec", SELF_ACCESS_SPEC))];
const SELF_RULES: &[(u32, Field)] =
    &[(1, Message("metadata", OBJECT_META)), (2, Message("spec", &[(1, Text("namespace"))]))];
const SELF_SUBJECT: &[(u32, Field)] = &[(1, Message("metadata", OBJECT_META))];
const BOUND_OBJECT: &[(u32, Field)] =
    &[(1, Text("kind")), (2, Text("apiVersion")), (3, Text("name")), (4, Text("uid"))];
const TOKEN_SPEC: &[(u32, Field)] =
    &[(1, Texts("audiences")), (3, Message("boundObjectRef", BOUND_OBJECT)), (4, Int("expirationSeconds"))];
const TOKEN_REQUEST: &[(u32, Field)] =
    &[(1, Message("metadata", OBJECT_META)), (2, Message("spec", TOKEN_SPEC))];
const NAME_ONLY: &[(u32, Field)] = &[(1, Text("name"))];
const OBJECT_REFERENCE: &[(u32, Field)] = &[
    (1, Text("kind")),
    (2, Text("namespace")),
    (3, Text("name")),
    (4, Text("uid")),
    (5, Text("apiVersion")),
];
const SERVICE_ACCOUNT: &[(u32, Field)] = &[
    (1, Message("metadata", OBJECT_META)),
    (2, Messages("secrets", OBJECT_REFERENCE)),
    (3, Messages("imagePullSecrets", NAME_ONLY)),
    (4, Bool("automountServiceAccountToken")),
];
const POLICY_RULE: &[(u32, Field)] = &[
    (1, Texts("verbs")),
    (2, Texts("apiGroups")),
    (3, Texts("resources")),
    (4, Texts("resourceNames")),
    (5, Texts("nonResourceURLs")),
];
const ROLE: &[(u32, Field)] = &[(1, Message("metadata", OBJECT_META)), (2, Messages("rules", POLICY_RULE))];
const SUBJECT: &[(u32, Field)] =
    &[(1, Text("kind")), (2, Text("apiGroup")), (3, Text("name")), (4, Text("namespace"))];
const ROLE_REF: &[(u32, Field)] = &[(1, Text("apiGroup")), (2, Text("kind")), (3, Text("name"))];
const ROLE_BINDING: &[(u32, Field)] = &[
    (1, Message("metadata", OBJECT_META)),
    (2, Messages("subjects", SUBJECT)),
    (3, Message("roleRef", ROLE_REF)),
];
const NAMESPACE: &[(u32, Field)] =
    &[(1, Message("metadata", OBJECT_META)), (2, Message("spec", &[(1, Texts("finalizers"))]))];
const CONFIG_MAP: &[(u32, Field)] = &[
    (1, Message("metadata", OBJECT_META)),
    (2, TextMap("data")),
    (3, BytesMap("binaryData")),
    (4, Bool("immutable")),
];
const SECRET: &[(u32, Field)] = &[
    (1, Message("metadata", OBJECT_META)),
    (2, BytesMap("data")),
    (3, Text("type")),
    (4, TextMap("stringData")),
    (5, Bool("immutable")),
];

const PRECONDITIONS: &[(u32, Field)] = &[(1, Text("uid")), (2, Text("resourceVersion"))];
const DELETE_OPTIONS: &[(u32, Field)] = &[
    (1, Int("gracePeriodSeconds")),
    (2, Message("preconditions", PRECONDITIONS)),
    (3, Bool("orphanDependents")),
    (4, Text("propagationPolicy")),
    (5, Texts("dryRun")),
];

/// The description of a kind this server reads in protobuf.
fn kind(api_version: &str, kind: &str) -> Option<&'static [(u32, Field)]> {
    Some(match (api_version, kind) {
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => SELF_ACCESS,
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => SELF_RULES,
        ("authentication.k8s.io/v1", "SelfSubjectReview") => SELF_SUBJECT,
        ("authentication.k8s.io/v1", "TokenRequest") => TOKEN_REQUEST,
        ("v1" | "meta.k8s.io/v1", "DeleteOptions") => DELETE_OPTIONS,
        ("v1", "ServiceAccount") => SERVICE_ACCOUNT,
        ("v1", "Namespace") => NAMESPACE,
        ("v1", "ConfigMap") => CONFIG_MAP,
        ("v1", "Secret") => SECRET,
        ("rbac.authorization.k8s.io/v1", "Role" | "ClusterRole") => ROLE,
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => ROLE_BINDING,
        _ => return None,
    })
}

/// Whether a request's Content-Type is Kubernetes' protobuf.
pub fn is_protobuf(content_type: &str) -> bool {
    content_type.split(';').next().is_some_and(|t| t.trim() == "application/vnd.kubernetes.protobuf")
}

/// A field of the wire format: its number and value.
enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
    Fixed,
}

fn varint(bytes: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes.get(*at).ok_or("the protobuf body ends inside a number")?;
        *at += 1;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err("a protobuf number is longer than 64 bits".into())
}

/// The fields of one message, in order.
fn fields(bytes: &[u8]) -> Result<Vec<(u32, Wire<'_>)>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let key = varint(bytes, &mut at)?;
        let number = u32::try_from(key >> 3).map_err(|_| "a protobuf field number is out of range")?;
        let wire = match key & 7 {
            0 => Wire::Varint(varint(bytes, &mut at)?),
            1 | 5 => {
                at += if key & 7 == 1 { 8 } else { 4 };
                Wire::Fixed
            }
            2 => {
                let length = usize::try_from(varint(bytes, &mut at)?)
                    .map_err(|_| "a protobuf length is out of range")?;
                let end = at
                    .checked_add(length)
                    .filter(|e| *e <= bytes.len())
                    .ok_or("a protobuf field runs past the body")?;
                let field = &bytes[at..end];
                at = end;
                Wire::Bytes(field)
            }
            other => return Err(format!("protobuf wire type {other} is not supported")),
        };
        out.push((number, wire));
    }
    Ok(out)
}

fn text(bytes: &[u8]) -> Result<String, String> {
    String::from_utf8(bytes.to_vec()).map_err(|_| "a protobuf string is not UTF-8".to_string())
}

/// One map entry: key (1) and value (2).
fn entry(bytes: &[u8]) -> Result<(String, &[u8]), String> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for (number, wire) in fields(bytes)? {
        match (number, wire) {
            (1, Wire::Bytes(b)) => key = text(b)?,
            (2, Wire::Bytes(b)) => value = b,
            _ => {}
        }
    }
    Ok((key, value))
}

fn message(bytes: &[u8], described: &[(u32, Field)]) -> Result<Value, String> {
    let mut out = Map::new();
    for (number, wire) in fields(bytes)? {
        let Some((_, field)) = described.iter().find(|(n, _)| *n == number) else { continue };
        match (field, wire) {
            // Go writes every string field, empty or not: an empty one is no value (as the
            // struct it decodes into, and JSON's omitempty, have it).
            (Text(_), Wire::Bytes([])) => {}
            (Text(name), Wire::Bytes(b)) => {
                out.insert(name.to_string(), Value::String(text(b)?));
            }
            (Int(name), Wire::Varint(v)) => {
                out.insert(name.to_string(), json!(v as i64));
            }
            (Bool(name), Wire::Varint(v)) => {
                out.insert(name.to_string(), json!(v != 0));
            }
            (Message(name, inner), Wire::Bytes(b)) => {
                out.insert(name.to_string(), message(b, inner)?);
            }
            (Texts(name), Wire::Bytes(b)) => {
                let list = out.entry(name.to_string()).or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    list.push(Value::String(text(b)?));
                }
            }
            (Messages(name, inner), Wire::Bytes(b)) => {
                let item = message(b, inner)?;
                let list = out.entry(name.to_string()).or_insert_with(|| json!([]));
                if let Some(list) = list.as_array_mut() {
                    list.push(item);
                }
            }
            (TextMap(name), Wire::Bytes(b)) => {
                let (key, value) = entry(b)?;
                let map = out.entry(name.to_string()).or_insert_with(|| json!({}));
                map[key] = Value::String(text(value)?);
            }
            (BytesMap(name), Wire::Bytes(b)) => {
                let (key, value) = entry(b)?;
                let map = out.entry(name.to_string()).or_insert_with(|| json!({}));
                map[key] = Value::String(base64::engine::general_purpose::STANDARD.encode(value));
            }
            _ => return Err(format!("protobuf field {number} has an unexpected wire type")),
        }
    }
    Ok(Value::Object(out))
}

/// The JSON of a protobuf request body, or why it cannot be read (a message for a 415 or 400).
pub fn to_json(body: &[u8]) -> Result<Value, String> {
    let envelope = body
        .strip_prefix(b"k8s\0")
        .ok_or("the protobuf body does not start with Kubernetes' magic k8s\\0")?;
    let mut api_version = String::new();
    let mut kind_name = String::new();
    let mut raw: &[u8] = &[];
    for (number, wire) in fields(envelope)? {
        match (number, wire) {
            (1, Wire::Bytes(type_meta)) => {
                for (n, w) in fields(type_meta)? {
                    match (n, w) {
                        (1, Wire::Bytes(b)) => api_version = text(b)?,
                        (2, Wire::Bytes(b)) => kind_name = text(b)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(b)) => raw = b,
            _ => {}
        }
    }
    let described = kind(&api_version, &kind_name).ok_or_else(|| {
        format!("{kind_name} ({api_version}) in protobuf is not a kind this server reads: send it as JSON (application/json)")
    })?;
    let mut object = message(raw, described)?;
    object["apiVersion"] = Value::String(api_version);
    object["kind"] = Value::String(kind_name);
    Ok(object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(number: u32, bytes: &[u8]) -> Vec<u8> {
        let mut out = vec![((number << 3) | 2) as u8, bytes.len() as u8];
        out.extend_from_slice(bytes);
        out
    }

    #[test]
    fn a_self_subject_access_review_reads_as_kubectl_sends_it() {
        let attributes = [field(1, b"team-a"), field(2, b"get"), field(5, b"pods")].concat();
        let spec = field(1, &attributes);
        let review = field(2, &spec);
        let type_meta = [field(1, b"authorization.k8s.io/v1"), field(2, b"SelfSubjectAccessReview")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &review)].concat();
        assert_eq!(
            to_json(&body).unwrap(),
            json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                   "spec": {"resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods"}}})
        );
    }

    #[test]
    fn maps_numbers_and_unknown_kinds() {
        let label = field(11, &[field(1, b"app"), field(2, b"web")].concat());
        let meta = field(1, &[field(1, b"t"), label].concat());
        let spec = field(2, &[field(1, b"aud"), vec![4 << 3, 0x90, 0x1c]].concat());
        let type_meta = [field(1, b"authentication.k8s.io/v1"), field(2, b"TokenRequest")].concat();
        let body = [b"k8s\0".to_vec(), field(1, &type_meta), field(2, &[meta, spec].concat())].concat();
        let object = to_json(&body).unwrap();
        assert_eq!(object["metadata"]["labels"]["app"], "web");
        assert_eq!(object["spec"], json!({"audiences": ["aud"], "expirationSeconds": 3600}));
        let pod = [field(1, b"v1"), field(2, b"Pod")].concat();
        let refused = to_json(&[b"k8s\0".to_vec(), field(1, &pod)].concat()).unwrap_err();
        assert!(refused.contains("send it as JSON"), "{refused}");
        assert!(to_json(b"{}").is_err());
        assert!(to_json(&[b"k8s\0".to_vec(), vec![0x0a, 0x7f]].concat()).is_err(), "a length past the end");
    }
}
