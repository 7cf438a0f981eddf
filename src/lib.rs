//! vnfkeeper keeps Kubernetes-cluster VNFs on OpenStack in their intended state.
//!
//! Requests (SOL003 Instantiate, Scale, Heal, Terminate) enter through [`intake`], are recorded
//! durably in the [`store`], and are carried out by the engine. See `ARCHITECTURE.md` for the
//! code map and the invariants every module keeps.

/// `println!` for command output: output into a closed pipe (`vnfkeeper ops | head -1`) ends the
/// command quietly with status 141, as SIGPIPE ends any Unix filter, instead of a panic.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::cli::write_line(format_args!($($arg)*))
    };
}

/// Command line: `daemon`, `submit`, `ops`, `status`, `reconcile --now`, `plan`, `config check`,
/// `hot adjust`, `backup`, `db init`.
pub mod cli;
/// The OpenStack cloud: trait Cloud and its implementation (Keystone, Nova, Neutron, Cinder, Heat).
pub mod cloud;
/// Configuration file → validated settings.
pub mod config;
/// The long-running service: spool watching, signals, systemd notification, logging.
pub mod daemon;
/// `vnfkeeper status VNF` and `vnfkeeper ops show ID` (one object in detail) and `-o`.
pub mod describe;
/// Runs LCM operations: step journal, resume, bounded parallel fan-out, retries.
pub mod engine;
/// `vnfkeeper events`: the timeline of one VNF instance (table or stable JSON).
pub mod events;
/// Crash hooks for tests (debug builds only).
pub mod failpoint;
/// `vnfkeeper hot adjust`: arguments and rendering over file contents.
pub mod hot_adjust;
/// Where requests enter: spool directory and request validation.
pub mod intake;
/// The journald `MESSAGE_ID`s of records an operator alerts on.
pub mod message_ids;
/// Prometheus metrics of the daemon (OpenMetrics text for `GET /metrics`).
pub mod metrics;
/// Operator controls: `pause`, `resume`.
pub mod operator;
/// WARN lines at a bounded rate for refusals an outside client can cause at will.
pub mod ratelog;
/// Reconcile: observe, decide (pure policy), heal or record why not.
pub mod reconcile;
/// Remote execution on VNFC hosts: trait Remote, SSH implementation (russh), quoting.
pub mod remote;
/// SQLite: the only module with SQL.
pub mod store;
/// Companion mode with Tacker: the subscription kept and Tacker's API polled into the store.
pub mod tacker;
/// Task verbs: `retry`, `fail`, `rollback`, `heal`, `scale`, `terminate` through the spool.
pub mod verbs;
