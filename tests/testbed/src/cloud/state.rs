//! In-memory records of the simulated cloud (servers, ports, networks, volumes, images, stacks).
//!
//! Everything lives in one [`Inner`] behind a `std::sync::Mutex` that is never held across an
//! `.await`.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::Ipv4Addr;

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::faults::FaultTable;
use super::heat::Stack;

/// A Nova server.
#[derive(Clone, Debug)]
pub struct ServerRec {
    /// UUID.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Nova status: `BUILD`, `ACTIVE`, `SHUTOFF`, `ERROR`, `REBOOT`.
    pub status: String,
    /// `OS-EXT-STS:vm_state`: `building`, `active`, `stopped`, `error`.
    pub vm_state: String,
    /// `OS-EXT-STS:power_state`: 0 no state, 1 running, 4 shutdown.
    pub power_state: u8,
    /// `fault` object shown when in ERROR.
    pub fault: Option<Value>,
    /// Flavor name as requested.
    pub flavor: String,
    /// Image id (a Glance record exists for it).
    pub image_id: String,
    /// `OS-EXT-AZ:availability_zone`.
    pub az: String,
    /// Server metadata.
    pub metadata: BTreeMap<String, String>,
    /// `key_name`.
    pub key_name: Option<String>,
    /// Base64 or plain user data as given.
    pub user_data: Option<String>,
    /// Whether a config drive was requested.
    pub config_drive: bool,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Last update time.
    pub updated: DateTime<Utc>,
    /// Port ids in attachment order.
    pub ports: Vec<String>,
    /// Ports Nova created itself (for `{network: ...}` requests); deleted with the server.
    pub own_ports: Vec<String>,
    /// Attached volumes: (volume id, device path).
    pub volumes: Vec<(String, String)>,
    /// Top-level Heat stack id (empty outside Heat).
    pub cluster: String,
    /// SSH host key reported by the farm.
    pub host_key: Option<String>,
    /// Monotonic creation sequence (sort key).
    pub seq: u64,
}

/// A Neutron port.
#[derive(Clone, Debug)]
pub struct PortRec {
    /// UUID.
    pub id: String,
    /// Name (may be empty).
    pub name: String,
    /// Network id as the client named it (every network is the testbed bridge).
    pub network_id: String,
    /// Address on the testbed subnet.
    pub ip: Ipv4Addr,
    /// Subnet id the address belongs to.
    pub subnet_id: String,
    /// MAC address `fa:16:3e:xx:xx:xx`.
    pub mac: String,
    /// Server id or empty.
    pub device_id: String,
    /// `compute:nova` when attached, else empty.
    pub device_owner: String,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Extra fields kept verbatim (allowed_address_pairs …).
    pub allowed_address_pairs: Vec<Value>,
}

/// A Neutron floating IP (Networking API v2.0 "Floating IPs"): an address of the floating
/// pool that the host farm's router ([`crate::hosts::HostFarm::set_floating_ip`]) DNATs to the
/// fixed address of the port it is associated with.
#[derive(Clone, Debug)]
pub struct FloatingIpRec {
    /// UUID.
    pub id: String,
    /// The floating address (`floating_ip_address`).
    pub address: Ipv4Addr,
    /// The floating network's id as the client named it (`floating_network_id`).
    pub network_id: String,
    /// The associated port, if any (`port_id`).
    pub port_id: Option<String>,
    /// That port's fixed address (`fixed_ip_address`).
    pub fixed: Option<Ipv4Addr>,
    /// Creation time.
    pub created: DateTime<Utc>,
}

/// A Neutron network (all are mapped onto the one testbed bridge).
#[derive(Clone, Debug)]
pub struct NetworkRec {
    /// UUID (or the id a client asked for).
    pub id: String,
    /// Name.
    pub name: String,
    /// Its (single) subnet id.
    pub subnet_id: String,
    /// Creation time.
    pub created: DateTime<Utc>,
}

/// A subnet created through the Networking API (`POST /v2.0/subnets`, what a real Heat's
/// `OS::Neutron::Subnet` calls). Addresses of ports on its network still come from the network's
/// own subnet ([`NetworkRec::subnet_id`]), the testbed's bridge: the record is what Neutron shows.
#[derive(Clone, Debug)]
pub struct SubnetRec {
    /// UUID.
    pub id: String,
    /// Its network's id.
    pub network_id: String,
    /// Name.
    pub name: String,
    /// The CIDR the client asked for, as given (e.g. `10.20.0.0/24`).
    pub cidr: String,
    /// 4 or 6.
    pub ip_version: u8,
    /// Creation time.
    pub created: DateTime<Utc>,
}

/// A Cinder volume.
#[derive(Clone, Debug)]
pub struct VolumeRec {
    /// UUID.
    pub id: String,
    /// Name (never null in the API: empty string when unnamed).
    pub name: String,
    /// Size in GiB.
    pub size: u32,
    /// `available`, `in-use`, `creating`, `deleting`, `error`.
    pub status: String,
    /// Volume type name.
    pub volume_type: String,
    /// Image id the volume was created from, if any.
    pub image_id: Option<String>,
    /// (server id, device, attachment id).
    pub attachments: Vec<(String, String, String)>,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Availability zone.
    pub az: String,
    /// Monotonic creation sequence.
    pub seq: u64,
}

/// A Glance image.
#[derive(Clone, Debug)]
pub struct ImageRec {
    /// UUID.
    pub id: String,
    /// Name.
    pub name: String,
    /// Creation time.
    pub created: DateTime<Utc>,
    /// Additional properties (Glance v2 shows them as top-level keys of the image), e.g.
    /// `os_distro`, `os_version`; they decide the host profile of servers booted from it.
    pub properties: BTreeMap<String, String>,
    /// `queued` (created, no data yet) or `active`.
    pub status: &'static str,
    /// `public`, `private`, `shared` or `community`.
    pub visibility: String,
    /// Tags (`GET /v2/images?tag=` filters on them).
    pub tags: Vec<String>,
    /// `disk_format` (e.g. `qcow2`), `container_format` (e.g. `bare`).
    pub formats: (String, String),
    /// Minimum disk (GiB) and RAM (MiB) to boot it.
    pub min_disk_ram: (u64, u64),
    /// Size of the uploaded data in bytes and its SHA-512 (hex); `None` before an upload
    /// (the images that exist from the start answer 1 GiB and no hash).
    pub data: Option<(u64, String)>,
}

impl ImageRec {
    /// An active public qcow2 image without data of its own (the testbed's own images).
    pub fn active(id: String, name: String) -> ImageRec {
        ImageRec {
            id,
            name,
            created: Utc::now(),
            properties: BTreeMap::new(),
            status: "active",
            visibility: "public".into(),
            tags: Vec::new(),
            formats: ("qcow2".into(), "bare".into()),
            min_disk_ram: (0, 0),
            data: None,
        }
    }
}

/// Everything the cloud knows, behind one lock.
#[derive(Default)]
pub struct Inner {
    /// Issued tokens → expiry.
    pub tokens: HashMap<String, DateTime<Utc>>,
    /// Servers by id.
    pub servers: BTreeMap<String, ServerRec>,
    /// Deleted servers by id, status `DELETED`, `updated` = deletion time: Nova keeps the
    /// soft-deleted row and lists it only to `changes-since` queries.
    pub deleted_servers: BTreeMap<String, ServerRec>,
    /// Ports by id.
    pub ports: BTreeMap<String, PortRec>,
    /// Networks by id.
    pub networks: BTreeMap<String, NetworkRec>,
    /// Subnets created through the Networking API by id (each network's own subnet is not here).
    pub subnets: BTreeMap<String, SubnetRec>,
    /// Floating IPs by id.
    pub floating_ips: BTreeMap<String, FloatingIpRec>,
    /// Volumes by id.
    pub volumes: BTreeMap<String, VolumeRec>,
    /// Images by id.
    pub images: BTreeMap<String, ImageRec>,
    /// Heat stacks (top-level and nested) by id.
    pub stacks: BTreeMap<String, Stack>,
    /// Host offsets (last octet for a /24) in use.
    pub ips_in_use: BTreeSet<u32>,
    /// Sequence counter.
    pub seq: u64,
    /// Request counters: service → "METHOD /path" → count.
    pub counters: BTreeMap<String, BTreeMap<String, u64>>,
    /// Fault rules per service.
    pub faults: FaultTable,
    /// Console output of every server instead of what cloud-init prints (`None`: cloud-init's
    /// host key blocks for the server's real host key, once its host is up).
    pub console_override: Option<String>,
}

impl Inner {
    /// Next sequence number.
    pub fn next_seq(&mut self) -> u64 {
        self.seq += 1;
        self.seq
    }

    /// Finds a network by id or name, creating a record mapped onto the bridge if unknown.
    pub fn network_for(&mut self, id_or_name: &str, default_subnet: &str) -> String {
        if let Some(n) = self.networks.get(id_or_name) {
            return n.id.clone();
        }
        if let Some(n) = self.networks.values().find(|n| n.name == id_or_name) {
            return n.id.clone();
        }
        let looks_like_id = uuid::Uuid::parse_str(id_or_name).is_ok();
        let id = if looks_like_id {
            id_or_name.to_string()
        } else {
            new_id()
        };
        let name = if looks_like_id {
            format!("net-{}", &id[..8])
        } else {
            id_or_name.to_string()
        };
        let subnet_id = if self.networks.is_empty() {
            default_subnet.to_string()
        } else {
            new_id()
        };
        self.networks.insert(
            id.clone(),
            NetworkRec {
                id: id.clone(),
                name,
                subnet_id,
                created: Utc::now(),
            },
        );
        id
    }

    /// Finds an image by id or name, recording a new one if unknown (any image a template asks for exists).
    pub fn image_for(&mut self, id_or_name: &str) -> String {
        if self.images.contains_key(id_or_name) {
            return id_or_name.to_string();
        }
        if let Some(i) = self.images.values().find(|i| i.name == id_or_name) {
            return i.id.clone();
        }
        let looks_like_id = uuid::Uuid::parse_str(id_or_name).is_ok();
        let id = if looks_like_id {
            id_or_name.to_string()
        } else {
            new_id()
        };
        self.images.insert(
            id.clone(),
            ImageRec::active(id.clone(), id_or_name.to_string()),
        );
        id
    }
}

/// A new random UUID string.
pub fn new_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// A Heat-style short id: 12 lowercase alphanumerics.
pub fn short_id() -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut n = uuid::Uuid::new_v4().as_u128();
    let mut s = String::with_capacity(12);
    for _ in 0..12 {
        s.push(ALPHABET[(n % 36) as usize] as char);
        n /= 36;
    }
    s
}

/// A random float in [0, 1).
pub fn random_unit() -> f64 {
    (uuid::Uuid::new_v4().as_u128() >> 75) as f64 / (1u64 << 53) as f64
}

/// Nova/Heat timestamp format `2026-01-01T00:00:00Z`.
pub fn ts(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Cinder/Neutron timestamp format `2026-01-01T00:00:00.000000`.
pub fn ts_micro(t: &DateTime<Utc>) -> String {
    t.format("%Y-%m-%dT%H:%M:%S%.6f").to_string()
}

/// Sanitises a server name into a hostname (RFC 1123 label, at most 63 characters).
pub fn hostname_of(name: &str) -> String {
    let mut h: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    h.truncate(63);
    let h = h.trim_matches('-').to_string();
    if h.is_empty() {
        "server".to_string()
    } else {
        h
    }
}
