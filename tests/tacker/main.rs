//! Tacker companion mode: subscriptions and adoption, notifications from Tacker's own client code,
//! OAuth 2.0 and TLS, the management steps, and `hot adjust` against Tacker's own code.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

#[path = "../support/mod.rs"]
mod support;
mod tacker_companion;
mod tacker_manage;
mod tacker_mgmt_driver;
mod tacker_notifications;
mod tacker_oauth_tls;
mod tacker_parity;
mod tacker_real;
mod tacker_reload;
mod tacker_slow_clients;
