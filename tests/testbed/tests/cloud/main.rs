//! The simulated cloud: Keystone, Nova, Neutron, Cinder, Glance, Heat and the Tacker stand-in,
//! with and without real hosts, driven by raw HTTP and by the `openstack` crate.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod cloud_api;
mod cloud_common;
mod cloud_floating;
mod cloud_heat;
mod cloud_heat_individual_vnfc;
mod cloud_hosts;
mod cloud_kubespray;
mod cloud_openstack_crate;
mod cloud_tacker;
