//! The Kubernetes cluster of a VNF as its INSTANTIATE request describes it (C0/C1): which VDU plays
//! which role, how to reach each VNFC over SSH, and the remote steps that configure a node, the
//! storage server and the PersistentVolumes. Shared by INSTANTIATE, SCALE and HEAL, so that a
//! node added by a scale-out or replaced by a heal is configured exactly like the original ones.
//!
//! Source: `seeds/pv-k8s-cluster` (`k8s_cluster_installation_param`), `research/tacker-anchor.md`
//! §1.1 (instantiate_end, scale_end, heal_end).

use std::path::Path;

use super::steps::Host;
use super::{Engine, EngineError, StepFailure};
use crate::cloud::{Cloud, StackRef};
use crate::intake::wire::Secret;
use crate::intake::wire::params::K8sClusterInstallationParam;
use crate::intake::wire::sol003::InstantiateVnfRequest;
use crate::package::VnfPackage;
use crate::plan;
use crate::recipes::{self, Step, pv::PvManifest};
use crate::remote::{Auth, HostKeyPolicy, Target};
use crate::store::{InstanceRow, VnfcRow};

/// Where PersistentVolume manifests are put on the master.
const MANIFEST_DIR: &str = "/tmp";

/// What a VNFC is to the cluster (shared with reconcile).
pub(super) use crate::plan::roles::ClusterRole as Role;

/// The instance's INSTANTIATE request, its VNF package, and the cluster parameters in it.
pub(super) struct Cluster {
    /// The InstantiateVnfRequest as accepted.
    pub req: InstantiateVnfRequest,
    /// The VNF package it named.
    pub pkg: VnfPackage,
    /// `additionalParams.k8s_cluster_installation_param`, if the VNF is a cluster.
    pub k8s: Option<K8sClusterInstallationParam>,
}

impl Cluster {
    /// From a stored InstantiateVnfRequest and package path.
    pub fn load(params: &str, package: Option<&str>) -> Result<Self, StepFailure> {
        let req: InstantiateVnfRequest = serde_json::from_str(params).map_err(|_| {
            StepFailure::input("plan", "stored InstantiateVnfRequest does not parse")
        })?;
        let package = package
            .ok_or_else(|| StepFailure::input("plan", "INSTANTIATE without a VNF package"))?;
        let pkg = VnfPackage::load(Path::new(package))
            .map_err(|err| StepFailure::input("plan", err.to_string()))?;
        let k8s = req
            .additional_params
            .as_ref()
            .and_then(|a| a.k8s_cluster_installation_param.clone());
        Ok(Self { req, pkg, k8s })
    }

    /// The cluster of an INSTANTIATED instance, from its last COMPLETED INSTANTIATE.
    pub fn of_instance<C: Cloud>(
        e: &Engine<C>,
        vnf_instance_id: &str,
    ) -> Result<Self, EngineError> {
        let (params, package) =
            e.db.with(|s| s.reader().instantiate_request(vnf_instance_id))?
                .ok_or_else(|| {
                    StepFailure::input(
                        "plan",
                        format!("VNF instance `{vnf_instance_id}` has no completed INSTANTIATE"),
                    )
                })?;
        Ok(Self::load(&params, package.as_deref())?)
    }

    /// The role of a VDU. Errors: a role's `ssh_cp_name` is not a CP of the VNFD.
    pub fn role(&self, vdu: &str) -> Result<Role, StepFailure> {
        let Some(k) = &self.k8s else {
            return Ok(Role::Other);
        };
        plan::roles::role_of_vdu(&self.pkg.vnfd, k, vdu).map_err(|(what, cp)| {
            StepFailure::input(
                "plan",
                format!("{what}.ssh_cp_name `{cp}` is not a CP of the VNFD"),
            )
        })
    }

    /// SSH access to one VNFC in `role` (address of the role's `ssh_cp_name`, the role's
    /// credentials, its pinned host key or trust on first use when none is pinned yet).
    pub fn host(&self, v: &VnfcRow, role: Role) -> Result<Host, StepFailure> {
        let k = self
            .k8s
            .as_ref()
            .ok_or_else(|| StepFailure::input("plan", "the VNF has no cluster parameters"))?;
        let (cp, user, password): (&str, &str, &Secret<String>) = match role {
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
                    StepFailure::input("plan", "the VNF has no storage_server parameters")
                })?;
                (&ss.ssh_cp_name, &ss.username, &ss.password)
            }
            Role::Other => {
                return Err(StepFailure::input(
                    "plan",
                    format!("VNFC {} has no role in the cluster", v.id),
                ));
            }
        };
        let addr = plan::roles::cp_address(v, cp).ok_or_else(|| {
            StepFailure::input("plan", format!("VNFC {} has no address on CP `{cp}`", v.id))
        })?;
        Ok(Host {
            vnfc_id: v.id.clone(),
            target: Target {
                address: addr,
                port: 22,
                username: user.to_owned(),
                auth: Auth::Password(password.clone()),
                host_key: v
                    .host_key
                    .clone()
                    .map(HostKeyPolicy::Pinned)
                    .unwrap_or(HostKeyPolicy::TrustOnFirstUse),
                label: v.id.clone(),
            },
            secrets: vec![password.clone()],
        })
    }

    /// The VNFCs in `role`, oldest first (the store's order: VDU, index, creation).
    pub fn hosts(&self, vnfcs: &[VnfcRow], role: Role) -> Result<Vec<Host>, StepFailure> {
        let mut out = Vec::new();
        for v in vnfcs {
            if self.role(&v.vdu_id)? == role {
                out.push(self.host(v, role)?);
            }
        }
        Ok(out)
    }

    /// Where the install script goes on a node and its content.
    fn script(&self) -> Result<(String, Vec<u8>), StepFailure> {
        let k = self
            .k8s
            .as_ref()
            .ok_or_else(|| StepFailure::input("k8s.install", "no cluster parameters"))?;
        let body = self
            .pkg
            .read(&k.script_path)
            .map_err(|err| StepFailure::input("k8s.install", err.to_string()))?;
        Ok((plan::roles::install_script_path(&k.script_path), body))
    }

    /// `k8s.install` on `host` in `role`, joining (or, for the first master, creating) the
    /// cluster whose first master answers at `master_ip`. Arguments per the README's install
    /// script contract: masters `-i <master> [-p <pod CIDR>]`, workers `-w <own> -i <master>`.
    pub fn install(&self, host: &Host, role: Role, master_ip: &str) -> Result<Step, StepFailure> {
        let k = self
            .k8s
            .as_ref()
            .ok_or_else(|| StepFailure::input("k8s.install", "no cluster parameters"))?;
        let (script, body) = self.script()?;
        let args = match role {
            Role::Worker => vec![
                "-w".to_owned(),
                host.target.address.to_string(),
                "-i".to_owned(),
                master_ip.to_owned(),
            ],
            _ => {
                let mut a = vec!["-i".to_owned(), master_ip.to_owned()];
                if let Some(p) = &k.master_node.pod_cidr {
                    a.extend(["-p".to_owned(), p.clone()]);
                }
                a
            }
        };
        Ok(recipes::k8s_install(&host.vnfc_id, &script, body, args))
    }

    /// The storage server's stages, each a single step on `server`: a filesystem (only if none)
    /// and a persistent mount per volume, the NFS server, exactly the requested exports.
    /// Errors: a `volume_resource_id` not attached to the server.
    pub fn storage_steps(
        &self,
        server: &Host,
        row: &VnfcRow,
        vnf_instance_id: &str,
    ) -> Result<Vec<Step>, StepFailure> {
        let Some(ss) = self.k8s.as_ref().and_then(|k| k.storage_server.as_ref()) else {
            return Ok(Vec::new());
        };
        let setup = plan::roles::storage_setup(ss, row);
        if let Some(missing) = setup.missing.first() {
            return Err(StepFailure::input(
                "storage",
                format!("volume resource `{missing}` is not attached to the storage server"),
            ));
        }
        let (setups, exports) = (setup.volumes, setup.exports);
        let mut steps = recipes::storage_volumes(&server.vnfc_id, &setups);
        steps.extend(recipes::nfs_server(
            &server.vnfc_id,
            vnf_instance_id,
            &exports,
        ));
        Ok(steps)
    }

    /// Number of storage stages ([`Cluster::storage_steps`]) the request asks for.
    pub fn storage_stage_count(&self) -> usize {
        self.k8s
            .as_ref()
            .and_then(|k| k.storage_server.as_ref())
            .map_or(0, |ss| 2 * ss.cinder_volume_setup_params.len() + 2)
    }

    /// Number of PersistentVolumes the request registers.
    pub fn pv_count(&self) -> usize {
        self.k8s.as_ref().map_or(0, |k| {
            if k.storage_server.is_some() {
                k.pv_registration_params.len()
            } else {
                0
            }
        })
    }

    /// The PersistentVolume manifests with `spec.nfs.server` set to the address of each one's
    /// `nfs_server_cp` among `vnfcs`. Errors: a CP without an address, a manifest that does not
    /// parse.
    pub fn pv_manifests(&self, vnfcs: &[VnfcRow]) -> Result<Vec<PvManifest>, StepFailure> {
        let Some(k) = self.k8s.as_ref().filter(|k| k.storage_server.is_some()) else {
            return Ok(Vec::new());
        };
        let cp_addr = plan::roles::cp_addresses(vnfcs);
        let mut out = Vec::new();
        for p in &k.pv_registration_params {
            let server_ip = cp_addr.get(&p.nfs_server_cp).ok_or_else(|| {
                StepFailure::input(
                    "pv.register",
                    format!(
                        "nfs_server_cp `{}` has no address in the stack",
                        p.nfs_server_cp
                    ),
                )
            })?;
            let text = self
                .pkg
                .read_text(&p.pv_manifest_file_path)
                .map_err(|err| StepFailure::input("pv.register", err.to_string()))?;
            out.push(
                recipes::pv::with_nfs_server(&p.pv_manifest_file_path, &text, server_ip)
                    .map_err(|err| StepFailure::input("pv.register", err.to_string()))?,
            );
        }
        Ok(out)
    }

    /// The names of the PersistentVolumes the request registers (from the manifests; the NFS
    /// server address does not matter for the name).
    pub fn pv_names(&self) -> Result<Vec<String>, StepFailure> {
        let Some(k) = self.k8s.as_ref().filter(|k| k.storage_server.is_some()) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for p in &k.pv_registration_params {
            let text = self
                .pkg
                .read_text(&p.pv_manifest_file_path)
                .map_err(|err| StepFailure::input("pv.register", err.to_string()))?;
            let pv = recipes::pv::with_nfs_server(&p.pv_manifest_file_path, &text, "0.0.0.0")
                .map_err(|err| StepFailure::input("pv.register", err.to_string()))?;
            out.push(pv.name);
        }
        Ok(out)
    }

    /// The two steps registering `pv` on `master` (apply, then wait for Available).
    pub fn pv_register(
        &self,
        master: &Host,
        vnf_instance_id: &str,
        pv: &PvManifest,
        wait: std::time::Duration,
    ) -> Vec<Step> {
        let dir = format!("{MANIFEST_DIR}/vnfkeeper-{vnf_instance_id}");
        let server = pv.server.clone();
        recipes::pv::register(&master.vnfc_id, &dir, pv, &server, wait)
    }
}

/// The instance row and its Heat stack (SCALE and HEAL act on an existing stack). Errors: the
/// instance vanished, or it has no stack id.
pub(super) fn instance_stack<C: Cloud>(
    e: &Engine<C>,
    vnf_instance_id: &str,
) -> Result<(InstanceRow, StackRef), EngineError> {
    let instance =
        e.db.with(|s| s.reader().instances())?
            .into_iter()
            .find(|i| i.id == vnf_instance_id)
            .ok_or_else(|| StepFailure::input("plan", "VNF instance vanished"))?;
    let stack = StackRef {
        name: instance
            .stack_name
            .clone()
            .unwrap_or_else(|| format!("vnf-{vnf_instance_id}")),
        id: instance
            .stack_id
            .clone()
            .ok_or_else(|| StepFailure::input("plan", "the instance has no Heat stack"))?,
    };
    Ok((instance, stack))
}
