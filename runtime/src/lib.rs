//! `butler-runtime`: what every controller of this workspace needs, written once and
//! parameterised by the names each controller uses (field manager, finalizer, lease, metric
//! prefix, condition order). It knows no controller and no API type of its own.
//!
//! - [`conditions`]: `metav1.Condition` lists that keep `lastTransitionTime` (kstatus).
//! - [`finalizer`]: adding and removing one finalizer safely against concurrent writers.
//! - [`apply`] and [`objects`]: server-side apply of objects of any kind, with discovery,
//!   deletion, and the order a set of objects is applied and deleted in.
//! - [`inventory`]: the record of an applied object set in a ConfigMap, and what dropped out.
//! - [`watches`]: metadata watches started on demand; [`error`]: errors as users read them, and
//!   "404 is fine".
//! - [`process`]: logs, `/healthz` and `/readyz`, the Prometheus server, leader election on a
//!   Lease, and graceful shutdown ([`shutdown`]) around a controller started by a closure;
//!   [`metrics`]: the reconcile metrics every controller exports.
//! - [`crds`]: rendering CRDs as the committed YAML, and the structural check a real API server
//!   makes.
//! - [`network`]: which addresses a client that follows what users write may reach.
//! - [`webhook`]: an admission-webhook server (AdmissionReview v1) over rustls, and the
//!   certificates it serves.

pub mod age;
pub mod apply;
pub mod conditions;
pub mod crds;
pub mod error;
pub mod finalizer;
pub mod inventory;
pub mod managed_fields;
pub mod metrics;
pub mod network;
pub mod objects;
pub mod precondition;
pub mod process;
pub mod requests;
pub mod secure_metrics;
pub mod shutdown;
pub mod watches;
pub mod webhook;
