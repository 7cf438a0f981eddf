//! The engine on the testbed: instantiate, lifecycle operations, crash and resume, the
//! kubespray and registry flavours, individual VNFC management, host keys and journal fields.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod engine_ansible_events;
mod engine_change_ext_conn;
mod engine_crash;
mod engine_floating_ip;
mod engine_heal_crash;
mod engine_host_keys;
mod engine_individual_vnfc;
mod engine_instantiate;
mod engine_journal_fields;
mod engine_kubespray;
mod engine_kubespray_crash;
mod engine_kubespray_names;
mod engine_kubespray_trust;
mod engine_lifecycle;
mod engine_package_swap;
mod engine_real_heat;
mod engine_registry;
mod engine_registry_crash;
mod engine_registry_trust;
mod engine_registry_unready;
mod engine_resume;
mod engine_storage_heal_tacker;
#[path = "../support/mod.rs"]
mod support;
