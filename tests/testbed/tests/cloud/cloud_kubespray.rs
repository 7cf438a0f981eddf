//! The cloud with the kubespray flavour's Ansible server (needs root; ignored unless
//! `--include-ignored`): `ansible-server.json` next to clouds.yaml, the server outside Nova and
//! every stack, reachable by password SSH with `ansible-playbook`; the kubespray package's BaseHOT
//! brings up an external LB server that can run haproxy.
//!
//! Prefix `tbk`, subnet 10.231.14.0/24.

use crate::cloud_common;

use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt as _;
use std::process::Command;

use cloud_common::{Client, servers};
use serde_json::{Value, json};
use testbed::cloud::{CloudOptions, Testbed};
use testbed::hosts::{ANSIBLE_SERVER_FILE, ANSIBLE_SERVER_ID, AnsibleServer};

const PREFIX: &str = "tbk";
const SUBNET: &str = "10.231.14.0/24";

/// Removes everything with our prefix when dropped (also on panic).
struct Cleanup;
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::thread::spawn(|| {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let _ = testbed::hosts::down_all(PREFIX).await;
            })
        })
        .join();
    }
}

/// Password SSH (password from the environment) without host key checking: the test only
/// checks reachability here; hosts_kubespray checks keys.
fn ssh(user: &str, password: &str, ip: &str, cmd: &str) -> std::process::Output {
    Command::new("sshpass")
        .arg("-e")
        .args([
            "ssh",
            "-o",
            "StrictHostKeyChecking=no",
            "-o",
            "UserKnownHostsFile=/dev/null",
            "-o",
            "ConnectTimeout=5",
            "-o",
            "LogLevel=ERROR",
            &format!("{user}@{ip}"),
            cmd,
        ])
        .env("SSHPASS", password)
        .output()
        .unwrap()
}

fn kubespray_body(name: &str, workers: u32) -> Value {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/packages/k8s-mgmtdriver-kubespray/BaseHOT/simple");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let img = "ubuntu-22.04-server-cloudimg-amd64";
    json!({"stack_name": name, "template": read("kubespray_k8s_cluster_top.hot.yaml"),
           "files": {"masterNode.yaml": read("nested/masterNode.yaml"), "workerNode.yaml": read("nested/workerNode.yaml")},
           "parameters": {"nfv": {
               "VDU": {
                   "masterNode": {"computeFlavourId": "m1.medium", "vcImageId": img, "desired_capacity": 1},
                   "workerNode": {"computeFlavourId": "m1.medium", "vcImageId": img, "desired_capacity": workers},
                   "externalLB": {"computeFlavourId": "m1.small", "vcImageId": img}
               },
               "CP": {
                   "masterNode_CP1": {"network": "b0b84da3-3259-4855-b4cd-5711ba5e5de1"},
                   "workerNode_CP2": {"network": "b0b84da3-3259-4855-b4cd-5711ba5e5de1"},
                   "externalLB_CP1": {"network": "b0b84da3-3259-4855-b4cd-5711ba5e5de1"}
               }}},
           "disable_rollback": true})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root"]
async fn ansible_server_and_kubespray_stack_with_lb() {
    let _ = testbed::hosts::down_all(PREFIX).await;
    let _cleanup = Cleanup;
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let dir = tempfile::Builder::new()
        .prefix("testbed-kubespray-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let farm = testbed::cloud::farm::start_farm(dir.path(), PREFIX, SUBNET)
        .await
        .expect("farm");
    let mut opts = CloudOptions::no_hosts(dir.path());
    opts.subnet = SUBNET.into();
    opts.farm = Some(farm);
    opts.ansible_server = true;
    let tb = Testbed::start(opts).await.unwrap();

    // the description next to clouds.yaml, 0600, equal to what the testbed reports
    let (server, path) = tb.ansible_server().expect("Ansible server started");
    assert_eq!(path, dir.path().join(ANSIBLE_SERVER_FILE));
    assert_eq!(path.parent(), tb.clouds_yaml().parent());
    assert_eq!(
        std::fs::metadata(path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let read = AnsibleServer::read(path).unwrap();
    assert_eq!(&read, server);
    assert_eq!(read.ip_address, Ipv4Addr::new(10, 231, 14, 254));

    // reachable with the written credentials; ansible-playbook runs there and is logged
    let ip = read.ip_address.to_string();
    let o = ssh(
        &read.username,
        &read.password,
        &ip,
        &format!(
            "ansible-playbook --version && test -f {}/cluster.yml && hostname",
            read.kubespray_root_path
        ),
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.contains("ansible-playbook [core 2."), "{out}");
    assert!(out.trim_end().ends_with(ANSIBLE_SERVER_ID), "{out}");
    let c = Client::login(&tb).await;
    let cmds = c.get("/testbed/hosts").await.1;
    assert!(
        cmds.to_string().contains(ANSIBLE_SERVER_ID),
        "the farm view lists the Ansible server: {cmds}"
    );

    // outside Nova: no server record; the cloud never hands out its address
    let (_, v) = c.get("/compute/v2.1/servers").await;
    assert_eq!(v["servers"].as_array().unwrap().len(), 0, "{v}");
    let id = c.create_stack(kubespray_body("ks", 2)).await;
    let s = c.wait("ks", &id).await;
    assert_eq!(s["stack_status"], "CREATE_COMPLETE", "{s}");
    let res = c.resources("ks", &id, 2).await;
    let srv = servers(&res);
    let mut names: Vec<&str> = srv.iter().map(|s| s.0.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["externalLB", "masterNode", "workerNode", "workerNode"]
    );
    let hosts = tb.cloud().hosts();
    assert_eq!(hosts.len(), 4, "the Ansible server is no Nova server");
    assert!(hosts.iter().all(|h| h.ip.as_deref() != Some(ip.as_str())));

    // the LB server is a host where haproxy checks and starts for real
    let lb = &srv.iter().find(|s| s.0 == "externalLB").unwrap().1;
    let lb_ip = hosts
        .iter()
        .find(|h| h.server_id == *lb)
        .and_then(|h| h.ip.clone())
        .unwrap();
    let o = ssh(
        "ubuntu",
        "ubuntu",
        &lb_ip,
        "printf 'defaults\\n  mode tcp\\n  timeout connect 1s\\n  timeout client 1s\\n  timeout server 1s\\nfrontend f\\n  bind *:8383\\n' | sudo -n tee /etc/haproxy/haproxy.cfg >/dev/null \
         && /usr/sbin/haproxy -c -f /etc/haproxy/haproxy.cfg && sudo -n systemctl start haproxy && systemctl is-active haproxy",
    );
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(out.trim_end().ends_with("active"), "{out}");
    assert!(
        std::net::TcpStream::connect((lb_ip.as_str(), 8383)).is_ok(),
        "haproxy does not listen on the LB"
    );

    tb.shutdown().await;
}
