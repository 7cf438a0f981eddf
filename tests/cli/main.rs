//! The command line and the daemon's operator interfaces: task verbs, pause/resume, `hot adjust`,
//! `host-key forget`, the Prometheus endpoint and the status page.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod config_cloud;
mod describe_daemon;
mod fleet_scenario;
mod host_key_forget;
mod hot_adjust_cli;
mod metrics_daemon;
mod pacemaker;
mod pause_cli;
mod prometheus_server;
mod reconcile_no_cloud;
mod shard_cli;
mod status_page;
#[path = "../support/mod.rs"]
mod support;
mod units;
mod verbs_daemon;
mod verbs_no_daemon;
