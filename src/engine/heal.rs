//! HEAL of VNFCs or of the whole VNF (SOL003 §5.4.9 HealVnfRequest; SOL002 `vnfcInstanceId`):
//! replace the servers through Heat, keeping data volumes, and configure the new servers exactly
//! like the originals.
//!
//! Order, chosen so that a refusal changes nothing (Tacker's `heal_start` removes the nodes
//! first, then finds a PersistentVolume in use):
//! 1.–2. the flavour's `heal_start` stages (for the kubeadm cluster: `pv.not_bound` refusing with
//!    409 while a PersistentVolume is Bound, `pv.unregister`, `k8s.remove_node` of the targeted
//!    nodes through a surviving master);
//! 2b. for each target whose stack volumes are kept (the storage server): `nova.stop` of its
//!    server, then `nova.detach_volume` of each such volume (until Cinder reports it
//!    `available`) — Heat creates the replacement before it deletes the old server, and Nova
//!    refuses a volume that is still attached; each checks first, so a RETRY or a resume after
//!    a crash repeats nothing;
//! 2c. `nova.stop` of each other target whose server Nova reported in `ERROR` when the heal was
//!    decided: before it creates a replacement, Heat detaches the old server's ports so the
//!    replacement can take them (`OS::Nova::Server` `prepare_for_replace`), except from a server
//!    in `ERROR` — and Nova refuses a port that is still bound to another server ("Port … is
//!    still in use", Compute API "Create Server" 409/400). Nova stops a server in `ERROR`
//!    (`os-stop`), and a stopped server's ports are detached;
//! 3. `heat.mark_unhealthy` of each target's server resource in the stack that owns it (the
//!    nested stack of an AutoScalingGroup member) — and of its volumes only when
//!    `additionalParams.all` is true; 4. `heat.update` (PATCH `{}`: only marked resources are
//!    replaced); 5. `heat.wait_update`; 6. `heat.read_vnfcs` (new server
//!    ids; their host keys are learned anew);
//! 7. the flavour's `heal_end` stages over the new rows (for the kubeadm cluster: join, or
//!    create when no master survived, NFS client; the storage server mounts its kept volume —
//!    `mkfs` only if it holds no filesystem —, NFS server and exports; the PVs registered again).
//!
//! Individual VNFC management (a BaseHOT without AutoScalingGroup, one Heat resource per VNFC):
//! targets may be named `<VDU>-<index>`; the plan holds the adjusted HOT of the heal
//! (`heat::adjust`: order and template unchanged, a healed VNFC's `vcImageId` from the Grant or
//! the request's `additionalParams.nfv`); step 3 marks the `VDU` server in each target's nested
//! stack, step 4 is a full update (PUT) with the adjusted documents, so only the targets' servers
//! are rebuilt.
//!
//! Origin `tacker` (after Tacker's HEAL COMPLETED, or Tacker's `heal_end` hook): Tacker replaced
//! the servers; the plan is `heat.read_vnfcs` of Tacker's stack (found by name first) and
//! `heal_end` over the targets (`tacker::heal_stages`). Tacker's `heal_start` hook (vnfkeeper as
//! its MgmtDriver, `store::tacker::hooks`): steps 1–2 only, before Tacker replaces anything.
//!
//! `additionalParams.configuration_only: true` (vnfkeeper; used by reconcile for drift that needs
//! no new server, e.g. a lost export line) skips 1–6 and only runs the idempotent configuration
//! stages on the targets.

use serde::{Deserialize, Serialize};

use super::adjusted;
use super::executor::{Exec, Subjects};
use super::instance::{Instance, instance_stack};
use super::{Engine, EngineError, StepFailure};
use crate::cloud::{Cloud, StackRef};
use crate::store::{OperationRow, VnfcRow};
use vnfkeeper_core::flavour::HookContext;
use vnfkeeper_core::heat;
use vnfkeeper_core::mgmt_hook::MgmtHook;
use vnfkeeper_core::model::VnfcId;
use vnfkeeper_core::plan;
use vnfkeeper_core::plan::individual::AdjustedPlan;
use vnfkeeper_core::plan::stages::{CloudAction, Hook, Mark, ReadCheck, Stage, StageList};
use vnfkeeper_core::tacker::Origin;
use vnfkeeper_core::wire::sol003::HealVnfRequest;

/// What the heal decided once (kept in the operation's `plan` across a crash or RETRY).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct HealPlan {
    /// The VNFCs healed (all of the instance's VNFCs for a whole-VNF heal).
    targets: Vec<VnfcId>,
    /// Rebuild nothing, only configure the targets again.
    configuration_only: bool,
    /// Replace the targets' volumes too (`additionalParams.all`).
    recreate_volumes: bool,
    /// The adjusted HOT (individual VNFC management): the same template, the targets' `nfv`
    /// entries with a new image when the request or Grant gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adjusted: Option<AdjustedPlan>,
    /// Targets whose server Nova reported in `ERROR` when the heal was decided: stopped before
    /// Heat replaces them, so Heat detaches their ports (module documentation, 2c).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    stop_first: Vec<VnfcId>,
    /// The stages.
    #[serde(default)]
    stages: Vec<Stage>,
}

fn request<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<HealVnfRequest, EngineError> {
    let (params, _) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    Ok(serde_json::from_str(&params)
        .map_err(|_| StepFailure::input("plan", "stored HealVnfRequest does not parse"))?)
}

/// The targets, the mode and the adjusted HOT, decided once.
async fn decide<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    inst: &Instance,
    hot: Option<&adjusted::Hot>,
    stack: &StackRef,
    vnfcs: &[VnfcRow],
) -> Result<HealPlan, EngineError> {
    let req = request(e, op)?;
    let extra = req.additional_params.as_ref();
    let known = adjusted::known(vnfcs);
    let targets: Vec<VnfcId> = if req.vnfc_instance_id.is_empty() {
        vnfcs.iter().map(|v| v.id.clone()).collect()
    } else {
        let mut out = Vec::new();
        for (i, id) in req.vnfc_instance_id.iter().enumerate() {
            // The id, or `<VDU>-<index>` of an individually managed VNFC.
            let Some(k) = plan::individual::resolve_vnfc(&known, id) else {
                return Err(StepFailure::input(
                    "plan",
                    format!("/request/vnfcInstanceId/{i}: VNFC `{id}` is not a VNFC of this VNF instance"),
                )
                .into());
            };
            if !out.contains(&k.id) {
                out.push(k.id.clone());
            }
        }
        out
    };
    let configuration_only = extra.and_then(|a| a.configuration_only).unwrap_or(false);
    let adjusted = match hot {
        Some(hot) if !configuration_only => {
            let current = adjusted::current(
                e,
                hot,
                stack,
                vnfcs,
                &inst.req.ext_virtual_links,
                &inst.req.ext_managed_virtual_links,
            )
            .await?;
            Some(
                plan::individual::decide(
                    &hot.base,
                    &inst.pkg.vnfd,
                    &current,
                    &known,
                    heat::Operation::Heal(&req),
                )
                .map_err(|err| StepFailure::input("plan", err.to_string()))?,
            )
        }
        _ => None,
    };
    // A server Heat will replace that is in ERROR keeps its ports bound (see 2c); Tacker's
    // heals replace nothing of vnfkeeper's.
    let mut stop_first = Vec::new();
    if !configuration_only && op.origin != Origin::Tacker {
        for v in vnfcs.iter().filter(|v| targets.contains(&v.id)) {
            let Some(server_id) = v.server_id.as_deref() else {
                continue;
            };
            let server = e
                .cloud
                .server(server_id)
                .await
                .map_err(|err| StepFailure::cloud("plan", &err))?;
            if server.is_some_and(|s| s.status == "ERROR") {
                stop_first.push(v.id.clone());
            }
        }
    }
    Ok(HealPlan {
        targets,
        configuration_only,
        recreate_volumes: extra.and_then(|a| a.all).unwrap_or(false),
        adjusted,
        stop_first,
        stages: Vec::new(),
    })
}

/// The stages of a decided heal.
fn stages<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    inst: &Instance,
    hot: Option<&adjusted::Hot>,
    before: &[VnfcRow],
    p: &HealPlan,
) -> Result<Vec<Stage>, EngineError> {
    if op.origin == Origin::Tacker {
        let hook = e.db.with(|s| s.reader().tacker_hook_of(&op.id))?;
        if matches!(hook, Some((MgmtHook::HealStart, _))) {
            // Tacker's `heal_start` (vnfkeeper as its MgmtDriver): before Tacker touches a
            // server, the same refusal and pre-steps as a heal of vnfkeeper's own; Tacker
            // replaces the servers once this operation COMPLETED.
            if let Some(why) = inst.driver.rebuild_refusal(before, &p.targets) {
                return Err(StepFailure {
                    status: 409,
                    ..StepFailure::input("heal_start", why)
                }
                .into());
            }
            let c = HookContext {
                vnfcs: before,
                pv_wait: e.limits.pv_wait,
                op_occ_id: op.id.as_str(),
            };
            return Ok(inst.driver.heal_start(c, &p.targets)?);
        }
        // Tacker replaced the servers: read them and configure (no heal_start, no Heat call).
        return Ok(vnfkeeper_core::tacker::heal_stages());
    }
    let mut list = StageList::default();
    if !p.configuration_only {
        if let Some(why) = inst.driver.rebuild_refusal(before, &p.targets) {
            // Refused before anything changes (intake refuses it too; this holds for a HEAL
            // that did not come through intake).
            return Err(StepFailure {
                status: 409,
                ..StepFailure::input("heal_start", why)
            }
            .into());
        }
        let individual = adjusted::pair(p.adjusted.as_ref(), hot)?;
        let c = HookContext {
            vnfcs: before,
            pv_wait: e.limits.pv_wait,
            op_occ_id: op.id.as_str(),
        };
        list.append(inst.driver.heal_start(c, &p.targets)?);
        // Heat creates a server's replacement before it deletes the server (convergence), and
        // Nova refuses a volume attached elsewhere: a target whose stack volumes are kept is
        // stopped and those volumes detached first, so its replacement can attach them. A
        // target in ERROR is stopped too, so that Heat detaches its ports (2c).
        for v in before.iter().filter(|v| p.targets.contains(&v.id)) {
            let kept: Vec<_> = if p.recreate_volumes {
                Vec::new()
            } else {
                v.volumes.iter().filter(|a| a.resource.is_some()).collect()
            };
            let stop = !kept.is_empty() || p.stop_first.contains(&v.id);
            let Some(server_id) = v.server_id.as_ref().filter(|_| stop) else {
                continue;
            };
            list.cloud_on(
                v.id.as_str(),
                CloudAction::StopServer {
                    server_id: server_id.clone(),
                },
            );
            for a in kept {
                list.cloud_on(
                    &a.volume_id,
                    CloudAction::DetachVolume {
                        server_id: server_id.clone(),
                        volume_id: a.volume_id.clone(),
                    },
                );
            }
        }
        // Mark the targets' servers (and, if asked, their volumes) unhealthy in the stack that
        // owns each (an AutoScalingGroup member's nested stack).
        let mut marks = Vec::new();
        for v in before.iter().filter(|v| p.targets.contains(&v.id)) {
            let mark = |resource: String| Mark {
                stack_name: v.stack_name.clone(),
                stack_id: v.stack_id.clone(),
                resource,
            };
            marks.push(mark(v.resource_name.clone()));
            if p.recreate_volumes {
                marks.extend(
                    v.volumes
                        .iter()
                        .filter_map(|a| a.resource.clone())
                        .map(mark),
                );
            }
        }
        list.cloud(CloudAction::MarkUnhealthy {
            marks,
            reason: format!("healed by vnfkeeper (VnfLcmOpOcc {})", op.id),
        });
        // Converge: Heat replaces exactly the marked resources (with the adjusted HOT, a full
        // update whose only change is the healed VNFCs' image, if any).
        match individual {
            Some((a, h)) => list.cloud(CloudAction::UpdateStack(adjusted::document(h, a))),
            None => list.cloud(CloudAction::PatchStack {
                parameters: serde_json::Map::new(),
            }),
        };
        list.cloud(CloudAction::WaitUpdate)
            .cloud(CloudAction::ReadVnfcs(ReadCheck {
                adjusted: individual.map(|(a, _)| adjusted::planned(a)),
                ..ReadCheck::default()
            }));
    }
    list.wave(|w| vec![Stage::expand(w, Hook::HealEnd)]);
    Ok(list.into_stages())
}

/// The adjusted HOT of individual VNFC management; `None` for a heal of origin `tacker` (Tacker
/// owns the stack's documents).
fn load_hot(op: &OperationRow, inst: &Instance) -> Result<Option<adjusted::Hot>, EngineError> {
    if op.origin == Origin::Tacker {
        return Ok(None);
    }
    Ok(adjusted::load(&inst.pkg, &inst.req.flavour_id)?)
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let inst = Instance::of_instance(e, op.vnf_instance_id.as_str())?;
    if op.origin == Origin::Tacker {
        // A heal of the whole VNF may have made Tacker re-create its stack: find it by name.
        super::instantiate::adopt_stack(e, op).await?;
    }
    let (_, stack) = instance_stack(e, op.vnf_instance_id.as_str())?;
    let before = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let plan = match e.db.with(|s| s.reader().operation_plan(&op.id))? {
        Some(text) => serde_json::from_str::<HealPlan>(&text)
            .map_err(|_| StepFailure::input("plan", "stored heal plan does not parse"))?,
        None => {
            let hot = load_hot(op, &inst)?;
            decide(e, op, &inst, hot.as_ref(), &stack, &before).await?
        }
    };
    let plan = if plan.stages.is_empty() {
        let hot = load_hot(op, &inst)?;
        let mut p = plan;
        p.stages = stages(e, op, &inst, hot.as_ref(), &before, &p)?;
        let json = serde_json::to_string(&p).unwrap_or_default();
        let text = adjusted::store(e, op, &json, p.adjusted.as_ref(), p.stages.len())?;
        serde_json::from_str::<HealPlan>(&text)
            .map_err(|_| StepFailure::input("plan", "stored heal plan does not parse"))?
    } else {
        plan
    };
    let x = Exec {
        instance: Some(&inst),
        adjusted: plan.adjusted.as_ref(),
        subjects: Subjects::Listed(plan.targets.clone()),
    };
    e.execute(op, plan.stages.clone(), &x).await
}
