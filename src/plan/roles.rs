//! Cluster roles and SSH addresses of VNFCs (shared by the engine's INSTANTIATE flow and the
//! reconcile probes): a role (master, worker, storage server) is the VDU that owns the role's
//! `ssh_cp_name` in the VNFD; a VNFC is reached at the address of that CP. Pure.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::package::Vnfd;
use crate::store::VnfcRow;

/// The VDU owning CP `cp` (`k8s_cluster_installation_param.*.ssh_cp_name`), if the VNFD has it.
pub fn vdu_of_cp(vnfd: &Vnfd, cp: &str) -> Option<String> {
    vnfd.cps.get(cp).map(|c| c.vdu.clone())
}

/// The address of CP `cp` of one VNFC (from its `cp_addresses` JSON), if recorded and an IP.
pub fn cp_address(vnfc: &VnfcRow, cp: &str) -> Option<IpAddr> {
    let cps: BTreeMap<String, serde_json::Value> = vnfc
        .cp_addresses
        .as_deref()
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or_default();
    cps.get(cp)
        .and_then(serde_json::Value::as_str)
        .and_then(|a| a.parse::<IpAddr>().ok())
}

/// CP name → address over every VNFC (e.g. `nfs_server_cp` of a PV registration).
pub fn cp_addresses(vnfcs: &[VnfcRow]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for v in vnfcs {
        let map: BTreeMap<String, String> = v
            .cp_addresses
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default();
        out.extend(map);
    }
    out
}
