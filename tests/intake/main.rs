//! Intake and the store: the spool end to end, hostile entries, crashes during intake, a busy
//! database, start-up checks (one daemon per state, the spool against the database, keyed
//! digests), secrets at rest, request fixtures and package snapshots.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod ha_fencing;
mod intake_busy;
mod package_snapshot;
mod secrets_at_rest;
mod spool_crash;
mod spool_hostile;
mod spool_intake;
mod startup_guards;
mod store_startup;
#[path = "../support/mod.rs"]
mod support;
mod tacker_samples;
mod wire_fixtures;
