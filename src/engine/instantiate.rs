//! INSTANTIATE of a Kubernetes-cluster VNF (C0) with NFS PersistentVolumes (C1):
//!
//! 1. `heat.create` — the stack `vnf-<vnfInstanceId>` from the flavour's BaseHOT and the `nfv`
//!    parameter (adopted if it already exists, so a crash between create and journal does not
//!    create twice); 2. `heat.wait_create`; 3. `heat.read_vnfcs` (nested resources, servers, ports,
//!    volumes → VNFC rows); then remote stages: the package's install script on the first master,
//!    then on the other masters and the workers in parallel; on the storage server a filesystem
//!    (only if none), a persistent mount, the NFS server and exactly the requested exports; the NFS
//!    client on every master and worker in parallel; each PersistentVolume manifest with
//!    `spec.nfs.server` set, applied on the first master and waited for until Available.
//!
//! With a BaseHOT whose VDU has no AutoScalingGroup (individual VNFC management, C4), step 1
//! creates the stack from the adjusted HOT (`<VDU>-<index>` resources, per-VNFC `nfv` entries)
//! decided once and kept in the operation's `plan`, and step 3 stores each VNFC's index and
//! parameters and checks the stack holds exactly the planned VNFCs.
//!
//! Source: `seeds/pv-k8s-cluster` (instantiate_end), `research/tacker-anchor.md` §1.1, §3.

use serde::{Deserialize, Serialize};

use super::adjusted;
use super::cluster::{Cluster, Role};
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, StackCreate, StackRef, StackStatus};
use crate::heat;
use crate::model::InstantiationState;
use crate::package::VnfPackage;
use crate::plan;
use crate::plan::individual::AdjustedPlan;
use crate::store::{OperationRow, VnfcRow};

fn inputs<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<Cluster, EngineError> {
    let (params, package) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    Ok(Cluster::load(&params, package.as_deref())?)
}

/// Stages of [`configure`] for the request: install (first master, then the rest), the storage
/// server's stages, the NFS clients, two per PersistentVolume.
fn configure_stages(c: &Cluster) -> i64 {
    if c.k8s.is_none() {
        return 0;
    }
    let storage = if c.storage_stage_count() > 0 {
        c.storage_stage_count() + 1
    } else {
        0
    };
    (2 + storage + 2 * c.pv_count()) as i64
}

/// The plan of an INSTANTIATE through the adjusted HOT, as stored: `{"adjusted": …}`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct InstantiatePlan {
    adjusted: AdjustedPlan,
}

/// The adjusted HOT of an INSTANTIATE: the stored one, else decided now (no VNFCs yet) and stored.
fn adjusted_plan<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    cluster: &Cluster,
    hot: &adjusted::Hot,
) -> Result<AdjustedPlan, EngineError> {
    if let Some(text) = e.db.with(|s| s.reader().operation_plan(&op.id))? {
        let p: InstantiatePlan = serde_json::from_str(&text)
            .map_err(|_| StepFailure::input("plan", "stored instantiate plan does not parse"))?;
        return Ok(p.adjusted);
    }
    let current = heat::Current::default();
    let a = plan::individual::decide(
        &hot.base,
        &cluster.pkg.vnfd,
        &current,
        &[],
        heat::Operation::Instantiate(&cluster.req),
    )
    .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    let p = InstantiatePlan { adjusted: a };
    let json = serde_json::to_string(&p).unwrap_or_default();
    adjusted::store(e, op, &json, &p.adjusted)?;
    Ok(p.adjusted)
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let cluster = inputs(e, op)?;
    let (req, pkg) = (&cluster.req, &cluster.pkg);
    let stack_name = format!("vnf-{}", op.vnf_instance_id);
    // Individual VNFC management: the stack is created from the adjusted HOT (one resource per
    // VNFC); an AutoScalingGroup BaseHOT is sent as it is with `desired_capacity` in `nfv`.
    let individual = adjusted::load(pkg, &req.flavour_id)?;
    let (create, adjusted) = match &individual {
        Some(hot) => {
            let a = adjusted_plan(e, op, &cluster, hot)?;
            (adjusted::stack_request(e, &stack_name, hot, &a), Some(a))
        }
        None => {
            let hot = pkg
                .base_hot(&req.flavour_id)
                .map_err(|err| StepFailure::input("plan", err.to_string()))?;
            let nfv = plan::nfv::instantiate_parameters(&pkg.vnfd, req)
                .map_err(|err| StepFailure::input("plan", err.to_string()))?;
            let mut parameters = serde_json::Map::new();
            parameters.insert("nfv".into(), nfv);
            let create = StackCreate {
                stack_name: stack_name.clone(),
                template: hot.template.clone(),
                files: hot.files.clone(),
                parameters,
                timeout_mins: Some((e.limits.stack_timeout.as_secs() / 60).max(1) as u32),
                disable_rollback: true,
            };
            (create, None)
        }
    };

    // 1. Create the stack, or adopt the one a previous attempt created.
    // N of "step k/N": 3 cloud steps, then stages that depend only on the request.
    let total = 3 + configure_stages(&cluster);
    e.db.write(|tx| tx.set_steps_total(&op.id, total))?;

    // Steps already DONE (resume after a crash, or RETRY) are not run again.
    let done = e.done_steps(op)?;
    let done_cloud = |no: i64| done.contains(&(no, String::new()));
    let recorded =
        e.db.with(|s| s.reader().instances())?
            .into_iter()
            .find(|i| i.id == op.vnf_instance_id);
    let stack = match recorded.and_then(|i| {
        Some(StackRef {
            name: i.stack_name?,
            id: i.stack_id?,
        })
    }) {
        Some(s) if done_cloud(1) => s,
        _ => {
            e.cloud_step(
                op,
                1,
                "heat.create",
                || async {
                    match e.cloud.find_stack(&stack_name).await? {
                        Some(s) => Ok(s),
                        None => e.cloud.create_stack(&create).await,
                    }
                },
                |s: &StackRef| {
                    Ok(e.db.write(|tx| {
                        tx.set_instance_stack(&op.vnf_instance_id, &s.name, Some(&s.id), now())
                    })?)
                },
            )
            .await?
        }
    };

    // 2. Wait for CREATE_COMPLETE.
    if !done_cloud(2) {
        e.cloud_step(
            op,
            2,
            "heat.wait_create",
            || {
                e.cloud.wait_stack(
                    &stack,
                    &[StackStatus::CreateComplete],
                    e.limits.stack_timeout,
                )
            },
            |_| Ok(()),
        )
        .await?;
    }

    // 3. Read the VNFCs.
    let vnfcs = if done_cloud(3) {
        e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?
    } else {
        read_vnfcs(e, op, pkg, &stack, 3, adjusted.as_ref()).await?
    };
    if let Some(a) = &adjusted {
        adjusted::verify(&vnfcs, a)?;
    }
    configure(e, op, &cluster, &vnfcs, 4).await?;
    finish(e, op, &cluster)
}

/// Configures the whole cluster from step `no` on (INSTANTIATE, and HEAL of the whole VNF): the
/// package's install script on the first master, then on the other masters and the workers in
/// parallel; on the storage server a filesystem (only if none), a persistent mount, the NFS
/// server and exactly the requested exports; the NFS client on every node in parallel; each
/// PersistentVolume applied on the first master and waited for until Available. Returns the next
/// step number. A VNF without cluster parameters needs nothing.
pub(super) async fn configure<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    cluster: &Cluster,
    vnfcs: &[VnfcRow],
    mut no: i64,
) -> Result<i64, EngineError> {
    if cluster.k8s.is_none() {
        return Ok(no);
    }
    let masters = cluster.hosts(vnfcs, Role::Master)?;
    let workers = cluster.hosts(vnfcs, Role::Worker)?;
    let first_master = masters
        .first()
        .cloned()
        .ok_or_else(|| StepFailure::input("plan", "the stack has no master VNFC"))?;
    let master_ip = first_master.target.address.to_string();

    // Cluster install: the first master alone, then everyone else in parallel.
    let first = cluster.install(&first_master, Role::Master, &master_ip)?;
    e.stage(op, no, vec![(first, first_master.clone())]).await?;
    no += 1;
    let mut joins = Vec::new();
    for m in masters.iter().skip(1) {
        joins.push((cluster.install(m, Role::Master, &master_ip)?, m.clone()));
    }
    for w in &workers {
        joins.push((cluster.install(w, Role::Worker, &master_ip)?, w.clone()));
    }
    e.stage(op, no, joins).await?;
    no += 1;

    if cluster.storage_stage_count() > 0 {
        let server = cluster
            .hosts(vnfcs, Role::StorageServer)?
            .first()
            .cloned()
            .ok_or_else(|| StepFailure::input("plan", "the stack has no storage server VNFC"))?;
        let row = vnfcs
            .iter()
            .find(|v| v.id == server.vnfc_id)
            .ok_or_else(|| StepFailure::input("plan", "the storage server VNFC vanished"))?;
        for step in cluster.storage_steps(&server, row, &op.vnf_instance_id)? {
            e.stage(op, no, vec![(step, server.clone())]).await?;
            no += 1;
        }
        let clients = masters
            .iter()
            .chain(workers.iter())
            .map(|h| (crate::recipes::nfs_client(&h.vnfc_id), h.clone()))
            .collect();
        e.stage(op, no, clients).await?;
        no += 1;
        no = register_pvs(e, op, cluster, vnfcs, &first_master, no).await?;
    }
    Ok(no)
}

/// Registers every PersistentVolume on `master` (two stages each). Returns the next step number.
pub(super) async fn register_pvs<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    cluster: &Cluster,
    vnfcs: &[VnfcRow],
    master: &super::steps::Host,
    mut no: i64,
) -> Result<i64, EngineError> {
    for pv in cluster.pv_manifests(vnfcs)? {
        for step in cluster.pv_register(master, &op.vnf_instance_id, &pv, e.limits.pv_wait) {
            e.stage(op, no, vec![(step, master.clone())]).await?;
            no += 1;
        }
    }
    Ok(no)
}

fn finish<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    cluster: &Cluster,
) -> Result<(), EngineError> {
    let (req, pkg) = (&cluster.req, &cluster.pkg);
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

/// Lists the stack's resources, servers, ports and volumes and records the VNFCs; with an
/// adjusted HOT, each individually managed VNFC is stored with its index and its `parameters`.
pub(super) async fn read_vnfcs<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    pkg: &VnfPackage,
    stack: &StackRef,
    step_no: i64,
    adjusted: Option<&AdjustedPlan>,
) -> Result<Vec<VnfcRow>, EngineError> {
    let mut stored = Vec::new();
    e.cloud_step(
        op,
        step_no,
        "heat.read_vnfcs",
        || async {
            let resources = e.cloud.stack_resources(stack, 5).await?;
            let servers = e.cloud.servers().await?;
            let ports = e.cloud.ports().await?;
            let volumes = e.cloud.volumes().await?;
            let mut observed =
                plan::vnfcs::observe(&pkg.vnfd, &resources, &servers, &ports, &volumes);
            if let Some(a) = adjusted {
                a.annotate(&mut observed);
            }
            Ok(observed)
        },
        |observed| {
            stored =
                e.db.write(|tx| tx.sync_vnfcs(&op.vnf_instance_id, observed, now()))?;
            Ok(())
        },
    )
    .await?;
    // A new or replaced server may answer at an address a pooled session still points to.
    for v in stored.iter().filter(|v| v.host_key.is_none()) {
        for addr in v.cp_addresses.values().filter_map(|a| a.parse().ok()) {
            let _ = e.remote.forget_address(addr).await;
        }
    }
    Ok(stored)
}

/// Updates the instance's stack and reads the result, from step `no` (three journaled cloud
/// steps; those already DONE are skipped): `heat.update` — with the adjusted HOT a full update
/// (`individual`), else a PATCH of `patch` (`{}` to replace what is marked unhealthy, or the new
/// `nfv`) —, `heat.wait_update` for `UPDATE_COMPLETE`, `heat.read_vnfcs` (checked against the
/// adjusted plan when there is one). Shared by SCALE and HEAL. Returns the VNFCs and the next
/// step number.
pub(super) async fn update_and_read<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    pkg: &VnfPackage,
    stack: &StackRef,
    patch: serde_json::Value,
    individual: Option<(&AdjustedPlan, &adjusted::Hot)>,
    mut no: i64,
) -> Result<(Vec<VnfcRow>, i64), EngineError> {
    let done = e.done_steps(op)?;
    let done_cloud = |n: i64| done.contains(&(n, String::new()));
    if !done_cloud(no) {
        match individual {
            Some((a, h)) => adjusted::update(e, op, no, stack, h, a).await?,
            None => {
                e.cloud_step(
                    op,
                    no,
                    "heat.update",
                    || e.cloud.update_stack_patch(stack, patch.clone()),
                    |_| Ok(()),
                )
                .await?;
            }
        }
    }
    no += 1;
    if !done_cloud(no) {
        e.cloud_step(
            op,
            no,
            "heat.wait_update",
            || {
                e.cloud.wait_stack(
                    stack,
                    &[StackStatus::UpdateComplete],
                    e.limits.stack_timeout,
                )
            },
            |_| Ok(()),
        )
        .await?;
    }
    no += 1;
    let after = if done_cloud(no) {
        e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?
    } else {
        read_vnfcs(e, op, pkg, stack, no, individual.map(|(a, _)| a)).await?
    };
    no += 1;
    if let Some((a, _)) = individual {
        adjusted::verify(&after, a)?;
    }
    Ok((after, no))
}

/// ROLLBACK of a failed INSTANTIATE: delete the stack (found by name if its id was never
/// recorded), forget the VNFCs and the journal; the instance stays `NOT_INSTANTIATED`.
pub(super) async fn roll_back<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
) -> Result<(), EngineError> {
    let stack_name = format!("vnf-{}", op.vnf_instance_id);
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
                &[StackStatus::DeleteComplete],
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
