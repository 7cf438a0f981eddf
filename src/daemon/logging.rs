//! Logging: journald with structured fields when run under systemd, human-readable stderr otherwise.
//!
//! Field names are snake_case in code and arrive upper-case in the journal without a prefix
//! (`vnf_instance_id` → `VNF_INSTANCE_ID`). Events an operator alerts on carry a stable
//! `message_id` (→ `MESSAGE_ID`, systemd catalog style, 128-bit hex; `crate::message_ids`).

use std::io::IsTerminal as _;

use tracing_subscriber::{EnvFilter, fmt, prelude::*};

/// Where log records go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogTarget {
    /// journald if `JOURNAL_STREAM` is set and the journal socket answers, else stderr.
    Auto,
    /// Always stderr.
    Stderr,
}

/// Installs the global subscriber. Level from `RUST_LOG`, else `default` (an `EnvFilter`
/// directive: the daemon logs at `info`, one-shot commands only `warn`, so that their output is
/// what they print, not the store's migration chatter). Returns which sink was chosen
/// (`"journald"` or `"stderr"`). Calling it twice is harmless (the second is ignored).
pub fn init(target: LogTarget, default: &str) -> &'static str {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
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
