//! A kubeadm cluster whose nodes are reached through floating IPs (needs root): the pv package
//! with an `OS::Neutron::FloatingIP` beside each node's CP port in its nested templates (the
//! shape of Tacker's packages with floating IPs, `masterNode_CP1_floating_ip`), and the request
//! naming those resources as `ssh_cp_name`, as Tacker's driver takes them. Every SSH session to
//! a node comes through the testbed's floating IP router, never to the fixed address; the
//! cluster is made on the `nic_cp_name` (fixed) addresses; the kept kubeconfig's endpoint is the
//! first master's floating address with the cluster IP as `tls-server-name`.

use crate::support;

use serde_json::Value;
use support::bed::{Bed, fast_limits};
use support::repo_root;
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper_core::model::OperationState;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn kubeadm_nodes_are_reached_through_their_floating_ips() {
    let bed = Bed::new("vkfip", 102, fast_limits()).await;
    let packages = bed.dir.path().join("packages");
    support::floating_pv_package(&packages);
    let mut req: Value = serde_json::from_slice(
        &std::fs::read(
            repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let k = &mut req["request"]["additionalParams"]["k8s_cluster_installation_param"];
    k["master_node"]["ssh_cp_name"] = "masterNode_CP1_floating_ip".into();
    k["worker_node"]["ssh_cp_name"] = "workerNode_CP2_floating_ip".into();
    let op = match bed.submit_in(&serde_json::to_vec(&req).unwrap(), &packages) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("{other:?}"),
    };
    let state = bed.engine.run(&op).await.unwrap();
    bed.print_journal(&op);
    assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));

    let vnf = req["vnfInstanceId"].as_str().unwrap();
    let rows = bed.db.with(|s| s.reader().vnfcs(&vnf.into())).unwrap();
    let router = bed.farm.floating_router_ip().to_string();
    let mut nodes = 0;
    for r in &rows {
        let (cp, fip_name) = match r.vdu_id.as_str() {
            "masterNode" => ("masterNode_CP1", "masterNode_CP1_floating_ip"),
            "workerNode" => ("workerNode_CP2", "workerNode_CP2_floating_ip"),
            _ => continue,
        };
        nodes += 1;
        let fixed = &r.cp_addresses[cp];
        let floating = &r.cp_addresses[fip_name];
        assert_ne!(fixed, floating, "{r:?}");
        let server = r.server_id.as_deref().unwrap();
        let clients = bed.farm.client_log(server).await.unwrap();
        assert!(
            !clients.is_empty() && clients.iter().all(|c| *c == router),
            "{} sessions from {clients:?}; the router is {router}",
            r.vdu_id
        );
        // The cluster knows the node by its fixed (nic_cp_name) address.
        let log = bed.farm.command_log(server).await.unwrap();
        assert!(
            log.iter()
                .any(|c| c.contains(fixed.as_str()) && c.contains("k8s.install")),
            "{log:#?}"
        );
        assert!(
            !log.iter().any(|c| c.contains(floating.as_str())
                && (c.contains("k8s.install") || c.contains("k8s.hosts"))),
            "the floating address is not the cluster's: {log:#?}"
        );
    }
    assert_eq!(nodes, 3);
    // The storage server (CP as ssh_cp_name) at its fixed address.
    let ss = rows.iter().find(|r| r.vdu_id == "storage_server").unwrap();
    let clients = bed
        .farm
        .client_log(ss.server_id.as_deref().unwrap())
        .await
        .unwrap();
    assert!(
        !clients.is_empty() && !clients.contains(&router),
        "{clients:?}"
    );

    let master = rows.iter().find(|r| r.vdu_id == "masterNode").unwrap();
    let conf = std::fs::read_to_string(bed.dir.path().join(format!("kubeconfig/{vnf}.conf")))
        .or_else(|_| {
            std::fs::read_to_string(bed.dir.path().join(format!("state/kubeconfig/{vnf}.conf")))
        })
        .expect("kept kubeconfig");
    let want = format!(
        "server: https://{}:6443\n",
        master.cp_addresses["masterNode_CP1_floating_ip"]
    );
    assert!(conf.contains(&want), "{conf}");
    assert!(
        conf.contains(&format!(
            "tls-server-name: {}\n",
            master.cp_addresses["masterNode_CP1"]
        )),
        "{conf}"
    );
}
