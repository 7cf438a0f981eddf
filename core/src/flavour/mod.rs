//! The flavour seam: what a kind of VNF (a Kubernetes cluster installed by the package's script
//! with NFS PersistentVolumes; kubespray with an external load balancer; the private registry VNF) adds to the cloud part of an
//! LCM operation. A flavour is one module behind [`MgmtDriver`], shaped like Tacker's MgmtDriver
//! hooks (`tacker/vnfm/mgmt_drivers/vnflcm_abstract_driver.py`: `instantiate_end`,
//! `scale_start`/`scale_end`, `heal_start`/`heal_end`, `terminate_start`): each hook returns the
//! stages to run as data (`plan::stages`); the engine stores and runs them. A flavour also says
//! what role each VDU plays, how a VNFC is reached over SSH, and what reconcile probes on it.
//!
//! Pure: no I/O, no clock. The package files a flavour needs ([`MgmtDriver::package_files`]) are
//! read by the caller and handed over in [`Inputs::files`].

mod kubeadm_nfs;
pub mod kubespray;
mod plain;
mod registry;
#[cfg(test)]
mod test_rows;
pub mod trust;

use std::collections::BTreeMap;
use std::time::Duration;

use crate::model::{StageKey, VnfInstanceId, VnfcId, VnfcRow};
use crate::package::Vnfd;
use crate::plan::stages::Stage;
use crate::recipes::{Late, Step};
use crate::wire::Secret;
use crate::wire::sol003::InstantiateVnfRequest;

pub use crate::model::Role;

/// How a VNFC in some role is reached: the CP whose address is used, and the credentials.
#[derive(Debug, Clone)]
pub struct Access {
    /// The CP (`ssh_cp_name`, or the CP its floating IP is on); empty for a host outside the
    /// VNF (see `address`).
    pub cp: String,
    /// The `OS::Neutron::FloatingIP` resource `ssh_cp_name` names, when it names one: the VNFC
    /// is reached at that floating address when its row records one (Tacker's
    /// `_get_ssh_ip_and_nic_ip`: the resource's `floating_ip_address` when it has one), else
    /// at the CP's fixed address.
    pub floating: Option<String>,
    /// The fixed address of a host outside the VNF (the Ansible server); `None` for a VNFC,
    /// whose address is its row's address on `cp`.
    pub address: Option<std::net::IpAddr>,
    /// SSH user.
    pub username: String,
    /// SSH and sudo password.
    pub password: Secret<String>,
}

impl Access {
    /// The address VNFC `row` is reached at: its floating address on [`Access::floating`] when
    /// recorded, else its address on [`Access::cp`]; `None` when it has neither.
    pub fn address_of(&self, row: &VnfcRow) -> Option<std::net::IpAddr> {
        self.floating
            .as_deref()
            .and_then(|f| crate::plan::vnfcs::cp_address(row, f))
            .or_else(|| crate::plan::vnfcs::cp_address(row, &self.cp))
    }
}

/// A flavour's refusal: the step (or `plan`) it concerns and why; the engine reports it as a
/// 422 ProblemDetails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{step}: {reason}")]
pub struct FlavourError {
    /// Step name or `plan`.
    pub step: &'static str,
    /// What is wrong (never a secret).
    pub reason: String,
}

/// A flavour's verdict that a streamed apply failed ([`MgmtDriver::judge_apply`]): the step
/// fails with `reason` (never a secret), shown as it is.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct ApplyFailed {
    /// Why, e.g. the hosts and tasks `ansible-playbook` reported failed.
    pub reason: String,
}

impl FlavourError {
    fn new(step: &'static str, reason: impl Into<String>) -> Self {
        Self {
            step,
            reason: reason.into(),
        }
    }
}

/// What a step's apply printed, as the engine hands it to [`MgmtDriver::judge_apply`]: every
/// secret the engine knows is already masked in the tails; the engine masks the verdict's reason
/// again (a message read from a JSON event is unescaped).
#[derive(Debug, Clone, Copy)]
pub struct ApplyOutput<'a> {
    /// Exit status (RFC 4254 §6.10 `exit-status`); `None` when the command died from a signal.
    pub exit_status: Option<u32>,
    /// Signal name without `SIG` (`KILL`), if the command died from one.
    pub signal: Option<&'a str>,
    /// The `ansible-playbook` events read from standard output line by line as it streamed
    /// (whatever the engine kept of the output itself).
    pub events: &'a crate::ansible::PlaybookRun,
    /// The last 1,000 bytes of standard output.
    pub stdout_tail: &'a str,
    /// The last 1,000 bytes of standard error.
    pub stderr_tail: &'a str,
}

/// The artifacts kept for an instance when a step runs ([`crate::artifact`]), by kind.
pub type KeptArtifacts = BTreeMap<crate::artifact::Artifact, Secret<String>>;

/// A file a flavour keeps from a step's output (see [`crate::artifact`]).
#[derive(Debug, Clone)]
pub struct Kept {
    /// Which artifact.
    pub artifact: crate::artifact::Artifact,
    /// Its content (may hold credentials: never logged).
    pub text: Secret<String>,
}

/// Everything a flavour decides from: the INSTANTIATE request of the instance, its VNFD and the
/// package files it asked for.
#[derive(Debug, Clone)]
pub struct Inputs {
    /// vnfInstanceId.
    pub vnf_instance_id: VnfInstanceId,
    /// The InstantiateVnfRequest as accepted.
    pub req: InstantiateVnfRequest,
    /// The VNF package's VNFD.
    pub vnfd: Vnfd,
    /// Package-relative path → content, for every path of [`MgmtDriver::package_files`].
    pub files: BTreeMap<String, Vec<u8>>,
    /// The top-level BaseHOT of the request's deployment flavour (`VnfPackage::base_hot`), as
    /// JSON, when the package has one: Heat resource names a request may name (kubespray's
    /// `ssh_cp_name`, a "resource name of CP" in the seed spec).
    pub base_hot: Option<serde_json::Value>,
    /// `OS::Neutron::FloatingIP` resource name → its port's resource name, over the
    /// flavour's BaseHOT and its nested templates ([`crate::package::BaseHot::floating_ip_ports`]):
    /// an `ssh_cp_name` may name such a resource (Tacker's driver then reaches the node at its
    /// `floating_ip_address`).
    pub floating_ip_ports: BTreeMap<String, String>,
}

impl Inputs {
    /// The VNFD CP that `name` is or whose port a floating IP `name` is attached to; `None`
    /// when it is neither.
    pub fn cp_behind(&self, name: &str) -> Option<&str> {
        if let Some((cp, _)) = self.vnfd.cps.get_key_value(name) {
            return Some(cp.as_str());
        }
        let port = self.floating_ip_ports.get(name)?;
        self.vnfd
            .cps
            .get_key_value(port.as_str())
            .map(|(cp, _)| cp.as_str())
    }
}

/// What a hook sees: the instance's VNFCs as stored now and the engine's limits.
#[derive(Debug, Clone, Copy)]
pub struct HookContext<'a> {
    /// The instance's VNFC rows (store order: VDU, index, creation).
    pub vnfcs: &'a [VnfcRow],
    /// Longest wait for a PersistentVolume to change phase.
    pub pv_wait: Duration,
    /// The operation occurrence (vnfLcmOpOccId) the stages are planned for, so that what a
    /// step makes once per operation (a cluster's join material) is made again by the next
    /// one; empty when reconcile plans probes.
    pub op_occ_id: &'a str,
}

/// A reconcile probe of one VNFC: a recipe step in check mode, or a `kubectl get … -o json` read.
#[derive(Debug, Clone)]
pub enum Probe {
    /// The step's script with `MODE=check` (0 in place, 10 drift).
    Script(Step),
    /// The step's script with `MODE=check` on the host outside the VNF that the flavour reaches
    /// in [`Role::AnsibleServer`] (kubespray's inventory); its verdict is about the VNFC whose
    /// probes list it, so that drift there is repaired by that VNFC's configuration-only heal.
    Outside(Step),
    /// `kubectl get <kind> -o json` on a master (`nodes`, `pv`).
    Kubectl(&'static str),
}

/// One flavour: roles, access and the MgmtDriver hooks as stage lists. Hook stages use waves
/// from 0 on; the caller places them. Every stage key is unique within one hook's result.
pub trait MgmtDriver: Send + Sync + std::fmt::Debug {
    /// The role of the VNFCs of `vdu`. Errors: the request names a CP the VNFD lacks.
    fn role(&self, vdu: &str) -> Result<Role, FlavourError>;

    /// How a VNFC in `role` is reached. Errors: the role is not managed over SSH.
    fn access(&self, role: Role) -> Result<Access, FlavourError>;

    /// Stages after the stack was created (Tacker `instantiate_end`). Default: none.
    fn instantiate_end(&self, _c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Stages before a SCALE_IN changes the stack: `victims` leave (Tacker `scale_start`).
    /// Default: none.
    fn scale_start(
        &self,
        _c: HookContext<'_>,
        _victims: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Stages after `gone` were removed by someone else (Tacker's SCALE_IN in companion mode):
    /// what of the flavour's removal can still run once the servers no longer exist — e.g.
    /// deleting the gone nodes from the cluster on a master that stays. `c.vnfcs` are the rows
    /// as vnfkeeper last read them, `gone` among them. The drain before removal cannot happen.
    /// Errors: the flavour cannot place the stages (no master stays). Default: none.
    fn scale_in_after_removal(
        &self,
        _c: HookContext<'_>,
        _gone: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Stages after a SCALE_OUT: `created` are new (Tacker `scale_end`). Default: none.
    fn scale_end(
        &self,
        _c: HookContext<'_>,
        _created: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Stages before a HEAL replaces `targets` (Tacker `heal_start`); may refuse (409 by a step).
    /// Default: none.
    fn heal_start(
        &self,
        _c: HookContext<'_>,
        _targets: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Stages after `targets` were replaced or, for a configuration-only heal, as they are
    /// (Tacker `heal_end`). Default: none.
    fn heal_end(
        &self,
        _c: HookContext<'_>,
        _targets: &[VnfcId],
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Stages before the stack is deleted (Tacker `terminate_start`). Default: none.
    fn terminate_start(&self, _c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Stages before a ROLLBACK of a failed INSTANTIATE deletes the stack (SOL003 §5.4.10
    /// ROLLBACK; Tacker's infra driver only deletes the stack): undo what the INSTANTIATE may
    /// have written on hosts that outlive the stack (kubespray's inventory on the Ansible
    /// server). Each must be safe when the INSTANTIATE never got that far. Run best effort: a
    /// failure is reported and does not block the rollback. Default: none.
    fn instantiate_rollback(&self, _c: HookContext<'_>) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// The expansion of a [`Hook::Configure`](crate::plan::stages::Hook::Configure) placeholder
    /// one of this flavour's hooks returned: stages decided from what the stages before it
    /// observed. `observed` maps the stage key of each stage of the operation journaled DONE to
    /// its verdict line (the last line its check or apply printed, e.g. `already done: mtu 1450
    /// on eth0`). Errors: an observation the flavour needs is missing or does not parse.
    fn configure(
        &self,
        _c: HookContext<'_>,
        _observed: &BTreeMap<StageKey, String>,
    ) -> Result<Vec<Stage>, FlavourError> {
        Ok(Vec::new())
    }

    /// Reconcile probes of one VNFC in `role` (`first_master`: the master that also reads the
    /// cluster's nodes and PersistentVolumes). Default: none.
    fn probes(
        &self,
        _c: HookContext<'_>,
        _vnfc: &VnfcRow,
        _role: Role,
        _first_master: bool,
    ) -> Vec<Probe> {
        Vec::new()
    }

    /// Names of the PersistentVolumes the VNF registers. Default: none.
    fn pv_names(&self) -> Result<Vec<String>, FlavourError> {
        Ok(Vec::new())
    }

    /// The content of a step's [`Late`] file from the VNFC rows as stored when the step runs
    /// and the artifacts kept for the instance (pinned host keys, credentials, join material).
    /// Errors: the flavour plans no such file, or what it needs is missing (a node without a
    /// pinned key, no join material kept).
    fn late_upload(
        &self,
        late: &Late,
        _rows: &[VnfcRow],
        _kept: &KeptArtifacts,
    ) -> Result<Secret<Vec<u8>>, FlavourError> {
        Err(FlavourError::new(
            "plan",
            format!("this flavour produces no file for {}", late.path()),
        ))
    }

    /// Secrets of the request other than the roles' SSH passwords that a step's output must
    /// never show (registry passwords and their auth tokens); masked wherever the engine records
    /// a step. Default: none.
    fn secrets(&self) -> Vec<Secret<String>> {
        Vec::new()
    }

    /// The private registries the VNF's nodes are made to trust (`trust::registry_uses`),
    /// recorded by the engine when a node's step that [records
    /// trust](crate::recipes::StepKind::records_trust) ends. Default: none.
    fn registries(&self) -> Vec<trust::RegistryUse> {
        Vec::new()
    }

    /// The verdict on the apply of a step whose output is
    /// [`Streamed`](crate::recipes::OutputUse::Streamed): [`ApplyFailed`] fails the step with its
    /// reason, `Ok` leaves the verdict to the exit status. Default: `Ok`.
    fn judge_apply(&self, _step: &Step, _out: &ApplyOutput<'_>) -> Result<(), ApplyFailed> {
        Ok(())
    }

    /// Why the flavour refuses a SCALE of `aspect_id`, or `None`; intake answers 422 with it
    /// before anything is queued. Default: none.
    fn scale_refusal(&self, _aspect_id: &str) -> Option<String> {
        None
    }

    /// Why the flavour refuses to rebuild the servers of `targets` (vnfcInstanceIds among the
    /// instance's `vnfcs`) in one HEAL, or `None`; intake answers 409 with it and reconcile never
    /// starts it (an alert instead). A configuration-only heal rebuilds nothing and is not
    /// asked. Default: none.
    fn rebuild_refusal(&self, _vnfcs: &[VnfcRow], _targets: &[VnfcId]) -> Option<String> {
        None
    }

    /// What to keep of a step whose check exited 0, from its standard output (unmasked: the
    /// artifact may be a credential). Errors: the step's output is not what the flavour keeps
    /// (the step fails). Default: nothing.
    fn keep(&self, _step: &Step, _stdout: &str) -> Result<Option<Kept>, FlavourError> {
        Ok(None)
    }
}

/// The package files the flavour of `req` reads (package-relative paths).
pub fn package_files(req: &InstantiateVnfRequest) -> Vec<String> {
    match (k8s(req), registry_param(req)) {
        (Some(k), _) if k.ansible.is_some() => kubespray::package_files(k),
        (Some(k), _) => kubeadm_nfs::package_files(k),
        (None, Some(r)) => registry::package_files(r),
        (None, None) => Vec::new(),
    }
}

/// Whether the INSTANTIATE request selects a flavour that configures its VNFCs (anything but
/// the plain VNF): the VNFs reconcile loads a package and a driver for, to probe them.
pub fn configures(req: &InstantiateVnfRequest) -> bool {
    k8s(req).is_some() || registry_param(req).is_some()
}

/// The flavour of an instance, from its INSTANTIATE request: `k8s_cluster_installation_param`
/// with an `ansible` block selects the kubespray cluster (run from that Ansible server, with the
/// external load balancer); without one, the kubeadm-script cluster (with storage server and
/// PersistentVolumes when given); `private_registry_installation_param` the registry VNF;
/// without either, a VNF whose VNFCs vnfkeeper does not configure.
pub fn select(inputs: Inputs) -> Box<dyn MgmtDriver> {
    match (
        k8s(&inputs.req).cloned(),
        registry_param(&inputs.req).cloned(),
    ) {
        (Some(k), _) if k.ansible.is_some() => Box::new(kubespray::Kubespray::new(inputs, k)),
        (Some(k), _) => Box::new(kubeadm_nfs::KubeadmNfs::new(inputs, k)),
        (None, Some(r)) => Box::new(registry::PrivateRegistry::new(inputs, r)),
        (None, None) => Box::new(plain::Plain),
    }
}

fn registry_param(
    req: &InstantiateVnfRequest,
) -> Option<&crate::wire::params::PrivateRegistryInstallationParam> {
    req.additional_params
        .as_ref()
        .and_then(|a| a.private_registry_installation_param.as_ref())
}

fn k8s(req: &InstantiateVnfRequest) -> Option<&crate::wire::params::K8sClusterInstallationParam> {
    req.additional_params
        .as_ref()
        .and_then(|a| a.k8s_cluster_installation_param.as_ref())
}

/// The admin kubeconfig `text` (as `k8s.kubeconfig` printed it) with every cluster's `server:`
/// set to `endpoint` ([`crate::artifact::kubeconfig_with_server`]). Errors: no `server:` line
/// (not a kubeconfig).
pub fn kubeconfig_for(text: &str, endpoint: &str) -> Result<String, FlavourError> {
    crate::artifact::kubeconfig_with_server(text, endpoint).ok_or_else(|| {
        FlavourError::new(
            "k8s.kubeconfig",
            "the admin kubeconfig has no `server:` line",
        )
    })
}
