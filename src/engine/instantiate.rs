//! INSTANTIATE (SOL003 §5.4.4 InstantiateVnfRequest): the plan is `heat.create` of the stack
//! `vnf-<vnfInstanceId>` from the flavour's BaseHOT and the `nfv` parameter (adopted if it already
//! exists, so a crash between create and journal does not create twice), `heat.wait_create`,
//! `heat.read_vnfcs` (nested resources, servers, ports, volumes → VNFC rows), then the flavour's
//! `instantiate_end` stages over the VNFCs just read.
//!
//! With a BaseHOT whose VDU has no AutoScalingGroup (individual VNFC management), the stack is
//! created from the adjusted HOT (`<VDU>-<index>` resources, per-VNFC `nfv` entries) decided once
//! and kept in the plan, and `heat.read_vnfcs` stores each VNFC's index and parameters and checks
//! the stack holds exactly the planned VNFCs.

use serde::{Deserialize, Serialize};

use super::adjusted;
use super::executor::{Exec, Subjects};
use super::instance::{Instance, stack_name};
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::Cloud;
use crate::store::OperationRow;
use vnfkeeper_core::heat;
use vnfkeeper_core::model::InstantiationState;
use vnfkeeper_core::plan;
use vnfkeeper_core::plan::individual::AdjustedPlan;
use vnfkeeper_core::plan::stages::{ReadCheck, StackDocument, Stage};
use vnfkeeper_core::tacker::Origin;

/// The plan of an INSTANTIATE, as stored.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct InstantiatePlan {
    /// The adjusted HOT (individual VNFC management).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adjusted: Option<AdjustedPlan>,
    /// The stages.
    #[serde(default)]
    stages: Vec<Stage>,
}

fn inputs<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<Instance, EngineError> {
    let (params, package) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    // The package is the snapshot taken at intake (`vnf_package`), checked against its digest.
    if let Some((digest, dir)) = e.db.with(|s| s.reader().package_snapshot(&op.id))? {
        crate::intake::snapshot::verify(&dir, digest)
            .map_err(|why| StepFailure::input("plan", why.to_string()))?;
    }
    Ok(Instance::load(
        op.vnf_instance_id.as_str(),
        &params,
        package.as_deref(),
    )?)
}

/// The stored plan, else the plan decided now (no VNFCs yet) and stored.
fn plan<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    inst: &Instance,
) -> Result<InstantiatePlan, EngineError> {
    let stored: Option<InstantiatePlan> =
        match e.db.with(|s| s.reader().operation_plan(&op.id))? {
            Some(text) => Some(serde_json::from_str(&text).map_err(|_| {
                StepFailure::input("plan", "stored instantiate plan does not parse")
            })?),
            None => None,
        };
    if let Some(p) = &stored
        && !p.stages.is_empty()
    {
        return Ok(p.clone());
    }
    if op.origin == Origin::Tacker {
        // Tacker created the stack: no document, no adjusted HOT; read it and configure.
        let empty = StackDocument {
            template: serde_json::Value::Object(Default::default()),
            files: Default::default(),
            parameters: Default::default(),
        };
        let p = InstantiatePlan {
            adjusted: None,
            stages: vnfkeeper_core::tacker::instantiate_stages(
                Origin::Tacker,
                empty,
                ReadCheck::default(),
            ),
        };
        let json = serde_json::to_string(&p).unwrap_or_default();
        let text = adjusted::store(e, op, &json, None, p.stages.len())?;
        return serde_json::from_str(&text).map_err(|_| {
            StepFailure::input("plan", "stored instantiate plan does not parse").into()
        });
    }
    let (req, pkg) = (&inst.req, &inst.pkg);
    // Individual VNFC management: the stack is created from the adjusted HOT (one resource per
    // VNFC); an AutoScalingGroup BaseHOT is sent as it is with `desired_capacity` in `nfv`.
    let (document, adjusted) = match adjusted::load(pkg, &req.flavour_id)? {
        Some(hot) => {
            let a = match stored.and_then(|p| p.adjusted) {
                Some(a) => a,
                None => plan::individual::decide(
                    &hot.base,
                    &pkg.vnfd,
                    &heat::Current::default(),
                    &[],
                    heat::Operation::Instantiate(req),
                )
                .map_err(|err| StepFailure::input("plan", err.to_string()))?,
            };
            (adjusted::document(&hot, &a), Some(a))
        }
        None => {
            let hot = pkg
                .base_hot(&req.flavour_id)
                .map_err(|err| StepFailure::input("plan", err.to_string()))?;
            let nfv = plan::nfv::instantiate_parameters(&pkg.vnfd, req)
                .map_err(|err| StepFailure::input("plan", err.to_string()))?;
            let mut parameters = serde_json::Map::new();
            parameters.insert("nfv".into(), nfv);
            let doc = StackDocument {
                template: hot.template,
                files: hot.files,
                parameters,
            };
            (doc, None)
        }
    };
    let stages = vnfkeeper_core::tacker::instantiate_stages(
        Origin::Spool,
        document,
        ReadCheck {
            adjusted: adjusted.as_ref().map(adjusted::planned),
            ..ReadCheck::default()
        },
    );
    let p = InstantiatePlan { adjusted, stages };
    let json = serde_json::to_string(&p).unwrap_or_default();
    let text = adjusted::store(e, op, &json, p.adjusted.as_ref(), p.stages.len())?;
    Ok(serde_json::from_str(&text)
        .map_err(|_| StepFailure::input("plan", "stored instantiate plan does not parse"))?)
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let inst = inputs(e, op)?;
    let plan = plan(e, op, &inst)?;
    if op.origin == Origin::Tacker {
        adopt_stack(e, op).await?;
    }
    let x = Exec {
        instance: Some(&inst),
        adjusted: plan.adjusted.as_ref(),
        subjects: Subjects::None,
    };
    e.execute(op, plan.stages.clone(), &x).await?;
    finish(e, op, &inst)
}

/// Records the stack Tacker created for the instance (`vnf-<vnfInstanceId>`, Tacker v2's
/// `heat_utils.get_stack_name`) as the instance's stack, found by name, so that
/// `heat.read_vnfcs` reads it. Errors: the cloud's; no such stack.
pub(super) async fn adopt_stack<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
) -> Result<(), EngineError> {
    let name = stack_name(op.vnf_instance_id.as_str());
    let found = e
        .cloud
        .find_stack(&name)
        .await
        .map_err(|err| StepFailure::cloud("heat.read_vnfcs", &err))?
        .ok_or_else(|| {
            StepFailure::input(
                "heat.read_vnfcs",
                format!("Tacker's stack {name} does not exist"),
            )
        })?;
    e.db.write(|tx| {
        tx.set_instance_stack(&op.vnf_instance_id, &found.name, Some(&found.id), now())
    })?;
    Ok(())
}

fn finish<C: Cloud>(e: &Engine<C>, op: &OperationRow, inst: &Instance) -> Result<(), EngineError> {
    let (req, pkg) = (&inst.req, &inst.pkg);
    let package = pkg.root().display().to_string();
    let levels = plan::scale::initial_levels(&pkg.vnfd, req.instantiation_level_id.as_deref());
    e.db.write(|tx| {
        tx.set_scale_status(&op.vnf_instance_id, Some(&levels), now())?;
        tx.set_instantiation_state(
            &op.vnf_instance_id,
            InstantiationState::Instantiated,
            Some(&req.flavour_id),
            Some(&package),
            now(),
        )
    })?;
    Ok(())
}

/// ROLLBACK of a failed INSTANTIATE: the flavour's `instantiate_rollback` stages (what it wrote
/// on hosts that outlive the stack), best effort; then (origin `spool` only: a Tacker-owned
/// stack is never touched) delete the stack (found by name if its id
/// was never recorded), forget the VNFCs and the journal; the instance stays `NOT_INSTANTIATED`.
pub(super) async fn roll_back<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
) -> Result<(), EngineError> {
    undo_outside(e, op).await?;
    let stack_name = stack_name(op.vnf_instance_id.as_str());
    if op.origin == Origin::Tacker {
        // The stack is Tacker's: vnfkeeper never deletes it.
        e.db.write(|tx| {
            tx.delete_vnfcs(&op.vnf_instance_id)?;
            tx.journal_clear(&op.id)
        })?;
        return Ok(());
    }
    e.status(op, "rolling back: deleting the stack")?;
    let found = e
        .cloud
        .find_stack(&stack_name)
        .await
        .map_err(|err| StepFailure::cloud("heat.delete", &err))?;
    if let Some(stack) = found {
        e.cloud
            .delete_stack(&stack)
            .await
            .map_err(|err| StepFailure::cloud("heat.delete", &err))?;
        let gone = e
            .cloud
            .wait_stack(
                &stack,
                &[crate::cloud::StackStatus::DeleteComplete],
                e.limits.stack_timeout,
            )
            .await;
        if let Err(err) = gone
            && !matches!(err.kind(), crate::cloud::ErrorKind::NotFound)
        {
            return Err(StepFailure::cloud("heat.wait_delete", &err).into());
        }
    }
    e.db.write(|tx| {
        tx.delete_vnfcs(&op.vnf_instance_id)?;
        tx.journal_clear(&op.id)?;
        tx.set_instance_stack(&op.vnf_instance_id, &stack_name, None, now())
    })?;
    Ok(())
}

/// Runs the flavour's `instantiate_rollback` stages. A host outside the VNF that cannot be
/// reached (or a step that fails) must not keep the VNF's resources in the cloud: the failure is
/// journaled as a warning naming what was left behind, and the rollback goes on.
async fn undo_outside<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let inst = match inputs(e, op) {
        Ok(inst) => inst,
        Err(err) => {
            tracing::warn!(error = %err, "rollback: the flavour cannot be loaded; only the stack is deleted");
            return Ok(());
        }
    };
    let rows = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let c = vnfkeeper_core::flavour::HookContext {
        vnfcs: &rows,
        pv_wait: e.limits.pv_wait,
        op_occ_id: op.id.as_str(),
    };
    let stages = match inst.driver.instantiate_rollback(c) {
        Ok(s) => s,
        Err(err) => {
            tracing::warn!(error = %err, "rollback: the flavour planned no clean-up");
            return Ok(());
        }
    };
    if stages.is_empty() {
        return Ok(());
    }
    e.status(
        op,
        "rolling back: removing what the flavour wrote outside the VNF",
    )?;
    let x = Exec {
        instance: Some(&inst),
        adjusted: None,
        subjects: Subjects::None,
    };
    match e.execute(op, stages, &x).await {
        Ok(()) => Ok(()),
        Err(EngineError::Step(err)) => {
            tracing::warn!(
                error = %err,
                "rollback: what the INSTANTIATE wrote outside the VNF may be left behind (e.g. \
                 kubespray's inventory on the Ansible server); the stack is deleted anyway"
            );
            Ok(())
        }
        Err(err @ EngineError::Store(_)) => Err(err),
    }
}
