//! TERMINATE (SOL003 §5.4.8 TerminateVnfRequest): the flavour's `terminate_start` stages, then
//! `heat.delete` of the instance's stack (found by id, else by name; already gone is fine) and
//! `heat.wait_delete`; then the VNFCs are forgotten and the instance is `NOT_INSTANTIATED`, its
//! history and audit rows kept. Nothing runs on the servers for the kubeadm cluster (Tacker's
//! `terminate_end` only deregisters the VIM).
//!
//! GRACEFUL vs FORCEFUL concerns the operations queued ahead of the TERMINATE; the daemon's runner
//! applies it (see `daemon::runner`).

use serde::{Deserialize, Serialize};

use super::executor::{Exec, Subjects};
use super::instance::{Instance, instance_row, stack_name};
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::Cloud;
use crate::store::OperationRow;
use vnfkeeper_core::flavour::HookContext;
use vnfkeeper_core::model::InstantiationState;
use vnfkeeper_core::plan::stages::{CloudAction, Stage, StageList};

/// The plan of a TERMINATE, as stored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct TerminatePlan {
    /// The stages.
    #[serde(default)]
    stages: Vec<Stage>,
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let instance = instance_row(e, op.vnf_instance_id.as_str())?;
    // A TERMINATE after a failed INSTANTIATE has no flavour to ask: only the stack goes.
    let inst = Instance::of_instance(e, op.vnf_instance_id.as_str()).ok();
    let stored: TerminatePlan = match e.db.with(|s| s.reader().operation_plan(&op.id))? {
        Some(text) => serde_json::from_str(&text)
            .map_err(|_| StepFailure::input("plan", "stored terminate plan does not parse"))?,
        None => TerminatePlan::default(),
    };
    let plan = if stored.stages.is_empty() {
        let rows = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
        let c = HookContext {
            vnfcs: &rows,
            pv_wait: e.limits.pv_wait,
            op_occ_id: op.id.as_str(),
        };
        let mut list = StageList::default();
        if let Some(inst) = &inst {
            list.append(inst.driver.terminate_start(c)?);
        }
        list.cloud(CloudAction::DeleteStack)
            .cloud(CloudAction::WaitDelete);
        let p = TerminatePlan {
            stages: list.into_stages(),
        };
        let json = serde_json::to_string(&p).unwrap_or_default();
        let text = super::adjusted::store(e, op, &json, None, p.stages.len())?;
        serde_json::from_str(&text)
            .map_err(|_| StepFailure::input("plan", "stored terminate plan does not parse"))?
    } else {
        stored
    };
    let x = Exec {
        instance: inst.as_ref(),
        adjusted: None,
        subjects: Subjects::None,
    };
    e.execute(op, plan.stages.clone(), &x).await?;
    let name = instance
        .stack_name
        .clone()
        .unwrap_or_else(|| stack_name(op.vnf_instance_id.as_str()));
    e.db.write(|tx| {
        tx.delete_vnfcs(&op.vnf_instance_id)?;
        tx.set_instance_stack(&op.vnf_instance_id, &name, None, now())?;
        tx.set_scale_status(&op.vnf_instance_id, None, now())?;
        tx.set_instantiation_state(
            &op.vnf_instance_id,
            InstantiationState::NotInstantiated,
            None,
            None,
            now(),
        )
    })?;
    // The VNF is gone, and with it what its kept artifacts (the admin kubeconfig kept from
    // the flavour's step) pointed at: `vnfkeeper status` shows no endpoint for it.
    e.remove_artifacts(&op.vnf_instance_id, |_| true);
    Ok(())
}
