//! HEAL of VNFCs or of the whole VNF (SOL003 §5.4.9 HealVnfRequest; SOL002 `vnfcInstanceId`):
//! replace the servers through Heat, keeping data volumes, and configure the new servers exactly
//! like the originals.
//!
//! Order, chosen so that a refusal changes nothing (Tacker removes the nodes first, then finds a
//! PersistentVolume in use: `research/tacker-anchor.md` §1.1 heal_start):
//! 1. storage server among the targets: `pv.not_bound` on a master — refuses with 409 naming the
//!    Bound PersistentVolumes before anything is touched; then `pv.unregister` of each PV;
//! 2. masters and workers among the targets, while another master survives: `k8s.remove_node`
//!    (drain, lenient: the node may be dead; delete);
//! 3. `heat.mark_unhealthy` of each target's server resource in the stack that owns it (the
//!    nested stack of an AutoScalingGroup member) — and of its volumes only when
//!    `additionalParams.all` is true; 4. `heat.update` (PATCH `{}`: only marked resources are
//!    replaced, `research/peers.md` §5); 5. `heat.wait_update`; 6. `heat.read_vnfcs` (new server
//!    ids; their host keys are learned anew);
//! 7. configuration of the targets: join (or create, when no master survived) the cluster, NFS
//!    client; on the storage server the kept volume is mounted (`mkfs` only if it holds no
//!    filesystem), the NFS server and exports; the PVs registered again.
//!
//! Individual VNFC management (C4): targets may be named `<VDU>-<index>`; the plan holds the
//! adjusted HOT of the heal (`heat::adjust`: order and template unchanged, a healed VNFC's
//! `vcImageId` from the Grant or the request's `additionalParams.nfv`); step 3 marks the `VDU`
//! server in each target's nested stack, step 4 is a full update (PUT) with the adjusted
//! documents, so only the targets' servers are rebuilt.
//!
//! `additionalParams.configuration_only: true` (vnfkeeper; used by reconcile for drift that needs
//! no new server, e.g. a lost export line) skips 1–6 and only runs the idempotent configuration
//! steps on the targets.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::adjusted;
use super::cluster::{Cluster, Role};
use super::instantiate::{register_pvs, update_and_read};
use super::steps::Host;
use super::{Engine, EngineError, StepFailure};
use crate::cloud::{Cloud, StackRef};
use crate::heat;
use crate::intake::wire::sol003::HealVnfRequest;
use crate::plan;
use crate::plan::individual::AdjustedPlan;
use crate::recipes::{self, DrainPolicy};
use crate::store::{OperationRow, VnfcRow};

/// Longest drain of a node being replaced before it is deleted anyway.
const HEAL_DRAIN: std::time::Duration = std::time::Duration::from_secs(60);

/// What the heal resolved once (kept in the operation's `plan` across a crash or RETRY).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct HealPlan {
    /// The VNFCs healed (all of the instance's VNFCs for a whole-VNF heal).
    targets: Vec<String>,
    /// Rebuild nothing, only configure the targets again.
    configuration_only: bool,
    /// Replace the targets' volumes too (`additionalParams.all`).
    recreate_volumes: bool,
    /// The adjusted HOT (individual VNFC management): the same template, the targets' `nfv`
    /// entries with a new image when the request or Grant gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    adjusted: Option<AdjustedPlan>,
}

fn request<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<HealVnfRequest, EngineError> {
    let (params, _) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    Ok(serde_json::from_str(&params)
        .map_err(|_| StepFailure::input("plan", "stored HealVnfRequest does not parse"))?)
}

async fn resolve<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    cluster: &Cluster,
    hot: Option<&adjusted::Hot>,
    stack: &StackRef,
    vnfcs: &[VnfcRow],
) -> Result<HealPlan, EngineError> {
    if let Some(text) = e.db.with(|s| s.reader().operation_plan(&op.id))? {
        return Ok(serde_json::from_str(&text)
            .map_err(|_| StepFailure::input("plan", "stored heal plan does not parse"))?);
    }
    let req = request(e, op)?;
    let extra = req.additional_params.as_ref();
    let known = adjusted::known(vnfcs);
    let targets: Vec<String> = if req.vnfc_instance_id.is_empty() {
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
            let current =
                adjusted::current(e, hot, stack, vnfcs, &cluster.req.ext_virtual_links).await?;
            Some(
                plan::individual::decide(
                    &hot.base,
                    &cluster.pkg.vnfd,
                    &current,
                    &known,
                    heat::Operation::Heal(&req),
                )
                .map_err(|err| StepFailure::input("plan", err.to_string()))?,
            )
        }
        _ => None,
    };
    let plan = HealPlan {
        targets,
        configuration_only,
        recreate_volumes: extra.and_then(|a| a.all).unwrap_or(false),
        adjusted,
    };
    let json = serde_json::to_string(&plan).unwrap_or_default();
    match &plan.adjusted {
        Some(a) => adjusted::store(e, op, &json, a)?,
        None => e.db.write(|tx| tx.set_operation_plan(&op.id, &json))?,
    }
    Ok(plan)
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let cluster = Cluster::of_instance(e, &op.vnf_instance_id)?;
    let (_, stack) = super::cluster::instance_stack(e, &op.vnf_instance_id)?;
    let before = e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?;
    let hot = adjusted::load(&cluster.pkg, &cluster.req.flavour_id)?;
    let plan = resolve(e, op, &cluster, hot.as_ref(), &stack, &before).await?;
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
    let targets: BTreeSet<&str> = plan.targets.iter().map(String::as_str).collect();
    let is_target = |v: &VnfcRow| targets.contains(v.id.as_str());

    let mut roles = Vec::new();
    for v in &before {
        roles.push((v, cluster.role(&v.vdu_id)?));
    }
    let storage_targeted = roles
        .iter()
        .any(|(v, r)| *r == Role::StorageServer && is_target(v));
    let node_targets: Vec<&VnfcRow> = roles
        .iter()
        .filter(|(v, r)| matches!(r, Role::Master | Role::Worker) && is_target(v))
        .map(|(v, _)| *v)
        .collect();
    // A master that is not healed runs kubectl for the others; without one, the first master.
    let surviving_master = roles
        .iter()
        .find(|(v, r)| *r == Role::Master && !is_target(v))
        .map(|(v, _)| *v);
    let pv_names = if storage_targeted {
        cluster.pv_names()?
    } else {
        Vec::new()
    };

    // N of "step k/N".
    let cloud_steps = if plan.configuration_only { 0 } else { 4 };
    let pre = if plan.configuration_only || cluster.k8s.is_none() {
        0
    } else {
        let pv = if storage_targeted && !pv_names.is_empty() {
            1 + pv_names.len()
        } else {
            0
        };
        let nodes = if surviving_master.is_some() {
            node_targets.len()
        } else {
            0
        };
        pv + nodes
    };
    let post = post_stage_count(&cluster, !node_targets.is_empty(), storage_targeted);
    e.db.write(|tx| tx.set_steps_total(&op.id, (pre + cloud_steps + post) as i64))?;

    let mut no = 1;
    let done = e.done_steps(op)?;
    let done_cloud = |n: i64| done.contains(&(n, String::new()));
    let vnfcs = if plan.configuration_only {
        before.clone()
    } else {
        // 1. PersistentVolumes: refuse while Bound, then unregister.
        if cluster.k8s.is_some() && storage_targeted && !pv_names.is_empty() {
            let master_row = surviving_master
                .or_else(|| {
                    roles
                        .iter()
                        .find(|(_, r)| *r == Role::Master)
                        .map(|(v, _)| *v)
                })
                .ok_or_else(|| {
                    StepFailure::input("plan", "no master to check PersistentVolumes on")
                })?;
            let master = cluster.host(master_row, Role::Master)?;
            e.stage(
                op,
                no,
                vec![(
                    recipes::pv::not_bound(&master.vnfc_id, &pv_names),
                    master.clone(),
                )],
            )
            .await?;
            no += 1;
            for name in &pv_names {
                let step = recipes::pv::unregister(&master.vnfc_id, name, e.limits.pv_wait);
                e.stage(op, no, vec![(step, master.clone())]).await?;
                no += 1;
            }
        }
        // 2. Nodes out of the cluster while a master survives to do it.
        if cluster.k8s.is_some()
            && let Some(m) = surviving_master
        {
            let master = cluster.host(m, Role::Master)?;
            for v in &node_targets {
                let addr = cluster.host(v, cluster.role(&v.vdu_id)?)?.target.address;
                let step = recipes::k8s_remove_node(
                    &master.vnfc_id,
                    &addr.to_string(),
                    HEAL_DRAIN,
                    DrainPolicy::Lenient,
                );
                e.stage(op, no, vec![(step, master.clone())]).await?;
                no += 1;
            }
        }
        // 3. Mark the targets' servers (and, if asked, their volumes) unhealthy.
        if !done_cloud(no) {
            let marks: Vec<(StackRef, String)> = before
                .iter()
                .filter(|v| is_target(v))
                .flat_map(|v| {
                    let owner = StackRef {
                        name: v.stack_name.clone(),
                        id: v.stack_id.clone(),
                    };
                    let mut out = vec![(owner.clone(), v.resource_name.clone())];
                    if plan.recreate_volumes {
                        out.extend(
                            v.volumes
                                .iter()
                                .filter_map(|a| a.resource.clone())
                                .map(|r| (owner.clone(), r)),
                        );
                    }
                    out
                })
                .collect();
            let reason = format!("healed by vnfkeeper (VnfLcmOpOcc {})", op.id);
            e.cloud_step(
                op,
                no,
                "heat.mark_unhealthy",
                || async {
                    for (owner, resource) in &marks {
                        e.cloud.mark_unhealthy(owner, resource, &reason).await?;
                    }
                    Ok(())
                },
                |_| Ok(()),
            )
            .await?;
        }
        no += 1;
        // 4.–6. Converge: Heat replaces exactly the marked resources (with the adjusted HOT, a
        // full update whose only change is the healed VNFCs' image, if any); the new servers.
        let (after, next) = update_and_read(
            e,
            op,
            &cluster.pkg,
            &stack,
            serde_json::json!({}),
            individual,
            no,
        )
        .await?;
        no = next;
        after
    };

    // 7. Configure the targets.
    if cluster.k8s.is_some() {
        configure_targets(
            e,
            op,
            &cluster,
            &vnfcs,
            &targets,
            surviving_master.map(|m| m.id.as_str()),
            no,
        )
        .await?;
    }
    Ok(())
}

/// Stages [`configure_targets`] runs.
fn post_stage_count(cluster: &Cluster, nodes: bool, storage: bool) -> usize {
    if cluster.k8s.is_none() {
        return 0;
    }
    let mut n = 0;
    if nodes {
        n += 2; // install/join, then the other targets in parallel
        if cluster.storage_stage_count() > 0 {
            n += 1; // NFS clients
        }
    }
    if storage {
        n += cluster.storage_stage_count() + 2 * cluster.pv_count();
    }
    n
}

/// Configures the healed VNFCs: nodes (re)join the cluster — through a surviving master, or the
/// first healed master creates it again — and get the NFS client; the storage server mounts its
/// kept volume, serves the exports, and the PersistentVolumes are registered again.
async fn configure_targets<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    cluster: &Cluster,
    vnfcs: &[VnfcRow],
    targets: &BTreeSet<&str>,
    surviving_master: Option<&str>,
    mut no: i64,
) -> Result<i64, EngineError> {
    let masters = cluster.hosts(vnfcs, Role::Master)?;
    let workers = cluster.hosts(vnfcs, Role::Worker)?;
    let storage = cluster.hosts(vnfcs, Role::StorageServer)?;
    let targeted = |h: &&Host| targets.contains(h.vnfc_id.as_str());
    let node_targets: Vec<(&Host, Role)> = masters
        .iter()
        .filter(targeted)
        .map(|h| (h, Role::Master))
        .chain(workers.iter().filter(targeted).map(|h| (h, Role::Worker)))
        .collect();
    // The master everybody joins: a surviving one, else the first (healed) master.
    let anchor = surviving_master
        .and_then(|id| masters.iter().find(|m| m.vnfc_id == id))
        .or_else(|| masters.first())
        .cloned()
        .ok_or_else(|| StepFailure::input("plan", "the stack has no master VNFC"))?;
    let master_ip = anchor.target.address.to_string();

    if !node_targets.is_empty() {
        // The anchor first when it is itself healed (it creates the cluster again).
        let (first, rest): (Vec<_>, Vec<_>) = node_targets
            .iter()
            .partition(|(h, _)| h.vnfc_id == anchor.vnfc_id);
        let mut stage = Vec::new();
        for (h, role) in first {
            stage.push((cluster.install(h, role, &master_ip)?, h.clone()));
        }
        e.stage(op, no, stage).await?;
        no += 1;
        let mut stage = Vec::new();
        for (h, role) in rest {
            stage.push((cluster.install(h, role, &master_ip)?, h.clone()));
        }
        e.stage(op, no, stage).await?;
        no += 1;
        if cluster.storage_stage_count() > 0 {
            let clients = node_targets
                .iter()
                .map(|(h, _)| (recipes::nfs_client(&h.vnfc_id), (*h).clone()))
                .collect();
            e.stage(op, no, clients).await?;
            no += 1;
        }
    }
    if let Some(server) = storage.iter().find(targeted) {
        let row = vnfcs
            .iter()
            .find(|v| v.id == server.vnfc_id)
            .ok_or_else(|| StepFailure::input("plan", "the storage server VNFC vanished"))?;
        for step in cluster.storage_steps(server, row, &op.vnf_instance_id)? {
            e.stage(op, no, vec![(step, server.clone())]).await?;
            no += 1;
        }
        no = register_pvs(e, op, cluster, vnfcs, &anchor, no).await?;
    }
    Ok(no)
}
