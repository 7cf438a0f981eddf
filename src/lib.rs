//! vnfkeeper keeps Kubernetes-cluster VNFs on OpenStack in their intended state.
//!
//! Requests (SOL003 Instantiate, Scale, Heal, Terminate) enter through [`intake`], are recorded
//! durably in the [`store`], and are carried out by the engine. See `ARCHITECTURE.md` for the
//! code map and the invariants every module keeps.

/// Command line: `daemon`, `submit`, `ops`, `status`, `config check`.
pub mod cli;
/// Configuration file → validated settings.
pub mod config;
/// The long-running service: spool watching, signals, systemd notification, logging.
pub mod daemon;
/// Crash hooks for tests (debug builds only).
pub mod failpoint;
/// Where requests enter: spool directory and request validation.
pub mod intake;
/// Domain types and invariants; no I/O.
pub mod model;
/// SQLite: the only module with SQL.
pub mod store;
