//! Intake: where requests enter vnfkeeper. Validates completely, persists, and only then acknowledges.

mod admission;
mod maildir;
pub mod snapshot;
pub mod spool;
pub(crate) use admission::examine_external;
