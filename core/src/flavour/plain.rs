//! A VNF without cluster parameters: vnfkeeper manages its stack and configures nothing on its
//! VNFCs, so every hook is empty and no VNFC is reached over SSH.

use super::{Access, FlavourError, HookContext, MgmtDriver, Probe, Role};
use crate::model::VnfcRow;
use crate::plan::stages::Stage;

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

    fn instantiate_end(&self, _c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    fn scale_start(
        &self,
        _c: HookContext<'_>,
        _victims: &[String],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    fn scale_end(
        &self,
        _c: HookContext<'_>,
        _created: &[String],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    fn heal_start(
        &self,
        _c: HookContext<'_>,
        _targets: &[String],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    fn heal_end(
        &self,
        _c: HookContext<'_>,
        _targets: &[String],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    fn terminate_start(&self, _c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    fn probes(
        &self,
        _c: HookContext<'_>,
        _vnfc: &VnfcRow,
        _role: Role,
        _first_master: bool,
    ) -> Vec<Probe> {
        Vec::new()
    }

    fn pv_names(&self) -> Result<Vec<String>, FlavourError> {
        Ok(Vec::new())
    }
}
