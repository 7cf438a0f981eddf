//! SCALE of an aspect (SOL003 §5.4.5 ScaleVnfRequest).
//!
//! AutoScalingGroup BaseHOTs: the group's `desired_capacity` comes from the `nfv` parameter, so a
//! scale is a stack PATCH with the `nfv` object recomputed for the new scale levels
//! (`plan::scale`). SCALE_OUT: `heat.update`, `heat.wait_update`, `heat.read_vnfcs`, then the
//! flavour's `scale_end` stages for the VNFCs the operation created — the existing ones are not
//! touched. SCALE_IN: the VNFCs to remove are chosen once, newest first (Cluster API remediates
//! and removes the newest machines first: they are the least likely to carry work); the
//! flavour's `scale_start` stages (drain and delete the nodes); their group members (the
//! resources whose nested stacks hold the servers) are marked unhealthy so that Heat removes
//! exactly them when the group shrinks (Heat removes failed members first; Tacker v2 does the
//! same); `heat.update` with the smaller `desired_capacity`, `heat.wait_update`,
//! `heat.read_vnfcs`, which checks the planned capacities and that the victims are gone.
//!
//! Individual VNFC management (a BaseHOT VDU without AutoScalingGroup): the plan holds the
//! adjusted HOT (`heat::adjust`): SCALE_OUT appends `<VDU>-<index>` after the highest index (never
//! reusing one), SCALE_IN removes the highest indices (the victims); `heat.update` is a full update
//! (PUT) with the adjusted template and `nfv`, so Heat creates or deletes exactly those resources
//! and keeps the others' servers; no member is marked unhealthy.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::adjusted;
use super::executor::{Exec, Subjects};
use super::instance::{Instance, instance_stack};
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, StackRef};
use crate::store::{OperationRow, VnfcRow};
use vnfkeeper_core::flavour::HookContext;
use vnfkeeper_core::heat;
use vnfkeeper_core::mgmt_hook::MgmtHook;
use vnfkeeper_core::model::{StageKey, VnfcId};
use vnfkeeper_core::plan;
use vnfkeeper_core::plan::individual::AdjustedPlan;
use vnfkeeper_core::plan::stages::{Action, CloudAction, Hook, Mark, ReadCheck, Stage, StageList};
use vnfkeeper_core::wire::sol003::{ScaleType, ScaleVnfRequest};

/// What the scale decided once (kept in the operation's `plan`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ScalePlan {
    /// Scale level per aspect once the operation is done.
    levels: BTreeMap<String, u32>,
    /// `desired_capacity` per VDU for those levels.
    capacities: BTreeMap<String, u32>,
    /// VNFCs to remove (SCALE_IN), newest first (adjusted HOT: highest index first).
    victims: Vec<VnfcId>,
    /// The adjusted HOT (individual VNFC management), sent to Heat in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adjusted: Option<AdjustedPlan>,
    /// The stages.
    #[serde(default)]
    stages: Vec<Stage>,
    /// What a ROLLBACK of this SCALE_OUT decided, once (individual VNFC management).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rollback: Option<RollbackPlan>,
}

/// The ROLLBACK of a failed SCALE_OUT, decided once and stored inside the [`ScalePlan`] before
/// anything acts (Tacker's `scale_rollback`): the stack as it was before the scale-out, the VNFC
/// rows the scale-out added, the ones of them its `scale_end` stages reached, and the stages.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct RollbackPlan {
    /// The adjusted HOT without the VNFCs the scale-out created (individual VNFC management;
    /// `None` for an AutoScalingGroup BaseHOT, whose groups go back to the capacities before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adjusted: Option<AdjustedPlan>,
    /// Row ids of the VNFCs the scale-out created (they must be gone afterwards).
    victims: Vec<VnfcId>,
    /// Those of `victims` that a `scale_end` stage ran on: the flavour's `scale_start` undoes
    /// its work on them (drain and delete the node) before Heat deletes them.
    hooked: Vec<VnfcId>,
    /// The stages, keyed `rollback:<key>` so that none is taken for a DONE stage of the
    /// scale-out.
    stages: Vec<Stage>,
}

/// The operation's request, instance, stack and current VNFCs.
struct Inputs {
    req: ScaleVnfRequest,
    inst: Instance,
    stack: StackRef,
    levels_now: BTreeMap<String, u32>,
    before: Vec<VnfcRow>,
}

/// The decision (levels, capacities, victims, adjusted HOT), made once.
async fn decide<C: Cloud>(
    e: &Engine<C>,
    i: &Inputs,
    hot: Option<&adjusted::Hot>,
) -> Result<ScalePlan, EngineError> {
    let vnfd = &i.inst.pkg.vnfd;
    let levels = plan::scale::apply(vnfd, &i.levels_now, &i.req)
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    if let Some(hot) = hot {
        // Adjusted HOT: new indices after the highest, removal of the highest (heat::adjust).
        let current = adjusted::current(
            e,
            hot,
            &i.stack,
            &i.before,
            &i.inst.req.ext_virtual_links,
            &i.inst.req.ext_managed_virtual_links,
        )
        .await?;
        let known = adjusted::known(&i.before);
        let a = plan::individual::decide(
            &hot.base,
            vnfd,
            &current,
            &known,
            heat::Operation::Scale(&i.req),
        )
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
        let mut capacities = BTreeMap::new();
        for c in &a.vnfcs {
            *capacities.entry(c.vdu_id.clone()).or_insert(0) += 1;
        }
        for vdu in vnfd.vdus.keys() {
            capacities.entry(vdu.clone()).or_insert(0);
        }
        let victims = a
            .removed
            .iter()
            .filter_map(|name| plan::individual::resolve_vnfc(&known, name))
            .map(|k| k.id.clone())
            .collect();
        return Ok(ScalePlan {
            levels,
            capacities,
            victims,
            adjusted: Some(a),
            stages: Vec::new(),
            rollback: None,
        });
    }
    let level = i.inst.req.instantiation_level_id.as_deref();
    let capacities = plan::scale::capacities(vnfd, level, &levels);
    let mut victims = Vec::new();
    if i.req.scale_type == ScaleType::ScaleIn {
        for (vdu, want) in &capacities {
            let mut members: Vec<&VnfcRow> = i.before.iter().filter(|v| &v.vdu_id == vdu).collect();
            let excess = members.len().saturating_sub(*want as usize);
            // Newest first; ties by id for a stable choice.
            members.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
            victims.extend(members.into_iter().take(excess).map(|v| v.id.clone()));
        }
    }
    Ok(ScalePlan {
        levels,
        capacities,
        victims,
        adjusted: None,
        stages: Vec::new(),
        rollback: None,
    })
}

/// The stages of a decided scale.
fn stages<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    i: &Inputs,
    hot: Option<&adjusted::Hot>,
    p: &ScalePlan,
) -> Result<Vec<Stage>, EngineError> {
    let out = i.req.scale_type == ScaleType::ScaleOut;
    let individual = adjusted::pair(p.adjusted.as_ref(), hot)?;
    let mut list = StageList::default();
    if !out {
        let c = HookContext {
            vnfcs: &i.before,
            pv_wait: e.limits.pv_wait,
            op_occ_id: op.id.as_str(),
        };
        let drain = i.inst.driver.scale_start(c, &p.victims)?;
        list.append(drain);
        if individual.is_none() {
            let victims = i
                .before
                .iter()
                .filter(|v| p.victims.contains(&v.id))
                .map(|v| Mark {
                    stack_name: v.stack_name.clone(),
                    stack_id: v.stack_id.clone(),
                    resource: v.resource_name.clone(),
                })
                .collect();
            list.cloud(CloudAction::MarkGroupMembers {
                victims,
                reason: format!("removed by SCALE_IN (VnfLcmOpOcc {})", op.id),
            });
        }
    }
    // The full adjusted template and nfv (only the created/removed VNFCs change), or the
    // complete `nfv` with the new capacities (Heat replaces a json parameter whole).
    match individual {
        Some((a, h)) => list.cloud(CloudAction::UpdateStack(adjusted::document(h, a))),
        None => {
            let mut nfv = plan::nfv::instantiate_parameters(&i.inst.pkg.vnfd, &i.inst.req)
                .map_err(|err| StepFailure::input("plan", err.to_string()))?;
            for (vdu, n) in &p.capacities {
                if let Some(entry) = nfv.pointer_mut(&format!("/VDU/{vdu}")) {
                    entry["desired_capacity"] = (*n).into();
                }
            }
            let mut parameters = serde_json::Map::new();
            parameters.insert("nfv".into(), nfv);
            list.cloud(CloudAction::PatchStack { parameters })
        }
    };
    list.cloud(CloudAction::WaitUpdate)
        .cloud(CloudAction::ReadVnfcs(ReadCheck {
            capacities: p.capacities.clone(),
            absent: p.victims.clone(),
            adjusted: individual.map(|(a, _)| adjusted::planned(a)),
        }));
    if out {
        list.wave(|w| vec![Stage::expand(w, Hook::ScaleEnd)]);
    }
    Ok(list.into_stages())
}

/// What a SCALE of origin `tacker` decided once (kept in the operation's `plan`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct TackerScalePlan {
    /// VNFCs Tacker removed (SCALE_IN): rows the stack no longer had when planned.
    #[serde(default)]
    gone: Vec<VnfcId>,
    /// The stages (`tacker::tacker_scale_stages`).
    stages: Vec<Stage>,
}

/// A SCALE of origin `tacker` (companion mode): Tacker's SCALE COMPLETED, its stack already
/// changed. SCALE_OUT: read the stack's VNFCs, then the flavour's `scale_end` over the VNFCs
/// this operation's read created (in the stack, not in the store before). SCALE_IN: the VNFCs
/// the stack no longer has are decided once (`tacker::removed_vnfcs`, from a read of the
/// stack at planning), the read forgets them, then the flavour's `scale_in_after_removal`
/// stages (e.g. `kubectl delete node` on a master that stays). No Heat write; the scale levels
/// are Tacker's and not recorded.
async fn run_tacker<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    req: &ScaleVnfRequest,
) -> Result<(), EngineError> {
    super::instantiate::adopt_stack(e, op).await?;
    let inst = Instance::of_instance(e, op.vnf_instance_id.as_str())?;
    let plan = match e.db.with(|s| s.reader().operation_plan(&op.id))? {
        Some(text) => serde_json::from_str::<TackerScalePlan>(&text)
            .map_err(|_| StepFailure::input("plan", "stored scale plan does not parse"))?,
        None if matches!(
            e.db.with(|s| s.reader().tacker_hook_of(&op.id))?,
            Some((MgmtHook::ScaleStart, _))
        ) =>
        {
            // Tacker's `scale_start` (vnfkeeper as its MgmtDriver), before Tacker removes the
            // servers: the flavour's `scale_start` over the VNFCs its Grant removes (the kubeadm
            // cluster: the nodes drained and deleted).
            let (_, victims) =
                e.db.with(|s| s.reader().tacker_hook_of(&op.id))?
                    .unwrap_or((MgmtHook::ScaleStart, Vec::new()));
            let before = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
            let c = HookContext {
                vnfcs: &before,
                pv_wait: e.limits.pv_wait,
                op_occ_id: op.id.as_str(),
            };
            let p = TackerScalePlan {
                gone: Vec::new(),
                stages: inst.driver.scale_start(c, &victims)?,
            };
            let json = serde_json::to_string(&p).unwrap_or_default();
            let text = adjusted::store(e, op, &json, None, p.stages.len())?;
            serde_json::from_str::<TackerScalePlan>(&text)
                .map_err(|_| StepFailure::input("plan", "stored scale plan does not parse"))?
        }
        None => {
            let out = req.scale_type == ScaleType::ScaleOut;
            let (gone, cleanup) = if out {
                (Vec::new(), Vec::new())
            } else {
                let (_, stack) = instance_stack(e, op.vnf_instance_id.as_str())?;
                let before = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
                let cloud = |err: crate::cloud::CloudError| StepFailure::cloud("plan", &err);
                let resources = e.cloud.stack_resources(&stack, 5).await.map_err(cloud)?;
                let servers = e.cloud.servers().await.map_err(cloud)?;
                let ports = e.cloud.ports().await.map_err(cloud)?;
                let volumes = e.cloud.volumes().await.map_err(cloud)?;
                let present: Vec<(String, String)> = plan::vnfcs::observe(
                    &inst.pkg.vnfd,
                    &resources,
                    &servers,
                    &ports,
                    &volumes,
                    &[],
                )
                .into_iter()
                .map(|o| (o.stack_id, o.resource_name))
                .collect();
                let gone = vnfkeeper_core::tacker::removed_vnfcs(&before, &present);
                let c = HookContext {
                    vnfcs: &before,
                    pv_wait: e.limits.pv_wait,
                    op_occ_id: op.id.as_str(),
                };
                let cleanup = inst.driver.scale_in_after_removal(c, &gone)?;
                (gone, cleanup)
            };
            let p = TackerScalePlan {
                gone,
                stages: vnfkeeper_core::tacker::tacker_scale_stages(out, cleanup),
            };
            let json = serde_json::to_string(&p).unwrap_or_default();
            let text = adjusted::store(e, op, &json, None, p.stages.len())?;
            serde_json::from_str::<TackerScalePlan>(&text)
                .map_err(|_| StepFailure::input("plan", "stored scale plan does not parse"))?
        }
    };
    let x = Exec {
        instance: Some(&inst),
        adjusted: None,
        subjects: Subjects::CreatedSince(op.start_time),
    };
    e.execute(op, plan.stages.clone(), &x).await?;
    Ok(())
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let (params, _) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    let req: ScaleVnfRequest = serde_json::from_str(&params)
        .map_err(|_| StepFailure::input("plan", "stored ScaleVnfRequest does not parse"))?;
    if op.origin == vnfkeeper_core::tacker::Origin::Tacker {
        return run_tacker(e, op, &req).await;
    }
    let inst = Instance::of_instance(e, op.vnf_instance_id.as_str())?;
    let (instance, stack) = instance_stack(e, op.vnf_instance_id.as_str())?;
    let before = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let i = Inputs {
        req,
        inst,
        stack,
        levels_now: instance.scale_status,
        before,
    };
    let plan = match e.db.with(|s| s.reader().operation_plan(&op.id))? {
        Some(text) => serde_json::from_str::<ScalePlan>(&text)
            .map_err(|_| StepFailure::input("plan", "stored scale plan does not parse"))?,
        None => {
            let hot = adjusted::load(&i.inst.pkg, &i.inst.req.flavour_id)?;
            decide(e, &i, hot.as_ref()).await?
        }
    };
    let plan = if plan.stages.is_empty() {
        // The stored decision decides the path: a plan made by the AutoScalingGroup path is
        // finished that way even if the package changed since.
        let hot = adjusted::load(&i.inst.pkg, &i.inst.req.flavour_id)?;
        let mut p = plan;
        p.stages = stages(e, op, &i, hot.as_ref(), &p)?;
        let json = serde_json::to_string(&p).unwrap_or_default();
        let text = adjusted::store(e, op, &json, p.adjusted.as_ref(), p.stages.len())?;
        serde_json::from_str::<ScalePlan>(&text)
            .map_err(|_| StepFailure::input("plan", "stored scale plan does not parse"))?
    } else {
        plan
    };
    let x = Exec {
        instance: Some(&i.inst),
        adjusted: plan.adjusted.as_ref(),
        subjects: Subjects::CreatedSince(op.start_time),
    };
    e.execute(op, plan.stages.clone(), &x).await?;
    e.db.write(|tx| tx.set_scale_status(&op.vnf_instance_id, Some(&plan.levels), now()))?;
    Ok(())
}

/// Prefix of the stage keys of a ROLLBACK (the scale-out's own keys stay journaled DONE).
const ROLLBACK_KEY: &str = "rollback:";

/// ROLLBACK of a failed SCALE_OUT (SOL003 §5.4.15; Tacker's `scale_rollback`). Individual VNFC
/// management: the VNFCs the scale-out added are removed — their flavour configuration undone
/// first where a `scale_end` stage reached them (`scale_start`, as a SCALE_IN does), then a full
/// stack update (PUT) to the template and `nfv` before the scale-out, which deletes their
/// servers, ports and volumes — and the other VNFCs are left untouched; the scale levels stay
/// those before the scale-out. The decision is stored once (`rollback` in the operation's plan)
/// and replayed on resume. A scale-out that stored no plan changed nothing: nothing to do.
/// An AutoScalingGroup BaseHOT: the members the scale-out added are marked unhealthy and the
/// groups go back to the capacities before (`decide_rollback_asg`). Errors: a SCALE_IN (501,
/// not supported); a failed stage (the operation returns to FAILED_TEMP).
pub(super) async fn roll_back<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
) -> Result<(), EngineError> {
    let (params, _) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("rollback", "operation vanished"))?;
    let req: ScaleVnfRequest = serde_json::from_str(&params)
        .map_err(|_| StepFailure::input("rollback", "stored ScaleVnfRequest does not parse"))?;
    if req.scale_type != ScaleType::ScaleOut {
        return Err(not_supported("ROLLBACK of a SCALE_IN").into());
    }
    if op.origin == vnfkeeper_core::tacker::Origin::Tacker {
        // Tacker owns the stack: undoing its scale-out is Tacker's rollback, not vnfkeeper's.
        return Err(not_supported("ROLLBACK of a SCALE of origin tacker").into());
    }
    let Some(text) = e.db.with(|s| s.reader().operation_plan(&op.id))? else {
        return Ok(());
    };
    let mut plan: ScalePlan = serde_json::from_str(&text)
        .map_err(|_| StepFailure::input("rollback", "stored scale plan does not parse"))?;
    let inst = Instance::of_instance(e, op.vnf_instance_id.as_str())?;
    let rb = match plan.rollback.clone() {
        Some(rb) => rb,
        None => {
            let rb = match plan.adjusted.as_ref() {
                Some(out) => {
                    let hot = adjusted::load(&inst.pkg, &inst.req.flavour_id)?;
                    let (out, hot) = adjusted::pair(Some(out), hot.as_ref())?
                        .ok_or_else(|| StepFailure::input("rollback", "no adjusted HOT"))?;
                    decide_rollback(e, op, &inst, hot, out)?
                }
                None => decide_rollback_asg(e, op, &inst).await?,
            };
            plan.rollback = Some(rb.clone());
            let json = serde_json::to_string(&plan).unwrap_or_default();
            match &rb.adjusted {
                Some(a) => adjusted::store_rollback(e, op, &json, a, rb.stages.len())?,
                None => e.db.write(|tx| {
                    tx.replace_operation_plan(&op.id, &json)?;
                    tx.set_steps_total(&op.id, rb.stages.len() as i64)
                })?,
            }
            rb
        }
    };
    let x = Exec {
        instance: Some(&inst),
        adjusted: rb.adjusted.as_ref(),
        subjects: Subjects::Listed(rb.hooked.clone()),
    };
    e.execute(op, rb.stages.clone(), &x).await?;
    Ok(())
}

fn not_supported(what: &str) -> StepFailure {
    StepFailure {
        step: "rollback".into(),
        host: "-".into(),
        exit_status: None,
        reason: format!(
            "{what} is not supported by this version of vnfkeeper; FAIL this operation"
        ),
        status: 501,
    }
}

/// The rollback's decision: the documents before the scale-out, its VNFCs and the stages.
fn decide_rollback<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    inst: &Instance,
    hot: &adjusted::Hot,
    out: &AdjustedPlan,
) -> Result<RollbackPlan, EngineError> {
    let a = plan::individual::rollback_scale_out(
        &hot.base,
        &inst.pkg.vnfd,
        out,
        &inst.req.ext_virtual_links,
        &inst.req.ext_managed_virtual_links,
    )
    .map_err(|err| StepFailure::input("rollback", err.to_string()))?;
    let rows = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let known = adjusted::known(&rows);
    let victims: Vec<VnfcId> = out
        .created
        .iter()
        .filter_map(|name| plan::individual::resolve_vnfc(&known, name))
        .map(|k| k.id.clone())
        .collect();
    // "When they got that far": a VNFC that no stage of the scale-out ran on has nothing to undo.
    let journal = e.db.with(|s| s.reader().journal(&op.id))?;
    let hooked: Vec<VnfcId> = victims
        .iter()
        .filter(|v| journal.iter().any(|j| **v == j.host))
        .cloned()
        .collect();
    let mut list = StageList::default();
    if !hooked.is_empty() {
        let c = HookContext {
            vnfcs: &rows,
            pv_wait: e.limits.pv_wait,
            op_occ_id: op.id.as_str(),
        };
        list.append(inst.driver.scale_start(c, &hooked)?);
    }
    let mut capacities = BTreeMap::new();
    for vdu in inst.pkg.vnfd.vdus.keys() {
        capacities.insert(vdu.clone(), 0);
    }
    for c in &a.vnfcs {
        *capacities.entry(c.vdu_id.clone()).or_insert(0) += 1;
    }
    list.cloud(CloudAction::UpdateStack(adjusted::document(hot, &a)))
        .cloud(CloudAction::WaitUpdate)
        .cloud(CloudAction::ReadVnfcs(ReadCheck {
            capacities,
            absent: victims.clone(),
            adjusted: Some(adjusted::planned(&a)),
        }));
    let mut stages = list.into_stages();
    if stages.iter().any(|s| matches!(s.action, Action::Expand(_))) {
        return Err(StepFailure::input(
            "rollback",
            "the flavour's scale_start stages for the rollback contain a placeholder",
        )
        .into());
    }
    for s in &mut stages {
        s.key = StageKey::new(format!("{ROLLBACK_KEY}{}", s.key));
    }
    Ok(RollbackPlan {
        adjusted: Some(a),
        victims,
        hooked,
        stages,
    })
}

/// The rollback's decision for an AutoScalingGroup BaseHOT (Tacker's `Openstack.scale_rollback`):
/// the group members whose servers the instance did not have before the scale-out (read from
/// the stack now: the scale-out may have failed before it recorded them) are marked unhealthy,
/// then the `nfv` parameter goes back to the capacities of the scale levels before (which the
/// failed operation never changed), so Heat removes exactly those members.
async fn decide_rollback_asg<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    inst: &Instance,
) -> Result<RollbackPlan, EngineError> {
    let (instance, stack) = instance_stack(e, op.vnf_instance_id.as_str())?;
    let vnfd = &inst.pkg.vnfd;
    let rows = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let known: Vec<&str> = rows
        .iter()
        .filter(|r| r.created_at < op.start_time)
        .filter_map(|r| r.server_id.as_deref())
        .collect();
    let cloud = |err: crate::cloud::CloudError| StepFailure::cloud("rollback", &err);
    let resources = e.cloud.stack_resources(&stack, 5).await.map_err(cloud)?;
    let servers = e.cloud.servers().await.map_err(cloud)?;
    let ports = e.cloud.ports().await.map_err(cloud)?;
    let volumes = e.cloud.volumes().await.map_err(cloud)?;
    let observed = plan::vnfcs::observe(vnfd, &resources, &servers, &ports, &volumes, &[]);
    let added: Vec<Mark> = observed
        .iter()
        .filter(|o| !known.contains(&o.server_id.as_str()))
        .map(|o| Mark {
            stack_name: o.stack_name.clone(),
            stack_id: o.stack_id.clone(),
            resource: o.resource_name.clone(),
        })
        .collect();
    let victims: Vec<VnfcId> = rows
        .iter()
        .filter(|r| r.created_at >= op.start_time)
        .map(|r| r.id.clone())
        .collect();
    let journal = e.db.with(|s| s.reader().journal(&op.id))?;
    let hooked: Vec<VnfcId> = victims
        .iter()
        .filter(|v| journal.iter().any(|j| **v == j.host))
        .cloned()
        .collect();
    let level = inst.req.instantiation_level_id.as_deref();
    let capacities = plan::scale::capacities(vnfd, level, &instance.scale_status);
    let mut nfv = plan::nfv::instantiate_parameters(vnfd, &inst.req)
        .map_err(|err| StepFailure::input("rollback", err.to_string()))?;
    for (vdu, n) in &capacities {
        if let Some(entry) = nfv.pointer_mut(&format!("/VDU/{vdu}")) {
            entry["desired_capacity"] = (*n).into();
        }
    }
    let mut parameters = serde_json::Map::new();
    parameters.insert("nfv".into(), nfv);
    let mut list = StageList::default();
    if !hooked.is_empty() {
        let c = HookContext {
            vnfcs: &rows,
            pv_wait: e.limits.pv_wait,
            op_occ_id: op.id.as_str(),
        };
        list.append(inst.driver.scale_start(c, &hooked)?);
    }
    if !added.is_empty() {
        list.cloud(CloudAction::MarkGroupMembers {
            victims: added,
            reason: format!("added by the rolled-back SCALE_OUT (VnfLcmOpOcc {})", op.id),
        });
    }
    list.cloud(CloudAction::PatchStack { parameters })
        .cloud(CloudAction::WaitUpdate)
        .cloud(CloudAction::ReadVnfcs(ReadCheck {
            capacities,
            absent: victims.clone(),
            adjusted: None,
        }));
    let mut stages = list.into_stages();
    if stages.iter().any(|s| matches!(s.action, Action::Expand(_))) {
        return Err(StepFailure::input(
            "rollback",
            "the flavour's scale_start stages for the rollback contain a placeholder",
        )
        .into());
    }
    for s in &mut stages {
        s.key = StageKey::new(format!("{ROLLBACK_KEY}{}", s.key));
    }
    Ok(RollbackPlan {
        adjusted: None,
        victims,
        hooked,
        stages,
    })
}
