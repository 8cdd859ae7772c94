//! The operator as a trust boundary: what a provider object, a repository, a registry or a
//! bundle can make it do, tried as an attacker would (the attacker's repository served from a
//! labelled ConfigMap or on 127.0.0.1). Each scenario runs on the in-memory API server and
//! unchanged on a real cluster (`make e2e`).

// The lifecycle scenarios' support, of which these scenarios use a part.
#[allow(dead_code)]
#[path = "../lifecycle/fixtures.rs"]
mod fixtures;
#[allow(dead_code)]
#[path = "../shapes/cluster_api.rs"]
mod shapes;
#[allow(dead_code)]
#[path = "../lifecycle/support.rs"]
mod support;

mod bundle;
mod claims;
mod exhaustion;
mod fetch;
mod immutable;
mod namespaces;
mod policy;
