//! TERMINATE (SOL003 §5.4.8 TerminateVnfRequest): 1. `heat.delete` of the instance's stack (found
//! by id, else by name; already gone is fine), 2. `heat.wait_delete`; then the VNFCs are forgotten
//! and the instance is `NOT_INSTANTIATED`, its history and audit rows kept. Nothing runs on the
//! servers (Tacker's terminate_end only deregisters the VIM, `research/tacker-anchor.md` §1.1).
//!
//! GRACEFUL vs FORCEFUL concerns the operations queued ahead of the TERMINATE; the daemon's runner
//! applies it (see `daemon::runner`).

use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, ErrorKind, StackRef, StackStatus};
use crate::model::InstantiationState;
use crate::store::OperationRow;

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    e.db.write(|tx| tx.set_steps_total(&op.id, 2))?;
    let instance =
        e.db.with(|s| s.reader().instances())?
            .into_iter()
            .find(|i| i.id == op.vnf_instance_id)
            .ok_or_else(|| StepFailure::input("plan", "VNF instance vanished"))?;
    let name = instance
        .stack_name
        .clone()
        .unwrap_or_else(|| format!("vnf-{}", op.vnf_instance_id));
    let done = e.done_steps(op)?;
    let done_cloud = |n: i64| done.contains(&(n, String::new()));
    let known = instance.stack_id.clone().map(|id| StackRef {
        name: name.clone(),
        id,
    });
    let stack = if done_cloud(1) {
        known
    } else {
        e.cloud_step(
            op,
            1,
            "heat.delete",
            || async {
                let stack = match &known {
                    Some(s) => Some(s.clone()),
                    None => e.cloud.find_stack(&name).await?,
                };
                if let Some(s) = &stack {
                    e.cloud.delete_stack(s).await?;
                }
                Ok(stack)
            },
            |_| Ok(()),
        )
        .await?
    };
    if !done_cloud(2)
        && let Some(s) = &stack
    {
        e.cloud_step(
            op,
            2,
            "heat.wait_delete",
            || async {
                match e
                    .cloud
                    .wait_stack(s, &[StackStatus::DeleteComplete], e.limits.stack_timeout)
                    .await
                {
                    Err(err) if matches!(err.kind(), ErrorKind::NotFound) => Ok(()),
                    other => other.map(|_| ()),
                }
            },
            |_| Ok(()),
        )
        .await?;
    }
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
    Ok(())
}
