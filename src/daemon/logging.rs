//! Logging: journald with structured fields when run under systemd, human-readable stderr otherwise.
//!
//! Field names are snake_case in code and arrive upper-case in the journal without a prefix
//! (`vnf_instance_id` → `VNF_INSTANCE_ID`). Events an operator alerts on carry a stable
//! `message_id` (→ `MESSAGE_ID`, systemd catalog style, 128-bit hex).

use std::io::IsTerminal as _;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// `MESSAGE_ID` of "request accepted".
pub const MSG_REQUEST_ACCEPTED: &str = "f1f516ae42f74597a8845965bfc74e9d";
/// `MESSAGE_ID` of "request rejected".
pub const MSG_REQUEST_REJECTED: &str = "6051f019d8e14722813e7bb1d60bcd7c";
/// `MESSAGE_ID` of "operation failed".
pub const MSG_OPERATION_FAILED: &str = "b76179fd677b445c9fa2f4b25f1b29c0";
/// `MESSAGE_ID` of "heal started".
pub const MSG_HEAL_STARTED: &str = "88cb856f6c00480f9482cc903f16e290";
/// `MESSAGE_ID` of "heal deferred".
pub const MSG_HEAL_DEFERRED: &str = "33b310679f694452aa170f8f7d921441";
/// `MESSAGE_ID` of "drift detected".
pub const MSG_DRIFT_DETECTED: &str = "640577c813d74a96a81514a1d8c5a8d7";
/// `MESSAGE_ID` of "reconcile alert" (max_unhealthy short-circuit, retry budget used up, storage
/// heal blocked by a Bound PV): an operator must look.
pub const MSG_RECONCILE_ALERT: &str = "c3d1f0a4b7e94f5c9a2e6d8b1f4a7c30";

/// Where log records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    /// journald if `JOURNAL_STREAM` is set and the journal socket answers, else stderr.
    Auto,
    /// Always stderr.
    Stderr,
}

/// Installs the global subscriber. Level from `RUST_LOG` (default `info`). Returns which sink
/// was chosen (`"journald"` or `"stderr"`). Calling it twice is harmless (the second is ignored).
pub fn init(target: LogTarget) -> &'static str {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let journald = match target {
        LogTarget::Stderr => None,
        LogTarget::Auto => std::env::var_os("JOURNAL_STREAM")
            .and_then(|_| tracing_journald::layer().ok())
            .map(|l| {
                l.with_syslog_identifier("vnfkeeper".into())
                    .with_field_prefix(None)
                    .with_priority_mappings(tracing_journald::PriorityMappings {
                        info: tracing_journald::Priority::Informational,
                        debug: tracing_journald::Priority::Debug,
                        ..tracing_journald::PriorityMappings::new()
                    })
            }),
    };
    let sink = if journald.is_some() {
        "journald"
    } else {
        "stderr"
    };
    let stderr = journald.is_none().then(|| {
        fmt::layer()
            .with_writer(std::io::stderr)
            .with_target(false)
            .with_ansi(std::io::stderr().is_terminal())
    });
    let _ = tracing_subscriber::registry()
        .with(filter)
        .with(journald)
        .with(stderr)
        .try_init();
    sink
}
