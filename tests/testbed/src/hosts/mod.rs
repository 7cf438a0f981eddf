//! Real hosts behind simulated servers: network namespaces, copy-on-write roots, sshd, loop-device volumes.
//!
//! Every ACTIVE server of the simulated cloud is backed by one host of a [`HostFarm`]:
//! - its own network namespace (`{prefix}-h{N}`) on a private bridge (`{prefix}-br`, default
//!   10.231.0.1/24) through a veth pair (`{prefix}-v{N}` on the bridge, `eth0` inside), with no
//!   default route;
//! - its own mount, UTS and PID namespaces: a copy-on-write overlay of the machine's root file
//!   system (upper layer on tmpfs), a private `/dev` (with the attached volumes as block-device
//!   nodes), `/run` and `/tmp`;
//! - a small init (PID 1, bash) that supervises the host's own `sshd -D` with a fresh ed25519 host
//!   key; login `ubuntu`/`ubuntu` (passwordless sudo) and root by the testbed key
//!   ([`root_key_path`]);
//! - an sshd `ForceCommand` wrapper that records every command ([`HostFarm::command_log`]) and
//!   implements the "hang" fault; a mkfs wrapper that records every mkfs run
//!   ([`HostFarm::mkfs_log`]);
//! - stand-ins for what cannot run here (`apt-get`, `systemctl`, `exportfs` over nfs-ganesha,
//!   `kubectl` over a per-cluster [`KubeStore`]); see `tests/testbed/standins/`.
//!
//! - a profile ([`HostProfile`]): the machine's Debian, or Ubuntu 20.04's `/etc/os-release` with
//!   `kubectl` absent until `apt-get install kubectl`.
//!
//! Everything needs root. [`down_all`] removes leftovers of a crashed run by name prefix. Farms
//! lease their prefix and network machine-wide ([`Lease`]), so tests may start farms in parallel.

mod ansible;
mod cleanup;
mod farm;
mod kube;
mod lease;
mod net;
mod packages;
mod profile;
mod seed;
mod spawner;
mod util;

pub use ansible::{
    ANSIBLE_PASSWORD, ANSIBLE_SERVER_FILE, ANSIBLE_SERVER_ID, ANSIBLE_USER, AnsibleServer,
    KUBESPRAY_ROOT,
};
pub use cleanup::{DownReport, down_all};
pub use farm::{
    FarmConfig, HostFarm, HostInfo, HostSpec, HostState, HostStatus, VolumeSpec, root_key_path,
};
pub use kube::KubeStore;
pub use lease::Lease;
pub use packages::{HOST_PACKAGES, LEAN_HOST_PACKAGES, install_packages, setup_packages};
pub use profile::HostProfile;
