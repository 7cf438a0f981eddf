//! CHANGE_EXT_CONN (SOL003 §5.4.11 ChangeExtVnfConnectivityRequest) in individual VNFC
//! management: the servers stay; the ports of the CPs the request's external VLs name move to
//! the VL's network and fixed addresses.
//!
//! Decided once (`heat::adjust` with `Operation::ChangeExtConn`: the same template, the `nfv.CP`
//! entries rewritten as Tacker's `StandardUserData.change_ext_conn` does) and stored with a
//! `HOT_ADJUSTED` event; then `heat.update` (PUT of the adjusted documents — Heat replaces the
//! ports whose network or addresses changed and re-attaches them to the same servers),
//! `heat.wait_update`, `heat.read_vnfcs` (the rows keep their id and pinned host key, their
//! addresses are the new ones; exactly the same VNFCs), and `node.reach` on every VNFC the
//! flavour reaches over SSH: it logs in at the new address with the host key pinned before,
//! so a host that answers there with another key fails the operation. Later operations use the
//! instance's external VLs with this request's applied (`Instance::of_instance`).

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::adjusted;
use super::executor::{Exec, Subjects};
use super::instance::{Instance, instance_stack};
use super::{Engine, EngineError, StepFailure};
use crate::cloud::Cloud;
use crate::store::OperationRow;
use vnfkeeper_core::heat;
use vnfkeeper_core::plan;
use vnfkeeper_core::plan::individual::AdjustedPlan;
use vnfkeeper_core::plan::stages::{CloudAction, ReadCheck, Stage, StageList};
use vnfkeeper_core::recipes::{Step, StepKind};
use vnfkeeper_core::wire::sol003::ChangeExtVnfConnectivityRequest;

/// What the operation decided once (kept in its `plan`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ChangePlan {
    /// The adjusted HOT: the same template, the new `nfv.CP` entries.
    adjusted: AdjustedPlan,
    /// The stages.
    #[serde(default)]
    stages: Vec<Stage>,
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let (params, _) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    let req: ChangeExtVnfConnectivityRequest = serde_json::from_str(&params).map_err(|_| {
        StepFailure::input(
            "plan",
            "stored ChangeExtVnfConnectivityRequest does not parse",
        )
    })?;
    let inst = Instance::of_instance(e, op.vnf_instance_id.as_str())?;
    let plan = match e.db.with(|s| s.reader().operation_plan(&op.id))? {
        Some(text) => serde_json::from_str::<ChangePlan>(&text)
            .map_err(|_| StepFailure::input("plan", "stored plan does not parse"))?,
        None => {
            let p = decide(e, op, &inst, &req).await?;
            let json = serde_json::to_string(&p).unwrap_or_default();
            let text = adjusted::store(e, op, &json, Some(&p.adjusted), p.stages.len())?;
            serde_json::from_str::<ChangePlan>(&text)
                .map_err(|_| StepFailure::input("plan", "stored plan does not parse"))?
        }
    };
    let x = Exec {
        instance: Some(&inst),
        adjusted: Some(&plan.adjusted),
        subjects: Subjects::None,
    };
    e.execute(op, plan.stages.clone(), &x).await
}

/// The decision: the adjusted documents and the stages.
async fn decide<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    inst: &Instance,
    req: &ChangeExtVnfConnectivityRequest,
) -> Result<ChangePlan, EngineError> {
    let Some(hot) = adjusted::load(&inst.pkg, &inst.req.flavour_id)? else {
        return Err(StepFailure {
            step: "plan".into(),
            host: "-".into(),
            exit_status: None,
            reason: "CHANGE_EXT_CONN of a VNF whose BaseHOT uses AutoScalingGroups is not \
                     supported by this version of vnfkeeper; FAIL this operation"
                .into(),
            status: 501,
        }
        .into());
    };
    let (_, stack) = instance_stack(e, op.vnf_instance_id.as_str())?;
    let before = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let current = adjusted::current(
        e,
        &hot,
        &stack,
        &before,
        &inst.req.ext_virtual_links,
        &inst.req.ext_managed_virtual_links,
    )
    .await?;
    let known = adjusted::known(&before);
    let a = plan::individual::decide(
        &hot.base,
        &inst.pkg.vnfd,
        &current,
        &known,
        heat::Operation::ChangeExtConn(req),
    )
    .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    let mut capacities = BTreeMap::new();
    for vdu in inst.pkg.vnfd.vdus.keys() {
        capacities.insert(vdu.clone(), 0);
    }
    for r in &before {
        *capacities.entry(r.vdu_id.clone()).or_insert(0) += 1;
    }
    let mut list = StageList::default();
    list.cloud(CloudAction::UpdateStack(adjusted::document(&hot, &a)))
        .cloud(CloudAction::WaitUpdate)
        .cloud(CloudAction::ReadVnfcs(ReadCheck {
            capacities,
            absent: Vec::new(),
            adjusted: Some(adjusted::planned(&a)),
        }));
    // SSH at the new address with the key pinned before, where the flavour reaches the VNFC.
    let mut reach = Vec::new();
    for r in &before {
        let Ok(role) = inst.driver.role(&r.vdu_id) else {
            continue;
        };
        if inst.driver.access(role).is_err() {
            continue;
        }
        let step = Step {
            kind: StepKind::NodeReach,
            host: r.id.to_string(),
            args: Vec::new(),
            uploads: Vec::new(),
            late: Vec::new(),
            sudo: false,
            timeout: Duration::from_secs(60),
        };
        reach.push((r.id.clone(), role, step));
    }
    list.wave(|w| {
        reach
            .into_iter()
            .map(|(id, role, step)| Stage::remote(w, id.as_str(), role, step))
            .collect()
    });
    Ok(ChangePlan {
        adjusted: a,
        stages: list.into_stages(),
    })
}
