//! The kubespray flavour on the testbed (needs root): the seed's kubespray INSTANTIATE request,
//! as written apart from its `ansible` block, runs real `ansible-playbook` on the testbed's
//! Ansible server against the VNF's hosts over real SSH (host keys checked against the keys
//! vnfkeeper pinned) and configures real HAProxy on the LB VNFC; Calico's MTU is the master's NIC
//! MTU; a playbook failure on a node whose sshd is stopped gives FAILED_TEMP naming the host and
//! the task, and RETRY after the node is back completes; SCALE_IN removes a node everywhere; a
//! reconcile pass repairs a cut haproxy.cfg; a worker HEAL keeps the node's name; TERMINATE
//! removes the inventory from the Ansible server.

use crate::support;
use vnfkeeper_core::model::{LcmOperationType, OpOccId, OperationState, Timestamp, VnfInstanceId};

use std::io::{BufRead as _, BufReader};
use std::net::TcpStream;
use std::time::Duration;

use support::bed::{Bed, fast_limits};
use testbed::hosts::{ANSIBLE_SERVER_FILE, ANSIBLE_SERVER_ID, AnsibleServer};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper_core::flavour::kubespray::haproxy_servers;
use vnfkeeper_core::policy::Policy;

/// Everything the engine logs (the daemon's journal), as text with span fields.
#[derive(Clone, Default)]
struct Journal(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Journal {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Journal {
    fn install() -> Self {
        let j = Journal::default();
        let w = j.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .with_writer(move || w.clone())
            .init();
        j
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

const INVENTORY: &str = "/home/ansible/kubespray/inventory/vnf-kubespray";

/// The Ansible server of the bed: as described next to clouds.yaml, else started here at
/// `10.231.<net>.254` (outside the cloud's allocations).
async fn ansible_server(bed: &Bed, net: u8) -> AnsibleServer {
    let path = bed
        .tb
        .clouds_yaml()
        .parent()
        .unwrap()
        .join(ANSIBLE_SERVER_FILE);
    match AnsibleServer::read(&path) {
        Ok(a) => a,
        Err(_) => bed
            .farm
            .start_ansible_server(std::net::Ipv4Addr::new(10, 231, net, 254))
            .await
            .expect("Ansible server"),
    }
}

/// The seed request with the Ansible server's real values (its `ansible` block); everything
/// else as the seed has it, `external_lb_param.ssh_cp_name: externalLB_instance` included.
fn request(a: &AnsibleServer) -> Vec<u8> {
    let text = std::fs::read_to_string(
        support::repo_root()
            .join("fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json"),
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

fn submit(bed: &Bed, bytes: &[u8]) -> (OpOccId, VnfInstanceId) {
    match bed.submit(bytes) {
        Outcome::Accepted {
            vnf_lcm_op_occ_id,
            vnf_instance_id,
            ..
        } => (vnf_lcm_op_occ_id, vnf_instance_id),
        other => panic!("{other:?}"),
    }
}

async fn text(bed: &Bed, server: &str, path: &str) -> String {
    String::from_utf8(bed.farm.read_file(server, path).await.unwrap()).unwrap()
}

/// Whether `path` exists on the Ansible server.
async fn exists(bed: &Bed, path: &str) -> bool {
    bed.farm
        .exec(ANSIBLE_SERVER_ID, &format!("test -e {path}"))
        .await
        .unwrap()
        .status
        .success()
}

/// Every file under the Ansible server's home and every command any host ran, as text.
async fn everything_the_hosts_kept(bed: &Bed) -> String {
    let mut all = String::new();
    let files = bed
        .farm
        .exec(
            ANSIBLE_SERVER_ID,
            "find /home/ansible /tmp -type f -size -2M -exec cat {} + 2>/dev/null; true",
        )
        .await
        .unwrap();
    all.push_str(&String::from_utf8_lossy(&files.stdout));
    for h in bed.farm.hosts() {
        if let Ok(log) = bed.farm.command_log(&h.server_id).await {
            all.push_str(&log.join("\n"));
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn kubespray_instantiate_completes_then_a_dead_node_fails_temp_and_retry_completes() {
    let journal = Journal::install();
    let bed = Bed::new("vkk", 76, fast_limits()).await;
    let a = ansible_server(&bed, 76).await;
    let (op, vnf) = submit(&bed, &request(&a));

    // 1. INSTANTIATE: COMPLETED, by ansible-playbook on the Ansible server.
    let state = bed.engine.run(&op).await.unwrap();
    bed.print_journal(&op);
    assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));
    let log = bed.farm.command_log(ANSIBLE_SERVER_ID).await.unwrap();
    let runs = log
        .iter()
        .filter(|c| c.contains("ansible-playbook") && c.contains("cluster.yml"))
        .count();
    assert!(runs >= 1, "cluster.yml ran on the Ansible server: {log:#?}");

    // The inventory: every node by its stable name, generated whole.
    let vnfcs = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let hosts_yaml = text(&bed, ANSIBLE_SERVER_ID, &format!("{INVENTORY}/hosts.yaml")).await;
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&hosts_yaml).unwrap();
    let names: Vec<String> = doc["all"]["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    let nodes = vnfcs
        .iter()
        .filter(|v| v.vdu_id == "masterNode" || v.vdu_id == "workerNode")
        .count();
    assert_eq!(names.len(), nodes, "{hosts_yaml}");
    // Calico's MTU: the first master's NIC MTU as observed there, in group_vars.
    let master = vnfcs.iter().find(|v| v.vdu_id == "masterNode").unwrap();
    let nic_mtu = bed
        .farm
        .exec(
            master.server_id.as_deref().unwrap(),
            "cat /sys/class/net/eth0/mtu",
        )
        .await
        .unwrap();
    let nic_mtu: u64 = String::from_utf8_lossy(&nic_mtu.stdout)
        .trim()
        .parse()
        .unwrap();
    let calico = text(
        &bed,
        ANSIBLE_SERVER_ID,
        &format!("{INVENTORY}/group_vars/k8s_cluster/vnfkeeper-calico.yml"),
    )
    .await;
    let calico: serde_yaml_ng::Value = serde_yaml_ng::from_str(&calico).unwrap();
    assert_eq!(calico["calico_mtu"].as_u64(), Some(nic_mtu), "{calico:?}");
    assert_eq!(calico["calico_veth_mtu"].as_u64(), Some(nic_mtu - 20));

    // Host keys: the known_hosts the playbooks used is the pinned keys, one line per node.
    let known = text(&bed, ANSIBLE_SERVER_ID, &format!("{INVENTORY}/known_hosts")).await;
    assert_eq!(known.lines().count(), nodes, "{known}");
    for v in vnfcs.iter().filter(|v| v.vdu_id != "externalLB") {
        let key = v.host_key.as_deref().unwrap();
        let blob = key.split_whitespace().nth(1).unwrap();
        assert!(known.contains(blob), "{} pinned key in known_hosts", v.id);
    }

    // The cluster store: every node registered under its inventory name.
    let stack = bed
        .db
        .with(|s| s.reader().instances())
        .unwrap()
        .into_iter()
        .find(|i| i.id == vnf)
        .and_then(|i| i.stack_id)
        .unwrap();
    let mut registered = bed.farm.kube(&stack).nodes().unwrap();
    registered.sort();
    let mut want = names.clone();
    want.sort();
    assert_eq!(registered, want);

    // The LB: haproxy runs with masters behind 8383 and every node behind the NodePorts, and a
    // TCP connection through it reaches a master's API server stand-in.
    let lb = vnfcs.iter().find(|v| v.vdu_id == "externalLB").unwrap();
    let lb_ip = lb.cp_addresses["externalLB_CP1"].clone();
    let server = lb.server_id.clone().unwrap();
    // The package's ExternalLB_installation.sh ran on the LB with `-m <masters> -w <workers>`
    // (its record holds the lists), before vnfkeeper's own configuration replaced its file.
    let addresses = |vdu: &str, cp: &str| {
        vnfcs
            .iter()
            .filter(|v| v.vdu_id == vdu)
            .map(|v| v.cp_addresses[cp].clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    let ran = text(&bed, &server, "/var/lib/vnfkeeper/external-lb/ran").await;
    let ran: Vec<&str> = ran.split_whitespace().collect();
    assert_eq!(
        ran[1..],
        [
            addresses("masterNode", "masterNode_CP1"),
            addresses("workerNode", "workerNode_CP2")
        ],
        "{ran:?}"
    );
    let lb_log = bed.farm.command_log(&server).await.unwrap();
    assert!(
        lb_log
            .iter()
            .any(|c| c.contains("ExternalLB_installation.sh") && c.contains("lb.script")),
        "{lb_log:#?}"
    );
    // external_lb_param.ssh_cp_name is the floating IP `externalLB_instance`: the LB is
    // recorded with its floating address and every SSH session reached it through the floating
    // IP router, never at its fixed address; the nodes (CPs as ssh_cp_name) at their fixed ones.
    let fip = lb.cp_addresses["externalLB_instance"].clone();
    assert_ne!(fip, lb_ip);
    let router = bed.farm.floating_router_ip().to_string();
    let clients = bed.farm.client_log(&server).await.unwrap();
    assert!(
        !clients.is_empty() && clients.iter().all(|c| *c == router),
        "LB sessions from {clients:?}, the router is {router}"
    );
    let master = vnfcs.iter().find(|v| v.vdu_id == "masterNode").unwrap();
    let clients = bed
        .farm
        .client_log(master.server_id.as_deref().unwrap())
        .await
        .unwrap();
    assert!(
        !clients.is_empty() && !clients.contains(&router),
        "master sessions from {clients:?}"
    );
    let cfg = text(&bed, &server, "/etc/haproxy/haproxy.cfg").await;
    let mut lb_nodes = haproxy_servers(&cfg, "kube_nodes");
    lb_nodes.sort();
    assert_eq!(lb_nodes, want, "{cfg}");
    let line = tokio::task::spawn_blocking(move || {
        let s = TcpStream::connect_timeout(
            &format!("{lb_ip}:8383").parse().unwrap(),
            Duration::from_secs(5),
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut line = String::new();
        BufReader::new(s).read_line(&mut line).unwrap();
        line
    })
    .await
    .unwrap();
    assert!(line.starts_with("testbed-apiserver"), "{line:?}");

    // The admin kubeconfig: kept 0600 under the state directory, pointing at the LB.
    let kc = bed
        .dir
        .path()
        .join("kubeconfig")
        .join(format!("{vnf}.conf"));
    let meta = std::fs::metadata(&kc).expect("kubeconfig kept");
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
        0o600
    );
    let kc_text = std::fs::read_to_string(&kc).unwrap();
    let lb_endpoint = format!("https://{}:8383", lb.cp_addresses["externalLB_CP1"]);
    assert_eq!(
        vnfkeeper_core::artifact::kubeconfig_server(&kc_text).as_deref(),
        Some(lb_endpoint.as_str()),
        "{kc_text}"
    );

    // 2. No password left anywhere: no credentials file, no proxy password in any file on the
    // Ansible server or in any command a host ran.
    let creds = bed
        .farm
        .exec(
            ANSIBLE_SERVER_ID,
            &format!("test -e {INVENTORY}/.vnfkeeper/credentials.yml"),
        )
        .await
        .unwrap();
    assert!(!creds.status.success(), "credentials file removed");
    let kept = everything_the_hosts_kept(&bed).await;
    for secret in ["password1", "password2", "ansible_password: ubuntu"] {
        assert!(!kept.contains(secret), "{secret} found on a host");
    }

    // 3. A playbook failure: SCALE_OUT while a worker's sshd is stopped. The new worker is
    // reached, then facts.yml (every host) fails: FAILED_TEMP naming that host and the task.
    let worker = vnfcs.iter().find(|v| v.vdu_id == "workerNode").unwrap();
    let worker_server = worker.server_id.clone().unwrap();
    let worker_name =
        vnfkeeper_core::flavour::kubespray::node_name(worker, vnfkeeper_core::model::Role::Worker);
    bed.farm.stop_sshd(&worker_server).await.unwrap();
    let scale = serde_json::json!({
        "operation": "SCALE",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.20",
        "request": {"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": 1}
    });
    let (scale_op, _) = submit(&bed, &serde_json::to_vec(&scale).unwrap());
    let state = bed.engine.run(&scale_op).await.unwrap();
    bed.print_journal(&scale_op);
    assert_eq!(state, OperationState::FailedTemp);
    let problem: serde_json::Value =
        serde_json::from_str(&bed.error_of(&scale_op).unwrap()).unwrap();
    let detail = problem["detail"].as_str().unwrap();
    assert!(
        detail.contains("ansible.playbook") && detail.contains(&format!("host {worker_name} ")),
        "{problem}"
    );
    assert!(
        detail.contains("task \""),
        "the failed task is named: {problem}"
    );

    // RETRY after the node is back: completes, the new worker in the inventory, the cluster and
    // the LB.
    bed.farm.start_sshd(&worker_server).await.unwrap();
    let retry = serde_json::json!({"operation": "RETRY", "vnfLcmOpOccId": scale_op, "requestId": "retry-scale"});
    bed.submit(&serde_json::to_vec(&retry).unwrap());
    let state = bed.engine.run(&scale_op).await.unwrap();
    bed.print_journal(&scale_op);
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&scale_op)
    );
    let hosts_yaml = text(&bed, ANSIBLE_SERVER_ID, &format!("{INVENTORY}/hosts.yaml")).await;
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&hosts_yaml).unwrap();
    let mut names: Vec<String> = doc["all"]["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    names.sort();
    assert_eq!(names.len(), nodes + 1, "{hosts_yaml}");
    let mut registered = bed.farm.kube(&stack).nodes().unwrap();
    registered.sort();
    assert_eq!(registered, names);
    let cfg = text(&bed, &server, "/etc/haproxy/haproxy.cfg").await;
    let mut lb_nodes = haproxy_servers(&cfg, "kube_nodes");
    lb_nodes.sort();
    assert_eq!(lb_nodes, names, "{cfg}");
    let log = bed.farm.command_log(ANSIBLE_SERVER_ID).await.unwrap();
    assert!(
        log.iter()
            .any(|c| c.contains("ansible-playbook") && c.contains("scale.yml")),
        "scale.yml ran"
    );

    // 4. SCALE_IN by one step: the newest worker is drained on a master, removed by
    // remove-node.yml, and leaves the inventory, the cluster and the LB; the others stay.
    let before = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let scale_in = serde_json::json!({
        "operation": "SCALE",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.40",
        "request": {"type": "SCALE_IN", "aspectId": "worker_instance", "numberOfSteps": 1}
    });
    let (in_op, _) = submit(&bed, &serde_json::to_vec(&scale_in).unwrap());
    let state = bed.engine.run(&in_op).await.unwrap();
    bed.print_journal(&in_op);
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&in_op)
    );
    let after = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let gone: Vec<_> = before
        .iter()
        .filter(|b| !after.iter().any(|a| a.id == b.id))
        .collect();
    assert_eq!(gone.len(), 1);
    let gone_name =
        vnfkeeper_core::flavour::kubespray::node_name(gone[0], vnfkeeper_core::model::Role::Worker);
    let stay: Vec<String> = names.iter().filter(|n| **n != gone_name).cloned().collect();
    assert_eq!(
        stay.len(),
        names.len() - 1,
        "{gone_name} was a node: {names:?}"
    );
    let hosts_yaml = text(&bed, ANSIBLE_SERVER_ID, &format!("{INVENTORY}/hosts.yaml")).await;
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&hosts_yaml).unwrap();
    let mut inv: Vec<String> = doc["all"]["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    inv.sort();
    assert_eq!(inv, stay);
    let mut registered = bed.farm.kube(&stack).nodes().unwrap();
    registered.sort();
    assert_eq!(registered, stay);
    let cfg = text(&bed, &server, "/etc/haproxy/haproxy.cfg").await;
    let mut lb_nodes = haproxy_servers(&cfg, "kube_nodes");
    lb_nodes.sort();
    assert_eq!(lb_nodes, stay, "{cfg}");
    let log = bed.farm.command_log(ANSIBLE_SERVER_ID).await.unwrap();
    assert!(
        log.iter().any(|c| c.contains("remove-node.yml")
            && c.contains(&format!("node={gone_name}"))
            && c.contains("skip_confirmation=yes")),
        "remove-node.yml ran for {gone_name}"
    );

    // Reconcile: a server line removed from the LB's haproxy.cfg behind vnfkeeper's back is found
    // by the full pass's probe of the LB and repaired by a configuration-only HEAL of the LB
    // (same server), after which the backends are the nodes again.
    let policy = Policy::default();
    let rec = Reconciler::new(
        bed.cloud.clone(),
        std::sync::Arc::new(SshRemote::new(SshConfig::default())),
        policy.clone(),
        ProbeSettings {
            timeout: Duration::from_secs(30),
            max_parallel_hosts: 16,
        },
    );
    let at = |secs: i64| Timestamp(chrono::Utc::now() + chrono::Duration::seconds(secs));
    let pass = |now: Timestamp| {
        let rec = &rec;
        let db = &bed.db;
        async move {
            let snap = db.with(|s| reconcile::snapshot(s.reader(), None)).unwrap();
            let mut report = rec.evaluate(&snap, PassKind::Full, now).await;
            db.write(|tx| reconcile::record(tx, &mut report, now))
                .unwrap();
            report
        }
    };
    let t0 = policy.startup_grace.as_secs() as i64 + 1;
    let r = pass(at(t0)).await;
    assert!(r.started.is_empty(), "healthy cluster: {r:?}");
    let cut = bed
        .farm
        .exec(
            &server,
            &format!(
                "sed -i '/^    server {} /d' /etc/haproxy/haproxy.cfg",
                stay[0]
            ),
        )
        .await
        .unwrap();
    assert!(cut.status.success(), "{cut:?}");
    let cfg = text(&bed, &server, "/etc/haproxy/haproxy.cfg").await;
    assert!(!haproxy_servers(&cfg, "kube_nodes").contains(&stay[0]));
    let r = pass(at(t0 + 10)).await;
    assert_eq!(r.started.len(), 1, "{r:?}");
    let lb_heal = bed
        .db
        .with(|s| s.reader().operations(Some(vnf.as_str())))
        .unwrap()
        .into_iter()
        .find(|o| o.operation == LcmOperationType::Heal)
        .unwrap();
    assert!(lb_heal.is_automatic_invocation);
    assert_eq!(
        bed.engine.run(&lb_heal.id).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&lb_heal.id)
    );
    bed.print_journal(&lb_heal.id);
    let lb_after = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    assert_eq!(
        lb_after
            .iter()
            .find(|v| v.id == lb.id)
            .and_then(|v| v.server_id.clone()),
        Some(server.clone()),
        "the LB was not rebuilt"
    );
    let cfg = text(&bed, &server, "/etc/haproxy/haproxy.cfg").await;
    let mut lb_nodes = haproxy_servers(&cfg, "kube_nodes");
    lb_nodes.sort();
    assert_eq!(lb_nodes, stay, "{cfg}");

    // Reconcile: the inventory on the Ansible server, edited behind vnfkeeper's back (a host
    // removed), is found by the LB's probe run on the Ansible server (with its pinned key) and
    // written whole again by the LB's configuration-only HEAL; nothing is rebuilt.
    let hosts_path = format!("{INVENTORY}/hosts.yaml");
    let good = text(&bed, ANSIBLE_SERVER_ID, &hosts_path).await;
    assert!(good.contains(&format!("{}:", stay[0])), "{good}");
    let cut = bed
        .farm
        .exec(
            ANSIBLE_SERVER_ID,
            &format!("sed -i '/{}/d' {hosts_path}", stay[0]),
        )
        .await
        .unwrap();
    assert!(cut.status.success(), "{cut:?}");
    assert_ne!(text(&bed, ANSIBLE_SERVER_ID, &hosts_path).await, good);
    // After the second attempt's retry backoff (twice the first).
    let t1 = t0 + 10 + 2 * policy.retry_backoff.as_secs() as i64 + 1;
    let r = pass(at(t1)).await;
    assert_eq!(r.started.len(), 1, "{r:?}");
    let inv_heal = bed
        .db
        .with(|s| s.reader().operations(Some(vnf.as_str())))
        .unwrap()
        .into_iter()
        .find(|o| o.operation == LcmOperationType::Heal && o.id != lb_heal.id)
        .unwrap();
    assert!(inv_heal.is_automatic_invocation);
    assert_eq!(
        bed.engine.run(&inv_heal.id).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&inv_heal.id)
    );
    bed.print_journal(&inv_heal.id);
    assert_eq!(text(&bed, ANSIBLE_SERVER_ID, &hosts_path).await, good);
    let rows_now = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    for v in &lb_after {
        let now = rows_now.iter().find(|n| n.id == v.id).unwrap();
        assert_eq!(now.server_id, v.server_id, "{} was not rebuilt", v.id);
    }
    let r = pass(at(t1 + 10)).await;
    assert!(r.started.is_empty(), "repaired: {r:?}");

    // 5. HEAL of one worker: drained, removed by remove-node.yml, its server rebuilt, then
    // facts.yml and scale.yml limited to it; it keeps its node name, and the inventory, the
    // cluster and the LB list exactly the current nodes.
    let worker = after.iter().find(|v| v.vdu_id == "workerNode").unwrap();
    let healed_name =
        vnfkeeper_core::flavour::kubespray::node_name(worker, vnfkeeper_core::model::Role::Worker);
    let old_server = worker.server_id.clone().unwrap();
    let log_before = bed.farm.command_log(ANSIBLE_SERVER_ID).await.unwrap().len();
    let heal = serde_json::json!({
        "operation": "HEAL",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.30",
        "request": {"vnfcInstanceId": [worker.id]}
    });
    let (heal_op, _) = submit(&bed, &serde_json::to_vec(&heal).unwrap());
    let state = bed.engine.run(&heal_op).await.unwrap();
    bed.print_journal(&heal_op);
    if state != OperationState::Completed {
        for l in journal
            .text()
            .lines()
            .filter(|l| l.contains("vnfkeeper::ansible"))
            .rev()
            .take(40)
        {
            eprintln!("{l}");
        }
    }
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&heal_op)
    );
    let healed_rows = bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap();
    let healed = healed_rows.iter().find(|v| v.id == worker.id).unwrap();
    assert_ne!(
        healed.server_id.as_deref(),
        Some(old_server.as_str()),
        "the worker's server was rebuilt"
    );
    assert_eq!(
        vnfkeeper_core::flavour::kubespray::node_name(healed, vnfkeeper_core::model::Role::Worker),
        healed_name,
        "the node name is stable across HEAL"
    );
    let hosts_yaml = text(&bed, ANSIBLE_SERVER_ID, &format!("{INVENTORY}/hosts.yaml")).await;
    let doc: serde_yaml_ng::Value = serde_yaml_ng::from_str(&hosts_yaml).unwrap();
    let mut inv: Vec<String> = doc["all"]["hosts"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    inv.sort();
    assert_eq!(inv, stay, "{hosts_yaml}");
    let mut registered = bed.farm.kube(&stack).nodes().unwrap();
    registered.sort();
    assert_eq!(registered, stay);
    let cfg = text(&bed, &server, "/etc/haproxy/haproxy.cfg").await;
    let mut lb_nodes = haproxy_servers(&cfg, "kube_nodes");
    lb_nodes.sort();
    assert_eq!(lb_nodes, stay, "{cfg}");
    // The healed node's pinned key (of the new server) is the one Ansible checks against.
    let known = text(&bed, ANSIBLE_SERVER_ID, &format!("{INVENTORY}/known_hosts")).await;
    let blob = healed
        .host_key
        .as_deref()
        .unwrap()
        .split_whitespace()
        .nth(1)
        .unwrap()
        .to_owned();
    assert!(known.contains(&blob), "{known}");
    let log = bed.farm.command_log(ANSIBLE_SERVER_ID).await.unwrap();
    let heal_log = &log[log_before..];
    let position = |what: &str, with: &str| {
        heal_log
            .iter()
            .position(|c| c.contains("' sh apply ") && c.contains(what) && c.contains(with))
            .unwrap_or_else(|| panic!("{what} with {with} ran at the heal: {heal_log:#?}"))
    };
    let removed = position("remove-node.yml", &format!("node={healed_name}"));
    let facts = position("facts.yml", "facts-");
    let scaled = position("scale.yml", &healed_name);
    assert!(removed < facts && facts < scaled, "{heal_log:#?}");

    // The journal: the playbooks' output with the operation's fields.
    let logged = journal.text();
    assert!(
        logged.lines().any(|l| l.contains("ansible-playbook")
            && l.contains("PLAY RECAP")
            && l.contains(&format!("vnf_lcm_op_occ_id={op}"))),
        "playbook output journaled with the operation's fields"
    );
    for secret in ["password1", "password2", "vnfkeeper_credentials:"] {
        assert!(!logged.contains(secret), "{secret} in the journal");
    }

    // Still no password anywhere, also not in the journal.
    let kept = everything_the_hosts_kept(&bed).await;
    for secret in ["password1", "password2", "ansible_password: ubuntu"] {
        assert!(!kept.contains(secret), "{secret} found on a host");
    }
    for o in [&op, &scale_op, &in_op, &heal_op] {
        for j in bed.db.with(|s| s.reader().journal(o)).unwrap() {
            let d = j.detail.unwrap_or_default();
            assert!(!d.contains("password1") && !d.contains("password2"), "{d}");
        }
    }

    // 6. TERMINATE: the stack goes, and the inventory directory vnfkeeper wrote on the Ansible
    // server with it (checked first, then removed).
    assert!(
        exists(&bed, INVENTORY).await,
        "the inventory exists before TERMINATE"
    );
    let terminate = serde_json::json!({
        "operation": "TERMINATE",
        "vnfInstanceId": vnf,
        "requestId": "vnf-kubespray.90",
        "request": {"terminationType": "FORCEFUL"}
    });
    let (term_op, _) = submit(&bed, &serde_json::to_vec(&terminate).unwrap());
    let state = bed.engine.run(&term_op).await.unwrap();
    bed.print_journal(&term_op);
    assert_eq!(
        state,
        OperationState::Completed,
        "{:?}",
        bed.error_of(&term_op)
    );
    assert!(
        !exists(&bed, INVENTORY).await,
        "TERMINATE removed {INVENTORY} from the Ansible server"
    );
    let journal = bed.db.with(|s| s.reader().journal(&term_op)).unwrap();
    assert!(
        journal.iter().any(
            |j| j.name == "ansible.forget" && j.state == vnfkeeper_core::model::StepState::Done
        ),
        "{journal:?}"
    );
    assert!(bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap().is_empty());
    // The admin kubeconfig of the cluster that is gone is gone too.
    assert!(
        !kc.exists(),
        "TERMINATE removed the kept kubeconfig {}",
        kc.display()
    );
    // The kubespray root itself (not vnfkeeper's) is still there.
    let root = bed
        .farm
        .exec(
            ANSIBLE_SERVER_ID,
            &format!("test -f {}/cluster.yml", a.kubespray_root_path),
        )
        .await
        .unwrap();
    assert!(root.status.success(), "kubespray's tree is left alone");
}

/// ROLLBACK of a kubespray INSTANTIATE that failed after writing the inventory (`cluster.yml`
/// missing from the kubespray tree) removes that inventory from the Ansible server, then the
/// stack. With the Ansible server unreachable, the rollback still deletes the stack: what is left
/// on a host outside the VNF never keeps the VNF's resources in the cloud.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces)"]
async fn rollback_of_a_failed_instantiate_removes_the_inventory_unless_the_ansible_server_is_gone()
{
    let bed = Bed::new("vky", 86, fast_limits()).await;
    let a = ansible_server(&bed, 86).await;
    let failing = |request_id: &str| {
        let mut v: serde_json::Value = serde_json::from_slice(&request(&a)).unwrap();
        v["requestId"] = request_id.into();
        v["request"]["additionalParams"]["k8s_cluster_installation_param"]["ansible"]["kubespray_root_path"] =
            "/home/ansible/no-kubespray-here".into();
        serde_json::to_vec(&v).unwrap()
    };
    let hosts_yaml = format!("{INVENTORY}/hosts.yaml");
    let rollback = |bed: &Bed, op: &str, id: &str| {
        let r = serde_json::json!({"operation": "ROLLBACK", "vnfLcmOpOccId": op, "requestId": id});
        bed.submit(&serde_json::to_vec(&r).unwrap());
    };
    let stack_of = |bed: &Bed, vnf: &str| {
        bed.db
            .with(|s| s.reader().instances())
            .unwrap()
            .into_iter()
            .find(|i| i.id == vnf)
            .and_then(|i| i.stack_id)
    };

    // 1. The playbook step fails once the inventory is written: FAILED_TEMP.
    let (op, vnf) = submit(&bed, &failing("rb.1"));
    let state = bed.engine.run(&op).await.unwrap();
    bed.print_journal(&op);
    assert_eq!(state, OperationState::FailedTemp);
    assert!(
        bed.error_of(&op).unwrap().contains("no-kubespray-here"),
        "{:?}",
        bed.error_of(&op)
    );
    assert!(exists(&bed, &hosts_yaml).await, "the inventory was written");
    let stack = stack_of(&bed, vnf.as_str()).expect("a stack");

    // 2. ROLLBACK: the inventory goes, then the stack.
    rollback(&bed, op.as_str(), "rb.1.rollback");
    assert_eq!(
        bed.engine.run(&op).await.unwrap(),
        OperationState::RolledBack,
        "{:?}",
        bed.error_of(&op)
    );
    assert!(
        !exists(&bed, &hosts_yaml).await,
        "the inventory was removed"
    );
    assert!(!exists(&bed, INVENTORY).await, "its directory too");
    assert!(stack_of(&bed, vnf.as_str()).is_none());
    assert!(
        bed.farm.hosts().iter().all(|h| h.cluster != stack),
        "the stack's servers are gone"
    );

    // 3. Again; then the Ansible server's sshd stops and the daemon restarts (no pooled session
    // survives) before the ROLLBACK: the stack still goes; the inventory stays (nobody could
    // remove it).
    let (op2, _) = submit(&bed, &failing("rb.2"));
    assert_eq!(
        bed.engine.run(&op2).await.unwrap(),
        OperationState::FailedTemp
    );
    let stack2 = stack_of(&bed, vnf.as_str()).expect("a stack");
    bed.farm.stop_sshd(ANSIBLE_SERVER_ID).await.unwrap();
    let restarted = vnfkeeper::engine::Engine::new(
        bed.db.clone(),
        bed.cloud.clone(),
        std::sync::Arc::new(SshRemote::new(SshConfig::default())),
        fast_limits(),
    );
    rollback(&bed, op2.as_str(), "rb.2.rollback");
    let state = restarted.run(&op2).await.unwrap();
    bed.farm.start_sshd(ANSIBLE_SERVER_ID).await.unwrap();
    assert_eq!(
        state,
        OperationState::RolledBack,
        "{:?}",
        bed.error_of(&op2)
    );
    assert!(stack_of(&bed, vnf.as_str()).is_none());
    assert!(bed.farm.hosts().iter().all(|h| h.cluster != stack2));
    assert!(exists(&bed, &hosts_yaml).await, "left behind, and said so");
}
