//! Intake: where requests enter vnfkeeper. Validates completely, persists, and only then acknowledges.

pub mod spool;
pub mod wire;
