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
//! Source: `seeds/pv-k8s-cluster` (instantiate_end), `research/tacker-anchor.md` §1.1.

use std::collections::BTreeMap;
use std::path::Path;

use super::steps::Host;
use super::{Engine, EngineError, StepFailure, now};
use crate::cloud::{Cloud, StackCreate, StackRef};
use crate::intake::wire::Secret;
use crate::intake::wire::params::K8sClusterInstallationParam;
use crate::intake::wire::sol003::InstantiateVnfRequest;
use crate::model::InstantiationState;
use crate::package::VnfPackage;
use crate::plan;
use crate::recipes::{self, Export, VolumeSetup};
use crate::remote::{Auth, HostKeyPolicy, Target};
use crate::store::{OperationRow, VnfcRow};

/// Where the package's install script is put on each node.
const SCRIPT_DIR: &str = "/usr/local/lib/vnfkeeper";
/// Where PersistentVolume manifests are put on the master.
const MANIFEST_DIR: &str = "/tmp";

/// The inputs of an instantiate, read from the operation and its package.
struct Inputs {
    req: InstantiateVnfRequest,
    pkg: VnfPackage,
    k8s: Option<K8sClusterInstallationParam>,
}

fn inputs<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<Inputs, EngineError> {
    let (params, package) =
        e.db.with(|s| s.reader().operation_params(&op.id))?
            .ok_or_else(|| StepFailure::input("plan", "operation vanished"))?;
    let req: InstantiateVnfRequest = serde_json::from_str(&params)
        .map_err(|_| StepFailure::input("plan", "stored InstantiateVnfRequest does not parse"))?;
    let package =
        package.ok_or_else(|| StepFailure::input("plan", "INSTANTIATE without a VNF package"))?;
    let pkg = VnfPackage::load(Path::new(&package))
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    let k8s = req
        .additional_params
        .as_ref()
        .and_then(|a| a.k8s_cluster_installation_param.clone());
    Ok(Inputs { req, pkg, k8s })
}

pub(super) async fn run<C: Cloud>(e: &Engine<C>, op: &OperationRow) -> Result<(), EngineError> {
    let Inputs { req, pkg, k8s } = inputs(e, op)?;
    let hot = pkg
        .base_hot(&req.flavour_id)
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    let nfv = plan::nfv::instantiate_parameters(&pkg.vnfd, &req)
        .map_err(|err| StepFailure::input("plan", err.to_string()))?;
    let stack_name = format!("vnf-{}", op.vnf_instance_id);

    // 1. Create the stack, or adopt the one a previous attempt created.
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
    // N of "step k/N": 3 cloud steps, then stages that depend only on the request.
    let total = 3 + k8s.as_ref().map_or(0, |k| {
        let storage = k
            .storage_server
            .as_ref()
            .map_or(0, |ss| 2 * ss.cinder_volume_setup_params.len() + 3);
        2 + storage + 2 * k.pv_registration_params.len()
    }) as i64;
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
                e.cloud
                    .wait_stack(&stack, &["CREATE_COMPLETE"], e.limits.stack_timeout)
            },
            |_| Ok(()),
        )
        .await?;
    }

    // 3. Read the VNFCs.
    let vnfcs = if done_cloud(3) {
        e.db.with(|s| s.reader().vnfcs(&op.vnf_instance_id))?
    } else {
        read_vnfcs(e, op, &pkg, &stack, 3).await?
    };
    let Some(k8s) = k8s else {
        // No cluster to configure (e.g. a plain VNF): the stack is the whole job.
        return finish(e, op, &req, &pkg);
    };

    // Roles by the VDU that owns each role's SSH CP.
    let vdu_of_cp = |cp: &str| plan::roles::vdu_of_cp(&pkg.vnfd, cp);
    let role = |cp: &str, what: &str| {
        vdu_of_cp(cp).ok_or_else(|| {
            StepFailure::input(
                "plan",
                format!("{what}.ssh_cp_name `{cp}` is not a CP of the VNFD"),
            )
        })
    };
    let master_vdu = role(&k8s.master_node.ssh_cp_name, "master_node")?;
    let worker_vdu = role(&k8s.worker_node.ssh_cp_name, "worker_node")?;
    let masters = hosts(
        &vnfcs,
        &master_vdu,
        &k8s.master_node.ssh_cp_name,
        &k8s.master_node.username,
        &k8s.master_node.password,
    )?;
    let workers = hosts(
        &vnfcs,
        &worker_vdu,
        &k8s.worker_node.ssh_cp_name,
        &k8s.worker_node.username,
        &k8s.worker_node.password,
    )?;
    let first_master = masters
        .first()
        .cloned()
        .ok_or_else(|| StepFailure::input("plan", "the stack has no master VNFC"))?;
    let master_ip = first_master.target.address.to_string();

    // Cluster install: the first master alone, then everyone else in parallel.
    let script_body = pkg
        .read(&k8s.script_path)
        .map_err(|err| StepFailure::input("k8s.install", err.to_string()))?;
    let script_name = Path::new(&k8s.script_path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let script = format!("{SCRIPT_DIR}/{script_name}");
    let mut master_args = vec!["-i".to_owned(), master_ip.clone()];
    if let Some(p) = &k8s.master_node.pod_cidr {
        master_args.extend(["-p".to_owned(), p.clone()]);
    }
    let mut no = 4;
    e.stage(
        op,
        no,
        vec![(
            recipes::k8s_install(
                &first_master.vnfc_id,
                &script,
                script_body.clone(),
                master_args.clone(),
            ),
            first_master.clone(),
        )],
    )
    .await?;
    no += 1;
    let mut joins = Vec::new();
    for m in masters.iter().skip(1) {
        joins.push((
            recipes::k8s_install(
                &m.vnfc_id,
                &script,
                script_body.clone(),
                master_args.clone(),
            ),
            m.clone(),
        ));
    }
    for w in &workers {
        let args = vec![
            "-w".to_owned(),
            w.target.address.to_string(),
            "-i".to_owned(),
            master_ip.clone(),
        ];
        joins.push((
            recipes::k8s_install(&w.vnfc_id, &script, script_body.clone(), args),
            w.clone(),
        ));
    }
    e.stage(op, no, joins).await?;
    no += 1;

    if let Some(ss) = &k8s.storage_server {
        let ss_vdu = role(&ss.ssh_cp_name, "storage_server")?;
        let storage = hosts(&vnfcs, &ss_vdu, &ss.ssh_cp_name, &ss.username, &ss.password)?;
        let server = storage
            .first()
            .cloned()
            .ok_or_else(|| StepFailure::input("plan", "the stack has no storage server VNFC"))?;
        let ss_row = vnfcs
            .iter()
            .find(|v| v.id == server.vnfc_id)
            .ok_or_else(|| StepFailure::input("plan", "the storage server VNFC vanished"))?;
        let attached: Vec<plan::vnfcs::AttachedVolume> = ss_row
            .volumes
            .as_deref()
            .and_then(|v| serde_json::from_str(v).ok())
            .unwrap_or_default();
        let mut setups = Vec::new();
        for c in &ss.cinder_volume_setup_params {
            let vol = attached
                .iter()
                .find(|a| a.resource.as_deref() == Some(c.volume_resource_id.as_str()))
                .ok_or_else(|| {
                    StepFailure::input(
                        "storage",
                        format!(
                            "volume resource `{}` is not attached to the storage server",
                            c.volume_resource_id
                        ),
                    )
                })?;
            setups.push(VolumeSetup {
                volume_id: vol.volume_id.clone(),
                device: vol.device.clone().unwrap_or_else(|| "/dev/vdb".into()),
                mount_to: c.mount_to.clone(),
            });
        }
        for step in recipes::storage_volumes(&server.vnfc_id, &setups) {
            e.stage(op, no, vec![(step, server.clone())]).await?;
            no += 1;
        }
        let exports: Vec<Export> = ss
            .nfs_server_setup_params
            .iter()
            .map(|x| Export {
                dir: x.export_dir.clone(),
                to: x.export_to.clone(),
            })
            .collect();
        for step in recipes::nfs_server(&server.vnfc_id, &op.vnf_instance_id, &exports) {
            e.stage(op, no, vec![(step, server.clone())]).await?;
            no += 1;
        }
        let clients = masters
            .iter()
            .chain(workers.iter())
            .map(|h| (recipes::nfs_client(&h.vnfc_id), h.clone()))
            .collect();
        e.stage(op, no, clients).await?;
        no += 1;

        // PersistentVolumes, registered on the first master.
        let cp_addr = cp_addresses(&vnfcs);
        for p in &k8s.pv_registration_params {
            let server_ip = cp_addr.get(&p.nfs_server_cp).ok_or_else(|| {
                StepFailure::input(
                    "pv.register",
                    format!(
                        "nfs_server_cp `{}` has no address in the stack",
                        p.nfs_server_cp
                    ),
                )
            })?;
            let text = pkg
                .read_text(&p.pv_manifest_file_path)
                .map_err(|err| StepFailure::input("pv.register", err.to_string()))?;
            let pv = recipes::pv::with_nfs_server(&p.pv_manifest_file_path, &text, server_ip)
                .map_err(|err| StepFailure::input("pv.register", err.to_string()))?;
            let dir = format!("{MANIFEST_DIR}/vnfkeeper-{}", op.vnf_instance_id);
            for step in recipes::pv::register(
                &first_master.vnfc_id,
                &dir,
                &pv,
                server_ip,
                e.limits.pv_wait,
            ) {
                e.stage(op, no, vec![(step, first_master.clone())]).await?;
                no += 1;
            }
        }
    }
    finish(e, op, &req, &pkg)
}

fn finish<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    req: &InstantiateVnfRequest,
    pkg: &VnfPackage,
) -> Result<(), EngineError> {
    let package = pkg.root().display().to_string();
    e.db.write(|tx| {
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

/// Lists the stack's resources, servers, ports and volumes and records the VNFCs.
pub(super) async fn read_vnfcs<C: Cloud>(
    e: &Engine<C>,
    op: &OperationRow,
    pkg: &VnfPackage,
    stack: &StackRef,
    step_no: i64,
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
            Ok(plan::vnfcs::observe(
                &pkg.vnfd, &resources, &servers, &ports, &volumes,
            ))
        },
        |observed| {
            stored =
                e.db.write(|tx| tx.sync_vnfcs(&op.vnf_instance_id, observed, now()))?;
            Ok(())
        },
    )
    .await?;
    Ok(stored)
}

/// CP name → address over every VNFC (shared with reconcile: `plan::roles`).
fn cp_addresses(vnfcs: &[VnfcRow]) -> BTreeMap<String, String> {
    plan::roles::cp_addresses(vnfcs)
}

/// SSH access to the VNFCs of `vdu`, by the address of `ssh_cp`, oldest first.
fn hosts(
    vnfcs: &[VnfcRow],
    vdu: &str,
    ssh_cp: &str,
    username: &str,
    password: &Secret<String>,
) -> Result<Vec<Host>, EngineError> {
    let mut out = Vec::new();
    for v in vnfcs.iter().filter(|v| v.vdu_id == vdu) {
        let addr = plan::roles::cp_address(v, ssh_cp).ok_or_else(|| {
            StepFailure::input(
                "plan",
                format!("VNFC {} has no address on CP `{ssh_cp}`", v.id),
            )
        })?;
        out.push(Host {
            vnfc_id: v.id.clone(),
            target: Target {
                address: addr,
                port: 22,
                username: username.to_owned(),
                auth: Auth::Password(password.clone()),
                host_key: v
                    .host_key
                    .clone()
                    .map(HostKeyPolicy::Pinned)
                    .unwrap_or(HostKeyPolicy::TrustOnFirstUse),
                label: v.id.clone(),
            },
            secrets: vec![password.clone()],
        });
    }
    Ok(out)
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
            .wait_stack(&stack, &["DELETE_COMPLETE"], e.limits.stack_timeout)
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
