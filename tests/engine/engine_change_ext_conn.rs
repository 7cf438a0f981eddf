//! CHANGE_EXT_CONN on the testbed (needs root): the registry VNF (individual VNFC management,
//! reached over SSH) is instantiated, then its external CP `CP1` moves to another network. Heat
//! replaces the port and re-attaches it to the same server (the testbed moves the host to the new
//! port's address); the engine reads the VNFC again and logs in at the new address with the host
//! key it pinned before (`node.reach`). The server, the VNFC id and the pinned key stay; the
//! address and the port's network change.

use crate::support;
use vnfkeeper_core::model::{OpOccId, OperationState, StepState, VnfInstanceId};

use serde_json::{Value, json};
use support::bed::{Bed, fast_limits};
use vnfkeeper::cloud::Cloud;
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::store::VnfcRow;

const VNF: &str = "vnf-cir-registry";
const NEW_NET: &str = "3c1e0b7a-9f4d-4e62-8a51-7d2f6b0c9e14";
const OTHER_NET: &str = "9a0f4c2e-51b7-4d3a-b6e8-0c7d2f1a3b95";

async fn run(bed: &Bed, bytes: &[u8]) -> OpOccId {
    let op = match bed.submit(bytes) {
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
    op
}

fn only_row(bed: &Bed) -> VnfcRow {
    let rows = bed
        .db
        .with(|s| s.reader().vnfcs(&VnfInstanceId::from(VNF)))
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    rows.into_iter().next().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn change_ext_conn_moves_the_port_and_keeps_server_and_host_key() {
    let bed = Bed::new("vkcx", 82, fast_limits()).await;
    let inst = std::fs::read(
        support::repo_root()
            .join("fixtures/requests/good/cir-k8s-cluster.10-registry-instantiate.json"),
    )
    .unwrap();
    run(&bed, &inst).await;
    let before = only_row(&bed);
    let server = before.server_id.clone().unwrap();
    let old_ip = before.ip_address.clone().unwrap();
    assert!(
        before.host_key.is_some(),
        "the registry steps pinned the host key"
    );

    let change = json!({
        "operation": "CHANGE_EXT_CONN",
        "vnfInstanceId": VNF,
        "requestId": "registry-change-ext-conn",
        "request": {
            "extVirtualLinks": [{
                "id": "net-moved",
                "resourceId": NEW_NET,
                "extCps": [{"cpdId": "CP1", "cpConfig": [
                    {"cpProtocolData": [{"layerProtocol": "IP_OVER_ETHERNET"}]}]}]
            }]
        }
    });
    let op = run(&bed, &serde_json::to_vec(&change).unwrap()).await;

    let after = only_row(&bed);
    assert_eq!(after.id, before.id, "the VNFC keeps its id");
    assert_eq!(
        after.server_id.as_deref(),
        Some(server.as_str()),
        "the server stays"
    );
    assert_eq!(
        after.host_key, before.host_key,
        "the pinned host key is kept"
    );
    let new_ip = after.ip_address.clone().unwrap();
    assert_ne!(new_ip, old_ip, "the VNFC answers at its new port's address");
    let ports = bed.cloud.ports().await.unwrap();
    let attached: Vec<_> = ports.iter().filter(|p| p.device_id == server).collect();
    assert_eq!(attached.len(), 1, "{attached:?}");
    assert_eq!(
        attached[0].network_id, NEW_NET,
        "the port is on the new network"
    );
    assert_eq!(attached[0].fixed_ips[0].ip_address, new_ip);
    let servers = bed.cloud.servers().await.unwrap();
    assert!(
        servers.iter().any(|s| s.id == server),
        "the same Nova server"
    );
    // The engine logged in at the new address with the key pinned before.
    let journal = bed.db.with(|s| s.reader().journal(&op)).unwrap();
    let reach = journal
        .iter()
        .find(|j| j.stage_key == format!("node.reach@{}", after.id))
        .unwrap_or_else(|| panic!("no node.reach stage: {journal:?}"));
    assert_eq!(reach.state, StepState::Done);
    let out = bed
        .farm
        .exec(&server, "ip -4 -o addr show dev eth0")
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(shown.contains(&format!("{new_ip}/")), "{shown}");
    assert!(!shown.contains(&format!("{old_ip}/")), "{shown}");
    // The stored parameters and later operations use the new network.
    let params: Value = after.parameters.clone().unwrap();
    let cp = params["CP"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()
        .clone();
    assert_eq!(cp["network"], NEW_NET, "{params}");

    // The key must not change with the address: a host answering with another key fails the
    // next CHANGE_EXT_CONN at `node.reach`, and the pinned key stays.
    bed.farm.rotate_host_key(&server).await.unwrap();
    let mut back = change.clone();
    back["requestId"] = json!("registry-change-ext-conn-back");
    back["request"]["extVirtualLinks"][0]["resourceId"] = json!(OTHER_NET);
    let op = match bed.submit(&serde_json::to_vec(&back).unwrap()) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("not accepted: {other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    assert_eq!(state, OperationState::FailedTemp);
    let error = bed.error_of(&op).unwrap();
    assert!(error.contains("node.reach"), "{error}");
    assert!(
        error.contains("host_key_changed"),
        "refused for its key: {error}"
    );
    assert_eq!(
        only_row(&bed).host_key,
        before.host_key,
        "still the pinned key"
    );
}

/// A SCALE_OUT after a CHANGE_EXT_CONN puts the new VNFC's port on the changed network (the
/// instance's external VLs are the INSTANTIATE's with the change applied).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn scale_out_after_change_ext_conn_uses_the_new_network() {
    let bed = Bed::new("vkd", 85, fast_limits()).await;
    let file = |name: &str| {
        std::fs::read(
            support::repo_root()
                .join("fixtures/requests/good")
                .join(name),
        )
        .unwrap()
    };
    run(
        &bed,
        &file("individual-vnfc-management.10-instantiate.json"),
    )
    .await;
    let mut change: Value =
        serde_json::from_slice(&file("individual-vnfc-management.35-change-ext-conn.json"))
            .unwrap();
    change["request"]["extVirtualLinks"][0]["resourceId"] = json!(NEW_NET);
    run(&bed, &serde_json::to_vec(&change).unwrap()).await;
    let rows = bed
        .db
        .with(|s| {
            s.reader()
                .vnfcs(&VnfInstanceId::from("vnf-individual-vnfc"))
        })
        .unwrap();
    assert_eq!(rows.len(), 2);
    let ports = bed.cloud.ports().await.unwrap();
    for r in &rows {
        let p = ports
            .iter()
            .find(|p| Some(&p.device_id) == r.server_id.as_ref())
            .unwrap();
        assert_eq!(p.network_id, NEW_NET, "{} moved", r.id);
    }
    run(&bed, &file("individual-vnfc-management.20-scale-out.json")).await;
    let rows = bed
        .db
        .with(|s| {
            s.reader()
                .vnfcs(&VnfInstanceId::from("vnf-individual-vnfc"))
        })
        .unwrap();
    assert_eq!(rows.len(), 3);
    let new = rows.iter().find(|r| r.vnfc_index == Some(2)).unwrap();
    let ports = bed.cloud.ports().await.unwrap();
    let p = ports
        .iter()
        .find(|p| Some(&p.device_id) == new.server_id.as_ref())
        .unwrap();
    assert_eq!(
        p.network_id, NEW_NET,
        "the new VNFC is on the changed network"
    );
    assert_eq!(
        new.parameters.as_ref().unwrap()["CP"]["VDU1_CP1-2"]["network"],
        NEW_NET
    );
}
