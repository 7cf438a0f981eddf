//! Our own tolerant views of OpenStack resources (servers, ports, volumes, stacks, stack
//! resources).
//!
//! Every field except `id` defaults when missing or `null`, and unknown fields are ignored, so a
//! cloud that omits an attribute (or Cinder's `name: null` for a volume created without a name,
//! which the `openstack` crate's typed `Volume` cannot decode) does not break a whole listing. A
//! list item without an `id` still fails the listing: dropping it silently would make a live
//! server look gone.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

mod status;

pub use status::StackStatus;

/// `null` or missing → `T::default()`.
fn nullable<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Any JSON scalar as a string (`null` → empty); objects/arrays as their JSON text.
fn lenient_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Null => String::new(),
        Value::String(s) => s,
        other => other.to_string(),
    })
}

/// A map whose values may be any JSON: strings stay, others become their JSON text.
fn lenient_string_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<BTreeMap<String, String>, D::Error> {
    let m: Option<BTreeMap<String, Value>> = Option::deserialize(d)?;
    Ok(m.unwrap_or_default()
        .into_iter()
        .map(|(k, v)| {
            let v = match v {
                Value::String(s) => s,
                Value::Null => String::new(),
                o => o.to_string(),
            };
            (k, v)
        })
        .collect())
}

/// Identifies a Heat stack: Heat addresses stacks as `/stacks/{name}/{id}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct StackRef {
    /// Stack name (`stack_name`).
    pub name: String,
    /// Stack id (UUID).
    pub id: String,
}

impl StackRef {
    /// A reference from name and id.
    pub fn new(name: impl Into<String>, id: impl Into<String>) -> StackRef {
        StackRef {
            name: name.into(),
            id: id.into(),
        }
    }

    /// Parses the `…/stacks/{name}/{id}` tail of a Heat stack link (`links[rel=stack|self|nested]`).
    /// Returns `None` when the URL has no such tail.
    pub fn from_href(href: &str) -> Option<StackRef> {
        let path = href.split(['?', '#']).next().unwrap_or(href);
        let segs: Vec<&str> = path.trim_end_matches('/').split('/').collect();
        let i = segs.iter().rposition(|s| *s == "stacks")?;
        match (segs.get(i + 1), segs.get(i + 2)) {
            (Some(n), Some(id)) if !n.is_empty() && !id.is_empty() && segs.len() == i + 3 => {
                Some(StackRef::new(percent_decode(n), percent_decode(id)))
            }
            _ => None,
        }
    }
}

impl std::fmt::Display for StackRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.name, self.id)
    }
}

/// Decodes `%XX` escapes (invalid escapes are kept as they are).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 3])
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
        {
            out.push(v);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Body of a stack create (`POST /stacks`) or full update (`PUT /stacks/{name}/{id}`).
///
/// Heat Orchestration API v1, "Create stack" / "Update stack": `template` is the top-level HOT as
/// a JSON object; `files` maps the names the templates use (`type: masterNode.yaml`,
/// `get_file`) to their text; `parameters` values may be JSON objects for `type: json`
/// parameters (the `nfv` parameter).
#[derive(Clone, Debug, PartialEq)]
pub struct StackCreate {
    /// `stack_name` (create only; ignored by the full update). Must start with a letter and
    /// contain only letters, digits, `_`, `-`, `.`.
    pub stack_name: String,
    /// The top-level template (HOT) as a JSON object.
    pub template: Value,
    /// Nested templates and files by the name the templates reference them with.
    pub files: BTreeMap<String, String>,
    /// Stack parameters, e.g. `{"nfv": {"VDU": {…}, "CP": {…}}}`.
    pub parameters: serde_json::Map<String, Value>,
    /// Heat's `timeout_mins` for the create/update; `None` = the cloud's default.
    pub timeout_mins: Option<u32>,
    /// Heat's `disable_rollback` (default `true`: a failed create keeps its resources for
    /// inspection and heal, as Tacker does).
    pub disable_rollback: bool,
}

impl StackCreate {
    /// A request with no files and no parameters, no timeout, rollback disabled.
    pub fn new(stack_name: impl Into<String>, template: Value) -> StackCreate {
        StackCreate {
            stack_name: stack_name.into(),
            template,
            files: BTreeMap::new(),
            parameters: serde_json::Map::new(),
            timeout_mins: None,
            disable_rollback: true,
        }
    }

    /// The JSON body for `POST /stacks` (with `stack_name`) or `PUT` (without).
    pub fn body(&self, with_name: bool) -> Value {
        let mut m = serde_json::Map::new();
        if with_name {
            m.insert("stack_name".into(), Value::String(self.stack_name.clone()));
        }
        m.insert("template".into(), self.template.clone());
        m.insert(
            "files".into(),
            serde_json::to_value(&self.files).unwrap_or(Value::Null),
        );
        m.insert("parameters".into(), Value::Object(self.parameters.clone()));
        m.insert(
            "disable_rollback".into(),
            Value::Bool(self.disable_rollback),
        );
        if let Some(t) = self.timeout_mins {
            m.insert("timeout_mins".into(), Value::from(t));
        }
        Value::Object(m)
    }
}

/// One stack output (`outputs[]` of `GET /stacks/{name}/{id}`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StackOutput {
    /// `output_key`.
    #[serde(default, deserialize_with = "nullable")]
    pub output_key: String,
    /// `output_value` (any JSON; `null` when it could not be resolved).
    #[serde(default)]
    pub output_value: Value,
    /// `description`.
    #[serde(default, deserialize_with = "nullable")]
    pub description: String,
    /// `output_error` when Heat could not resolve the value.
    #[serde(default)]
    pub output_error: Option<String>,
}

/// A stack as shown by `GET /stacks/{name}/{id}` (Heat API v1 "Show stack details").
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stack {
    /// Stack id.
    pub id: String,
    /// `stack_name`.
    #[serde(default, deserialize_with = "nullable")]
    pub stack_name: String,
    /// `stack_status`, `<ACTION>_<STATE>`, e.g. `CREATE_COMPLETE`, `UPDATE_IN_PROGRESS`.
    #[serde(default, deserialize_with = "nullable")]
    pub stack_status: StackStatus,
    /// `stack_status_reason`.
    #[serde(default, deserialize_with = "lenient_string")]
    pub stack_status_reason: String,
    /// `outputs` (empty when Heat omits them).
    #[serde(default, deserialize_with = "nullable")]
    pub outputs: Vec<StackOutput>,
    /// `parameters` as Heat shows them (values are strings; `json` parameters are JSON text).
    #[serde(default, deserialize_with = "nullable")]
    pub parameters: BTreeMap<String, Value>,
    /// `creation_time` (ISO 8601, as given).
    #[serde(default)]
    pub creation_time: Option<String>,
    /// `updated_time` (ISO 8601, as given).
    #[serde(default)]
    pub updated_time: Option<String>,
    /// `parent` stack id for nested stacks.
    #[serde(default)]
    pub parent: Option<String>,
}

impl Stack {
    /// The reference `name/id` of this stack.
    pub fn reference(&self) -> StackRef {
        StackRef::new(self.stack_name.clone(), self.id.clone())
    }

    /// The output value named `key`, if present and resolved.
    pub fn output(&self, key: &str) -> Option<&Value> {
        self.outputs
            .iter()
            .find(|o| o.output_key == key)
            .map(|o| &o.output_value)
            .filter(|v| !v.is_null())
    }

    /// A parameter as JSON: Heat shows `json` parameters as JSON text; this parses them back
    /// (other values are returned as they are).
    pub fn parameter_json(&self, key: &str) -> Option<Value> {
        let v = self.parameters.get(key)?;
        Some(match v {
            Value::String(s) => serde_json::from_str(s).unwrap_or_else(|_| v.clone()),
            _ => v.clone(),
        })
    }

    /// True while the status ends in `_IN_PROGRESS` (see [`StackStatus::is_in_progress`]).
    pub fn is_in_progress(&self) -> bool {
        self.stack_status.is_in_progress()
    }

    /// True for `*_FAILED` and for `ROLLBACK_COMPLETE` (see [`StackStatus::is_failed`]).
    pub fn is_failed(&self) -> bool {
        self.stack_status.is_failed()
    }
}

/// One entry of `GET /stacks/{name}/{id}/resources?nested_depth=N` (Heat API v1 "List
/// resources").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StackResource {
    /// `resource_name` (the logical name in its template, e.g. `workerNode`).
    pub resource_name: String,
    /// `physical_resource_id` (Nova server id, Neutron port id, Cinder volume id, nested stack
    /// id); empty while not created.
    pub physical_resource_id: String,
    /// `resource_type`, e.g. `OS::Nova::Server`, `OS::Heat::AutoScalingGroup`, `workerNode.yaml`.
    pub resource_type: String,
    /// `resource_status`, e.g. `CREATE_COMPLETE`, `CHECK_FAILED`.
    pub resource_status: String,
    /// `resource_status_reason`.
    pub status_reason: String,
    /// The stack that holds this resource (from `links[rel=stack]`); for a nested resource this
    /// is the nested stack, which is where `mark_unhealthy` must be sent.
    pub stack: StackRef,
    /// `parent_resource`: the resource of the parent stack that owns `stack` (e.g. the ASG
    /// member), `None` at the top level.
    pub parent_resource: Option<String>,
    /// The nested stack this resource creates (from `links[rel=nested]`), if any.
    pub nested_stack: Option<StackRef>,
    /// `required_by`: resources of the same stack that depend on this one.
    pub required_by: Vec<String>,
}

/// Wire form of a resource entry (tolerant), converted into [`StackResource`].
#[derive(Deserialize)]
pub struct RawResource {
    #[serde(default, deserialize_with = "nullable")]
    resource_name: String,
    #[serde(default, deserialize_with = "nullable")]
    logical_resource_id: String,
    #[serde(default, deserialize_with = "lenient_string")]
    physical_resource_id: String,
    #[serde(default, deserialize_with = "nullable")]
    resource_type: String,
    #[serde(default, deserialize_with = "nullable")]
    resource_status: String,
    #[serde(default, deserialize_with = "lenient_string")]
    resource_status_reason: String,
    #[serde(default)]
    parent_resource: Option<String>,
    #[serde(default, deserialize_with = "nullable")]
    links: Vec<Link>,
    #[serde(default, deserialize_with = "nullable")]
    required_by: Vec<String>,
}

/// A `{"href", "rel"}` link of a Heat API resource entry.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct Link {
    /// Target URL.
    #[serde(default, deserialize_with = "nullable")]
    pub href: String,
    /// Relation, e.g. `stack`, `nested`.
    #[serde(default, deserialize_with = "nullable")]
    pub rel: String,
}

impl RawResource {
    /// Converts; `queried` is the stack the listing was asked for (used when the entry has no
    /// `rel=stack` link).
    pub fn into_resource(self, queried: &StackRef) -> StackResource {
        let link = |rel: &str| {
            self.links
                .iter()
                .find(|l| l.rel == rel)
                .and_then(|l| StackRef::from_href(&l.href))
        };
        let stack = link("stack").unwrap_or_else(|| queried.clone());
        let nested_stack = link("nested");
        StackResource {
            resource_name: if self.resource_name.is_empty() {
                self.logical_resource_id
            } else {
                self.resource_name
            },
            physical_resource_id: self.physical_resource_id,
            resource_type: self.resource_type,
            resource_status: self.resource_status,
            status_reason: self.resource_status_reason,
            stack,
            parent_resource: self.parent_resource.filter(|p| !p.is_empty()),
            nested_stack,
            required_by: self.required_by,
        }
    }
}

/// One address of a server (`addresses.<network>[]`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerAddress {
    /// The IP address as text.
    #[serde(default, deserialize_with = "nullable")]
    pub addr: String,
    /// IP version (4 or 6), 0 if not given.
    #[serde(default, deserialize_with = "nullable")]
    pub version: u8,
    /// `OS-EXT-IPS:type`: `fixed` or `floating`, if given.
    #[serde(default, rename = "OS-EXT-IPS:type")]
    pub kind: Option<String>,
    /// `OS-EXT-IPS-MAC:mac_addr`, if given.
    #[serde(default, rename = "OS-EXT-IPS-MAC:mac_addr")]
    pub mac: Option<String>,
}

/// A Nova server from `GET /servers/detail` (Compute API v2.1 "List Servers Detailed").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Server {
    /// Server id.
    pub id: String,
    /// Display name.
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// Nova `status`: `ACTIVE`, `BUILD`, `ERROR`, `SHUTOFF`, `REBOOT`, `HARD_REBOOT`, …
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// Network name → addresses on it.
    #[serde(default, deserialize_with = "nullable")]
    pub addresses: BTreeMap<String, Vec<ServerAddress>>,
    /// `fault.message` (present for `ERROR` servers).
    #[serde(default, deserialize_with = "fault_message")]
    pub fault: Option<String>,
    /// `metadata` (values that are not strings are kept as JSON text).
    #[serde(default, deserialize_with = "lenient_string_map")]
    pub metadata: BTreeMap<String, String>,
    /// `updated` (ISO 8601, as given).
    #[serde(default)]
    pub updated: Option<String>,
    /// `created` (ISO 8601, as given).
    #[serde(default)]
    pub created: Option<String>,
    /// `OS-EXT-STS:task_state` (e.g. `spawning`, `rebuilding`), if given.
    #[serde(default, rename = "OS-EXT-STS:task_state")]
    pub task_state: Option<String>,
    /// `OS-EXT-STS:vm_state` (e.g. `active`, `error`), if given.
    #[serde(default, rename = "OS-EXT-STS:vm_state")]
    pub vm_state: Option<String>,
    /// `OS-EXT-STS:power_state` (1 = running, 4 = shutdown), if given.
    #[serde(default, rename = "OS-EXT-STS:power_state")]
    pub power_state: Option<u8>,
    /// Ids from `os-extended-volumes:volumes_attached`.
    #[serde(
        default,
        rename = "os-extended-volumes:volumes_attached",
        deserialize_with = "volume_ids"
    )]
    pub volumes_attached: Vec<String>,
    /// `image.id`: the Glance image the server was booted from; `None` for a server booted from
    /// a volume (Nova shows `"image": ""`) or when not given.
    #[serde(
        default,
        deserialize_with = "image_id",
        skip_serializing_if = "Option::is_none"
    )]
    pub image: Option<String>,
    /// `OS-EXT-AZ:availability_zone`, if given.
    #[serde(
        default,
        rename = "OS-EXT-AZ:availability_zone",
        skip_serializing_if = "Option::is_none"
    )]
    pub availability_zone: Option<String>,
}

impl Server {
    /// Every address of the server, over all networks (network name order).
    pub fn ips(&self) -> Vec<&str> {
        self.addresses
            .values()
            .flatten()
            .map(|a| a.addr.as_str())
            .collect()
    }

    /// The addresses on one network (by network name).
    pub fn ips_on(&self, network: &str) -> Vec<&str> {
        self.addresses
            .get(network)
            .into_iter()
            .flatten()
            .map(|a| a.addr.as_str())
            .collect()
    }
}

fn fault_message<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Object(m) => Some(match m.get("message") {
            Some(Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::new(),
        }),
        Value::String(s) => Some(s),
        _ => None,
    })
}

/// Nova's `image`: `{"id": …, "links": …}`, `""` (boot from volume), or the id as text (our own
/// serialization).
fn image_id<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v: Option<Value> = Option::deserialize(d)?;
    Ok(match v {
        Some(Value::Object(m)) => m.get("id").and_then(Value::as_str).map(String::from),
        Some(Value::String(s)) if !s.is_empty() => Some(s),
        _ => None,
    }
    .filter(|s| !s.is_empty()))
}

fn volume_ids<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let v: Option<Vec<Value>> = Option::deserialize(d)?;
    Ok(v.unwrap_or_default()
        .into_iter()
        .filter_map(|x| x.get("id").and_then(Value::as_str).map(String::from))
        .collect())
}

/// One `fixed_ips[]` entry of a port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixedIp {
    /// The address.
    #[serde(default, deserialize_with = "nullable")]
    pub ip_address: String,
    /// The subnet id.
    #[serde(default, deserialize_with = "nullable")]
    pub subnet_id: String,
}

/// A Neutron floating IP from `GET /v2.0/floatingips` (Networking API v2.0 "List floating
/// IPs"): an address outside the project's networks that the router forwards to the fixed
/// address of `port_id` (Heat's `OS::Neutron::FloatingIP`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloatingIp {
    /// Floating IP id (a `OS::Neutron::FloatingIP` resource's physical resource id).
    pub id: String,
    /// The floating address.
    #[serde(default, deserialize_with = "nullable")]
    pub floating_ip_address: String,
    /// The associated port; empty when not associated.
    #[serde(default, deserialize_with = "nullable")]
    pub port_id: String,
    /// The associated port's fixed address; empty when not associated.
    #[serde(default, deserialize_with = "nullable")]
    pub fixed_ip_address: String,
}

/// A Neutron port from `GET /v2.0/ports` (Networking API v2.0 "List ports").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Port {
    /// Port id.
    pub id: String,
    /// Name (often empty).
    #[serde(default, deserialize_with = "nullable")]
    pub name: String,
    /// The server (or other device) using the port; empty when unbound.
    #[serde(default, deserialize_with = "nullable")]
    pub device_id: String,
    /// `device_owner`, e.g. `compute:nova`.
    #[serde(default, deserialize_with = "nullable")]
    pub device_owner: String,
    /// Network id.
    #[serde(default, deserialize_with = "nullable")]
    pub network_id: String,
    /// Addresses.
    #[serde(default, deserialize_with = "nullable")]
    pub fixed_ips: Vec<FixedIp>,
    /// `status`: `ACTIVE`, `DOWN`, `BUILD`, `ERROR`.
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// MAC address.
    #[serde(default, deserialize_with = "nullable")]
    pub mac_address: String,
    /// `allowed_address_pairs` (Networking API v2.0, "Allowed address pairs" extension): other
    /// addresses the port may send from and receive at, e.g. a VIP that VRRP moves between
    /// servers.
    #[serde(default, deserialize_with = "nullable")]
    pub allowed_address_pairs: Vec<AddressPair>,
}

/// One `allowed_address_pairs[]` entry of a port.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddressPair {
    /// An IP address or CIDR.
    #[serde(default, deserialize_with = "nullable")]
    pub ip_address: String,
}

/// One `attachments[]` entry of a volume.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VolumeAttachment {
    /// The server the volume is attached to.
    #[serde(default, deserialize_with = "nullable")]
    pub server_id: String,
    /// Device path inside the server, e.g. `/dev/vdb` (may be absent).
    #[serde(default)]
    pub device: Option<String>,
    /// Attachment id, if given.
    #[serde(default)]
    pub attachment_id: Option<String>,
}

/// A Cinder volume from `GET /volumes/detail` (Block Storage API v3 "List volumes with details").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Volume {
    /// Volume id.
    pub id: String,
    /// Name; `None` when Cinder has none (`"name": null`).
    #[serde(default)]
    pub name: Option<String>,
    /// `status`: `available`, `in-use`, `creating`, `error`, …
    #[serde(default, deserialize_with = "nullable")]
    pub status: String,
    /// Size in GiB.
    #[serde(default, deserialize_with = "nullable")]
    pub size: u64,
    /// Attachments (empty when detached).
    #[serde(default, deserialize_with = "nullable")]
    pub attachments: Vec<VolumeAttachment>,
}

/// One observation of a project: every server, port and volume (see
/// [`Cloud::inventory`](super::Cloud::inventory)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inventory {
    /// `GET /servers/detail`, all pages.
    pub servers: Vec<Server>,
    /// `GET /v2.0/ports`, all pages.
    pub ports: Vec<Port>,
    /// `GET /volumes/detail`, all pages.
    pub volumes: Vec<Volume>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stack_ref_from_links() {
        let r = StackRef::from_href("http://h:8004/v1/p/stacks/pv-worker_instance-x/0a1b").unwrap();
        assert_eq!(r, StackRef::new("pv-worker_instance-x", "0a1b"));
        assert_eq!(
            StackRef::from_href("http://h/v1/p/stacks/a%2Eb/1/")
                .unwrap()
                .name,
            "a.b"
        );
        assert!(StackRef::from_href("http://h/v1/p/stacks/a/1/resources/x").is_none());
        assert!(StackRef::from_href("http://h/v1/p/stacks/a").is_none());
    }

    #[test]
    fn tolerant_volume_server_port() {
        let v: Volume = serde_json::from_value(json!({"id": "v", "name": null, "size": null,
            "attachments": [{"server_id": "s", "device": "/dev/vdb", "extra": 1}], "unknown": {}}))
        .unwrap();
        assert_eq!(v.name, None);
        assert_eq!(v.size, 0);
        assert_eq!(v.attachments[0].device.as_deref(), Some("/dev/vdb"));
        let s: Server = serde_json::from_value(json!({"id": "s", "name": "n", "status": "ERROR",
            "addresses": {"net0": [{"addr": "10.0.0.5", "version": 4, "OS-EXT-IPS:type": "fixed"}]},
            "fault": {"code": 500, "message": "boom"}, "metadata": {"a": "b", "n": 1},
            "OS-EXT-STS:task_state": null, "os-extended-volumes:volumes_attached": [{"id": "v"}]}))
        .unwrap();
        assert_eq!(s.ips(), vec!["10.0.0.5"]);
        assert_eq!(s.fault.as_deref(), Some("boom"));
        assert_eq!(s.metadata["n"], "1");
        assert_eq!(s.volumes_attached, vec!["v"]);
        let s: Server =
            serde_json::from_value(json!({"id": "s", "addresses": null, "metadata": null}))
                .unwrap();
        assert!(s.ips().is_empty());
        let p: Port = serde_json::from_value(
            json!({"id": "p", "name": null, "fixed_ips": [{"ip_address": "10.0.0.5"}]}),
        )
        .unwrap();
        assert_eq!(p.fixed_ips[0].ip_address, "10.0.0.5");
        assert!(serde_json::from_value::<Server>(json!({"name": "no id"})).is_err());
    }

    #[test]
    fn resource_links() {
        let raw: RawResource = serde_json::from_value(json!({
            "resource_name": "workerNode", "physical_resource_id": "srv", "resource_type": "OS::Nova::Server",
            "resource_status": "CHECK_FAILED", "resource_status_reason": null, "parent_resource": "abc",
            "links": [{"rel": "self", "href": "http://h/v1/p/stacks/n-abc/7/resources/workerNode"},
                      {"rel": "stack", "href": "http://h/v1/p/stacks/n-abc/7"}]}))
        .unwrap();
        let r = raw.into_resource(&StackRef::new("top", "1"));
        assert_eq!(r.stack, StackRef::new("n-abc", "7"));
        assert_eq!(r.parent_resource.as_deref(), Some("abc"));
        assert_eq!(r.status_reason, "");
    }

    #[test]
    fn stack_helpers() {
        let s: Stack = serde_json::from_value(json!({"id": "1", "stack_name": "pv", "stack_status": "UPDATE_FAILED",
            "parameters": {"nfv": "{\"a\": 1}"}, "outputs": [{"output_key": "ip", "output_value": "10.0.0.1"}]}))
        .unwrap();
        assert!(s.is_failed());
        assert_eq!(s.parameter_json("nfv").unwrap()["a"], 1);
        assert_eq!(s.output("ip").unwrap(), "10.0.0.1");
        let body =
            StackCreate::new("pv", json!({"heat_template_version": "2013-05-23"})).body(true);
        assert_eq!(body["stack_name"], "pv");
        assert_eq!(body["disable_rollback"], true);
        assert!(body.get("timeout_mins").is_none());
    }
}
