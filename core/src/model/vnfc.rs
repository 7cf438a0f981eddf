//! A VNFC as the store records it: its VDU, server, addresses, volumes, pinned host key.

use std::collections::BTreeMap;

use super::{Timestamp, VnfInstanceId, VnfcId};

/// A `vnfc` row (one VNFC: one server of a VDU), decoded by the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VnfcRow {
    /// vnfcInstanceId.
    pub id: VnfcId,
    /// vnfInstanceId.
    pub vnf_instance_id: VnfInstanceId,
    /// VDU the VNFC belongs to.
    pub vdu_id: String,
    /// Index in `<VDU>-<index>`.
    pub vnfc_index: Option<i64>,
    /// Name of the Heat stack owning the server resource.
    pub stack_name: String,
    /// Id of that stack.
    pub stack_id: String,
    /// The server resource's name.
    pub resource_name: String,
    /// Nova server id.
    pub server_id: Option<String>,
    /// Nova status when last observed.
    pub server_status: Option<String>,
    /// Address used for SSH.
    pub ip_address: Option<String>,
    /// CP name → address (stored as a JSON object; `NULL` → empty).
    pub cp_addresses: BTreeMap<String, String>,
    /// Volumes attached to the server (stored as JSON `[{resource, volumeId, device}]`; `NULL`
    /// → empty).
    pub volumes: Vec<AttachedVolume>,
    /// Pinned SSH host key.
    pub host_key: Option<String>,
    /// When the row was created: the VNFC's first server came up then.
    pub created_at: Timestamp,
    /// The VNFC's slice of the stack's `nfv` parameter (`{"VDU": {"<VDU>-<i>": {…}}, "CP":
    /// {"<CP>-<i>": {…}}}`) when its VDU is managed individually (adjusted HOT).
    pub parameters: Option<serde_json::Value>,
}

/// A volume attached to a VNFC's server.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachedVolume {
    /// The `OS::Cinder::Volume` resource name, when the stack holds it.
    pub resource: Option<String>,
    /// Cinder volume id.
    pub volume_id: String,
    /// Device reported by the attachment (e.g. `/dev/vdb`).
    pub device: Option<String>,
}
