//! The controllers' scenarios, on the in-memory API server and unchanged on a real cluster
//! (`make e2e`).

mod examples;
mod ipam;
mod providerconfig;
mod support;
mod team;
mod tenant_ipam;
mod webhooks;
