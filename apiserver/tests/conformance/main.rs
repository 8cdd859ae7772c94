//! Conformance scenarios of the in-memory API server. Each is written against `Cluster`, so it
//! runs unchanged against a real cluster (`make e2e`); the few checks that only the in-memory
//! server can make on demand say so and are skipped elsewhere with a printed reason.

mod apply;
mod controller;
mod crds;
mod crud;
mod deletion;
mod discovery;
mod events;
mod fields;
mod rbac;
mod schema;
mod selectors;
mod status;
mod support;
mod watch;
