//! kill -9 of the daemon while `cluster.yml` runs on the Ansible server (needs root): the seed's
//! kubespray INSTANTIATE through the daemon binary on the testbed; the daemon is SIGKILLed while
//! `ansible-playbook … cluster.yml` is running there (seen in the Ansible server's process list),
//! then restarted. The operation converges to COMPLETED with one inventory directory holding one
//! `hosts.yaml` that lists every node once, the cluster store holding exactly those nodes, and an
//! HAProxy configuration without a duplicated server line.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::{Install, wait_until};
use testbed::hosts::ANSIBLE_SERVER_ID;
use vnfkeeper_core::flavour::kubespray::haproxy_servers;

const PREFIX: &str = "vkx";

fn op_state(install: &Install, vnf: &str) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == vnf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn kill9_during_cluster_yml_then_restart_converges_with_one_inventory() {
    let dir = tempfile::Builder::new()
        .prefix("vk-kscrash-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts_opts(PREFIX, 77, dir.path(), true).await;
    let server = tb.ansible_server().expect("Ansible server").0.clone();

    let install = Install::new();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();

    // The seed request as it is, with the testbed's Ansible server in its `ansible` block.
    let fixture = support::repo_root()
        .join("fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    support::kubespray::fill_ansible(&mut env, &server).unwrap();
    let vnf = env["vnfInstanceId"].as_str().unwrap().to_owned();
    let inv = env["request"]["additionalParams"]["k8s_cluster_installation_param"]["ansible"]
        ["transferring_inventory_path"]
        .as_str()
        .unwrap()
        .to_owned();

    let mut daemon = install.start();
    install.drop_file("kubespray.json", &serde_json::to_vec(&env).unwrap());

    // Wait for the real ansible-playbook of cluster.yml (not the step script's text, which
    // names it too: the process's `-i` is followed by an absolute path).
    let running = "ps -eo args | grep '[a]nsible-playbook -i /' | grep -q cluster.yml";
    let mut during = false;
    for _ in 0..1800 {
        if farm
            .exec(ANSIBLE_SERVER_ID, running)
            .await
            .is_ok_and(|o| o.status.success())
        {
            during = true;
            break;
        }
        if !daemon.is_running() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        during,
        "cluster.yml was never seen running:\n{}",
        daemon.log_text()
    );
    daemon.kill9();
    let state = op_state(&install, &vnf).unwrap();
    assert_eq!(
        state["operationState"], "PROCESSING",
        "killed mid-operation: {state}"
    );

    // Restart: the stored plan resumes and converges.
    let daemon = install.start();
    let done = tokio::task::block_in_place(|| {
        wait_until(Duration::from_secs(240), || {
            op_state(&install, &vnf).is_some_and(|o| {
                o["operationState"] == "COMPLETED" || o["operationState"] == "FAILED_TEMP"
            })
        })
    });
    let state = op_state(&install, &vnf).unwrap();
    assert!(
        done && state["operationState"] == "COMPLETED",
        "after restart: {state}\n{}",
        daemon.log_text()
    );

    // One inventory: the kubespray tree's inventory directory holds the sample and ours only,
    // and ours one hosts.yaml.
    let ls = farm
        .exec(
            ANSIBLE_SERVER_ID,
            &format!("ls -A {}/inventory", server.kubespray_root_path),
        )
        .await
        .unwrap();
    let mut dirs: Vec<String> = String::from_utf8_lossy(&ls.stdout)
        .lines()
        .map(str::to_owned)
        .collect();
    dirs.sort();
    let leaf = inv.rsplit('/').next().unwrap().to_owned();
    assert_eq!(dirs, ["sample".to_owned(), leaf], "{dirs:?}");
    let found = farm
        .exec(ANSIBLE_SERVER_ID, &format!("find {inv} -name 'hosts*'"))
        .await
        .unwrap();
    let found = String::from_utf8_lossy(&found.stdout).into_owned();
    assert_eq!(found.lines().count(), 1, "{found}");
    let hosts_yaml = String::from_utf8(
        farm.read_file(ANSIBLE_SERVER_ID, &format!("{inv}/hosts.yaml"))
            .await
            .unwrap(),
    )
    .unwrap();
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&hosts_yaml).unwrap();
    let mut names: Vec<String> = doc["all"]["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    names.sort();

    // Every node once, in the inventory and in the cluster store.
    let db = rusqlite::Connection::open(&install.database).unwrap();
    let nodes: i64 = db
        .query_row(
            "SELECT count(*) FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id IN ('masterNode', 'workerNode')",
            [&vnf],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(names.len() as i64, nodes, "{hosts_yaml}");
    let (stack, lb_server): (String, String) = db
        .query_row(
            "SELECT i.stack_id, v.server_id FROM vnf_instance i JOIN vnfc v ON v.vnf_instance_id = i.id
             WHERE i.id = ?1 AND v.vdu_id = 'externalLB'",
            [&vnf],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    let mut registered = farm.kube(&stack).nodes().unwrap();
    registered.sort();
    assert_eq!(registered, names);

    // The LB: no duplicated line, the backends are exactly the nodes.
    let cfg = String::from_utf8(
        farm.read_file(&lb_server, "/etc/haproxy/haproxy.cfg")
            .await
            .unwrap(),
    )
    .unwrap();
    let servers: Vec<&str> = cfg
        .lines()
        .filter(|l| l.trim_start().starts_with("server "))
        .collect();
    let mut unique = servers.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        servers.len(),
        "duplicated server line:\n{cfg}"
    );
    let mut backends = haproxy_servers(&cfg, "kube_nodes");
    backends.sort();
    assert_eq!(backends, names, "{cfg}");

    // How the step ended: cluster.yml applied before the kill and, unless the interrupted run
    // finished and recorded itself before the restarted check, once more after it.
    let log = farm.command_log(ANSIBLE_SERVER_ID).await.unwrap();
    let applies = log
        .iter()
        .filter(|c| c.contains("' sh apply ") && c.contains("cluster.yml"))
        .count();
    let attempts: i64 = db
        .query_row(
            "SELECT attempts FROM step_journal WHERE stage_key = 'ansible.playbook@cluster.yml'
             AND vnf_lcm_op_occ_id = (SELECT id FROM vnf_lcm_op_occ WHERE vnf_instance_id = ?1)",
            [&vnf],
            |r| r.get(0),
        )
        .unwrap();
    eprintln!(
        "cluster.yml applied {applies} time(s) on the Ansible server; the step's journal: {attempts} attempt(s)"
    );
    assert!(applies >= 1);

    // Nothing of the interrupted run left behind: no credentials file.
    let creds = farm
        .exec(
            ANSIBLE_SERVER_ID,
            &format!("test -e {inv}/.vnfkeeper/credentials.yml"),
        )
        .await
        .unwrap();
    assert!(!creds.status.success(), "credentials file removed");
    drop(daemon);
    tb.shutdown().await;
}
