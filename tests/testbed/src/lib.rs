//! Testbed: a simulated OpenStack cloud whose servers are real SSH hosts in network namespaces.
//!
//! Test infrastructure only; never shipped in the .deb/.rpm.

pub mod cloud;
pub mod hosts;
