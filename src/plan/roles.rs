//! Cluster roles and SSH addresses of VNFCs (shared by the engine's INSTANTIATE flow and the
//! reconcile probes): a role (master, worker, storage server) is the VDU that owns the role's
//! `ssh_cp_name` in the VNFD; a VNFC is reached at the address of that CP. Pure.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::intake::wire::{K8sClusterInstallationParam, StorageServer};
use crate::package::Vnfd;
use crate::recipes::{Export, VolumeSetup};
use crate::store::VnfcRow;

/// The VDU owning CP `cp` (`k8s_cluster_installation_param.*.ssh_cp_name`), if the VNFD has it.
pub fn vdu_of_cp(vnfd: &Vnfd, cp: &str) -> Option<String> {
    vnfd.cps.get(cp).map(|c| c.vdu.clone())
}

/// The address of CP `cp` of one VNFC, if recorded and an IP.
pub fn cp_address(vnfc: &VnfcRow, cp: &str) -> Option<IpAddr> {
    vnfc.cp_addresses.get(cp)?.parse().ok()
}

/// CP name → address over every VNFC (e.g. `nfs_server_cp` of a PV registration); a CP
/// recorded on several VNFCs keeps the address of the last one.
pub fn cp_addresses(vnfcs: &[VnfcRow]) -> BTreeMap<String, String> {
    vnfcs.iter().flat_map(|v| v.cp_addresses.clone()).collect()
}

/// What the storage server must serve, from `storage_server` and the volumes attached to its VNFC
/// (`vnfc.volumes`): each `cinder_volume_setup_params` entry whose `volume_resource_id` is
/// attached becomes a [`VolumeSetup`] (device from the attachment, `/dev/vdb` when Cinder gave
/// none); the others are listed in `missing` by resource id; `nfs_server_setup_params` become the
/// [`Export`]s. Shared by the engine (which refuses when something is missing) and the reconcile
/// probes (which check what is there; a lost volume is the cloud pass's finding).
pub fn storage_setup(ss: &StorageServer, vnfc: &VnfcRow) -> StorageSetup {
    let mut out = StorageSetup::default();
    for c in &ss.cinder_volume_setup_params {
        match vnfc
            .volumes
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

/// Where the package's install script (`script_path`) is put on every node: the engine uploads
/// it there, the reconcile probes check the node with it.
pub const SCRIPT_DIR: &str = "/usr/local/lib/vnfkeeper";

/// `SCRIPT_DIR/<file name of script_path>`.
pub fn install_script_path(script_path: &str) -> String {
    let name = std::path::Path::new(script_path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{SCRIPT_DIR}/{name}")
}

/// What a VDU's VNFCs are to the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterRole {
    /// A control-plane node (`master_node`).
    Master,
    /// A worker node (`worker_node`).
    Worker,
    /// The NFS storage server (`storage_server`).
    StorageServer,
    /// A VDU the cluster parameters do not mention.
    Other,
}

/// The role of `vdu`: the VDU owning `master_node`, `worker_node` or `storage_server`'s
/// `ssh_cp_name` (checked in that order). Errors: the role (`master_node`, …) whose
/// `ssh_cp_name` is not a CP of the VNFD, with that CP.
pub fn role_of_vdu(
    vnfd: &Vnfd,
    k8s: &K8sClusterInstallationParam,
    vdu: &str,
) -> Result<ClusterRole, (&'static str, String)> {
    let owner =
        |cp: &str, what: &'static str| vdu_of_cp(vnfd, cp).ok_or_else(|| (what, cp.to_owned()));
    if owner(&k8s.master_node.ssh_cp_name, "master_node")? == vdu {
        return Ok(ClusterRole::Master);
    }
    if owner(&k8s.worker_node.ssh_cp_name, "worker_node")? == vdu {
        return Ok(ClusterRole::Worker);
    }
    if let Some(ss) = &k8s.storage_server
        && owner(&ss.ssh_cp_name, "storage_server")? == vdu
    {
        return Ok(ClusterRole::StorageServer);
    }
    Ok(ClusterRole::Other)
}
