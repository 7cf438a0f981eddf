//! The host farm: isolation, SSH, volumes, NFS, faults, crash cleanup, scale, the Ubuntu profile
//! the kubespray flavour's Ansible server, Tacker's real `install_k8s_cluster.sh` and a cluster VIP
//! with the real HAProxy and keepalived.
//!
//! One test binary per subject (fewer links, one process per test under nextest); each module
//! is one former test file, its tests unchanged.

mod hosts_common;
mod hosts_crash;
mod hosts_farm;
mod hosts_kubespray;
mod hosts_scale;
mod hosts_smoke;
mod hosts_tacker_script;
mod hosts_ubuntu;
mod hosts_vip;
