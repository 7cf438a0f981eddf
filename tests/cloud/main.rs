//! The daemon's OpenStack client and SSH remote against the testbed: the `openstack` crate, the
//! real OpenStack command-line clients, and a real sshd.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod cloud_openstack;
mod heat_differential;
mod remote_ssh;
#[path = "../support/mod.rs"]
mod support;
mod testbed_conformance;
