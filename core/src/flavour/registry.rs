//! The registry VNF flavour (`private_registry_installation_param`, cir spec): one VM running the
//! Docker private registry (the CNCF distribution server) in a container, its data on the VNFC's
//! Cinder volume so that a HEAL that rebuilds the VM keeps every pushed image.
//!
//! Roles: the VDU owning `ssh_cp_name` is [`Role::Registry`]; other VDUs are not configured.
//! Hooks (Tacker `samples/mgmt_driver/kubernetes/private_registry_mgmt.py`: `instantiate_end` and
//! `heal_end` run the same routine, every other hook is empty), with its defects removed:
//! - the data directory lives on the first volume attached to the registry VNFC, formatted only
//!   when it holds no filesystem and mounted persistently (`storage.filesystem`, `storage.mount`),
//!   instead of the VM's local disk;
//! - every step is check-then-apply: a re-run finds the container running and does nothing, a
//!   container of the same name is started or replaced, never a name conflict;
//! - readiness is `GET /v2/` answering, bounded, with the last status in the failure.

use std::time::Duration;

use super::{Access, FlavourError, HookContext, Inputs, MgmtDriver, Probe, Role};
use crate::model::{VnfcId, VnfcRow};
use crate::plan::stages::{Stage, StageList};
use crate::recipes::{self, Registry, Step, VolumeSetup};
use crate::wire::params::PrivateRegistryInstallationParam;

/// The registry container's name (as the reference names it).
pub const CONTAINER: &str = "private_registry";

/// The registry image run (as the reference runs it); the package's tar is tagged so if it holds
/// the image under another tag.
pub const IMAGE: &str = "registry:latest";

/// Where the registry's data volume is mounted on the VM; bound to the container's
/// `/var/lib/registry`.
pub const DATA_DIR: &str = "/var/lib/vnfkeeper/registry";

/// Where the package's image tar is uploaded before it is loaded.
pub const IMAGE_UPLOAD: &str = "/var/lib/vnfkeeper/registry-image.tar";

/// Longest wait for `GET /v2/` to answer after the container started.
pub const READY_WAIT: Duration = Duration::from_secs(60);

/// The package files this flavour reads: the registry image tar, when `image_path` is given.
pub(super) fn package_files(p: &PrivateRegistryInstallationParam) -> Vec<String> {
    p.image_path.iter().cloned().collect()
}

/// The registry VNF of one instance.
#[derive(Debug)]
pub(super) struct PrivateRegistry {
    inputs: Inputs,
    param: PrivateRegistryInstallationParam,
}

impl PrivateRegistry {
    pub(super) fn new(inputs: Inputs, param: PrivateRegistryInstallationParam) -> Self {
        Self { inputs, param }
    }

    /// What the registry VM runs. Errors: `image_path` given but not read.
    fn registry(&self) -> Result<Registry, FlavourError> {
        let image_tar = match &self.param.image_path {
            Some(path) => {
                let bytes = self.inputs.files.get(path).ok_or_else(|| {
                    FlavourError::new(
                        "registry.image",
                        format!("package file `{path}` was not read"),
                    )
                })?;
                Some((IMAGE_UPLOAD.to_owned(), bytes.clone()))
            }
            None => None,
        };
        Ok(Registry {
            container: CONTAINER.into(),
            image: IMAGE.into(),
            image_tar,
            port: self.param.port(),
            data_dir: DATA_DIR.into(),
            ready_wait: READY_WAIT,
        })
    }

    /// The registry VNFCs among `vnfcs` (store order).
    fn servers<'a>(&self, vnfcs: &'a [VnfcRow]) -> Result<Vec<&'a VnfcRow>, FlavourError> {
        let mut out = Vec::new();
        for row in vnfcs {
            if self.role(&row.vdu_id)? == Role::Registry {
                out.push(row);
            }
        }
        Ok(out)
    }

    /// The stages that bring `vnfc` to a serving registry, one wave each: the data volume
    /// (filesystem only if none, persistent mount at [`DATA_DIR`]), then [`recipes::registry`].
    fn configure(&self, vnfc: &VnfcRow, list: &mut StageList) -> Result<(), FlavourError> {
        if let Some(v) = data_volume(vnfc) {
            for step in recipes::storage_volumes(vnfc.id.as_str(), std::slice::from_ref(&v)) {
                list.wave(|w| vec![Stage::remote(w, &v.volume_id, Role::Registry, step)]);
            }
        }
        for step in recipes::registry(vnfc.id.as_str(), &self.registry()?) {
            list.wave(|w| vec![Stage::remote(w, vnfc.id.as_str(), Role::Registry, step)]);
        }
        Ok(())
    }
}

/// The registry's data volume: the first volume attached to `vnfc` (device from the attachment,
/// `/dev/vdb` when Cinder gave none), mounted at [`DATA_DIR`]; `None` when none is attached (the
/// data then lives on the VM's own disk and does not survive a rebuild).
pub fn data_volume(vnfc: &VnfcRow) -> Option<VolumeSetup> {
    vnfc.volumes.first().map(|a| VolumeSetup {
        volume_id: a.volume_id.clone(),
        device: a.device.clone().unwrap_or_else(|| "/dev/vdb".into()),
        mount_to: DATA_DIR.into(),
    })
}

impl MgmtDriver for PrivateRegistry {
    /// cir spec: "Scale operation is not supported".
    fn scale_refusal(&self, _aspect_id: &str) -> Option<String> {
        Some("the private registry VNF does not support SCALE".into())
    }

    fn role(&self, vdu: &str) -> Result<Role, FlavourError> {
        let cp = &self.param.ssh_cp_name;
        let owner = self.inputs.vnfd.cps.get(cp).ok_or_else(|| {
            FlavourError::new(
                "plan",
                format!(
                    "private_registry_installation_param.ssh_cp_name `{cp}` is not a CP of the VNFD"
                ),
            )
        })?;
        Ok(if owner.vdu == vdu {
            Role::Registry
        } else {
            Role::Other
        })
    }

    fn access(&self, role: Role) -> Result<Access, FlavourError> {
        if role != Role::Registry {
            return Err(FlavourError::new(
                "plan",
                "only the registry VNFC is configured",
            ));
        }
        Ok(Access {
            address: None,
            cp: self.param.ssh_cp_name.clone(),
            floating: None,
            username: self.param.ssh_username.clone(),
            password: self.param.ssh_password.clone(),
        })
    }

    fn instantiate_end(&self, c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        let servers = self.servers(c.vnfcs)?;
        if servers.is_empty() {
            return Err(FlavourError::new("plan", "the stack has no registry VNFC"));
        }
        let mut list = StageList::default();
        for s in servers {
            self.configure(s, &mut list)?;
        }
        Ok(list.into_stages())
    }

    fn heal_end(&self, c: HookContext<'_>, targets: &[VnfcId]) -> Result<Vec<Stage>, FlavourError> {
        let mut list = StageList::default();
        for s in self.servers(c.vnfcs)? {
            if targets.contains(&s.id) {
                self.configure(s, &mut list)?;
            }
        }
        Ok(list.into_stages())
    }

    fn probes(
        &self,
        _c: HookContext<'_>,
        vnfc: &VnfcRow,
        role: Role,
        _first_master: bool,
    ) -> Vec<Probe> {
        if role != Role::Registry {
            return Vec::new();
        }
        let mut out: Vec<Probe> = data_volume(vnfc)
            .map(|v| recipes::storage_volumes(vnfc.id.as_str(), &[v]))
            .unwrap_or_default()
            .into_iter()
            .filter(|s| s.kind == recipes::StepKind::StorageMount)
            .map(Probe::Script)
            .collect();
        if let Ok(r) = self.registry() {
            out.extend(
                recipes::registry(vnfc.id.as_str(), &r)
                    .into_iter()
                    .filter(|s: &Step| {
                        matches!(
                            s.kind,
                            recipes::StepKind::RegistryRun | recipes::StepKind::RegistryReady
                        )
                    })
                    .map(Probe::Script),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests;
