//! What an attacker's repository or registry, served on 127.0.0.1, can make the repository
//! client do: every answer is bounded in size, count and time.

#[allow(dead_code)]
#[path = "../sources/support.rs"]
mod support;

mod cache;
mod github;
mod oci;
mod redirects;
