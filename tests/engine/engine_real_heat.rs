//! The engine against real Keystone 30.0.0 and real Heat 27.0.1 (needs root; PyPI and the
//! Debian packages mariadb-server and rabbitmq-server the first time, see
//! `scripts/openstack-venv`): the testbed runs them beside its simulated Nova, Neutron, Cinder and
//! Glance, whose servers are real SSH hosts. A VNF from
//! `fixtures/packages/individual-vnfc-management` goes through INSTANTIATE (2 VNFCs), SCALE_OUT
//! by 1 (PATCH update with `existing`), HEAL of one VNFC with a new image (mark-unhealthy of its
//! server, then an update) and TERMINATE; then, on the same control plane, the PV flavour
//! (`fixtures/packages/pv-k8s-cluster`) goes through INSTANTIATE, a HEAL of its storage server
//! (stopped and its volume detached before Heat's update, the volume attached to the new server
//! with its file system and NFS export intact) and TERMINATE; requests go through intake, the
//! engine runs them, and
//! the test reads the stack from the real Heat and the servers and ports from the simulated
//! Nova and Neutron, which only real Heat called (the simulated Heat answers no request).

use crate::support;
use vnfkeeper_core::model::{OpOccId, OperationState, VnfInstanceId};

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{Value, json};
use support::bed::{Bed, fast_limits};
use vnfkeeper::cloud::{Cloud, Server, StackResource};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::store::VnfcRow;

use super::engine_individual_vnfc::{VNF, nova, rows, stack};
/// The network of the instantiate request's external virtual link.
const EXT_NET: &str = "67c837dc-c247-4a3e-ac0f-5603bfef1ba3";
const NEW_IMAGE: &str = "5f0d9c3e-7a41-4b8e-9d2a-0c6f1e2b3a4d";

fn fixture(name: &str) -> Value {
    let path = support::repo_root()
        .join("fixtures/requests/good")
        .join(name);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Submits `envelope`, runs the operation, checks it COMPLETED; returns the op id.
async fn run(bed: &Bed, envelope: &Value) -> OpOccId {
    let t0 = Instant::now();
    let op = match bed.submit(&serde_json::to_vec(envelope).unwrap()) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("not accepted: {other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    if state != OperationState::Completed {
        bed.print_journal(&op);
    }
    assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));
    eprintln!(
        "{} against real Heat: {:.1} s",
        envelope["operation"],
        t0.elapsed().as_secs_f64()
    );
    op
}

/// The real Heat's resources of the stack, nested ones included: (parent or "", name) → resource.
async fn heat(bed: &Bed) -> BTreeMap<(String, String), StackResource> {
    bed.cloud
        .stack_resources(&stack(bed), 2)
        .await
        .unwrap()
        .into_iter()
        .map(|r| {
            (
                (
                    r.parent_resource.clone().unwrap_or_default(),
                    r.resource_name.clone(),
                ),
                r,
            )
        })
        .collect()
}

/// Checks that the real Heat's stack holds exactly `vnfcs` as top-level `VDU1.yaml` resources,
/// each with its server (the VNFC row's) and port (attached to that server) complete.
async fn assert_stack(bed: &Bed, vnfcs: &[&str]) {
    let res = heat(bed).await;
    let top: Vec<&str> = res
        .keys()
        .filter(|(p, _)| p.is_empty())
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(top, vnfcs, "top-level resources");
    let rows = rows(bed);
    let ports: BTreeMap<String, vnfkeeper::cloud::Port> = bed
        .cloud
        .ports()
        .await
        .unwrap()
        .into_iter()
        .map(|p| (p.id.clone(), p))
        .collect();
    for v in vnfcs {
        let t = &res[&(String::new(), v.to_string())];
        assert_eq!(t.resource_type, "VDU1.yaml", "{v}");
        assert!(t.resource_status.ends_with("_COMPLETE"), "{v}: {t:?}");
        let server = &res[&(v.to_string(), "VDU1".to_string())];
        assert_eq!(server.resource_type, "OS::Nova::Server");
        assert!(server.resource_status.ends_with("_COMPLETE"), "{server:?}");
        assert_eq!(
            server.physical_resource_id,
            rows[*v].server_id.clone().unwrap(),
            "{v}: the VNFC's server is the stack's"
        );
        let port = &res[&(v.to_string(), "VDU1_CP1".to_string())];
        assert_eq!(port.resource_type, "OS::Neutron::Port");
        let p = &ports[&port.physical_resource_id];
        assert_eq!(
            p.device_id, server.physical_resource_id,
            "{v}: port attached"
        );
        assert_eq!(p.network_id, EXT_NET, "{v}: port on the external network");
    }
}

/// The first address of a server.
fn address(s: &Server) -> String {
    s.addresses
        .values()
        .flatten()
        .next()
        .map(|a| a.addr.clone())
        .unwrap_or_default()
}

/// Each server is a real host answering as itself.
async fn hosts_answer(bed: &Bed, servers: &[String]) {
    for s in servers {
        let out = bed.farm.exec(s, "cat /etc/hostname").await.unwrap();
        assert!(
            !String::from_utf8_lossy(&out.stdout).trim().is_empty(),
            "host of server {s} answers"
        );
    }
}

fn server_of(r: &VnfcRow) -> String {
    r.server_id.clone().unwrap()
}

/// The PV flavour's VNF, healed on the same control plane.
const PV_VNF: &str = "vnf-pv-k8s-cluster";
/// A file on the storage server's kept volume (under pv1's NFS export).
const FILE_ON_PV: &str = "/volume/nfs/pv1/kept-across-heal.txt";

/// The PV VNF's VNFC rows.
fn pv_rows(bed: &Bed) -> Vec<VnfcRow> {
    bed.db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(PV_VNF)))
        .unwrap()
}

/// HEAL of one VNFC of the PV VNF.
fn heal_storage(vnfc: &str) -> Value {
    json!({
        "operation": "HEAL",
        "vnfInstanceId": PV_VNF,
        "requestId": "vnf-pv-k8s-cluster.40-real-heat",
        "request": {"vnfcInstanceId": [vnfc], "cause": "storage server rebuilt on real Heat"}
    })
}

/// Registers the networks and images the adjusted HOT of `request` names in the simulation (a
/// real Heat looks them up; `vnfkeeper hot adjust` says which).
fn register(bed: &Bed, package: &str, request: &str) {
    let root = support::repo_root();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .current_dir(&root)
        .args(["hot", "adjust", "--package"])
        .arg(root.join("fixtures/packages").join(package))
        .args([
            "--flavour",
            "simple",
            "--operation",
            "instantiate",
            "--request",
        ])
        .arg(root.join("fixtures/requests/good").join(request))
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let adjusted: Value = serde_json::from_slice(&out.stdout).unwrap();
    let nfv = &adjusted["parameters"]["nfv"];
    for cp in nfv["CP"].as_object().into_iter().flatten() {
        if let Some(n) = cp.1["network"].as_str() {
            bed.tb.cloud().add_network(n);
        }
    }
    for vdu in nfv["VDU"].as_object().into_iter().flatten() {
        if let Some(i) = vdu.1["vcImageId"].as_str() {
            bed.tb.cloud().set_image_properties(i, BTreeMap::new());
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces), MariaDB and RabbitMQ"]
async fn instantiate_scale_out_heal_terminate_through_real_heat() {
    let t0 = Instant::now();
    let bed = Bed::new_real("vkrh", 101, fast_limits()).await;
    let real = bed.tb.real().expect("a real control plane");
    eprintln!(
        "real control plane up in {:.1} s (testbed with hosts: {:.1} s), {} MiB resident",
        real.start_time.as_secs_f64(),
        t0.elapsed().as_secs_f64(),
        real.rss_kib() / 1024
    );
    // What the request and the heal name exists in Neutron and Glance: a real Heat looks them
    // up (the simulated one records whatever a template names).
    bed.tb.cloud().add_network(EXT_NET);
    bed.tb
        .cloud()
        .set_image_properties(NEW_IMAGE, BTreeMap::new());

    // INSTANTIATE at instantiation_level_2: VDU1-0 (zone-x) and VDU1-1 (zone-y).
    run(
        &bed,
        &fixture("individual-vnfc-management.10-instantiate.json"),
    )
    .await;
    let r0 = rows(&bed);
    assert_eq!(r0.keys().collect::<Vec<_>>(), ["VDU1-0", "VDU1-1"]);
    assert_stack(&bed, &["VDU1-0", "VDU1-1"]).await;
    let n0 = nova(&bed).await;
    for (name, zone) in [("VDU1-0", "zone-x"), ("VDU1-1", "zone-y")] {
        let s = &n0[&server_of(&r0[name])];
        assert_eq!(s.availability_zone.as_deref(), Some(zone), "{name}");
        assert_eq!(s.name, name, "computeName");
        assert_eq!(s.status, "ACTIVE");
    }
    let cirros = n0[&server_of(&r0["VDU1-0"])].image.clone().unwrap();
    hosts_answer(&bed, &r0.values().map(server_of).collect::<Vec<_>>()).await;
    // The simulated Heat answered nothing; the servers were created through Nova's API.
    let counts = bed.tb.cloud().request_counts();
    assert!(
        counts.get("orchestration").is_none_or(|m| m.is_empty()),
        "{counts:?}"
    );
    assert!(
        counts["compute"]
            .get("POST /compute/v2.1/servers")
            .is_some_and(|n| *n >= 2),
        "{counts:?}"
    );

    // SCALE_OUT by 1 (a PATCH update with `existing`): VDU1-2 in zone-z; VDU1-0 and VDU1-1 keep
    // their servers.
    let mut out = fixture("individual-vnfc-management.20-scale-out.json");
    out["request"]["additionalParams"] =
        json!({"nfv": {"VDU": {"VDU1-2": {"locationConstraints": "zone-z"}}}});
    run(&bed, &out).await;
    let r1 = rows(&bed);
    assert_eq!(
        r1.keys().collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU1-2"]
    );
    assert_stack(&bed, &["VDU1-0", "VDU1-1", "VDU1-2"]).await;
    for name in ["VDU1-0", "VDU1-1"] {
        assert_eq!(r1[name].id, r0[name].id, "{name} keeps its VNFC id");
        assert_eq!(
            server_of(&r1[name]),
            server_of(&r0[name]),
            "{name} untouched"
        );
    }
    let n1 = nova(&bed).await;
    let new = &n1[&server_of(&r1["VDU1-2"])];
    assert_eq!(new.availability_zone.as_deref(), Some("zone-z"));
    assert_eq!(new.name, "VDU1-2");
    hosts_answer(&bed, &[server_of(&r1["VDU1-2"])]).await;
    let levels = &bed.db.with(|s| s.reader().instances()).unwrap()[0].scale_status;
    assert_eq!(levels.get("VDU1_scale"), Some(&2));

    // HEAL of VDU1-1 with a new image: Heat replaces its server (marked unhealthy) and keeps its
    // port, so the new server has the old address; the others are untouched.
    let before = &n1[&server_of(&r1["VDU1-1"])];
    let heal = json!({
        "operation": "HEAL",
        "vnfInstanceId": VNF,
        "requestId": "vnf-individual-vnfc.30-new-image",
        "request": {
            "vnfcInstanceId": ["VDU1-1"],
            "cause": "new image for VDU1-1 only",
            "additionalParams": {"nfv": {"VDU": {"VDU1-1": {"vcImageId": NEW_IMAGE}}}}
        }
    });
    run(&bed, &heal).await;
    let r2 = rows(&bed);
    assert_eq!(
        r2["VDU1-1"].id, r1["VDU1-1"].id,
        "a healed VNFC keeps its id"
    );
    assert_ne!(
        server_of(&r2["VDU1-1"]),
        server_of(&r1["VDU1-1"]),
        "VDU1-1 rebuilt"
    );
    for name in ["VDU1-0", "VDU1-2"] {
        assert_eq!(
            server_of(&r2[name]),
            server_of(&r1[name]),
            "{name} untouched"
        );
    }
    assert_stack(&bed, &["VDU1-0", "VDU1-1", "VDU1-2"]).await;
    let n2 = nova(&bed).await;
    assert!(
        !n2.contains_key(&server_of(&r1["VDU1-1"])),
        "the old VDU1-1 server is gone"
    );
    let healed = &n2[&server_of(&r2["VDU1-1"])];
    assert_eq!(healed.image.as_deref(), Some(NEW_IMAGE), "new image");
    assert_eq!(
        healed.availability_zone.as_deref(),
        Some("zone-y"),
        "zone kept"
    );
    assert_eq!(
        address(healed),
        address(before),
        "the port and its address stay"
    );
    for name in ["VDU1-0", "VDU1-2"] {
        assert_eq!(
            n2[&server_of(&r2[name])].image.as_deref(),
            Some(cirros.as_str()),
            "{name} keeps the VNFD image"
        );
    }
    hosts_answer(&bed, &[server_of(&r2["VDU1-1"])]).await;

    // TERMINATE deletes the stack in Heat, its servers and ports, and forgets the VNFCs.
    let s = stack(&bed);
    run(
        &bed,
        &fixture("individual-vnfc-management.90-terminate.json"),
    )
    .await;
    assert!(rows(&bed).is_empty());
    assert!(nova(&bed).await.is_empty());
    assert!(bed.cloud.ports().await.unwrap().is_empty(), "ports deleted");
    match bed.cloud.stack(&s).await {
        Err(e) => assert!(
            e.to_string().contains("404") || e.to_string().to_lowercase().contains("not found"),
            "{e}"
        ),
        Ok(st) => assert_eq!(st.stack_status.as_str(), "DELETE_COMPLETE", "{st:?}"),
    }
    // The PV flavour on the same control plane: a HEAL of the storage server keeps its Cinder
    // volume. Heat creates the replacement before it deletes the server, so vnfkeeper stops the
    // server and detaches the volume first; the replacement attaches it, mounts it without a
    // mkfs, and exports it again.
    let t1 = Instant::now();
    register(&bed, "pv-k8s-cluster", "pv-k8s-cluster.10-instantiate.json");
    run(&bed, &fixture("pv-k8s-cluster.10-instantiate.json")).await;
    let pv0 = pv_rows(&bed);
    let storage = pv0
        .iter()
        .find(|v| v.vdu_id == "storage_server")
        .unwrap()
        .clone();
    let old = server_of(&storage);
    let volume = storage.volumes[0].volume_id.clone();
    let out = bed
        .farm
        .exec(
            &old,
            &format!("echo written-before-heal > {FILE_ON_PV} && sync"),
        )
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(bed.farm.mkfs_log(&old).await.unwrap().len(), 1);
    let heal = run(&bed, &heal_storage(storage.id.as_str())).await;
    let stages: Vec<String> = bed
        .db
        .with(|s| s.reader().journal(&heal))
        .unwrap()
        .into_iter()
        .map(|j| j.name)
        .collect();
    let at = |name: &str| stages.iter().position(|n| n == name).unwrap_or(usize::MAX);
    assert!(
        at("pv.not_bound") < at("nova.stop")
            && at("nova.stop") < at("nova.detach_volume")
            && at("nova.detach_volume") < at("heat.mark_unhealthy")
            && at("heat.mark_unhealthy") < at("heat.update"),
        "{stages:?}"
    );
    let pv1 = pv_rows(&bed);
    let healed = pv1.iter().find(|v| v.id == storage.id).unwrap();
    let new = server_of(healed);
    assert_ne!(new, old, "the storage server was replaced");
    for v in pv1.iter().filter(|v| v.id != storage.id) {
        let was = pv0.iter().find(|b| b.id == v.id).unwrap();
        assert_eq!(v.server_id, was.server_id, "VNFC {} untouched", v.id);
    }
    assert!(
        !nova(&bed).await.contains_key(&old),
        "the old server is gone"
    );
    let vol = bed
        .cloud
        .volumes()
        .await
        .unwrap()
        .into_iter()
        .find(|v| v.id == volume)
        .expect("the volume is kept");
    assert_eq!(vol.status, "in-use");
    assert_eq!(
        vol.attachments
            .iter()
            .map(|a| a.server_id.as_str())
            .collect::<Vec<_>>(),
        [new.as_str()],
        "the volume is attached to the new server"
    );
    let read = bed
        .farm
        .exec(&new, &format!("cat {FILE_ON_PV}"))
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim(),
        "written-before-heal",
        "the filesystem is intact"
    );
    assert!(
        bed.farm.mkfs_log(&new).await.unwrap().is_empty(),
        "no mkfs on the kept volume"
    );
    // The export is back: a worker reads the file over NFS.
    let storage_ip = healed.ip_address.clone().unwrap();
    let worker = pv1.iter().find(|v| v.vdu_id == "workerNode").unwrap();
    let read = bed
        .farm
        .exec(
            &server_of(worker),
            &format!("nfs-cat nfs://{storage_ip}/volume/nfs/pv1/kept-across-heal.txt"),
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim(),
        "written-before-heal",
        "the NFS export is back: {}",
        String::from_utf8_lossy(&read.stderr)
    );
    run(&bed, &fixture("pv-k8s-cluster.90-terminate.json")).await;
    assert!(pv_rows(&bed).is_empty());
    assert!(nova(&bed).await.is_empty());
    assert!(
        bed.cloud.volumes().await.unwrap().is_empty(),
        "volume deleted"
    );
    eprintln!(
        "PV instantiate, storage heal, terminate: {:.1} s",
        t1.elapsed().as_secs_f64()
    );
    eprintln!(
        "whole test: {:.1} s, control plane {} MiB resident at the end",
        t0.elapsed().as_secs_f64(),
        bed.tb.real().map(|r| r.rss_kib() / 1024).unwrap_or(0)
    );
}
