//! The command line and the daemon's operator interfaces: task verbs, pause/resume, `hot adjust`,
//! `host-key forget` and the Prometheus endpoint.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod config_cloud;
mod describe_daemon;
mod host_key_forget;
mod hot_adjust_cli;
mod metrics_daemon;
mod pacemaker;
mod pause_cli;
mod prometheus_server;
mod reconcile_no_cloud;
mod shard_cli;
#[path = "../support/mod.rs"]
mod support;
mod units;
mod verbs_daemon;
mod verbs_no_daemon;
