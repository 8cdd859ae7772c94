//! Components and templates processed the way clusterctl does.

mod components;
mod templates;
