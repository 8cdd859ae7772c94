//! `butler-e2e`: an in-memory Kubernetes API server for tests, and the end-to-end runner.
//!
//! [`TestApiServer::start`] serves the Kubernetes HTTP API on a free port of 127.0.0.1 (plain
//! HTTP) and hands out a [`kube::Client`] and a kubeconfig file for it. kube-runtime
//! controllers run against it unchanged. [`Cluster::connect`] gives a scenario a fresh server,
//! or the real cluster named by `BUTLER_E2E_KUBECONFIG`.
//!
//! # Supported
//! - Discovery (legacy form): `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}`,
//!   `/apis/{group}/{version}`, for Namespace, ConfigMap, Secret, Service, ServiceAccount, Event
//!   (core and `events.k8s.io`), Deployment, DaemonSet, Role, RoleBinding, ClusterRole,
//!   ClusterRoleBinding, Validating/MutatingWebhookConfiguration, Lease and
//!   CustomResourceDefinition, and every kind a CRD registers (all served versions, scope,
//!   names, status subresource) while it exists.
//! - get; list with label selectors (equality and set-based), field selectors
//!   (`metadata.name`, `metadata.namespace`, and the event fields) and paging
//!   (`limit`/`continue`); watch from a resourceVersion with ADDED/MODIFIED/DELETED, BOOKMARK
//!   and initial events (`sendInitialEvents`, the streaming-list form), with objects entering or
//!   leaving a selector seen as ADDED or DELETED, and 410 Expired for a resourceVersion older
//!   than the last 20,000 changes.
//! - create (generateName, uid, creationTimestamp, resourceVersion, generation 1), update (409
//!   on a stale resourceVersion; no-op writes keep the resourceVersion), patch: JSON merge, JSON
//!   patch, strategic merge (see below) and server-side apply with per-manager ownership in
//!   `managedFields` (conflicts are 409 unless forced; a field a manager stops applying is
//!   removed unless someone else owns it; other writes take the fields they change), dry run.
//! - delete and deletecollection with finalizers and deletionTimestamp, preconditions,
//!   propagation Background, Foreground and Orphan, garbage collection by ownerReferences,
//!   namespace deletion (content first), CRD deletion (its objects first).
//! - The status subresource: `/status` writes change only status, main-resource writes leave
//!   status alone; generation grows only when the spec changes (and at deletion).
//! - Custom resources checked against their CRD: unknown fields pruned, nulls dropped, defaults
//!   applied, type, required, enum, minimum/maximum, length, items and pattern checks, and the
//!   CEL rules (`x-kubernetes-validations`); failures are 422 Invalid with one cause per field.
//!   A CRD whose schema is not structural is refused.
//! - Secrets fold `stringData` into `data`; namespaces get their phase and `kubernetes`
//!   finalizer; creating into a missing namespace is 404, into a terminating one 403.
//! - Errors are `Status` objects with the real codes and reasons.
//! - Metadata-only answers (`Accept: ...;as=PartialObjectMetadata`) for get, list and watch,
//!   as kube's `Api<PartialObjectMeta<K>>` asks for them.
//! - Table output (`Accept: ...;as=Table`, what `kubectl get` asks for): custom resources print
//!   their `additionalPrinterColumns` (or Age); Deployment, Event, ConfigMap, Secret and
//!   Namespace print kubectl's usual columns; other kinds print Name and Age. Watches are not
//!   printed (`kubectl get -w` shows objects without the columns).
//! - Events have one store behind `v1` and `events.k8s.io/v1`, converted field by field, so
//!   events that the operator records show in `kubectl get events` and `kubectl describe`.
//! - A log of requests by client ([`TestApiServer::client_as`] names one with its
//!   User-Agent, [`TestApiServer::requests_from`] lists its requests), to count them.
//!
//! # Deliberately not supported
//! Authentication and authorization (every request is allowed), admission webhooks (they are
//! not called), protobuf, aggregated discovery and OpenAPI documents, CRD
//! conversion webhooks (versions differ only in apiVersion), selectable fields of CRDs, pods
//! and every controller but the garbage collector and the namespace and CRD finalizers (no
//! Deployment ever becomes Available by itself). Strategic merge patch is approximated: a merge
//! patch whose keyed lists (containers, env, ports, volumes, volume mounts, conditions, and
//! list-map lists of CRD schemas) merge by key, with `$patch: delete` and `$patch: replace`;
//! other directives are ignored. Server-side apply knows the list types that CRD schemas
//! declare and those listed above for built-in kinds; every other list is atomic.

pub mod cluster;
pub mod server;
pub mod stand_ins;

pub use cluster::Cluster;
pub use server::{ServerOptions, TestApiServer};
