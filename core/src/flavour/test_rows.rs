//! VNFC rows for the flavours' unit tests: a server on one CP address, with a pinned key.

use crate::model::{Timestamp, VnfcRow};

/// VNFC `id` of VDU `vdu` in VNF `vnf`, reached at `ip` on CP `cp`, with scale index `index`.
pub(crate) fn vnfc_row(
    vnf: &str,
    id: &str,
    vdu: &str,
    cp: &str,
    index: Option<i64>,
    ip: &str,
) -> VnfcRow {
    VnfcRow {
        id: id.into(),
        vnf_instance_id: vnf.into(),
        vdu_id: vdu.into(),
        vnfc_index: index,
        stack_name: "s".into(),
        stack_id: "sid".into(),
        resource_name: vdu.into(),
        server_id: Some(format!("srv-{id}")),
        server_status: Some("ACTIVE".into()),
        ip_address: Some(ip.into()),
        cp_addresses: [(cp.to_owned(), ip.to_owned())].into_iter().collect(),
        volumes: Vec::new(),
        host_key: Some(format!("ssh-ed25519 KEY{id} comment")),
        created_at: Timestamp::parse("2026-11-24T00:00:00Z").unwrap(),
        parameters: None,
    }
}
