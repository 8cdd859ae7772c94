//! The controllers' scenarios, on the in-memory API server and unchanged on a real cluster
//! (`make e2e`).

mod caches;
mod confinement;
mod docs_examples;
mod examples;
mod ipam;
mod ipam_races;
mod isolation;
mod leadership;
mod providerconfig;
mod quantities;
mod secret_access;
mod shipped;
mod support;
mod team;
mod tenant_elastic;
mod tenant_ipam;
mod tenant_release;
mod tenants;
mod webhooks;
