//! A VNF without cluster parameters: vnfkeeper manages its stack and configures nothing on its
//! VNFCs, so every hook is empty and no VNFC is reached over SSH.

use super::{Access, FlavourError, MgmtDriver, Role};

/// The flavour of a VNF whose request carries no `k8s_cluster_installation_param`.
#[derive(Debug)]
pub(super) struct Plain;

impl MgmtDriver for Plain {
    fn role(&self, _vdu: &str) -> Result<Role, FlavourError> {
        Ok(Role::Other)
    }

    fn access(&self, _role: Role) -> Result<Access, FlavourError> {
        Err(FlavourError::new(
            "plan",
            "the VNF has no cluster parameters",
        ))
    }
}
