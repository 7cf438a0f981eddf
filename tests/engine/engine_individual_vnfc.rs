//! Individual VNFC management (one Heat resource per VNFC) on the testbed (needs root): a VNF from
//! `fixtures/packages/individual-vnfc-management` (BaseHOT without AutoScalingGroup) goes through
//! INSTANTIATE (2 VNFCs), SCALE_OUT by 1, HEAL of one VNFC with a new image, SCALE_IN by 1 and
//! TERMINATE; requests go through intake, the engine runs them against the simulated cloud whose
//! servers are real SSH hosts, and the test reads Nova (server ids, images, zones) and Heat (the
//! top-level resources `VDU1-<index>`).
//!
//! A Heat failure in the scale-out leaves the operation in FAILED_TEMP with its adjusted HOT
//! stored; the RETRY sends the same documents (one `HOT_ADJUSTED` decision per operation).
//!
//! Zones come from the requests' `additionalParams.nfv.VDU.<VDU1-i>.locationConstraints`
//! (the engine has no NFVO: its derived Grant names no zones); the heal's new image from
//! `additionalParams.nfv.VDU.VDU1-1.vcImageId`.

use crate::support;
use vnfkeeper_core::model::{OpOccId, OperationState, VnfInstanceId};

use std::collections::BTreeMap;

use serde_json::{Value, json};
use support::bed::{Bed, fast_limits};
use testbed::cloud::FaultRule;
use vnfkeeper::cloud::{Cloud, Server, StackRef};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::store::VnfcRow;

pub(super) const VNF: &str = "vnf-individual-vnfc";
const NEW_IMAGE: &str = "5f0d9c3e-7a41-4b8e-9d2a-0c6f1e2b3a4d";

fn fixture(name: &str) -> Value {
    let path = support::repo_root()
        .join("fixtures/requests/good")
        .join(name);
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Submits `envelope`, runs the operation, checks it COMPLETED with `steps_total` = its last
/// step; returns the op id.
async fn run(bed: &Bed, envelope: &Value) -> OpOccId {
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
    let journal = bed.db.with(|s| s.reader().journal(&op)).unwrap();
    let last = journal.iter().map(|j| j.step_no).max();
    let total = bed.db.with(|s| s.reader().steps_total(&op)).unwrap();
    assert_eq!(total, last, "steps_total of {op}");
    op
}

/// `<VDU>-<index>` → row, for the instance's VNFC rows.
pub(super) fn rows(bed: &Bed) -> BTreeMap<String, VnfcRow> {
    bed.db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(VNF)))
        .unwrap()
        .into_iter()
        .map(|r| {
            let i = r
                .vnfc_index
                .expect("individually managed VNFCs have an index");
            (format!("{}-{i}", r.vdu_id), r)
        })
        .collect()
}

/// The instance's top-level stack.
pub(super) fn stack(bed: &Bed) -> StackRef {
    let i = bed
        .db
        .with(|s| s.reader().instances())
        .unwrap()
        .into_iter()
        .find(|i| i.id == VNF)
        .unwrap();
    StackRef::new(i.stack_name.unwrap(), i.stack_id.unwrap())
}

/// Nova's view: server id → server.
pub(super) async fn nova(bed: &Bed) -> BTreeMap<String, Server> {
    bed.cloud
        .servers()
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.id.clone(), s))
        .collect()
}

/// Names of the top-level resources of the stack.
async fn top_resources(bed: &Bed) -> Vec<String> {
    let mut v: Vec<String> = bed
        .cloud
        .stack_resources(&stack(bed), 0)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.parent_resource.is_none())
        .map(|r| r.resource_name)
        .collect();
    v.sort();
    v
}

fn server_of(r: &VnfcRow) -> String {
    r.server_id.clone().unwrap()
}

/// The VNFC's stored parameters.
fn params(r: &VnfcRow) -> Value {
    r.parameters.clone().expect("parameters stored")
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn instantiate_scale_out_heal_scale_in_touch_only_their_vnfc() {
    let bed = Bed::new("vki", 68, fast_limits()).await;

    // INSTANTIATE at instantiation_level_2: VDU1-0 (zone-x) and VDU1-1 (zone-y).
    let inst = run(
        &bed,
        &fixture("individual-vnfc-management.10-instantiate.json"),
    )
    .await;
    let r0 = rows(&bed);
    assert_eq!(r0.keys().collect::<Vec<_>>(), ["VDU1-0", "VDU1-1"]);
    assert_eq!(top_resources(&bed).await, ["VDU1-0", "VDU1-1"]);
    let n0 = nova(&bed).await;
    let cirros = n0[&server_of(&r0["VDU1-0"])].image.clone().unwrap();
    for (name, zone) in [("VDU1-0", "zone-x"), ("VDU1-1", "zone-y")] {
        let s = &n0[&server_of(&r0[name])];
        assert_eq!(s.availability_zone.as_deref(), Some(zone), "{name}");
        assert_eq!(s.name, name, "computeName");
        assert_eq!(
            params(&r0[name])["VDU"][name]["locationConstraints"],
            zone,
            "{name}'s stored parameters"
        );
    }
    assert_eq!(
        params(&r0["VDU1-1"])["CP"]["VDU1_CP1-1"]["network"],
        "67c837dc-c247-4a3e-ac0f-5603bfef1ba3"
    );
    hosts_answer(&bed, &r0.values().map(server_of).collect::<Vec<_>>()).await;
    let plan: Value = serde_json::from_str(
        &bed.db
            .with(|s| s.reader().operation_plan(&inst))
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plan["adjusted"]["created"], json!(["VDU1-0", "VDU1-1"]));

    // SCALE_OUT by 1: VDU1-2 in zone-z; VDU1-0 and VDU1-1 keep their servers. Heat first
    // refuses the update (400): the operation stops in FAILED_TEMP with its adjusted HOT stored,
    // and the RETRY sends that same plan.
    bed.tb.cloud().add_api_fault(
        "orchestration",
        FaultRule {
            status: Some(400),
            count: Some(1),
            probability: 1.0,
            method: Some("PUT".into()),
            ..FaultRule::default()
        },
    );
    let mut out = fixture("individual-vnfc-management.20-scale-out.json");
    out["request"]["additionalParams"] =
        json!({"nfv": {"VDU": {"VDU1-2": {"locationConstraints": "zone-z"}}}});
    let op = match bed.submit(&serde_json::to_vec(&out).unwrap()) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("not accepted: {other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    assert_eq!(state, OperationState::FailedTemp);
    let error = bed.error_of(&op).unwrap();
    assert!(error.contains("heat.update"), "{error}");
    assert_eq!(
        top_resources(&bed).await,
        ["VDU1-0", "VDU1-1"],
        "nothing changed"
    );
    let stored = bed.db.with(|s| s.reader().operation_plan(&op)).unwrap();
    let retry = json!({"operation": "RETRY", "vnfLcmOpOccId": op, "requestId": "retry-scale-out"});
    bed.submit(&serde_json::to_vec(&retry).unwrap());
    let state = bed.engine.run(&op).await.unwrap();
    if state != OperationState::Completed {
        bed.print_journal(&op);
    }
    assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));
    // RETRY follows the stored plan: the same decision, the same stages (the flavour hook's
    // placeholder at the end is replaced by its expansion, here empty).
    let decided = |text: Option<String>| {
        let mut v: serde_json::Value = serde_json::from_str(&text.unwrap()).unwrap();
        let stages: Vec<serde_json::Value> = v["stages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["action"].get("expand").is_none())
            .cloned()
            .collect();
        v.as_object_mut().unwrap().remove("stages");
        (v, stages)
    };
    assert_eq!(
        decided(bed.db.with(|s| s.reader().operation_plan(&op)).unwrap()),
        decided(stored),
        "RETRY follows the stored plan"
    );
    let r1 = rows(&bed);
    assert_eq!(
        r1.keys().collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU1-2"]
    );
    assert_eq!(top_resources(&bed).await, ["VDU1-0", "VDU1-1", "VDU1-2"]);
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
    let plan: Value = serde_json::from_str(
        &bed.db
            .with(|s| s.reader().operation_plan(&op))
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert!(
        plan["adjusted"]["templatePatch"]["resources"]["VDU1-2"].is_object(),
        "the merge patch is kept for audit: {plan}"
    );
    assert_eq!(
        plan["adjusted"]["templatePatch"]["resources"]
            .as_object()
            .unwrap()
            .len(),
        1,
        "only VDU1-2 changes"
    );
    let levels = &bed.db.with(|s| s.reader().instances()).unwrap()[0].scale_status;
    assert_eq!(levels.get("VDU1_scale"), Some(&2));
    // Intake's level check holds for an individually managed aspect: level 2 is the maximum.
    let mut too_far = fixture("individual-vnfc-management.20-scale-out.json");
    too_far["requestId"] = json!("too-far");
    match bed.submit(&serde_json::to_vec(&too_far).unwrap()) {
        Outcome::Rejected { problem, .. } => {
            assert_eq!(problem.status, 422);
            assert_eq!(problem.errors[0].pointer, "/request/numberOfSteps");
        }
        other => panic!("{other:?}"),
    }

    // HEAL of VDU1-1 (named `<VDU>-<index>`) with a new image: only its server is rebuilt.
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
        r2.keys().collect::<Vec<_>>(),
        ["VDU1-0", "VDU1-1", "VDU1-2"]
    );
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
    for name in ["VDU1-0", "VDU1-2"] {
        assert_eq!(
            n2[&server_of(&r2[name])].image.as_deref(),
            Some(cirros.as_str()),
            "{name} keeps the VNFD image"
        );
    }
    assert_eq!(
        params(&r2["VDU1-1"])["VDU"]["VDU1-1"]["vcImageId"],
        NEW_IMAGE
    );
    hosts_answer(&bed, &[server_of(&r2["VDU1-1"])]).await;

    // SCALE_IN by 1: the highest index, VDU1-2, goes; the others keep their servers.
    run(
        &bed,
        &fixture("individual-vnfc-management.40-scale-in.json"),
    )
    .await;
    let r3 = rows(&bed);
    assert_eq!(r3.keys().collect::<Vec<_>>(), ["VDU1-0", "VDU1-1"]);
    assert_eq!(top_resources(&bed).await, ["VDU1-0", "VDU1-1"]);
    for name in ["VDU1-0", "VDU1-1"] {
        assert_eq!(
            server_of(&r3[name]),
            server_of(&r2[name]),
            "{name} untouched"
        );
    }
    let n3 = nova(&bed).await;
    assert!(
        !n3.contains_key(&server_of(&r2["VDU1-2"])),
        "VDU1-2's server deleted"
    );
    assert_eq!(
        n3[&server_of(&r3["VDU1-1"])].image.as_deref(),
        Some(NEW_IMAGE),
        "the healed image stays"
    );
    let levels = &bed.db.with(|s| s.reader().instances()).unwrap()[0].scale_status;
    assert_eq!(levels.get("VDU1_scale"), Some(&1));

    // Every stack change is audited with its merge patches.
    let db = rusqlite::Connection::open(bed.dir.path().join("state.db")).unwrap();
    let adjusted: i64 = db
        .query_row(
            "SELECT COUNT(*) FROM event WHERE kind = 'HOT_ADJUSTED' AND vnf_instance_id = ?1",
            [VNF],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(adjusted, 4);

    // TERMINATE deletes the stack and forgets the VNFCs.
    run(
        &bed,
        &fixture("individual-vnfc-management.90-terminate.json"),
    )
    .await;
    assert!(rows(&bed).is_empty());
    assert!(nova(&bed).await.is_empty());
}

/// ROLLBACK of a SCALE_OUT that failed after Heat created its VNFC (Tacker's `scale_rollback`):
/// Nova refuses the listing of `heat.read_vnfcs` (400), the operation stops in FAILED_TEMP with
/// VDU1-2 in the stack; the ROLLBACK removes exactly VDU1-2 (its server, its port, its `nfv`
/// entries), keeps VDU1-0 and VDU1-1 with their servers, ports, rows and pinned host keys, ends
/// ROLLED_BACK with the scale level unchanged, and a later SCALE_OUT works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn rollback_of_a_failed_scale_out_removes_only_the_added_vnfc() {
    let bed = Bed::new("vkw", 81, fast_limits()).await;
    run(
        &bed,
        &fixture("individual-vnfc-management.10-instantiate.json"),
    )
    .await;
    let r0 = rows(&bed);
    assert_eq!(r0.keys().collect::<Vec<_>>(), ["VDU1-0", "VDU1-1"]);
    let n0 = nova(&bed).await;
    let ports0: Vec<String> = {
        let mut v: Vec<String> = bed
            .cloud
            .ports()
            .await
            .unwrap()
            .into_iter()
            .map(|p| p.id)
            .collect();
        v.sort();
        v
    };

    bed.tb.cloud().add_api_fault(
        "compute",
        FaultRule {
            status: Some(400),
            count: Some(1),
            probability: 1.0,
            method: Some("GET".into()),
            path_contains: Some("/servers".into()),
            ..FaultRule::default()
        },
    );
    let op = match bed.submit(
        &serde_json::to_vec(&fixture("individual-vnfc-management.20-scale-out.json")).unwrap(),
    ) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("not accepted: {other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    assert_eq!(state, OperationState::FailedTemp);
    let error = bed.error_of(&op).unwrap();
    assert!(error.contains("heat.read_vnfcs"), "{error}");
    assert_eq!(
        top_resources(&bed).await,
        ["VDU1-0", "VDU1-1", "VDU1-2"],
        "the failed scale-out got as far as Heat"
    );
    assert_eq!(nova(&bed).await.len(), 3);

    let rollback =
        json!({"operation": "ROLLBACK", "vnfLcmOpOccId": op, "requestId": "rollback-scale-out"});
    bed.submit(&serde_json::to_vec(&rollback).unwrap());
    let state = bed.engine.run(&op).await.unwrap();
    if state != OperationState::RolledBack {
        bed.print_journal(&op);
    }
    assert_eq!(state, OperationState::RolledBack, "{:?}", bed.error_of(&op));

    assert_eq!(top_resources(&bed).await, ["VDU1-0", "VDU1-1"]);
    let r1 = rows(&bed);
    assert_eq!(r1.keys().collect::<Vec<_>>(), ["VDU1-0", "VDU1-1"]);
    for name in ["VDU1-0", "VDU1-1"] {
        assert_eq!(r1[name].id, r0[name].id, "{name} keeps its VNFC id");
        assert_eq!(
            server_of(&r1[name]),
            server_of(&r0[name]),
            "{name} untouched"
        );
        assert_eq!(
            r1[name].host_key, r0[name].host_key,
            "{name} keeps its pinned key"
        );
        assert_eq!(
            params(&r1[name]),
            params(&r0[name]),
            "{name} keeps its nfv slice"
        );
    }
    let n1 = nova(&bed).await;
    assert_eq!(
        n1.keys().collect::<Vec<_>>(),
        n0.keys().collect::<Vec<_>>(),
        "only the added server is gone"
    );
    let mut ports1: Vec<String> = bed
        .cloud
        .ports()
        .await
        .unwrap()
        .into_iter()
        .map(|p| p.id)
        .collect();
    ports1.sort();
    assert_eq!(ports1, ports0, "only the added port is gone");
    let shown = bed.cloud.stack(&stack(&bed)).await.unwrap();
    let nfv: Value = match shown.parameters.get("nfv") {
        Some(Value::String(t)) => serde_json::from_str(t).unwrap(),
        Some(v) => v.clone(),
        None => panic!("no nfv parameter"),
    };
    assert!(nfv["VDU"].get("VDU1-2").is_none(), "{nfv}");
    assert!(nfv["CP"].get("VDU1_CP1-2").is_none(), "{nfv}");
    let levels = &bed.db.with(|s| s.reader().instances()).unwrap()[0].scale_status;
    assert_eq!(
        levels.get("VDU1_scale"),
        Some(&1),
        "level before the scale-out"
    );
    let plan: Value = serde_json::from_str(
        &bed.db
            .with(|s| s.reader().operation_plan(&op))
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(plan["rollback"]["adjusted"]["removed"], json!(["VDU1-2"]));
    assert!(
        plan["rollback"]["stages"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["key"].as_str().unwrap().starts_with("rollback:")),
        "{plan}"
    );

    // The instance goes on: the next SCALE_OUT creates VDU1-2 again.
    let mut again = fixture("individual-vnfc-management.20-scale-out.json");
    again["requestId"] = json!("scale-out-after-rollback");
    run(&bed, &again).await;
    assert_eq!(top_resources(&bed).await, ["VDU1-0", "VDU1-1", "VDU1-2"]);
    hosts_answer(&bed, &[server_of(&rows(&bed)["VDU1-2"])]).await;
}
