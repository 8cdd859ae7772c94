//! Telling what happened: every reason a provider gives, typed ([`reason`]), and its status
//! and events, written in one place and only when they change ([`status`]).

pub mod reason;
pub mod status;
