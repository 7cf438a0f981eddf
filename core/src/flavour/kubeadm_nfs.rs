//! The kubeadm-script flavour: a Kubernetes cluster installed by the VNF package's install
//! script (`k8s_cluster_installation_param`), optionally with an NFS storage server whose Cinder
//! volumes are formatted (only when empty), mounted and exported, and PersistentVolumes
//! registered from the package's manifests.
//!
//! Roles: the VDU owning `master_node`, `worker_node` or `storage_server`'s `ssh_cp_name`.
//! Hooks (Tacker `kubernetes_mgmt.py` and its PV variant, with their defects removed):
//! - `instantiate_end`: install on the first master, then on the other masters and the workers
//!   at once; storage server: filesystem and mount per volume, NFS server, exports; NFS client
//!   on every node; each PersistentVolume applied on the first master, then waited for.
//! - `scale_start`: each SCALE_IN victim drained (strictly: its pods must move) and deleted on a
//!   master that stays; `scale_end`: the new nodes join and get the NFS client.
//! - `heal_start`: storage server targeted → refuse while a PersistentVolume is Bound, then
//!   unregister them; nodes targeted → removed (leniently: they may be dead) through a master
//!   that survives; `heal_end`: nodes join again (the first healed master creates the cluster
//!   when none survived), the storage server mounts its kept volume and serves again, the
//!   PersistentVolumes are registered again.
//! - after the nodes of `instantiate_end`, `scale_end` and `heal_end` are installed: the node
//!   trust of `private_registry_connection_info` ([`super::trust`]): registry files, `/etc/hosts`
//!   block and registry auths on each node, then `daemon.json` observed and, in `configure`,
//!   replaced by its merge with the insecure registries.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use super::{
    Access, FlavourError, HookContext, Inputs, Kept, KeptArtifacts, MgmtDriver, Probe, Role,
    kubeconfig_for, trust,
};
use crate::artifact::{Artifact, JoinMaterial, KubernetesVim};
use crate::model::{StageKey, VnfcId, VnfcRow};
use crate::plan::stages::{Stage, StageList};
use crate::recipes::{
    self, DrainPolicy, Export, Late, Step, StepKind, VolumeSetup, pv::PvManifest,
};
use crate::wire::Secret;
use crate::wire::params::{K8sClusterInstallationParam, StorageServer};

/// Where the package's install script is put on every node (the engine uploads it there; the
/// reconcile probes check the node with it).
pub const SCRIPT_DIR: &str = "/usr/local/lib/vnfkeeper";

/// Longest drain of a node removed by SCALE_IN.
const SCALE_IN_DRAIN: Duration = Duration::from_secs(300);

/// Longest drain of a node being replaced before it is deleted anyway.
const HEAL_DRAIN: Duration = Duration::from_secs(60);

/// The package files this flavour reads: the install script and the PV manifests.
pub(super) fn package_files(k: &K8sClusterInstallationParam) -> Vec<String> {
    let mut out = vec![k.script_path.clone()];
    out.extend(
        k.private_registry_connection_info
            .iter()
            .filter_map(|r| r.certificate_path.clone()),
    );
    if k.storage_server.is_some() {
        out.extend(
            k.pv_registration_params
                .iter()
                .map(|p| p.pv_manifest_file_path.clone()),
        );
    }
    out
}

/// `SCRIPT_DIR/<file name of script_path>`.
pub fn install_script_path(script_path: &str) -> String {
    let name = std::path::Path::new(script_path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    format!("{SCRIPT_DIR}/{name}")
}

/// The role of `vdu`: the VDU owning `master_node`, `worker_node` or `storage_server`'s
/// `ssh_cp_name` (checked in that order), a CP of the VNFD or an `OS::Neutron::FloatingIP` of
/// the BaseHOT on one ([`Inputs::cp_behind`]). Errors: the role (`master_node`, …) whose
/// `ssh_cp_name` is neither, with that name.
pub fn role_of_vdu(
    inputs: &Inputs,
    k8s: &K8sClusterInstallationParam,
    vdu: &str,
) -> Result<Role, (&'static str, String)> {
    let owner = |cp: &str, what: &'static str| {
        inputs
            .cp_behind(cp)
            .and_then(|c| inputs.vnfd.cps.get(c))
            .map(|c| c.vdu.clone())
            .ok_or_else(|| (what, cp.to_owned()))
    };
    if owner(&k8s.master_node.ssh_cp_name, "master_node")? == vdu {
        return Ok(Role::Master);
    }
    if owner(&k8s.worker_node.ssh_cp_name, "worker_node")? == vdu {
        return Ok(Role::Worker);
    }
    if let Some(ss) = &k8s.storage_server
        && owner(&ss.ssh_cp_name, "storage_server")? == vdu
    {
        return Ok(Role::StorageServer);
    }
    Ok(Role::Other)
}

/// What the storage server must serve, from `storage_server` and the volumes attached to its VNFC
/// (`vnfc.volumes`): each `cinder_volume_setup_params` entry whose `volume_resource_id` is
/// attached becomes a [`VolumeSetup`] (device from the attachment, `/dev/vdb` when Cinder gave
/// none); the others are listed in `missing` by resource id; `nfs_server_setup_params` become the
/// [`Export`]s. Shared by the hooks (which refuse when something is missing) and the reconcile
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

/// The kubeadm-script cluster of one instance.
#[derive(Debug)]
pub(super) struct KubeadmNfs {
    inputs: Inputs,
    k8s: K8sClusterInstallationParam,
}

/// Tacker's default `--pod-network-cidr` of the install script (`kubernetes_mgmt.py`).
const DEFAULT_POD_CIDR: &str = "192.168.0.0/16";
/// Tacker's default `--service-cidr` of the install script (`cluster_cidr`).
const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/12";

/// What every install script run of one cluster shares (see `KubeadmNfs::cluster_args`).
#[derive(Debug, Clone)]
struct ClusterArgs {
    /// The masters' `nic_cp_name` addresses, comma-separated, the anchor first (`-m`).
    masters: String,
    /// The address of `cluster_cp_name` (`-i`).
    cluster_ip: IpAddr,
    /// More than one master (`ha_flag=True` for workers).
    ha: bool,
}

impl ClusterArgs {
    /// The API server endpoint the cluster was made with: `https://<cluster IP>:16443` with
    /// several masters (HAProxy in front of the API servers, as Tacker's install script sets it
    /// up), else `https://<cluster IP>:6443` (kubeadm's default).
    fn endpoint(&self) -> String {
        let port = if self.ha { 16443 } else { 6443 };
        format!(
            "https://{}",
            std::net::SocketAddr::new(self.cluster_ip, port)
        )
    }
}

/// A VNFC as a hook places it: its row, role and SSH address.
#[derive(Debug, Clone)]
struct Node<'a> {
    row: &'a VnfcRow,
    role: Role,
    address: IpAddr,
}

impl KubeadmNfs {
    pub(super) fn new(inputs: Inputs, k8s: K8sClusterInstallationParam) -> Self {
        Self { inputs, k8s }
    }

    fn file(&self, path: &str, step: &'static str) -> Result<&[u8], FlavourError> {
        self.inputs
            .files
            .get(path)
            .map(Vec::as_slice)
            .ok_or_else(|| FlavourError::new(step, format!("package file `{path}` was not read")))
    }

    /// The VNFCs in `role`, in store order, with their SSH addresses.
    fn nodes<'a>(&self, vnfcs: &'a [VnfcRow], role: Role) -> Result<Vec<Node<'a>>, FlavourError> {
        let mut out = Vec::new();
        for row in vnfcs {
            if self.role(&row.vdu_id)? != role {
                continue;
            }
            let access = self.access(role)?;
            let address = access.address_of(row).ok_or_else(|| {
                FlavourError::new(
                    "plan",
                    format!("VNFC {} has no address on CP `{}`", row.id, access.cp),
                )
            })?;
            out.push(Node { row, role, address });
        }
        Ok(out)
    }

    /// What every install script run of the cluster shares, as Tacker's sample MgmtDriver
    /// passes it (`kubernetes_mgmt.py` `_install_k8s_cluster`): the masters' `nic_cp_name`
    /// addresses with `anchor` (the master that creates the cluster, or that the others join)
    /// first, and the cluster IP, the address of `master_node.cluster_cp_name`: a VNFC's CP, or
    /// a port of the stack outside the VNFCs whose address the masters' ports list in their
    /// `allowed_address_pairs` (the VIP of Tacker's `complex` flavour, `vip_CP`). Errors: a
    /// master without a `nic_cp_name` address; `cluster_cp_name` neither.
    fn cluster_args(
        &self,
        vnfcs: &[VnfcRow],
        masters: &[Node<'_>],
        anchor: &Node<'_>,
    ) -> Result<ClusterArgs, FlavourError> {
        let mut ips = vec![self.nic(anchor)?];
        for m in masters.iter().filter(|m| m.row.id != anchor.row.id) {
            ips.push(self.nic(m)?);
        }
        let cp = &self.k8s.master_node.cluster_cp_name;
        // The endpoint the cluster was made with: the first VNFC (store order) on the CP — a
        // master's own CP, or the VIP port its port may answer for (recorded with its CPs).
        let cluster_ip = vnfcs
            .iter()
            .find_map(|row| crate::plan::vnfcs::cp_address(row, cp))
            .ok_or_else(|| {
                FlavourError::new(
                    "k8s.install",
                    format!(
                        "master_node.cluster_cp_name `{cp}` is neither a CP of a VNFC nor a port \
                         of the stack in a master port's allowed_address_pairs (a VIP)"
                    ),
                )
            })?;
        Ok(ClusterArgs {
            masters: ips
                .iter()
                .map(IpAddr::to_string)
                .collect::<Vec<_>>()
                .join(","),
            cluster_ip,
            ha: ips.len() > 1,
        })
    }

    /// The address of `node` on its role's `nic_cp_name` (the address the cluster uses).
    fn nic(&self, node: &Node<'_>) -> Result<IpAddr, FlavourError> {
        let cp = match node.role {
            Role::Master => &self.k8s.master_node.nic_cp_name,
            _ => &self.k8s.worker_node.nic_cp_name,
        };
        crate::plan::vnfcs::cp_address(node.row, cp).ok_or_else(|| {
            FlavourError::new(
                "k8s.install",
                format!("VNFC {} has no address on nic_cp_name `{cp}`", node.row.id),
            )
        })
    }

    /// `k8s.install` on `node`, with the arguments of Tacker's sample MgmtDriver: a master
    /// `-m <masters> -i <cluster IP> -p <pod CIDR> -a <service CIDR>` (Tacker's defaults
    /// `192.168.0.0/16` and `10.96.0.0/12` when the request gives none), a worker
    /// `-w <own nic address> -i <cluster IP>` with `ha_flag` in its environment.
    /// `join`: the node joins the existing cluster (the join material kept by
    /// `k8s.join_material` travels in its environment file).
    fn install(
        &self,
        node: &Node<'_>,
        cluster: &ClusterArgs,
        join: bool,
    ) -> Result<Stage, FlavourError> {
        let body = self.file(&self.k8s.script_path, "k8s.install")?.to_vec();
        let m = &self.k8s.master_node;
        let (args, ha_flag) = match node.role {
            Role::Worker => (
                vec![
                    "-w".to_owned(),
                    self.nic(node)?.to_string(),
                    "-i".to_owned(),
                    cluster.cluster_ip.to_string(),
                ],
                Some(cluster.ha),
            ),
            _ => (
                vec![
                    "-m".to_owned(),
                    cluster.masters.clone(),
                    "-i".to_owned(),
                    cluster.cluster_ip.to_string(),
                    "-p".to_owned(),
                    m.pod_cidr
                        .clone()
                        .unwrap_or_else(|| DEFAULT_POD_CIDR.into()),
                    "-a".to_owned(),
                    m.cluster_cidr
                        .clone()
                        .unwrap_or_else(|| DEFAULT_SERVICE_CIDR.into()),
                ],
                None,
            ),
        };
        let step = recipes::k8s_install(
            node.row.id.as_str(),
            &install_script_path(&self.k8s.script_path),
            body,
            args,
            ha_flag,
            join,
        );
        Ok(Stage::remote(0, node.row.id.as_str(), node.role, step))
    }

    /// The install script's environment file ([`Late::InstallEnv`]): the join material of a
    /// joining node, `ha_flag` for a worker, and the request's proxies as Tacker's driver exports them (`no_proxy` extended by the pod
    /// and service CIDRs, the loopback and the cluster IP).
    fn install_env(
        &self,
        ha_flag: Option<bool>,
        join: Option<&JoinMaterial>,
        rows: &[VnfcRow],
    ) -> String {
        let mut vars: Vec<(&str, String)> = Vec::new();
        if let Some(j) = join {
            vars.push(("TOKEN_NAME", j.token.clone()));
            vars.push(("TOKEN_HASH", j.ca_hash.clone()));
            vars.push(("CERT_KEY", j.certificate_key.clone()));
        }
        if let Some(ha) = ha_flag {
            vars.push(("ha_flag", if ha { "True" } else { "False" }.into()));
        }
        if let Some(p) = &self.k8s.proxy {
            if let Some(h) = &p.http_proxy {
                vars.push(("http_proxy", h.expose().clone()));
            }
            if let Some(h) = &p.https_proxy {
                vars.push(("https_proxy", h.expose().clone()));
            }
            let m = &self.k8s.master_node;
            let cluster_ip = rows
                .iter()
                .find_map(|r| crate::plan::vnfcs::cp_address(r, &m.cluster_cp_name));
            let no_proxy: Vec<String> = p
                .no_proxy
                .iter()
                .cloned()
                .chain([
                    m.pod_cidr
                        .clone()
                        .unwrap_or_else(|| DEFAULT_POD_CIDR.into()),
                    m.cluster_cidr
                        .clone()
                        .unwrap_or_else(|| DEFAULT_SERVICE_CIDR.into()),
                    "127.0.0.1".into(),
                    "localhost".into(),
                ])
                .chain(cluster_ip.map(|ip| ip.to_string()))
                .collect();
            vars.push(("no_proxy", no_proxy.join(",")));
        }
        vars.iter()
            .map(|(k, v)| {
                let quoted = shlex::try_quote(v).map_or_else(|_| "''".into(), |q| q.into_owned());
                format!("export {k}={quoted}\n")
            })
            .collect()
    }

    /// `k8s.hosts` on each of `on`: the `/etc/hosts` block of every node of `all`, one
    /// `<nic address> master<n>` / `worker<n>` line each (`<n>`: the address's last part, the
    /// name Tacker's install script gives the node), masters first, as Tacker's driver writes it
    /// before the install script runs. Errors: a node without a `nic_cp_name` address.
    fn hosts_stages(
        &self,
        on: &[&Node<'_>],
        all: &[&Node<'_>],
    ) -> Result<Vec<Stage>, FlavourError> {
        let mut lines = Vec::new();
        for role in [Role::Master, Role::Worker] {
            for n in all.iter().filter(|n| n.role == role) {
                let ip = self.nic(n)?;
                lines.push(format!("{ip} {}", node_name(role, ip)));
            }
        }
        let block = lines.join("\n");
        let owner = format!("{}-nodes", self.inputs.vnf_instance_id);
        Ok(on
            .iter()
            .map(|n| {
                let step = recipes::k8s_hosts(n.row.id.as_str(), &owner, &block);
                Stage::remote(0, n.row.id.as_str(), n.role, step)
            })
            .collect())
    }

    /// `k8s.haproxy_backends` on each of `on`: HAProxy's API server backend lists exactly
    /// `masters` (their `nic_cp_name` addresses, named as Tacker's install script names them),
    /// so that a master that left, or was rebuilt or added at a new address, is no longer (or
    /// now) a backend of the others. Tacker's driver edits these lines with `sed` when it
    /// deletes a master (`_delete_master_node`) and when it re-joins one (`_fix_master_node`).
    /// Errors: a master without a `nic_cp_name` address.
    fn haproxy_stages(
        &self,
        on: &[&Node<'_>],
        masters: &[&Node<'_>],
    ) -> Result<Vec<Stage>, FlavourError> {
        let mut servers = Vec::new();
        for m in masters {
            let ip = self.nic(m)?;
            servers.push((node_name(Role::Master, ip), ip));
        }
        Ok(on
            .iter()
            .map(|n| {
                let step = recipes::k8s_haproxy_backends(n.row.id.as_str(), &servers);
                Stage::remote(0, n.row.id.as_str(), n.role, step)
            })
            .collect())
    }

    /// `k8s.join_material` on `anchor`, the control-plane node the others join, made once per
    /// operation `op_occ_id`; its check's output is kept by [`MgmtDriver::keep`].
    fn join_material(&self, anchor: &Node<'_>, op_occ_id: &str) -> Stage {
        let file = format!(
            "/var/lib/vnfkeeper/join/{}.env",
            self.inputs.vnf_instance_id
        );
        let step = recipes::k8s_join_material(anchor.row.id.as_str(), &file, op_occ_id);
        Stage::remote(0, anchor.row.id.as_str(), anchor.role, step)
    }

    /// The cluster as a VIM, read on `anchor` once the cluster is made: its admin kubeconfig
    /// (`k8s.kubeconfig`, server set to the endpoint) and the admin ServiceAccount's bearer
    /// token (`k8s.vim_token`), one wave each; kept as the artifacts `AdminKubeconfig` and
    /// `KubernetesVim` (Tacker's sample MgmtDriver reads the same after its install,
    /// `_install_k8s_cluster`, to register the VIM).
    ///
    /// When the masters are reached at floating addresses (`ssh_cp_name` names a floating IP
    /// the anchor has), the endpoint is the floating address of `cluster_fip_name` (several
    /// masters) or the anchor's own, as Tacker's `_create_vim` registers it; the kept
    /// kubeconfig then names the cluster IP as `tls-server-name`, the address the API server's
    /// certificate is made for.
    fn vim_stages(&self, anchor: &Node<'_>, cluster: &ClusterArgs, list: &mut StageList) {
        let host = anchor.row.id.as_str();
        let mut kubeconfig = recipes::k8s_kubeconfig(host, &cluster.endpoint());
        if let Some(floating) = self.floating_endpoint(anchor, cluster) {
            kubeconfig.args = vec![floating, cluster.cluster_ip.to_string()];
        }
        list.wave(|w| vec![Stage::remote(w, host, anchor.role, kubeconfig)]);
        let token = recipes::k8s_vim_token(host);
        list.wave(|w| vec![Stage::remote(w, host, anchor.role, token)]);
    }

    /// The cluster's endpoint at a floating address, when the masters are reached at floating
    /// addresses (see [`KubeadmNfs::vim_stages`]); `None` otherwise.
    fn floating_endpoint(&self, anchor: &Node<'_>, cluster: &ClusterArgs) -> Option<String> {
        let access = self.access(Role::Master).ok()?;
        let own = crate::plan::vnfcs::cp_address(anchor.row, access.floating.as_deref()?)?;
        let ip = self
            .k8s
            .master_node
            .cluster_fip_name
            .as_deref()
            .filter(|_| cluster.ha)
            .and_then(|f| crate::plan::vnfcs::cp_address(anchor.row, f))
            .unwrap_or(own);
        let port = if cluster.ha { 16443 } else { 6443 };
        Some(format!("https://{}", std::net::SocketAddr::new(ip, port)))
    }

    /// The VIM's name: `vim_name`, else `kubernetes_vim_<vnfInstanceId>` (as Tacker names it).
    fn vim_name(&self) -> String {
        self.k8s
            .vim_name
            .clone()
            .unwrap_or_else(|| format!("kubernetes_vim_{}", self.inputs.vnf_instance_id))
    }

    fn has_storage(&self) -> bool {
        self.k8s.storage_server.is_some()
    }

    /// The storage server's stages, one wave each: the NFS server's package, a filesystem (only
    /// if none) and a persistent mount per volume, exactly the requested exports. Errors: a
    /// `volume_resource_id` not attached to the server.
    fn storage_stages(&self, server: &Node<'_>, list: &mut StageList) -> Result<(), FlavourError> {
        let Some(ss) = &self.k8s.storage_server else {
            return Ok(());
        };
        let setup = storage_setup(ss, server.row);
        if let Some(missing) = setup.missing.first() {
            return Err(FlavourError::new(
                "storage",
                format!("volume resource `{missing}` is not attached to the storage server"),
            ));
        }
        let mut nfs = recipes::nfs_server(
            server.row.id.as_str(),
            self.inputs.vnf_instance_id.as_str(),
            &setup.exports,
        )
        .into_iter();
        // The NFS server's package first: it needs no volume, and its install is the longest
        // of these steps, so it overlaps the first master's cluster install instead of
        // following the joins (the waves are barriers).
        if let Some(install) = nfs.next() {
            list.wave(|w| {
                vec![Stage::remote(
                    w,
                    server.row.id.as_str(),
                    Role::StorageServer,
                    install,
                )]
            });
        }
        let volume_steps = recipes::storage_volumes(server.row.id.as_str(), &setup.volumes);
        for (step, v) in volume_steps
            .into_iter()
            .zip(setup.volumes.iter().flat_map(|v| [v, v]))
        {
            list.wave(|w| vec![Stage::remote(w, &v.volume_id, Role::StorageServer, step)]);
        }
        for step in nfs {
            list.wave(|w| {
                vec![Stage::remote(
                    w,
                    server.row.id.as_str(),
                    Role::StorageServer,
                    step,
                )]
            });
        }
        Ok(())
    }

    /// The PersistentVolume manifests with `spec.nfs.server` set to the address of each one's
    /// `nfs_server_cp` among `vnfcs`. Errors: a CP without an address, a manifest that does not
    /// parse.
    fn pv_manifests(&self, vnfcs: &[VnfcRow]) -> Result<Vec<PvManifest>, FlavourError> {
        if !self.has_storage() {
            return Ok(Vec::new());
        }
        let cp_addr = crate::plan::vnfcs::cp_addresses(vnfcs);
        let mut out = Vec::new();
        for p in &self.k8s.pv_registration_params {
            let server_ip = cp_addr.get(&p.nfs_server_cp).ok_or_else(|| {
                FlavourError::new(
                    "pv.register",
                    format!(
                        "nfs_server_cp `{}` has no address in the stack",
                        p.nfs_server_cp
                    ),
                )
            })?;
            out.push(self.manifest(&p.pv_manifest_file_path, server_ip)?);
        }
        Ok(out)
    }

    fn manifest(&self, path: &str, server: &str) -> Result<PvManifest, FlavourError> {
        let text = String::from_utf8(self.file(path, "pv.register")?.to_vec())
            .map_err(|_| FlavourError::new("pv.register", format!("`{path}` is not UTF-8 text")))?;
        recipes::pv::with_nfs_server(path, &text, server)
            .map_err(|err| FlavourError::new("pv.register", err.to_string()))
    }

    /// Every PersistentVolume registered on `master`: one stage applies them all, the next waits
    /// until all are Available, each in a wave of its own and keyed by the master
    /// (`pv.register@<master>`, `pv.available@<master>`). A plan of an earlier version holds one
    /// stage per PersistentVolume (`pv.register@<name>`) instead; it resumes as stored.
    fn pv_stages(
        &self,
        vnfcs: &[VnfcRow],
        master: &Node<'_>,
        wait: Duration,
        list: &mut StageList,
    ) -> Result<(), FlavourError> {
        let pvs = self.pv_manifests(vnfcs)?;
        if pvs.is_empty() {
            return Ok(());
        }
        let dir = format!("/tmp/vnfkeeper-{}", self.inputs.vnf_instance_id);
        let host = master.row.id.as_str();
        for step in recipes::pv::register(host, &dir, &pvs, wait) {
            list.wave(|w| vec![Stage::remote(w, host, Role::Master, step)]);
        }
        Ok(())
    }

    /// The node trust of `nodes` ([`trust::node_stages`]).
    fn trust_stages(&self, nodes: &[&Node<'_>], list: &mut StageList) -> Result<(), FlavourError> {
        let nodes: Vec<trust::TrustNode<'_>> = nodes
            .iter()
            .map(|n| trust::TrustNode {
                vnfc_id: n.row.id.as_str(),
                role: n.role,
            })
            .collect();
        trust::node_stages(&self.trust_inputs(), &nodes, list)
    }

    fn trust_inputs(&self) -> trust::TrustInputs<'_> {
        trust::TrustInputs {
            registries: &self.k8s.private_registry_connection_info,
            files: &self.inputs.files,
            owner: self.inputs.vnf_instance_id.as_str(),
        }
    }

    fn nfs_clients(&self, nodes: &[&Node<'_>]) -> Vec<Stage> {
        if !self.has_storage() {
            return Vec::new();
        }
        nodes
            .iter()
            .map(|n| {
                Stage::remote(
                    0,
                    n.row.id.as_str(),
                    n.role,
                    recipes::nfs_client(n.row.id.as_str()),
                )
            })
            .collect()
    }

    /// `k8s.remove_node` of each of `leaving`, run on `master`, one wave each.
    /// `k8s.remove_node` of the nodes among `victims` (masters and workers; others are not
    /// nodes) on a master that is not leaving, in the order of `victims`; none when no node
    /// leaves. Errors: no master stays.
    fn leave(
        &self,
        c: HookContext<'_>,
        victims: &[VnfcId],
        drain: Duration,
        policy: DrainPolicy,
    ) -> Result<Vec<Stage>, FlavourError> {
        let leaving = targeted(victims);
        let mut gone = Vec::new();
        for role in [Role::Master, Role::Worker] {
            gone.extend(
                self.nodes(c.vnfcs, role)?
                    .into_iter()
                    .filter(|n| leaving.contains(n.row.id.as_str())),
            );
        }
        if gone.is_empty() {
            return Ok(Vec::new());
        }
        let master = self
            .nodes(c.vnfcs, Role::Master)?
            .into_iter()
            .find(|n| !leaving.contains(n.row.id.as_str()))
            .ok_or_else(|| FlavourError::new("plan", "no master stays to drain nodes on"))?;
        // Store order: VDU, index, creation — the victims in the order the request chose them.
        gone.sort_by_key(|n| victims.iter().position(|v| *v == n.row.id));
        let mut list = StageList::default();
        self.remove_nodes(&master, &gone, drain, policy, &mut list);
        if gone.iter().any(|n| n.role == Role::Master) {
            // The masters that stay stop sending API traffic to the ones that left.
            let staying = self.nodes(c.vnfcs, Role::Master)?;
            let staying: Vec<&Node<'_>> = staying
                .iter()
                .filter(|n| !leaving.contains(n.row.id.as_str()))
                .collect();
            let stages = self.haproxy_stages(&staying, &staying)?;
            list.wave(|w| at(w, stages));
        }
        Ok(list.into_stages())
    }

    fn remove_nodes(
        &self,
        master: &Node<'_>,
        leaving: &[Node<'_>],
        drain: Duration,
        policy: DrainPolicy,
        list: &mut StageList,
    ) {
        for n in leaving {
            // The node's address in the cluster: its nic_cp_name's (kubeadm advertises it).
            let address = self.nic(n).unwrap_or(n.address).to_string();
            let step = recipes::k8s_remove_node(master.row.id.as_str(), &address, drain, policy);
            list.wave(|w| vec![Stage::remote(w, n.row.id.as_str(), Role::Master, step)]);
            // A master also leaves the stacked etcd (Tacker: `_delete_master_node`), so that
            // the dead member neither counts against the quorum nor blocks its address's
            // re-join.
            if n.role == Role::Master {
                let step = recipes::k8s_etcd_remove_member(master.row.id.as_str(), &address);
                list.wave(|w| vec![Stage::remote(w, n.row.id.as_str(), Role::Master, step)]);
            }
        }
    }
}

/// The name Tacker's install script gives the node at `ip` (`master<n>` / `worker<n>`, `<n>`
/// the address's last part), used in `/etc/hosts` and HAProxy's backend.
fn node_name(role: Role, ip: IpAddr) -> String {
    let last = match ip {
        IpAddr::V4(v4) => v4.octets()[3].to_string(),
        IpAddr::V6(v6) => format!("{:x}", v6.segments()[7]),
    };
    let name = if role == Role::Master {
        "master"
    } else {
        "worker"
    };
    format!("{name}{last}")
}

/// `stages` with every wave number set to `w`.
fn at(w: u32, stages: Vec<Stage>) -> Vec<Stage> {
    stages
        .into_iter()
        .map(|mut s| {
            s.wave = w;
            s
        })
        .collect()
}

fn targeted(targets: &[VnfcId]) -> BTreeSet<&str> {
    targets.iter().map(VnfcId::as_str).collect()
}

impl MgmtDriver for KubeadmNfs {
    /// pv spec: scale of the storage server VM is not supported, so an aspect with a delta for
    /// its VDU is refused.
    fn scale_refusal(&self, aspect_id: &str) -> Option<String> {
        let aspect = self.inputs.vnfd.aspects.get(aspect_id)?;
        let vdu = aspect
            .vdu_deltas
            .keys()
            .find(|vdu| self.role(vdu) == Ok(Role::StorageServer))?;
        Some(format!(
            "aspect `{aspect_id}` scales VDU `{vdu}`, the storage server \
             (storage_server.ssh_cp_name), which does not support SCALE"
        ))
    }

    /// A kubeadm cluster lives in the stacked etcd of its control planes: rebuilding every
    /// master loses it, and the nodes that are not rebuilt would stay joined to a cluster that
    /// is gone (kubeadm has no way to re-join them but `kubeadm reset` and a new join, which
    /// Tacker's install script does not do). So the last masters are rebuilt only with every
    /// other node of the cluster (a whole-VNF heal); the storage server need not be. Some of
    /// the masters are rebuilt only while the others keep the etcd quorum.
    fn rebuild_refusal(&self, vnfcs: &[VnfcRow], targets: &[VnfcId]) -> Option<String> {
        let healed = targeted(targets);
        let of = |role| {
            vnfcs
                .iter()
                .filter(move |v| self.role(&v.vdu_id) == Ok(role))
        };
        let masters = of(Role::Master).count();
        let rebuilt = of(Role::Master)
            .filter(|v| healed.contains(v.id.as_str()))
            .count();
        if rebuilt < masters {
            // The masters that stay must be a majority of the etcd members: with fewer, etcd
            // has no quorum and no member can be removed or added (etcd FAQ, "fault tolerance").
            let quorum = masters / 2 + 1;
            let staying = masters - rebuilt;
            if rebuilt > 0 && staying < quorum {
                return Some(format!(
                    "the HEAL rebuilds {rebuilt} of the {masters} masters at once: the {staying} \
                     left are no etcd quorum (a majority is {quorum}); heal one master at a time"
                ));
            }
            // Without a VIP, the API endpoint is the address of the master that owns
            // cluster_cp_name: while its server is rebuilt no node can reach the cluster to
            // re-join it.
            let cp = &self.k8s.master_node.cluster_cp_name;
            let own_cp = self.inputs.vnfd.cps.contains_key(cp);
            let endpoint = vnfcs
                .iter()
                .filter(|_| own_cp)
                .find(|v| crate::plan::vnfcs::cp_address(v, cp).is_some());
            if let Some(v) = endpoint.filter(|v| healed.contains(v.id.as_str())) {
                return Some(format!(
                    "VNFC {} holds the cluster's API endpoint (master_node.cluster_cp_name \
                     `{cp}` is its own CP, not a VIP): rebuilding it leaves no endpoint to \
                     re-join; heal the whole VNF instead",
                    v.id
                ));
            }
            return None;
        }
        let staying: Vec<&str> = of(Role::Worker)
            .filter(|v| !healed.contains(v.id.as_str()))
            .map(|v| v.id.as_str())
            .collect();
        if staying.is_empty() {
            return None;
        }
        Some(format!(
            "the HEAL rebuilds every master of the kubeadm cluster, whose etcd goes with them, \
             but not worker VNFC(s) {}: they would stay joined to a cluster that is gone; \
             heal the whole VNF instead",
            staying.join(", ")
        ))
    }

    fn role(&self, vdu: &str) -> Result<Role, FlavourError> {
        role_of_vdu(&self.inputs, &self.k8s, vdu).map_err(|(what, cp)| {
            FlavourError::new(
                "plan",
                format!(
                    "{what}.ssh_cp_name `{cp}` is neither a CP of the VNFD nor a floating IP \
                     of one in the BaseHOT"
                ),
            )
        })
    }

    fn access(&self, role: Role) -> Result<Access, FlavourError> {
        let k = &self.k8s;
        let (cp, user, password) = match role {
            Role::Master => (
                &k.master_node.ssh_cp_name,
                &k.master_node.username,
                &k.master_node.password,
            ),
            Role::Worker => (
                &k.worker_node.ssh_cp_name,
                &k.worker_node.username,
                &k.worker_node.password,
            ),
            Role::StorageServer => {
                let ss = k.storage_server.as_ref().ok_or_else(|| {
                    FlavourError::new("plan", "the VNF has no storage_server parameters")
                })?;
                (&ss.ssh_cp_name, &ss.username, &ss.password)
            }
            Role::Other | Role::LoadBalancer | Role::AnsibleServer | Role::Registry => {
                return Err(FlavourError::new(
                    "plan",
                    "a VNFC without a role in the cluster is not configured",
                ));
            }
        };
        // A floating IP resource as ssh_cp_name: the node is reached at its floating address.
        let (cp, floating) = match self.inputs.floating_ip_ports.get(cp.as_str()) {
            Some(port) if !self.inputs.vnfd.cps.contains_key(cp.as_str()) => {
                (port.clone(), Some(cp.clone()))
            }
            _ => (cp.clone(), None),
        };
        Ok(Access {
            address: None,
            cp,
            floating,
            username: user.clone(),
            password: password.clone(),
        })
    }

    fn instantiate_end(&self, c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        let masters = self.nodes(c.vnfcs, Role::Master)?;
        let workers = self.nodes(c.vnfcs, Role::Worker)?;
        let first = masters
            .first()
            .ok_or_else(|| FlavourError::new("plan", "the stack has no master VNFC"))?;
        let mut list = StageList::default();
        let nodes: Vec<&Node<'_>> = masters.iter().chain(workers.iter()).collect();
        let hosts = self.hosts_stages(&nodes, &nodes)?;
        list.wave(|w| at(w, hosts));
        let cluster = self.cluster_args(c.vnfcs, &masters, first)?;
        let create = self.install(first, &cluster, false)?;
        list.wave(|w| at(w, vec![create]));
        let mut joins = Vec::new();
        for n in masters.iter().skip(1).chain(workers.iter()) {
            joins.push(self.install(n, &cluster, true)?);
        }
        if !joins.is_empty() {
            let material = self.join_material(first, c.op_occ_id);
            list.wave(|w| at(w, vec![material]));
        }
        list.wave(|w| at(w, joins));
        self.vim_stages(first, &cluster, &mut list);
        self.trust_stages(&nodes, &mut list)?;
        if self.has_storage() {
            let server = self
                .nodes(c.vnfcs, Role::StorageServer)?
                .into_iter()
                .next()
                .ok_or_else(|| FlavourError::new("plan", "the stack has no storage server VNFC"))?;
            // The storage server needs nothing of the cluster: it is prepared while the
            // cluster installs (its waves beside the install waves); the NFS clients and the
            // PersistentVolumes wait for both.
            let mut storage = StageList::default();
            self.storage_stages(&server, &mut storage)?;
            list.beside(0, storage.into_stages());
            // The NFS clients need nothing of the cluster or the server either: each installs
            // while its host is idle — the other nodes during the first master's install
            // (wave 1, after the hosts block), the first master during the joins (wave 3, after
            // it made the join material).
            let others: Vec<&Node<'_>> = masters.iter().skip(1).chain(workers.iter()).collect();
            list.beside(1, self.nfs_clients(&others));
            let joins_wave = if others.is_empty() { 2 } else { 3 };
            list.beside(joins_wave, self.nfs_clients(&[first]));
            self.pv_stages(c.vnfcs, first, c.pv_wait, &mut list)?;
        }
        Ok(list.into_stages())
    }

    fn scale_start(
        &self,
        c: HookContext<'_>,
        victims: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        self.leave(c, victims, SCALE_IN_DRAIN, DrainPolicy::Strict)
    }

    /// After Tacker removed the servers: `kubectl delete node` of each gone node on a master
    /// that stays, without a drain (the node is gone; `lenient`, as a heal removes a dead node).
    fn scale_in_after_removal(
        &self,
        c: HookContext<'_>,
        gone: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        self.leave(c, gone, Duration::ZERO, DrainPolicy::Lenient)
    }

    fn scale_end(
        &self,
        c: HookContext<'_>,
        created: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        let new = targeted(created);
        let masters = self.nodes(c.vnfcs, Role::Master)?;
        let first = masters
            .first()
            .ok_or_else(|| FlavourError::new("plan", "the stack has no master VNFC"))?;
        let workers = self.nodes(c.vnfcs, Role::Worker)?;
        let joining: Vec<&Node<'_>> = masters
            .iter()
            .chain(workers.iter())
            .filter(|n| new.contains(n.row.id.as_str()))
            .collect();
        let cluster = self.cluster_args(c.vnfcs, &masters, first)?;
        let mut joins = Vec::new();
        for n in &joining {
            joins.push(self.install(n, &cluster, true)?);
        }
        let clients = self.nfs_clients(&joining);
        let nodes: Vec<&Node<'_>> = masters.iter().chain(workers.iter()).collect();
        let hosts = self.hosts_stages(&nodes, &nodes)?;
        let mut list = StageList::default();
        list.wave(|w| at(w, hosts));
        if !joins.is_empty() {
            let material = self.join_material(first, c.op_occ_id);
            list.wave(|w| at(w, vec![material]));
        }
        list.wave(|w| at(w, joins));
        if joining.iter().any(|n| n.role == Role::Master) {
            // Every master sends API traffic to the new ones too.
            let all: Vec<&Node<'_>> = masters.iter().collect();
            let stages = self.haproxy_stages(&all, &all)?;
            list.wave(|w| at(w, stages));
        }
        list.wave(|w| at(w, clients));
        self.trust_stages(&joining, &mut list)?;
        Ok(list.into_stages())
    }

    fn heal_start(
        &self,
        c: HookContext<'_>,
        targets: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        let healed = targeted(targets);
        let masters = self.nodes(c.vnfcs, Role::Master)?;
        let surviving = masters.iter().find(|n| !healed.contains(n.row.id.as_str()));
        let storage = self.nodes(c.vnfcs, Role::StorageServer)?;
        let storage_targeted = storage.iter().find(|n| healed.contains(n.row.id.as_str()));
        let mut list = StageList::default();
        // 1. PersistentVolumes: refuse while Bound, then unregister.
        if let Some(server) = storage_targeted {
            let names = self.pv_names()?;
            if !names.is_empty() {
                let master = surviving.or(masters.first()).ok_or_else(|| {
                    FlavourError::new("plan", "no master to check PersistentVolumes on")
                })?;
                let check = recipes::pv::not_bound(master.row.id.as_str(), &names);
                list.wave(|w| {
                    vec![Stage::remote(
                        w,
                        server.row.id.as_str(),
                        Role::Master,
                        check,
                    )]
                });
                // One stage over all of them, keyed by the master (an earlier version's plan has
                // one `pv.unregister@<name>` per PersistentVolume; it resumes as stored).
                let host = master.row.id.as_str();
                let step = recipes::pv::unregister(host, &names, c.pv_wait);
                list.wave(|w| vec![Stage::remote(w, host, Role::Master, step)]);
            }
        }
        // 2. Nodes out of the cluster while a master survives to do it.
        if let Some(master) = surviving {
            let mut leaving = Vec::new();
            for role in [Role::Master, Role::Worker] {
                leaving.extend(
                    self.nodes(c.vnfcs, role)?
                        .into_iter()
                        .filter(|n| healed.contains(n.row.id.as_str())),
                );
            }
            // In the store's order, as the VNFC rows list them.
            leaving.sort_by_key(|n| c.vnfcs.iter().position(|v| v.id == n.row.id));
            self.remove_nodes(
                master,
                &leaving,
                HEAL_DRAIN,
                DrainPolicy::Lenient,
                &mut list,
            );
        }
        Ok(list.into_stages())
    }

    fn heal_end(&self, c: HookContext<'_>, targets: &[VnfcId]) -> Result<Vec<Stage>, FlavourError> {
        let healed = targeted(targets);
        let masters = self.nodes(c.vnfcs, Role::Master)?;
        let workers = self.nodes(c.vnfcs, Role::Worker)?;
        // The master everybody joins: a surviving one, else the first (healed) master.
        let anchor = masters
            .iter()
            .find(|n| !healed.contains(n.row.id.as_str()))
            .or(masters.first())
            .ok_or_else(|| FlavourError::new("plan", "the stack has no master VNFC"))?;
        let nodes: Vec<&Node<'_>> = masters
            .iter()
            .chain(workers.iter())
            .filter(|n| healed.contains(n.row.id.as_str()))
            .collect();
        let mut list = StageList::default();
        if !nodes.is_empty() {
            let all: Vec<&Node<'_>> = masters.iter().chain(workers.iter()).collect();
            let hosts = self.hosts_stages(&all, &all)?;
            list.wave(|w| at(w, hosts));
            // The anchor first when it is itself healed (it creates the cluster again).
            let (first, rest): (Vec<&Node<'_>>, Vec<&Node<'_>>) =
                nodes.iter().partition(|n| n.row.id == anchor.row.id);
            let cluster = self.cluster_args(c.vnfcs, &masters, anchor)?;
            let mut wave = Vec::new();
            for n in first {
                wave.push(self.install(n, &cluster, false)?);
            }
            list.wave(|w| at(w, wave));
            let mut wave = Vec::new();
            for n in rest {
                wave.push(self.install(n, &cluster, true)?);
            }
            if !wave.is_empty() {
                let material = self.join_material(anchor, c.op_occ_id);
                list.wave(|w| at(w, vec![material]));
            }
            list.wave(|w| at(w, wave));
            if nodes.iter().any(|n| n.role == Role::Master) {
                // A rebuilt master may answer at a new address: every master's HAProxy
                // backend lists the masters as they are now.
                let all: Vec<&Node<'_>> = masters.iter().collect();
                let stages = self.haproxy_stages(&all, &all)?;
                list.wave(|w| at(w, stages));
            }
            let clients = self.nfs_clients(&nodes);
            list.wave(|w| at(w, clients));
            if healed.contains(anchor.row.id.as_str()) {
                // The cluster was made again: a new CA and a new admin account.
                self.vim_stages(anchor, &cluster, &mut list);
            }
            self.trust_stages(&nodes, &mut list)?;
        }
        let storage = self.nodes(c.vnfcs, Role::StorageServer)?;
        if let Some(server) = storage.iter().find(|n| healed.contains(n.row.id.as_str())) {
            self.storage_stages(server, &mut list)?;
            self.pv_stages(c.vnfcs, anchor, c.pv_wait, &mut list)?;
        }
        Ok(list.into_stages())
    }

    /// The `trust.docker` stages of the nodes whose `daemon.json` was observed
    /// ([`trust::configure_stages`]).
    fn configure(
        &self,
        c: HookContext<'_>,
        observed: &BTreeMap<StageKey, String>,
    ) -> Result<Vec<Stage>, FlavourError> {
        let mut rows = Vec::new();
        for role in [Role::Master, Role::Worker] {
            rows.extend(self.nodes(c.vnfcs, role)?);
        }
        let nodes: Vec<trust::TrustNode<'_>> = rows
            .iter()
            .map(|n| trust::TrustNode {
                vnfc_id: n.row.id.as_str(),
                role: n.role,
            })
            .collect();
        trust::configure_stages(&self.k8s.private_registry_connection_info, &nodes, observed)
    }

    fn late_upload(
        &self,
        late: &Late,
        rows: &[VnfcRow],
        kept: &KeptArtifacts,
    ) -> Result<Secret<Vec<u8>>, FlavourError> {
        match late {
            Late::InstallEnv { ha_flag, join, .. } => {
                let material = if *join {
                    let text = kept.get(&Artifact::JoinMaterial).ok_or_else(|| {
                        FlavourError::new("k8s.install", "no join material is kept for the cluster")
                    })?;
                    let j = JoinMaterial::parse(text.expose())
                        .map_err(|why| FlavourError::new("k8s.install", why.to_string()))?;
                    Some(j)
                } else {
                    None
                };
                let env = self.install_env(*ha_flag, material.as_ref(), rows);
                Ok(Secret::new(env.into_bytes()))
            }
            Late::RegistryAuth { .. } => {
                trust::docker_config_json(&self.k8s.private_registry_connection_info)
                    .map(|t| Secret::new(t.expose().clone().into_bytes()))
                    .ok_or_else(|| {
                        FlavourError::new("trust.auth", "no registry entry has credentials")
                    })
            }
            other => Err(FlavourError::new(
                "plan",
                format!("this flavour produces no file for {}", other.path()),
            )),
        }
    }

    /// `k8s.join_material`: the join material its check printed, checked.
    fn keep(&self, step: &Step, stdout: &str) -> Result<Option<Kept>, FlavourError> {
        let (artifact, text) = match step.kind {
            StepKind::K8sJoinMaterial => {
                let j = JoinMaterial::parse(stdout)
                    .map_err(|why| FlavourError::new("k8s.join_material", why.to_string()))?;
                (Artifact::JoinMaterial, j.to_env())
            }
            StepKind::K8sKubeconfig => {
                let endpoint = step.args.first().map(String::as_str).unwrap_or_default();
                let mut text = kubeconfig_for(stdout, endpoint)?;
                if let Some(name) = step.args.get(1) {
                    text = crate::artifact::kubeconfig_with_tls_server_name(&text, name);
                }
                (Artifact::AdminKubeconfig, text)
            }
            StepKind::K8sVimToken => {
                let bearer_token = KubernetesVim::token_of(stdout)
                    .map_err(|why| FlavourError::new("k8s.vim_token", why.to_string()))?;
                let vim = KubernetesVim {
                    name: self.vim_name(),
                    bearer_token,
                };
                (Artifact::KubernetesVim, vim.to_env())
            }
            _ => return Ok(None),
        };
        Ok(Some(Kept {
            artifact,
            text: Secret::new(text),
        }))
    }

    /// The registry passwords, and the proxy URLs (they may carry credentials).
    fn secrets(&self) -> Vec<Secret<String>> {
        let mut out = trust::secrets(&self.k8s.private_registry_connection_info);
        if let Some(p) = &self.k8s.proxy {
            out.extend(p.http_proxy.iter().chain(&p.https_proxy).cloned());
        }
        out
    }

    fn registries(&self) -> Vec<trust::RegistryUse> {
        trust::registry_uses(&self.trust_inputs())
    }

    fn terminate_start(&self, _c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        // Tacker's terminate_end only deregisters the cluster as a VIM; nothing runs on the
        // servers before the stack goes.
        Ok(Vec::new())
    }

    fn probes(
        &self,
        c: HookContext<'_>,
        vnfc: &VnfcRow,
        role: Role,
        first_master: bool,
    ) -> Vec<Probe> {
        let mut out = Vec::new();
        match role {
            Role::StorageServer => {
                let Some(ss) = &self.k8s.storage_server else {
                    return out;
                };
                let setup = storage_setup(ss, vnfc);
                out.extend(
                    recipes::storage_volumes(vnfc.id.as_str(), &setup.volumes)
                        .into_iter()
                        .filter(|s| s.kind == recipes::StepKind::StorageMount)
                        .map(Probe::Script),
                );
                out.extend(
                    recipes::nfs_server(
                        vnfc.id.as_str(),
                        self.inputs.vnf_instance_id.as_str(),
                        &setup.exports,
                    )
                    .into_iter()
                    .map(Probe::Script),
                );
            }
            Role::Master | Role::Worker => {
                let script = install_script_path(&self.k8s.script_path);
                out.push(Probe::Script(recipes::k8s_install(
                    vnfc.id.as_str(),
                    &script,
                    Vec::new(),
                    Vec::new(),
                    None,
                    false,
                )));
                if self.has_storage() {
                    out.push(Probe::Script(recipes::nfs_client(vnfc.id.as_str())));
                }
                // Node trust drift: registry files, hosts block, auths, insecure registries.
                out.extend(
                    trust::probes(&self.trust_inputs(), vnfc.id.as_str())
                        .into_iter()
                        .map(Probe::Script),
                );
                if first_master {
                    out.push(Probe::Kubectl("nodes"));
                    out.push(Probe::Kubectl("pv"));
                    out.extend(self.pv_probes(c, vnfc));
                }
            }
            Role::Other | Role::LoadBalancer | Role::AnsibleServer | Role::Registry => {}
        }
        out
    }

    fn pv_names(&self) -> Result<Vec<String>, FlavourError> {
        if !self.has_storage() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for p in &self.k8s.pv_registration_params {
            // The NFS server address does not matter for the name.
            out.push(self.manifest(&p.pv_manifest_file_path, "0.0.0.0")?.name);
        }
        Ok(out)
    }
}

impl KubeadmNfs {
    /// `pv.register` in check mode for every PersistentVolume whose server address is known,
    /// reported as drift of the storage server (its configuration-only heal re-registers them).
    fn pv_probes(&self, c: HookContext<'_>, master: &VnfcRow) -> Vec<Probe> {
        let storage_vnfc = c
            .vnfcs
            .iter()
            .find(|v| self.role(&v.vdu_id).ok() == Some(Role::StorageServer))
            .map(|v| v.id.clone());
        let cp_addr: BTreeMap<String, String> = crate::plan::vnfcs::cp_addresses(c.vnfcs);
        let dir = format!("/tmp/vnfkeeper-{}", self.inputs.vnf_instance_id);
        let mut out = Vec::new();
        for p in &self.k8s.pv_registration_params {
            let Some(server) = cp_addr.get(&p.nfs_server_cp) else {
                continue;
            };
            let Ok(pv) = self.manifest(&p.pv_manifest_file_path, server) else {
                continue;
            };
            let mut step: Step = recipes::pv::register(
                master.id.as_str(),
                &dir,
                std::slice::from_ref(&pv),
                Duration::ZERO,
            )
            .remove(0);
            step.host = storage_vnfc
                .clone()
                .unwrap_or_else(|| master.id.clone())
                .into_string();
            out.push(Probe::Script(step));
        }
        out
    }
}

#[cfg(test)]
mod tests;
