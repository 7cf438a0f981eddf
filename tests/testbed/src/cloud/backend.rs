//! The seam between the simulated cloud and the host farm.
//!
//! The cloud never talks to `crate::hosts` directly: it holds an `Option<Arc<dyn HostBackend>>`.
//! `None` means servers are records only. [`crate::cloud::farm`] implements this trait for
//! `crate::hosts::HostFarm`; tests may implement it with a fake to observe calls.

use std::future::Future;
use std::net::Ipv4Addr;
use std::pin::Pin;

/// A boxed, sendable future (the trait must stay object safe).
pub type BoxFut<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What the cloud asks the farm to boot for one ACTIVE server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostRequest {
    /// Nova server id (UUID); the farm's key for the host.
    pub server_id: String,
    /// Hostname (sanitised server name, at most 63 characters).
    pub hostname: String,
    /// The address of the server's first port on the testbed subnet.
    pub ip: Ipv4Addr,
    /// The id of the top-level Heat stack the server belongs to (empty for servers outside Heat).
    pub cluster: String,
    /// Cinder volumes attached at boot.
    pub volumes: Vec<HostVolume>,
    /// The host's profile, from the server's image's Glance properties
    /// ([`crate::hosts::HostProfile::from_image_properties`]).
    pub profile: crate::hosts::HostProfile,
}

/// One volume attached to a host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostVolume {
    /// Cinder volume id; the farm keeps the backing file (and its data) per volume id.
    pub volume_id: String,
    /// Device path inside the host, e.g. `/dev/vdb`.
    pub device: String,
    /// Size in GiB.
    pub size_gib: u32,
}

/// What the farm reports for a started host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostStarted {
    /// The server id it was started for.
    pub server_id: String,
    /// Its address on the bridge.
    pub ip: Ipv4Addr,
    /// Its SSH host public key (OpenSSH one-line format).
    pub host_key: String,
}

/// Operations of the host farm the cloud and the fault injection use.
///
/// All methods are async (boxed futures) and return `anyhow` errors whose text is shown to API
/// clients (server `fault.message`) or fault-injection callers.
pub trait HostBackend: Send + Sync + 'static {
    /// Boots a host for a server; the server becomes ACTIVE only after this returns `Ok`.
    fn start(&self, req: HostRequest) -> BoxFut<'_, anyhow::Result<HostStarted>>;
    /// Stops and removes the host of a server (volume backing files are kept). Unknown ids are fine.
    fn stop(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>>;
    /// [`HostBackend::stop`] for a deleted server: what lived only on its disk is gone too
    /// (a Kubernetes control plane's etcd member). Unknown ids are fine.
    fn delete(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>>;
    /// Removes a volume's backing storage (its data is gone).
    fn delete_volume(&self, volume_id: &str) -> BoxFut<'_, anyhow::Result<()>>;
    /// Stops every host.
    fn shutdown(&self) -> BoxFut<'_, ()>;
    /// Stops the sshd of a host (connections are refused afterwards).
    fn stop_sshd(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>>;
    /// Starts the sshd of a host again.
    fn start_sshd(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<()>>;
    /// Makes every command run over SSH on the host hang (`true`) or run normally (`false`).
    fn set_hang(&self, server_id: &str, hang: bool) -> BoxFut<'_, anyhow::Result<()>>;
    /// Replaces the host's SSH host key; returns the new public key.
    fn rotate_host_key(&self, server_id: &str) -> BoxFut<'_, anyhow::Result<String>>;
    /// Simulates a workload using PV `pv` in the cluster's Kubernetes stand-in: the PV becomes
    /// `Bound` (claim `default/claim-PV`, pod on `node` if given). Errors unless it is `Available`.
    fn bind_pv(
        &self,
        cluster: &str,
        pv: &str,
        node: Option<&str>,
    ) -> BoxFut<'_, anyhow::Result<()>>;
    /// Ends the use of a PV: `Released` (claimRef kept) or, with `released == false`, `Available`.
    fn unbind_pv(&self, cluster: &str, pv: &str, released: bool) -> BoxFut<'_, anyhow::Result<()>>;
    /// Sets a node's `Ready` condition in the cluster's Kubernetes stand-in.
    fn set_node_ready(
        &self,
        cluster: &str,
        node: &str,
        ready: bool,
    ) -> BoxFut<'_, anyhow::Result<()>>;
    /// Hosts as the farm sees them (free-form JSON per host).
    fn hosts_json(&self) -> serde_json::Value;
    /// Moves a running host to the address `ip` (its port was replaced by one on another network
    /// or with another fixed address; Nova re-attaches the interface): the same host, SSH host
    /// key and files, reached at `ip` from now on. The default refuses: only a real farm has
    /// hosts.
    fn readdress(&self, server_id: &str, ip: Ipv4Addr) -> BoxFut<'_, anyhow::Result<()>> {
        let id = server_id.to_string();
        Box::pin(async move { anyhow::bail!("this host backend cannot move host {id} to {ip}") })
    }
    /// Makes the floating address `floating` reach the host at the fixed address `fixed`
    /// (`None`: reach nothing), as a Neutron router's DNAT does. The default does nothing:
    /// without hosts a floating IP is a record only.
    fn set_floating_ip(
        &self,
        floating: Ipv4Addr,
        fixed: Option<Ipv4Addr>,
    ) -> BoxFut<'_, anyhow::Result<()>> {
        let _ = (floating, fixed);
        Box::pin(async { Ok(()) })
    }
    /// Starts the kubespray flavour's Ansible server at `ip` (outside any stack). The default
    /// refuses: only a real farm has one.
    fn start_ansible_server(
        &self,
        ip: Ipv4Addr,
    ) -> BoxFut<'_, anyhow::Result<crate::hosts::AnsibleServer>> {
        Box::pin(async move { anyhow::bail!("this host backend has no Ansible server ({ip})") })
    }
}
