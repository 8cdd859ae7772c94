//! `butler-e2e`: the in-memory Kubernetes API server that tests run against, and the end-to-end
//! scenarios that run against it in CI or against a real cluster.
