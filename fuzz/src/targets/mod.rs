//! The targets, one module each, each with `pub fn run(data: &[u8])`.

pub mod cloud;
pub mod config;
pub mod intake;
pub mod notification;
pub mod package;
pub mod probe;
pub mod vnfd;
