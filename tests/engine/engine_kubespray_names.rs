//! Kubespray node names that share a prefix (needs root): with the worker VDU managed
//! individually (one `workerNode-<index>` resource per VNFC, so nodes are named `worker1` …
//! `worker10` from their index), a HEAL of `worker1` while `worker10` exists removes and
//! re-adds `worker1` only — `remove-node.yml` gets `node=worker1`, and `worker10` stays in the
//! inventory, the cluster store and the LB's backend list, its server untouched — and a SCALE_IN
//! (which removes the highest index, `worker10`) leaves `worker1` everywhere. Tacker's kubespray
//! MgmtDriver edits these lists with `sed` patterns that a name's prefix can match.

use crate::support;
use vnfkeeper_core::model::{OpOccId, OperationState, Role, VnfcRow};

use std::path::Path;

use serde_yaml_ng::Value as Yaml;
use support::bed::{Bed, fast_limits};
use support::repo_root;
use testbed::hosts::{ANSIBLE_SERVER_FILE, ANSIBLE_SERVER_ID, AnsibleServer};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper_core::flavour::kubespray::{haproxy_servers, node_name};

const PACKAGE: &str = "fixtures/packages/k8s-mgmtdriver-kubespray";
const INVENTORY: &str = "/home/ansible/kubespray/inventory/vnf-kubespray";
/// Workers at INSTANTIATE (`worker1` … `worker9`); a SCALE_OUT adds `worker10`.
const WORKERS: u64 = 9;

/// Copies the kubespray fixture package under `packages` and makes its worker VDU individually
/// managed with `WORKERS` instances at INSTANTIATE: the BaseHOT's worker AutoScalingGroup (and
/// its scaling policies) becomes one resource `workerNode` of type `workerNode.yaml`, which the
/// adjusted HOT expands into `workerNode-0`, `workerNode-1`, …; the VNFD's worker initial delta
/// and instantiation levels are `WORKERS`, its `vdu_profile` allows two more. The fixture itself is not changed.
fn individual_package(packages: &Path) {
    let to = packages.join(PACKAGE);
    std::fs::create_dir_all(to.parent().unwrap()).unwrap();
    let st = std::process::Command::new("cp")
        .arg("-a")
        .arg(repo_root().join(PACKAGE))
        .arg(&to)
        .status()
        .unwrap();
    assert!(st.success());

    let vnfd_path = to.join("Definitions/kubespray_k8s_cluster_vnfd.yaml");
    let mut vnfd: Yaml = serde_yaml_ng::from_str(&std::fs::read_to_string(&vnfd_path).unwrap())
        .expect("VNFD is YAML");
    let topo = &mut vnfd["topology_template"];
    let profile = &mut topo["node_templates"]["workerNode"]["properties"]["vdu_profile"];
    profile["max_number_of_instances"] = Yaml::from(WORKERS + 2);
    let mut set = 0;
    for policy in topo["policies"].as_sequence_mut().expect("policies") {
        let Some(map) = policy.as_mapping_mut() else {
            continue;
        };
        for (name, body) in map.iter_mut() {
            match name.as_str() {
                Some("workerNode_initial_delta") => {
                    body["properties"]["initial_delta"]["number_of_instances"] =
                        Yaml::from(WORKERS);
                    set += 1;
                }
                Some("workerNode_instantiation_levels") => {
                    for (_, level) in body["properties"]["levels"]
                        .as_mapping_mut()
                        .expect("levels")
                        .iter_mut()
                    {
                        level["number_of_instances"] = Yaml::from(WORKERS);
                    }
                    set += 1;
                }
                _ => {}
            }
        }
    }
    assert_eq!(set, 2, "the VNFD's worker initial delta and levels");
    std::fs::write(&vnfd_path, serde_yaml_ng::to_string(&vnfd).unwrap()).unwrap();

    let hot_path = to.join("BaseHOT/simple/kubespray_k8s_cluster_top.hot.yaml");
    let mut hot: Yaml =
        serde_yaml_ng::from_str(&std::fs::read_to_string(&hot_path).unwrap()).expect("HOT");
    let resources = hot["resources"].as_mapping_mut().expect("resources");
    for name in [
        "worker_instance",
        "worker_instance_scale_out",
        "worker_instance_scale_in",
    ] {
        assert!(resources.remove(name).is_some(), "{name} in the BaseHOT");
    }
    let worker: Yaml = serde_yaml_ng::from_str(
        "type: workerNode.yaml
properties:
  flavor: { get_param: [ nfv, VDU, workerNode, computeFlavourId ] }
  image: { get_param: [ nfv, VDU, workerNode, vcImageId ] }
  net1: { get_param: [ nfv, CP, workerNode_CP2, network ] }
",
    )
    .unwrap();
    resources.insert("workerNode".into(), worker);
    std::fs::write(&hot_path, serde_yaml_ng::to_string(&hot).unwrap()).unwrap();
}

/// The seed request with the Ansible server's real values.
fn request(a: &AnsibleServer) -> Vec<u8> {
    let text = std::fs::read_to_string(
        repo_root().join("fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json"),
    )
    .unwrap();
    let mut v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let k = &mut v["request"]["additionalParams"]["k8s_cluster_installation_param"];
    k["ansible"]["ip_address"] = a.ip_address.to_string().into();
    k["ansible"]["username"] = a.username.clone().into();
    k["ansible"]["password"] = a.password.clone().into();
    k["ansible"]["kubespray_root_path"] = a.kubespray_root_path.clone().into();
    k["ansible"]["transferring_inventory_path"] = INVENTORY.into();
    serde_json::to_vec(&v).unwrap()
}

fn submit(bed: &Bed, bytes: &[u8], packages: &Path) -> OpOccId {
    match bed.submit_in(bytes, packages) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id, ..
        } => vnf_lcm_op_occ_id,
        other => panic!("{other:?}"),
    }
}

async fn text(bed: &Bed, server: &str, path: &str) -> String {
    String::from_utf8(bed.farm.read_file(server, path).await.unwrap()).unwrap()
}

/// The node names of the inventory, the cluster store and the LB's NodePort backends, sorted.
async fn everywhere(bed: &Bed, stack: &str, lb_server: &str) -> [Vec<String>; 3] {
    let hosts_yaml = text(bed, ANSIBLE_SERVER_ID, &format!("{INVENTORY}/hosts.yaml")).await;
    let doc: Yaml = serde_yaml_ng::from_str(&hosts_yaml).unwrap();
    let mut inventory: Vec<String> = doc["all"]["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    inventory.sort();
    let mut cluster = bed.farm.kube(stack).nodes().unwrap();
    cluster.sort();
    let cfg = text(bed, lb_server, "/etc/haproxy/haproxy.cfg").await;
    let mut lb = haproxy_servers(&cfg, "kube_nodes");
    lb.sort();
    [inventory, cluster, lb]
}

fn worker(rows: &[VnfcRow], name: &str) -> VnfcRow {
    rows.iter()
        .find(|v| v.vdu_id == "workerNode" && node_name(v, Role::Worker) == name)
        .unwrap_or_else(|| panic!("{name} among the workers"))
        .clone()
}

/// The `ansible-playbook … <book>` commands the Ansible server ran after log line `from`, and
/// the log's length now.
async fn runs_of(bed: &Bed, book: &str, from: usize) -> (Vec<String>, usize) {
    let log = bed.farm.command_log(ANSIBLE_SERVER_ID).await.unwrap();
    let runs = log[from..]
        .iter()
        .filter(|c| c.contains("' sh apply ") && c.contains(&format!(" {book} ")))
        .cloned()
        .collect();
    (runs, log.len())
}

/// The LIMIT argument of an `ansible.playbook` step command (`… sh apply ROOT INVENTORY BOOK
/// RECORD LIMIT [EXTRA_VAR…]`), its shell quotes removed.
fn limit(command: &str) -> String {
    let args = &command[command.rfind("' sh apply ").expect("a step command") + 11..];
    args.split_whitespace()
        .nth(4)
        .expect("a LIMIT argument")
        .trim_matches('\'')
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn heal_of_worker1_and_scale_in_of_worker10_leave_the_other_everywhere() {
    let bed = Bed::new("vkn", 88, fast_limits()).await;
    let path = bed
        .tb
        .clouds_yaml()
        .parent()
        .unwrap()
        .join(ANSIBLE_SERVER_FILE);
    let a = match AnsibleServer::read(&path) {
        Ok(a) => a,
        Err(_) => bed
            .farm
            .start_ansible_server(std::net::Ipv4Addr::new(10, 231, 88, 254))
            .await
            .expect("Ansible server"),
    };
    let packages = bed.dir.path().join("packages");
    individual_package(&packages);

    // 1. INSTANTIATE: nine individually managed workers, worker1 … worker9; SCALE_OUT adds
    // worker10 (the next index).
    let op = submit(&bed, &request(&a), &packages);
    let state = bed.engine.run(&op).await.unwrap();
    bed.print_journal(&op);
    assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));
    let instance = bed
        .db
        .with(|s| s.reader().instances())
        .unwrap()
        .into_iter()
        .next()
        .unwrap();
    let (vnf, stack) = (instance.id.clone(), instance.stack_id.clone().unwrap());
    let rows = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let mut workers: Vec<String> = rows
        .iter()
        .filter(|v| v.vdu_id == "workerNode")
        .map(|v| node_name(v, Role::Worker))
        .collect();
    workers.sort();
    let mut want: Vec<String> = (1..=WORKERS).map(|i| format!("worker{i}")).collect();
    want.sort();
    assert_eq!(workers, want, "individually managed workers named by index");
    let scale_out = serde_json::json!({
        "operation": "SCALE",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.names.20",
        "request": {"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": 1}
    });
    let out_op = submit(&bed, &serde_json::to_vec(&scale_out).unwrap(), &packages);
    let state = bed.engine.run(&out_op).await.unwrap();
    bed.print_journal(&out_op);
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&out_op)
    );
    let rows = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let lb = rows.iter().find(|v| v.vdu_id == "externalLB").unwrap();
    let lb_server = lb.server_id.clone().unwrap();
    let all_nodes = everywhere(&bed, &stack, &lb_server).await;
    assert_eq!(all_nodes[0], all_nodes[1], "inventory = cluster");
    assert_eq!(all_nodes[0], all_nodes[2], "inventory = LB backends");
    assert!(
        all_nodes[0].contains(&"worker1".to_owned())
            && all_nodes[0].contains(&"worker10".to_owned())
    );
    let (_, mut log_at) = runs_of(&bed, "remove-node.yml", 0).await;

    // 2. HEAL of worker1 with worker10 present: only worker1 is removed and re-added.
    let w1 = worker(&rows, "worker1");
    let w10 = worker(&rows, "worker10");
    let heal = serde_json::json!({
        "operation": "HEAL",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.names.30",
        "request": {"vnfcInstanceId": [w1.id]}
    });
    let heal_op = submit(&bed, &serde_json::to_vec(&heal).unwrap(), &packages);
    let state = bed.engine.run(&heal_op).await.unwrap();
    bed.print_journal(&heal_op);
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&heal_op)
    );
    let (runs, _) = runs_of(&bed, "remove-node.yml", log_at).await;
    let (scaled, at) = runs_of(&bed, "scale.yml", log_at).await;
    log_at = at;
    assert_eq!(scaled.len(), 1, "one scale.yml at the heal: {scaled:#?}");
    assert_eq!(limit(&scaled[0]), "worker1", "scale.yml limited to worker1");
    assert_eq!(runs.len(), 1, "one remove-node.yml at the heal: {runs:#?}");
    assert!(runs[0].contains("'node=worker1'"), "{runs:#?}");
    assert!(!runs[0].contains("node=worker10"), "{runs:#?}");
    let rows = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    assert_ne!(
        worker(&rows, "worker1").server_id,
        w1.server_id,
        "worker1 was rebuilt"
    );
    assert_eq!(
        worker(&rows, "worker10").server_id,
        w10.server_id,
        "worker10 was not touched"
    );
    let [inventory, cluster, backends] = everywhere(&bed, &stack, &lb_server).await;
    assert_eq!(
        inventory, all_nodes[0],
        "the inventory lists every node again"
    );
    assert_eq!(cluster, all_nodes[0], "the cluster has every node again");
    assert_eq!(backends, all_nodes[0], "the LB has every node again");

    // 3. SCALE_IN by one step removes the highest index, worker10; worker1 stays everywhere.
    let scale_in = serde_json::json!({
        "operation": "SCALE",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.names.40",
        "request": {"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}
    });
    let in_op = submit(&bed, &serde_json::to_vec(&scale_in).unwrap(), &packages);
    let state = bed.engine.run(&in_op).await.unwrap();
    bed.print_journal(&in_op);
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&in_op)
    );
    let (runs, _) = runs_of(&bed, "remove-node.yml", log_at).await;
    assert_eq!(
        runs.len(),
        1,
        "one remove-node.yml at the scale-in: {runs:#?}"
    );
    assert!(runs[0].contains("'node=worker10'"), "{runs:#?}");
    let rows = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    assert!(
        rows.iter()
            .all(|v| v.vdu_id != "workerNode" || node_name(v, Role::Worker) != "worker10"),
        "worker10's VNFC is gone"
    );
    let stay: Vec<String> = all_nodes[0]
        .iter()
        .filter(|n| *n != "worker10")
        .cloned()
        .collect();
    let [inventory, cluster, backends] = everywhere(&bed, &stack, &lb_server).await;
    assert_eq!(inventory, stay);
    assert_eq!(cluster, stay);
    assert_eq!(backends, stay);
    assert!(stay.contains(&"worker1".to_owned()));

    // 4. TERMINATE: nothing of the VNF is left in the cloud.
    let terminate = serde_json::json!({
        "operation": "TERMINATE",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.names.90",
        "request": {"terminationType": "FORCEFUL"}
    });
    let term_op = submit(&bed, &serde_json::to_vec(&terminate).unwrap(), &packages);
    assert_eq!(
        bed.engine.run(&term_op).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&term_op)
    );
    assert!(bed.farm.hosts().iter().all(|h| h.cluster != stack));
}
