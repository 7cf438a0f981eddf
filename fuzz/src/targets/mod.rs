//! The targets, one module each, each with `pub fn run(data: &[u8])`.

pub mod cloud;
#[cfg(feature = "daemon")]
pub mod clouds;
#[cfg(feature = "daemon")]
pub mod config;
pub mod heat;
pub mod intake;
#[cfg(feature = "daemon")]
pub mod intake_store;
pub mod kubectl;
pub mod mgmt_hook;
pub mod notification;
pub mod package;
pub mod package_dir;
pub mod probe;
pub mod vnfd;
