//! SCALE of an aspect (SOL003 §5.4.5 ScaleVnfRequest) for AutoScalingGroup BaseHOTs: the group's
//! `desired_capacity` comes from the `nfv` parameter, so a scale is a stack PATCH with the `nfv`
//! object recomputed for the new scale levels (`plan::scale`).
//!
//! SCALE_OUT: 1. `heat.update` (PATCH `nfv`), 2. `heat.wait_update`, 3. `heat.read_vnfcs`, then the
//! new VNFCs join the cluster (`k8s.install`) and get the NFS client — the existing nodes are not
//! touched.
//!
//! SCALE_IN: the VNFCs to remove are chosen once, newest first (Cluster API remediates and
//! removes the newest machines first: they are the least likely to carry work), and kept in the
//! operation's plan; each is drained (strict: its pods must move) and deleted from Kubernetes on
//! the first master that stays; then its group member (the resource whose nested stack holds the
//! server) is marked unhealthy so that Heat removes exactly it when the group shrinks (Heat removes failed members first; Tacker v2 does the same),
//! `heat.update` with the smaller `desired_capacity`, `heat.wait_update`, `heat.read_vnfcs`.
//!
//! Individual VNFC management (a BaseHOT VDU without AutoScalingGroup, C4): the plan holds the
//! adjusted HOT (`heat::adjust`): SCALE_OUT appends `<VDU>-<index>` after the highest index (never
//! reusing one), SCALE_IN removes the highest indices (the victims); `heat.update` is a full update
//! (PUT) with the adjusted template and `nfv`, so Heat creates or deletes exactly those resources
//! and keeps the others' servers; no member is marked unhealthy. The rows then carry index and
//! parameters, and must match the plan's VNFCs.
//!
//! Source: `research/tacker-anchor.md` §1.1 (scale_start/scale_end), §3.4–§3.5,
//! `research/peers.md` §1.2, §5.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::adjusted;
use super::cluster::{Cluster, Role};
use super::instantiate::update_and_read;
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, StackRef};
use crate::heat;
use crate::intake::wire::sol003::{ScaleType, ScaleVnfRequest};
use crate::plan;
use crate::plan::individual::AdjustedPlan;
use crate::recipes::{self, DrainPolicy};
use crate::store::{OperationRow, VnfcRow};

/// Longest drain of a node removed by SCALE_IN.
const SCALE_IN_DRAIN: std::time::Duration = std::time::Duration::from_secs(300);

/// What the scale resolved once (kept in the operation's `plan`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct ScalePlan {
    /// Scale level per aspect once the operation is done.
    levels: BTreeMap<String, u32>,
    /// `desired_capacity` per VDU for those levels.
    capacities: BTreeMap<String, u32>,
    /// VNFCs to remove (SCALE_IN), newest first (adjusted HOT: highest index first).
    victims: Vec<String>,
    /// The adjusted HOT (individual VNFC management), sent to Heat in full.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adjusted: Option<AdjustedPlan>,
}

#[allow(clippy::too_many_arguments)]
async fn resolve<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    cluster: &Cluster,
    hot: Option<&adjusted::Hot>,
    stack: &StackRef,
    levels_now: &BTreeMap<String, u32>,
    vnfcs: &[VnfcRow],
    req: &ScaleVnfRequest,
) -> Result<ScalePlan, EngineError> {
    if let Some(text) = e.db.with(|s| s.reader().operation_plan(&op.id))? {
        return Ok(serde_json::from_str(&text)
            .map_err(|_| StepFailure::input("plan", "stored scale plan does not parse"))?);
    }
    let vnfd = &cluster.pkg.vnfd;
    let level = cluster.req.instantiation_level_id.as_deref();
    let levels = plan::scale::apply(vnfd, levels_now, req)
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    if let Some(hot) = hot {
        // Adjusted HOT: new indices after the highest, removal of the highest (heat::adjust).
        let current =
            adjusted::current(e, hot, stack, vnfcs, &cluster.req.ext_virtual_links).await?;
        let known = adjusted::known(vnfcs);
        let a = plan::individual::decide(
            &hot.base,
            vnfd,
            &current,
            &known,
            heat::Operation::Scale(req),
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
        let plan = ScalePlan {
            levels,
            capacities,
            victims,
            adjusted: Some(a),
        };
        let json = serde_json::to_string(&plan).unwrap_or_default();
        if let Some(a) = &plan.adjusted {
            adjusted::store(e, op, &json, a)?;
        }
        return Ok(plan);
    }
    let capacities = plan::scale::capacities(vnfd, level, &levels);
    let mut victims = Vec::new();
    if req.scale_type == ScaleType::ScaleIn {
        for (vdu, want) in &capacities {
            let mut members: Vec<&VnfcRow> = vnfcs.iter().filter(|v| &v.vdu_id == vdu).collect();
            let excess = members.len().saturating_sub(*want as usize);
            // Newest first; ties by id for a stable choice.
            members.sort_by(|a, b| b.created_at.cmp(&a.created_at).then(b.id.cmp(&a.id)));
            victims.extend(members.into_iter().take(excess).map(|v| v.id.clone()));
        }
    }
    let plan = ScalePlan {
        levels,
        capacities,
        victims,
        adjusted: None,
    };
    let json = serde_json::to_string(&plan).unwrap_or_default();
    e.db.write(|tx| tx.set_operation_plan(&op.id, &json))?;
    Ok(plan)
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let (params, _) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    let req: ScaleVnfRequest = serde_json::from_str(&params)
        .map_err(|_| StepFailure::input("plan", "stored ScaleVnfRequest does not parse"))?;
    let cluster = Cluster::of_instance(e, &op.vnf_instance_id)?;
    let (instance, stack) = super::cluster::instance_stack(e, &op.vnf_instance_id)?;
    let before = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let hot = adjusted::load(&cluster.pkg, &cluster.req.flavour_id)?;
    let plan = resolve(
        e,
        op,
        &cluster,
        hot.as_ref(),
        &stack,
        &instance.scale_status,
        &before,
        &req,
    )
    .await?;
    // The stored plan decides the path: a plan made by the AutoScalingGroup path is finished
    // that way even if the package changed since.
    let individual = match (&plan.adjusted, &hot) {
        (Some(a), Some(h)) => Some((a, h)),
        (Some(_), None) => {
            return Err(StepFailure::input(
                "plan",
                "the stored plan uses an adjusted HOT, but the package's BaseHOT no longer has an individually managed VDU",
            )
            .into());
        }
        (None, _) => None,
    };

    // AutoScalingGroup: the complete `nfv` object with the new capacities (Heat replaces a json
    // parameter whole).
    let nfv = if individual.is_none() {
        let mut nfv = plan::nfv::instantiate_parameters(&cluster.pkg.vnfd, &cluster.req)
            .map_err(|err| StepFailure::input("plan", err.to_string()))?;
        for (vdu, n) in &plan.capacities {
            if let Some(entry) = nfv.pointer_mut(&format!("/VDU/{vdu}")) {
                entry["desired_capacity"] = (*n).into();
            }
        }
        nfv
    } else {
        serde_json::Value::Null
    };

    let out = req.scale_type == ScaleType::ScaleOut;
    let k8s = cluster.k8s.is_some();
    let nfs = cluster.storage_stage_count() > 0;
    let remote = if !k8s {
        0
    } else if out {
        1 + usize::from(nfs)
    } else {
        plan.victims.len()
    };
    // An AutoScalingGroup SCALE_IN also marks the members to remove; with the adjusted HOT the
    // removed `<VDU>-<index>` resources simply leave the template.
    let cloud_steps = if out || individual.is_some() { 3 } else { 4 };
    e.db.write(|tx| tx.set_steps_total(&op.id, (remote + cloud_steps) as i64))?;
    let done = e.done_steps(op)?;
    let done_cloud = |n: i64| done.contains(&(n, String::new()));
    let mut no = 1;

    if !out {
        // Drain and delete the victims' nodes on a master that stays.
        let victims: Vec<&VnfcRow> = before
            .iter()
            .filter(|v| plan.victims.contains(&v.id))
            .collect();
        if k8s && !victims.is_empty() {
            let master_row = before
                .iter()
                .find(|v| {
                    !plan.victims.contains(&v.id)
                        && cluster.role(&v.vdu_id).ok() == Some(Role::Master)
                })
                .ok_or_else(|| StepFailure::input("plan", "no master stays to drain nodes on"))?;
            let master = cluster.host(master_row, Role::Master)?;
            for v in &victims {
                let role = cluster.role(&v.vdu_id)?;
                let addr = cluster.host(v, role)?.target.address.to_string();
                let step = recipes::k8s_remove_node(
                    &master.vnfc_id,
                    &addr,
                    SCALE_IN_DRAIN,
                    DrainPolicy::Strict,
                );
                e.stage(op, no, vec![(step, master.clone())]).await?;
                no += 1;
            }
        }
        // Heat removes failed members first: mark exactly the victims.
        if individual.is_none() && !done_cloud(no) {
            let reason = format!("removed by SCALE_IN (VnfLcmOpOcc {})", op.id);
            e.cloud_step(
                op,
                no,
                "heat.mark_unhealthy",
                || async {
                    // The group's member is the resource whose nested stack holds the server.
                    let resources = e.cloud.stack_resources(&stack, 5).await?;
                    for v in &victims {
                        let (owner, name) = resources
                            .iter()
                            .find(|r| r.nested_stack.as_ref().is_some_and(|n| n.id == v.stack_id))
                            .map(|r| (r.stack.clone(), r.resource_name.clone()))
                            .unwrap_or_else(|| {
                                let own = StackRef {
                                    name: v.stack_name.clone(),
                                    id: v.stack_id.clone(),
                                };
                                (own, v.resource_name.clone())
                            });
                        e.cloud.mark_unhealthy(&owner, &name, &reason).await?;
                    }
                    Ok(())
                },
                |_| Ok(()),
            )
            .await?;
        }
        if individual.is_none() {
            no += 1;
        }
    }

    // The full adjusted template and nfv (only the created/removed VNFCs change), or the
    // complete `nfv` with the new capacities.
    let (after, next) = update_and_read(
        e,
        op,
        &cluster.pkg,
        &stack,
        serde_json::json!({ "nfv": nfv }),
        individual,
        no,
    )
    .await?;
    no = next;

    // The group must now hold exactly the planned members.
    for (vdu, want) in &plan.capacities {
        let have = after.iter().filter(|v| &v.vdu_id == vdu).count();
        if have != *want as usize {
            return Err(StepFailure::input(
                "heat.read_vnfcs",
                format!("VDU `{vdu}` has {have} VNFC(s) after the update, {want} planned"),
            )
            .into());
        }
    }
    if let Some(left) = after.iter().find(|v| plan.victims.contains(&v.id)) {
        return Err(StepFailure::input(
            "heat.read_vnfcs",
            format!("VNFC {} chosen for removal is still there", left.id),
        )
        .into());
    }

    if out && k8s {
        let first_master = cluster
            .hosts(&after, Role::Master)?
            .into_iter()
            .next()
            .ok_or_else(|| StepFailure::input("plan", "the stack has no master VNFC"))?;
        let master_ip = first_master.target.address.to_string();
        let mut joins = Vec::new();
        let mut clients = Vec::new();
        // The VNFCs this operation created (also right after a crash or on RETRY).
        for v in after.iter().filter(|v| v.created_at >= op.start_time) {
            let role = cluster.role(&v.vdu_id)?;
            if !matches!(role, Role::Master | Role::Worker) {
                continue;
            }
            let h = cluster.host(v, role)?;
            joins.push((cluster.install(&h, role, &master_ip)?, h.clone()));
            clients.push((recipes::nfs_client(&h.vnfc_id), h));
        }
        e.stage(op, no, joins).await?;
        no += 1;
        if nfs {
            e.stage(op, no, clients).await?;
        }
    }
    e.db.write(|tx| tx.set_scale_status(&op.vnf_instance_id, Some(&plan.levels), now()))?;
    Ok(())
}
