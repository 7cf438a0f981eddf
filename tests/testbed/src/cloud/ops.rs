//! Operations on the records shared by the APIs, the Heat engine and fault injection.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use serde::Serialize;
use serde_json::{Value, json};

use super::Cloud;
use super::backend::{HostRequest, HostVolume};
use super::faults::FaultRule;
use super::state::{Inner, PortRec, ServerRec, VolumeRec, hostname_of, new_id};

/// A network attachment in a server create request.
#[derive(Clone, Debug)]
pub enum NetReq {
    /// Attach an existing port by id.
    Port(String),
    /// Let Nova create a port on a network (id or name), optionally with a fixed IP.
    Network {
        /// Network id or name (mapped onto the bridge).
        net: String,
        /// Requested address.
        fixed_ip: Option<Ipv4Addr>,
    },
}

/// A server to create.
#[derive(Clone, Debug, Default)]
pub struct ServerSpec {
    /// Display name.
    pub name: String,
    /// Flavor name or id.
    pub flavor: String,
    /// Image name or id (recorded in Glance if unknown).
    pub image: String,
    /// Availability zone (default `nova`).
    pub az: Option<String>,
    /// Networks, in order.
    pub networks: Vec<NetReq>,
    /// Volumes to attach: (volume id, device name such as `vdb` or `/dev/vdb`).
    pub volumes: Vec<(String, String)>,
    /// User data.
    pub user_data: Option<String>,
    /// Config drive requested.
    pub config_drive: bool,
    /// Metadata.
    pub metadata: BTreeMap<String, String>,
    /// Key pair name.
    pub key_name: Option<String>,
    /// Top-level stack id.
    pub cluster: String,
}

/// One row of [`Cloud::hosts`].
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct HostView {
    /// Server id.
    pub server_id: String,
    /// Server name.
    pub name: String,
    /// Nova status.
    pub status: String,
    /// First address.
    pub ip: Option<String>,
    /// Top-level stack id.
    pub cluster: String,
    /// Attached volumes (id, device).
    pub volumes: Vec<(String, String)>,
    /// SSH host key, if the farm reported one.
    pub host_key: Option<String>,
}

fn mac() -> String {
    let b = uuid::Uuid::new_v4().into_bytes();
    format!("fa:16:3e:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2])
}

/// The `allowed_address_pairs` of a Neutron port request: a list of objects, each with a string
/// `ip_address` (kept verbatim); null is an empty list. The error text is Neutron's.
pub(crate) fn allowed_pairs(v: &Value) -> Result<Vec<Value>, String> {
    match v {
        Value::Null => Ok(Vec::new()),
        Value::Array(a) if a.iter().all(|p| p["ip_address"].is_string()) => Ok(a.clone()),
        other => Err(format!(
            "Invalid input for allowed_address_pairs. Reason: {other} is not a list of address pairs."
        )),
    }
}

/// Normalises `vdb` → `/dev/vdb`.
pub fn device_path(d: &str) -> String {
    if d.starts_with("/dev/") {
        d.to_string()
    } else {
        format!("/dev/{d}")
    }
}

impl Cloud {
    /// Creates a port (under the lock). `fixed_ip` reserves that address, else the next free one.
    pub(crate) fn port_create(
        &self,
        inner: &mut Inner,
        net: &str,
        name: &str,
        fixed_ip: Option<Ipv4Addr>,
        allowed_address_pairs: Vec<Value>,
    ) -> Result<String, String> {
        let network_id = inner.network_for(net, &self.default_subnet);
        let subnet_id = inner.networks[&network_id].subnet_id.clone();
        let ip = match fixed_ip {
            Some(ip) => {
                if !self.reserve_ip(inner, ip) {
                    return Err(format!(
                        "IP address {ip} already allocated or outside subnet {}",
                        self.cidr()
                    ));
                }
                ip
            }
            None => self.alloc_ip(inner).ok_or_else(|| {
                format!("no more IP addresses available on subnet {}", self.cidr())
            })?,
        };
        let id = new_id();
        inner.ports.insert(
            id.clone(),
            PortRec {
                id: id.clone(),
                name: name.to_string(),
                network_id,
                ip,
                subnet_id,
                mac: mac(),
                device_id: String::new(),
                device_owner: String::new(),
                created: Utc::now(),
                allowed_address_pairs,
            },
        );
        Ok(id)
    }

    /// Deletes a port and releases its address (unknown ids are fine).
    pub(crate) fn port_delete(&self, inner: &mut Inner, id: &str) {
        if let Some(p) = inner.ports.remove(id) {
            self.release_ip(inner, p.ip);
            let now = Utc::now();
            for s in inner.servers.values_mut() {
                let before = s.ports.len();
                s.ports.retain(|x| x != id);
                if s.ports.len() != before {
                    // Its `addresses` changed.
                    s.updated = now;
                }
            }
        }
    }

    /// Creates a floating IP on network `net` (id or name), associated with port `port_id` if
    /// given (Networking API v2.0 "Create floating IP"; Heat's `OS::Neutron::FloatingIP`), and
    /// makes the farm's router forward it to the port's fixed address. Returns its id.
    /// Errors: an unknown port, an exhausted pool, or the farm failing to route it.
    pub(crate) async fn floating_ip_create(
        &self,
        net: &str,
        port_id: Option<&str>,
    ) -> Result<String, String> {
        let (id, address, fixed) = {
            let mut inner = self.lock();
            let fixed = match port_id {
                Some(p) => Some(
                    inner
                        .ports
                        .get(p)
                        .map(|p| p.ip)
                        .ok_or_else(|| format!("Port {p} could not be found."))?,
                ),
                None => None,
            };
            let network_id = inner.network_for(net, &self.default_subnet);
            let address = self.alloc_floating_ip(&mut inner).ok_or_else(|| {
                format!("No more IP addresses available on network {network_id}.")
            })?;
            let id = new_id();
            inner.floating_ips.insert(
                id.clone(),
                super::state::FloatingIpRec {
                    id: id.clone(),
                    address,
                    network_id,
                    port_id: port_id.map(str::to_owned),
                    fixed,
                    created: Utc::now(),
                },
            );
            (id, address, fixed)
        };
        if let (Some(farm), Some(fixed)) = (&self.farm, fixed) {
            farm.set_floating_ip(address, Some(fixed))
                .await
                .map_err(|e| format!("floating IP {address}: {e:#}"))?;
        }
        Ok(id)
    }

    /// Deletes floating IP `id` (unknown ids are fine): its address is released and no longer
    /// routed.
    pub(crate) async fn floating_ip_delete(&self, id: &str) -> Result<(), String> {
        let rec = {
            let mut inner = self.lock();
            let rec = inner.floating_ips.remove(id);
            if let Some(r) = &rec {
                self.release_ip(&mut inner, r.address);
            }
            rec
        };
        if let (Some(farm), Some(r)) = (&self.farm, rec) {
            farm.set_floating_ip(r.address, None)
                .await
                .map_err(|e| format!("floating IP {}: {e:#}", r.address))?;
        }
        Ok(())
    }

    /// Creates an `available` volume record.
    pub(crate) fn volume_create(
        &self,
        inner: &mut Inner,
        name: &str,
        size: u32,
        volume_type: Option<&str>,
        image: Option<&str>,
        az: Option<&str>,
    ) -> String {
        let image_id = image.map(|i| inner.image_for(i));
        let id = new_id();
        let seq = inner.next_seq();
        inner.volumes.insert(
            id.clone(),
            VolumeRec {
                id: id.clone(),
                name: name.to_string(),
                size: size.max(1),
                status: "available".to_string(),
                volume_type: volume_type.unwrap_or("__DEFAULT__").to_string(),
                image_id,
                attachments: Vec::new(),
                created: Utc::now(),
                az: az.unwrap_or("nova").to_string(),
                seq,
            },
        );
        id
    }

    /// Deletes a volume record and its backing storage in the farm. Errors when it is attached.
    pub(crate) async fn volume_delete(&self, id: &str) -> Result<(), String> {
        {
            let mut inner = self.lock();
            let Some(v) = inner.volumes.get(id) else {
                return Ok(());
            };
            if !v.attachments.is_empty() {
                return Err(format!(
                    "Volume {id} is still attached, detach volume first."
                ));
            }
            inner.volumes.remove(id);
        }
        if let Some(farm) = &self.farm {
            farm.delete_volume(id)
                .await
                .map_err(|e| format!("deleting volume {id}: {e:#}"))?;
        }
        Ok(())
    }

    /// Creates a server record in BUILD (under the lock): ports, volume attachments.
    pub(crate) fn server_begin(
        &self,
        inner: &mut Inner,
        spec: &ServerSpec,
    ) -> Result<String, String> {
        let id = new_id();
        for (vol, _) in &spec.volumes {
            match inner.volumes.get(vol) {
                None => return Err(format!("Volume {vol} could not be found.")),
                Some(v) if !v.attachments.is_empty() => {
                    return Err(format!("Volume {vol} is already attached to a server"));
                }
                Some(_) => {}
            }
        }
        let mut ports = Vec::new();
        let mut own = Vec::new();
        for n in &spec.networks {
            match n {
                NetReq::Port(p) => {
                    let Some(port) = inner.ports.get(p) else {
                        return Err(format!("Port {p} could not be found."));
                    };
                    if !port.device_id.is_empty() {
                        return Err(format!("Port {p} is still in use by {}.", port.device_id));
                    }
                    ports.push(p.clone());
                }
                NetReq::Network { net, fixed_ip } => {
                    let p = self.port_create(inner, net, "", *fixed_ip, Vec::new())?;
                    own.push(p.clone());
                    ports.push(p);
                }
            }
        }
        for p in &ports {
            if let Some(port) = inner.ports.get_mut(p) {
                port.device_id = id.clone();
                port.device_owner = "compute:nova".to_string();
            }
        }
        let mut vols = Vec::new();
        for (vol, dev) in &spec.volumes {
            let dev = device_path(dev);
            if let Some(v) = inner.volumes.get_mut(vol) {
                v.status = "in-use".to_string();
                v.attachments.push((id.clone(), dev.clone(), new_id()));
            }
            vols.push((vol.clone(), dev));
        }
        let image_id = inner.image_for(&spec.image);
        let seq = inner.next_seq();
        let now = Utc::now();
        inner.servers.insert(
            id.clone(),
            ServerRec {
                id: id.clone(),
                name: spec.name.clone(),
                status: "BUILD".to_string(),
                vm_state: "building".to_string(),
                power_state: 0,
                fault: None,
                flavor: spec.flavor.clone(),
                image_id,
                az: spec
                    .az
                    .clone()
                    .filter(|z| !z.is_empty())
                    .unwrap_or_else(|| "nova".to_string()),
                metadata: spec.metadata.clone(),
                key_name: spec.key_name.clone(),
                user_data: spec.user_data.clone(),
                config_drive: spec.config_drive,
                created: now,
                updated: now,
                ports,
                own_ports: own,
                volumes: vols,
                cluster: spec.cluster.clone(),
                host_key: None,
                seq,
            },
        );
        Ok(id)
    }

    /// The farm request for a server, from its records.
    fn host_request(&self, inner: &Inner, id: &str) -> Option<HostRequest> {
        let s = inner.servers.get(id)?;
        let ip = s
            .ports
            .first()
            .and_then(|p| inner.ports.get(p))
            .map(|p| p.ip)?;
        Some(HostRequest {
            server_id: s.id.clone(),
            hostname: hostname_of(&s.name),
            ip,
            cluster: s.cluster.clone(),
            volumes: s
                .volumes
                .iter()
                .map(|(v, d)| HostVolume {
                    volume_id: v.clone(),
                    device: d.clone(),
                    size_gib: inner.volumes.get(v).map(|v| v.size).unwrap_or(1),
                })
                .collect(),
            profile: inner
                .images
                .get(&s.image_id)
                .map(|i| crate::hosts::HostProfile::from_image_properties(&i.properties))
                .unwrap_or_default(),
        })
    }

    fn set_status(&self, id: &str, status: &str, vm_state: &str, power: u8, fault: Option<Value>) {
        let mut inner = self.lock();
        if let Some(s) = inner.servers.get_mut(id) {
            s.status = status.to_string();
            s.vm_state = vm_state.to_string();
            s.power_state = power;
            s.fault = fault;
            s.updated = Utc::now();
        }
    }

    /// Boots a server's host (if there is a farm) and makes it ACTIVE, or ERROR with a fault.
    pub(crate) async fn server_boot(&self, id: &str) -> Result<(), String> {
        let req = { self.host_request(&self.lock(), id) };
        if let Some(farm) = &self.farm {
            let Some(req) = req else {
                let msg =
                    "server has no port on the testbed network: cannot start a host".to_string();
                self.set_status(id, "ERROR", "error", 0, Some(fault_json(500, &msg)));
                return Err(msg);
            };
            match farm.start(req).await {
                Ok(h) => {
                    let mut inner = self.lock();
                    if let Some(s) = inner.servers.get_mut(id) {
                        s.host_key = Some(h.host_key);
                    }
                }
                Err(e) => {
                    let msg = format!("host failed to start: {e:#}");
                    self.set_status(id, "ERROR", "error", 0, Some(fault_json(500, &msg)));
                    return Err(msg);
                }
            }
        }
        let exists = self.lock().servers.contains_key(id);
        if !exists {
            // Deleted while booting.
            if let Some(farm) = &self.farm {
                let _ = farm.delete(id).await;
            }
            return Err(format!("server {id} was deleted while building"));
        }
        self.set_status(id, "ACTIVE", "active", 1, None);
        Ok(())
    }

    /// Deletes a server: stops its host, deletes Nova-created ports, detaches ports and volumes.
    /// Unknown ids are fine (already gone).
    pub(crate) async fn server_delete(&self, id: &str) -> Result<(), String> {
        if !self.lock().servers.contains_key(id) {
            return Ok(());
        }
        if let Some(farm) = &self.farm {
            farm.delete(id)
                .await
                .map_err(|e| format!("stopping host of {id}: {e:#}"))?;
        }
        let mut inner = self.lock();
        let Some(s) = inner.servers.remove(id) else {
            return Ok(());
        };
        // Nova soft-deletes the instance row: `changes-since` still lists it as DELETED.
        let mut gone = s.clone();
        gone.status = "DELETED".to_string();
        gone.vm_state = "deleted".to_string();
        gone.power_state = 0;
        gone.updated = Utc::now();
        gone.ports.clear();
        gone.volumes.clear();
        inner.deleted_servers.insert(gone.id.clone(), gone);
        for p in &s.own_ports {
            self.port_delete(&mut inner, p);
        }
        for p in &s.ports {
            if let Some(port) = inner.ports.get_mut(p) {
                port.device_id.clear();
                port.device_owner.clear();
            }
        }
        for (v, _) in &s.volumes {
            if let Some(vol) = inner.volumes.get_mut(v) {
                vol.attachments.retain(|a| a.0 != id);
                if vol.attachments.is_empty() {
                    vol.status = "available".to_string();
                }
            }
        }
        Ok(())
    }

    /// Nova's interface detach (`DELETE /servers/{id}/os-interface/{port}`, also what Heat
    /// asks before it replaces a server): the port leaves the server; a port Nova created for a
    /// `{network: …}` request is deleted, as Nova does, others stay in Neutron. Returns whether
    /// the server is left without any port (its host is then unreachable and should be stopped,
    /// so that the address can go to the server the port is attached to next).
    ///
    /// Errors: unknown server; the port is not attached to it.
    pub(crate) fn interface_detach(
        &self,
        inner: &mut Inner,
        server_id: &str,
        port: &str,
    ) -> Result<bool, String> {
        let s = inner
            .servers
            .get_mut(server_id)
            .ok_or_else(|| format!("Instance {server_id} could not be found."))?;
        if !s.ports.iter().any(|p| p == port) {
            return Err(format!("Port {port} is not attached"));
        }
        s.ports.retain(|p| p != port);
        let own = s.own_ports.iter().any(|p| p == port);
        s.own_ports.retain(|p| p != port);
        s.updated = Utc::now();
        let orphaned = s.ports.is_empty();
        if own {
            self.port_delete(inner, port);
        } else if let Some(p) = inner.ports.get_mut(port) {
            p.device_id.clear();
            p.device_owner.clear();
        }
        Ok(orphaned)
    }

    /// Nova's volume detach (`DELETE /servers/{id}/os-volume_attachments/{volume}`): the
    /// attachment goes; the volume is `available` once it has none left. The testbed cannot
    /// unplug a loop device from a running host: a server whose host runs (`ACTIVE`, `BUILD`,
    /// `REBOOT`) is refused with 409, like Nova refuses `ERROR` and `BUILD` servers.
    ///
    /// Errors: (404, …) unknown server or volume not attached to it; (409, …) server state.
    pub(crate) fn volume_detach(
        &self,
        inner: &mut Inner,
        server_id: &str,
        volume_id: &str,
    ) -> Result<(), (u16, String)> {
        let s = inner
            .servers
            .get_mut(server_id)
            .ok_or_else(|| (404, format!("Instance {server_id} could not be found.")))?;
        if !s.volumes.iter().any(|(v, _)| v == volume_id) {
            return Err((
                404,
                format!("volume_id not found: {volume_id} is not attached to {server_id}"),
            ));
        }
        if s.status != "SHUTOFF" {
            return Err((
                409,
                format!(
                    "Cannot 'detach_volume' instance {server_id} while it is in vm_state {} (the testbed detaches volumes from stopped servers only)",
                    s.vm_state
                ),
            ));
        }
        s.volumes.retain(|(v, _)| v != volume_id);
        s.updated = Utc::now();
        if let Some(v) = inner.volumes.get_mut(volume_id) {
            v.attachments.retain(|a| a.0 != server_id);
            if v.attachments.is_empty() {
                v.status = "available".to_string();
            }
        }
        Ok(())
    }

    /// Nova `os-stop`: SHUTOFF (the host is stopped; volumes and ports stay).
    pub(crate) async fn server_stop(&self, id: &str) -> Result<(), String> {
        if let Some(farm) = &self.farm {
            farm.stop(id).await.map_err(|e| format!("{e:#}"))?;
        }
        self.set_status(id, "SHUTOFF", "stopped", 4, None);
        Ok(())
    }

    /// Nova `os-start` (also used for a hard reboot): boots the host again.
    pub(crate) async fn server_start(&self, id: &str) -> Result<(), String> {
        self.set_status(id, "BUILD", "building", 0, None);
        self.server_boot(id).await
    }

    // ---- fault injection and inspection (public) ----

    /// Puts a server in ERROR with a `fault` (code 500, `message`) and stops its host.
    ///
    /// Errors: unknown server, farm failure.
    pub async fn inject_server_error(&self, server_id: &str, message: &str) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.lock().servers.contains_key(server_id),
            "no server {server_id}"
        );
        if let Some(farm) = &self.farm {
            farm.stop(server_id).await?;
        }
        self.set_status(
            server_id,
            "ERROR",
            "error",
            0,
            Some(fault_json(500, message)),
        );
        Ok(())
    }

    /// Adds `n` ACTIVE servers named `<prefix>-<i>` outside any stack, without ports or volumes
    /// (no address: a fleet's other servers for benchmarks, listed, changed and deleted like any
    /// other; no host is started for them). Returns their ids.
    pub fn add_idle_servers(&self, n: usize, prefix: &str) -> Vec<String> {
        let mut inner = self.lock();
        let mut ids = Vec::with_capacity(n);
        for i in 0..n {
            let spec = ServerSpec {
                name: format!("{prefix}-{i}"),
                flavor: "m1.tiny".into(),
                image: "cirros-0.5.2-x86_64-disk".into(),
                ..ServerSpec::default()
            };
            let Ok(id) = self.server_begin(&mut inner, &spec) else {
                continue;
            };
            if let Some(s) = inner.servers.get_mut(&id) {
                s.status = "ACTIVE".to_string();
                s.vm_state = "active".to_string();
                s.power_state = 1;
            }
            ids.push(id);
        }
        ids
    }

    /// Stops (`on` false: SHUTOFF, as Nova `os-stop` or a guest shutting itself down) or starts
    /// (`os-start`: BUILD, then ACTIVE) a server behind our back.
    ///
    /// Errors: unknown server, farm failure.
    pub async fn inject_server_power(&self, server_id: &str, on: bool) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.lock().servers.contains_key(server_id),
            "no server {server_id}"
        );
        if on {
            self.server_start(server_id).await
        } else {
            self.server_stop(server_id).await
        }
        .map_err(anyhow::Error::msg)
    }

    /// Deletes a server behind Heat's back (Heat still lists the resource with the old id).
    pub async fn inject_server_vanish(&self, server_id: &str) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.lock().servers.contains_key(server_id),
            "no server {server_id}"
        );
        self.server_delete(server_id)
            .await
            .map_err(anyhow::Error::msg)
    }

    fn farm(&self) -> anyhow::Result<&Arc<dyn super::HostBackend>> {
        self.farm
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the testbed runs without hosts (--no-hosts)"))
    }

    /// Stops the sshd of a server's host.
    pub async fn inject_stop_sshd(&self, server_id: &str) -> anyhow::Result<()> {
        self.farm()?.stop_sshd(server_id).await
    }

    /// Starts the sshd of a server's host again.
    pub async fn inject_start_sshd(&self, server_id: &str) -> anyhow::Result<()> {
        self.farm()?.start_sshd(server_id).await
    }

    /// Makes commands on a server's host hang (or not).
    pub async fn inject_hang(&self, server_id: &str, hang: bool) -> anyhow::Result<()> {
        self.farm()?.set_hang(server_id, hang).await
    }

    /// Records Glance properties of an image (created if no image has this id or name, as any
    /// image a template names exists), e.g. `os_distro=ubuntu`, `os_version=20.04`: they show in
    /// `GET /image/v2/images[/{id}]` as top-level keys and decide the host profile
    /// ([`crate::hosts::HostProfile`]) of servers booted from the image afterwards (a running
    /// host keeps its profile until it is rebuilt). Returns the image id.
    pub fn set_image_properties(
        &self,
        id_or_name: &str,
        properties: BTreeMap<String, String>,
    ) -> String {
        let mut inner = self.lock();
        let id = inner.image_for(id_or_name);
        if let Some(i) = inner.images.get_mut(&id) {
            i.properties.extend(properties);
        }
        id
    }

    /// Records a network (Neutron `GET /v2.0/networks` lists it) named `id_or_name`, or with
    /// that id when it is a UUID, mapped onto the testbed bridge; returns its id (the existing
    /// one's if there is one). The simulated Heat records any network a template names; a real
    /// Heat looks networks up, so they must exist first.
    pub fn add_network(&self, id_or_name: &str) -> String {
        self.lock().network_for(id_or_name, &self.default_subnet)
    }

    /// Makes every server's console output `text` (`None`: back to what cloud-init prints, the
    /// host key blocks of the server's real key). `Some("")` is a console without blocks.
    pub fn set_console_override(&self, text: Option<String>) {
        self.lock().console_override = text;
    }

    /// Gives a server's host a new SSH host key; returns it.
    pub async fn inject_rotate_host_key(&self, server_id: &str) -> anyhow::Result<String> {
        let key = self.farm()?.rotate_host_key(server_id).await?;
        if let Some(s) = self.lock().servers.get_mut(server_id) {
            s.host_key = Some(key.clone());
        }
        Ok(key)
    }

    /// Binds a PV in the cluster's (top-level stack id) Kubernetes stand-in (a claim and a pod,
    /// on `node` if given, use it).
    pub async fn inject_bind_pv(
        &self,
        cluster: &str,
        pv: &str,
        node: Option<&str>,
    ) -> anyhow::Result<()> {
        self.farm()?.bind_pv(cluster, pv, node).await
    }

    /// Unbinds a PV: `Released` when `released`, else `Available`.
    pub async fn inject_unbind_pv(
        &self,
        cluster: &str,
        pv: &str,
        released: bool,
    ) -> anyhow::Result<()> {
        self.farm()?.unbind_pv(cluster, pv, released).await
    }

    /// Sets a node's Ready condition.
    pub async fn inject_node_ready(
        &self,
        cluster: &str,
        node: &str,
        ready: bool,
    ) -> anyhow::Result<()> {
        self.farm()?.set_node_ready(cluster, node, ready).await
    }

    /// Adds an API fault rule for a service (`identity`, `compute`, `network`, `volume`, `image`,
    /// `orchestration`).
    pub fn add_api_fault(&self, service: &str, rule: FaultRule) {
        self.lock().faults.add(service, rule);
    }

    /// Removes the fault rules of a service, or all with `None`.
    pub fn clear_api_faults(&self, service: Option<&str>) {
        self.lock().faults.clear(service);
    }

    /// The installed fault rules.
    pub fn api_faults(&self) -> BTreeMap<String, Vec<FaultRule>> {
        self.lock().faults.list()
    }

    /// Request counters: service → `"METHOD /normalised/path"` → count (ids shown as `{id}`).
    pub fn request_counts(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        self.lock().counters.clone()
    }

    /// Total requests per service.
    pub fn request_totals(&self) -> BTreeMap<String, u64> {
        self.lock()
            .counters
            .iter()
            .map(|(k, v)| (k.clone(), v.values().sum()))
            .collect()
    }

    /// Resets the request counters.
    pub fn reset_request_counts(&self) {
        self.lock().counters.clear();
    }

    /// Every server with its address and state.
    pub fn hosts(&self) -> Vec<HostView> {
        let inner = self.lock();
        let mut v: Vec<HostView> = inner
            .servers
            .values()
            .map(|s| HostView {
                server_id: s.id.clone(),
                name: s.name.clone(),
                status: s.status.clone(),
                ip: s
                    .ports
                    .first()
                    .and_then(|p| inner.ports.get(p))
                    .map(|p| p.ip.to_string()),
                cluster: s.cluster.clone(),
                volumes: s.volumes.clone(),
                host_key: s.host_key.clone(),
            })
            .collect();
        v.sort_by(|a, b| a.name.cmp(&b.name));
        v
    }

    /// The farm's own view of its hosts (`null` without a farm).
    pub fn farm_hosts(&self) -> Value {
        self.farm
            .as_ref()
            .map(|f| f.hosts_json())
            .unwrap_or(Value::Null)
    }

    /// Polls a stack (top-level, by name or id) until its status no longer ends in `_IN_PROGRESS`;
    /// returns `(stack_status, stack_status_reason)`. Errors on timeout or unknown stack.
    pub async fn wait_stack(
        &self,
        name_or_id: &str,
        timeout: Duration,
    ) -> anyhow::Result<(String, String)> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let st = {
                let inner = self.lock();
                super::heat::find_stack(&inner, name_or_id, true)
                    .map(|s| (s.status_string(), s.reason.clone()))
            };
            match st {
                Some((s, r)) if !s.ends_with("_IN_PROGRESS") => return Ok((s, r)),
                Some(_) => {}
                None => anyhow::bail!("no stack {name_or_id}"),
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "timeout waiting for stack {name_or_id}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Number of server, port and volume records (for "nothing left" checks).
    pub fn record_counts(&self) -> (usize, usize, usize) {
        let inner = self.lock();
        (inner.servers.len(), inner.ports.len(), inner.volumes.len())
    }
}

/// A Nova `fault` object.
pub(crate) fn fault_json(code: u16, message: &str) -> Value {
    json!({"code": code, "message": message, "created": super::state::ts(&Utc::now()), "details": ""})
}
