//! Reconcile: the loop against the testbed with faults, its daemon commands and its SSH probes.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod reconcile;
mod reconcile_daemon;
mod reconcile_probes;
#[path = "../support/mod.rs"]
mod support;
