//! Cluster roles and SSH addresses of VNFCs (shared by the engine's INSTANTIATE flow and the
//! reconcile probes): a role (master, worker, storage server) is the VDU that owns the role's
//! `ssh_cp_name` in the VNFD; a VNFC is reached at the address of that CP. Pure.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::intake::wire::StorageServer;
use crate::package::Vnfd;
use crate::plan::vnfcs::AttachedVolume;
use crate::recipes::{Export, VolumeSetup};
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

/// What the storage server must serve, from `storage_server` and the volumes attached to its VNFC
/// (`vnfc.volumes`): each `cinder_volume_setup_params` entry whose `volume_resource_id` is
/// attached becomes a [`VolumeSetup`] (device from the attachment, `/dev/vdb` when Cinder gave
/// none); the others are listed in `missing` by resource id; `nfs_server_setup_params` become the
/// [`Export`]s. Shared by the engine (which refuses when something is missing) and the reconcile
/// probes (which check what is there; a lost volume is the cloud pass's finding).
pub fn storage_setup(ss: &StorageServer, vnfc: &VnfcRow) -> StorageSetup {
    let attached: Vec<AttachedVolume> = vnfc
        .volumes
        .as_deref()
        .and_then(|v| serde_json::from_str(v).ok())
        .unwrap_or_default();
    let mut out = StorageSetup::default();
    for c in &ss.cinder_volume_setup_params {
        match attached
            .iter()
            .find(|a| a.resource.as_deref() == Some(c.volume_resource_id.as_str()))
        {
            Some(a) => out.volumes.push(VolumeSetup {
                volume_id: a.volume_id.clone(),
                device: a.device.clone().unwrap_or_else(|| "/dev/vdb".into()),
                mount_to: c.mount_to.clone(),
            }),
            None => out.missing.push(c.volume_resource_id.clone()),
        }
    }
    out.exports = ss
        .nfs_server_setup_params
        .iter()
        .map(|x| Export {
            dir: x.export_dir.clone(),
            to: x.export_to.clone(),
        })
        .collect();
    out
}

/// The result of [`storage_setup`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StorageSetup {
    /// Volumes to format (only if empty) and mount.
    pub volumes: Vec<VolumeSetup>,
    /// `volume_resource_id`s the request names that are not attached to the server.
    pub missing: Vec<String>,
    /// Exports to serve.
    pub exports: Vec<Export>,
}
