//! Intake: where requests enter vnfkeeper. Validates completely, persists, and only then acknowledges.

mod admission;
pub mod check;
mod maildir;
pub mod snapshot;
pub mod spool;
pub(crate) use admission::examine_external;
pub(crate) use admission::precheck;
