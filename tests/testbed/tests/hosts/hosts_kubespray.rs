//! The kubespray flavour's testbed side (needs root): the Ansible server runs the real
//! `ansible-playbook` (Debian's `ansible`) of the kubespray stand-in tree over real SSH, with
//! host key checking on, against namespace hosts; real haproxy on an LB host forwards to a master.
//!
//! Prefix `tbt13`, subnet 10.231.13.0/24.

use crate::hosts_common;

use std::collections::BTreeMap;
use std::io::Read as _;
use std::net::{Ipv4Addr, TcpStream};
use std::process::{Command, Output};
use std::time::Duration;

use hosts_common::{Guard, ssh_pw, ssh_pw_raw, stdout};
use testbed::hosts::{
    ANSIBLE_PASSWORD, ANSIBLE_SERVER_ID, ANSIBLE_USER, AnsibleServer, HostFarm, HostSpec,
    KUBESPRAY_ROOT,
};
use vnfkeeper_core::ansible::{self, PlaybookRun};

const CLUSTER: &str = "stack-13";
/// Where the test puts its inventory on the Ansible server (as vnfkeeper's
/// `transferring_inventory_path` would).
const INV: &str = "/home/ansible/kubespray/inventory/t13";
const KNOWN_HOSTS: &str = "/home/ansible/.ssh/t13_known_hosts";
/// The node credentials, in a 0600 vars file instead of argv or the inventory.
const SECRETS: &str = "/home/ansible/.t13-secrets.yml";

/// The play recap per host: (ok, changed, unreachable, failures).
type Recap = BTreeMap<String, (u64, u64, u64, u64)>;

/// The play recap of a run's JSON-lines events, as the kubespray flavour reads it
/// ([`PlaybookRun`]); empty without a stats event.
fn recap(out: &str) -> Recap {
    PlaybookRun::parse(out)
        .stats
        .unwrap_or_default()
        .into_iter()
        .map(|(h, c)| (h, (c.ok, c.changed, c.unreachable, c.failures)))
        .collect()
}

struct Bed {
    g: Guard,
    ansible: AnsibleServer,
    /// known_hosts on the machine for the Ansible server.
    known: tempfile::NamedTempFile,
}

impl Bed {
    /// Runs `cd KUBESPRAY_ROOT && ansible-playbook -i INV/hosts.yaml -e @SECRETS ARGS` on the
    /// Ansible server over password SSH (password from the environment, not argv), with the
    /// JSON-lines stdout callback the kubespray flavour uses.
    fn playbook(&self, args: &str) -> (Output, String) {
        let cmd = format!(
            "cd {KUBESPRAY_ROOT} && ANSIBLE_FORCE_COLOR=0 ANSIBLE_STDOUT_CALLBACK={} ansible-playbook -i {INV}/hosts.yaml -e @{SECRETS} {args}",
            ansible::STDOUT_CALLBACK
        );
        let out = Command::new("sshpass")
            .arg("-e")
            .args([
                "ssh",
                "-o",
                "StrictHostKeyChecking=yes",
                "-o",
                &format!("UserKnownHostsFile={}", self.known.path().display()),
                "-o",
                "LogLevel=ERROR",
                "-o",
                "ConnectTimeout=5",
            ])
            .arg(format!(
                "{}@{}",
                self.ansible.username, self.ansible.ip_address
            ))
            .arg(&cmd)
            .env("SSHPASS", &self.ansible.password)
            .output()
            .unwrap();
        let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
        (out, text)
    }

    fn nodes(&self) -> Vec<String> {
        self.g.farm.kube(CLUSTER).nodes().unwrap()
    }

    async fn write_inventory(&self, workers: &[(&str, Ipv4Addr)]) {
        let m = self.g.ip(11);
        let mut hosts = format!("    master1: {{ansible_host: {m}, ip: {m}, access_ip: {m}}}\n");
        let mut nodes = "        master1:\n".to_string();
        for (n, ip) in workers {
            hosts.push_str(&format!(
                "    {n}: {{ansible_host: {ip}, ip: {ip}, access_ip: {ip}}}\n"
            ));
            nodes.push_str(&format!("        {n}:\n"));
        }
        let inv = format!(
            "all:\n  vars:\n    ansible_user: ubuntu\n    ansible_ssh_common_args: \"-o UserKnownHostsFile={KNOWN_HOSTS} -o StrictHostKeyChecking=yes\"\n  hosts:\n{hosts}  children:\n    kube_control_plane:\n      hosts:\n        master1:\n    kube_node:\n      hosts:\n{nodes}    etcd:\n      hosts:\n        master1:\n    k8s_cluster:\n      children:\n        kube_control_plane:\n        kube_node:\n    calico_rr:\n      hosts: {{}}\n"
        );
        self.g
            .farm
            .write_file(
                ANSIBLE_SERVER_ID,
                &format!("{INV}/hosts.yaml"),
                inv.as_bytes(),
            )
            .await
            .unwrap();
    }

    /// (command count, commands) in a host's command log.
    async fn log(&self, id: &str) -> Vec<String> {
        self.g.farm.command_log(id).await.unwrap()
    }
}

fn spec(id: &str, ip: Ipv4Addr) -> HostSpec {
    HostSpec {
        server_id: id.into(),
        hostname: id.into(),
        ip,
        cluster: CLUSTER.into(),
        volumes: Vec::new(),
        profile: testbed::hosts::HostProfile::Debian,
    }
}

async fn apiserver_pid(farm: &HostFarm, id: &str) -> Option<String> {
    farm.read_file(id, "/run/testbed-apiserver.pid")
        .await
        .ok()
        .map(|b| String::from_utf8_lossy(&b).trim().to_string())
}

fn port_open(ip: Ipv4Addr, port: u16) -> bool {
    TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(2)).is_ok()
}

/// Reads the one line a connection to `ip:port` answers with.
fn banner(ip: Ipv4Addr, port: u16) -> String {
    let mut s = TcpStream::connect_timeout(&(ip, port).into(), Duration::from_secs(3)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut b = String::new();
    let _ = s.read_to_string(&mut b);
    b.trim().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
#[ignore = "needs root (network namespaces, overlay mounts, sshd)"]
async fn kubespray_standin_playbooks_and_haproxy_over_real_ssh() {
    let g = Guard::new("tbt13", 13).await;
    let (m, w1, w10, lb) = (g.ip(11), g.ip(12), g.ip(13), g.ip(14));
    let (a, b, c, d, e) = tokio::join!(
        g.farm.start_ansible_server(g.ip(254)),
        g.farm.start(spec("master1", m)),
        g.farm.start(spec("worker1", w1)),
        g.farm.start(spec("worker10", w10)),
        g.farm.start(spec("lb", lb)),
    );
    let ansible = a.unwrap();
    let infos = [b.unwrap(), c.unwrap(), d.unwrap(), e.unwrap()];
    assert_eq!(ansible.username, ANSIBLE_USER);
    assert_eq!(ansible.password, ANSIBLE_PASSWORD);

    // known_hosts for the Ansible server on the machine, and for the nodes on the Ansible server
    let known = tempfile::NamedTempFile::new().unwrap();
    let server_key = g.farm.host_key(ANSIBLE_SERVER_ID).unwrap();
    std::fs::write(
        known.path(),
        format!("{} {server_key}\n", ansible.ip_address),
    )
    .unwrap();
    let nodes_known: String = infos[..3]
        .iter()
        .map(|h| format!("{} {}\n", h.ip, h.host_key))
        .collect();
    let f = &g.farm;
    let setup = format!(
        "set -e; install -d -o ansible -g ansible -m 0700 /home/ansible/.ssh {INV}; \
         printf '%s' '{nodes_known}' > {KNOWN_HOSTS}; \
         printf 'ansible_password: ubuntu\\n' > {SECRETS}; \
         chown ansible:ansible {KNOWN_HOSTS} {SECRETS}; chmod 0600 {SECRETS}"
    );
    let o = f.exec(ANSIBLE_SERVER_ID, &setup).await.unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let bed = Bed { g, ansible, known };
    let f = &bed.g.farm;

    // the kubespray stand-in tree is where the description says, owned by the login
    let o = f
        .exec(
            ANSIBLE_SERVER_ID,
            &format!(
                "cd {KUBESPRAY_ROOT} && stat -c '%U %n' cluster.yml scale.yml remove-node.yml facts.yml inventory/sample/hosts.yaml inventory/sample/group_vars/k8s_cluster/k8s-cluster.yml"
            ),
        )
        .await
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        stdout(&o)
            .lines()
            .filter(|l| l.starts_with("ansible "))
            .count(),
        6
    );

    // 1. cluster.yml with master1 + worker1: both registered, 6443 open on the master only
    bed.write_inventory(&[("worker1", w1)]).await;
    let (o, text) = bed.playbook("cluster.yml");
    assert!(o.status.success(), "cluster.yml failed:\n{text}");
    let r = recap(&text);
    assert_eq!(r.len(), 2, "{text}");
    assert!(r.values().all(|v| v.2 == 0 && v.3 == 0), "{r:?}");
    assert_eq!(bed.nodes(), ["master1", "worker1"]);
    assert!(port_open(m, 6443), "6443 closed on master1");
    assert!(!port_open(w1, 6443), "6443 open on a worker");
    assert_eq!(banner(m, 6443), "testbed-apiserver master1");
    let node = &bed.g.farm.kube(CLUSTER).read().unwrap()["nodes"]["master1"];
    assert_eq!(node["status"]["addresses"][0]["address"], m.to_string());
    assert!(
        node["metadata"]["labels"]
            .get("node-role.kubernetes.io/control-plane")
            .is_some()
    );
    assert!(
        bed.log(ANSIBLE_SERVER_ID)
            .await
            .iter()
            .any(|c| c.contains("ansible-playbook") && c.contains("cluster.yml"))
    );
    assert!(
        !bed.log("worker1").await.is_empty(),
        "Ansible never reached worker1"
    );

    // the listener survives the SSH session, and a re-run keeps it (idempotent)
    let pid = apiserver_pid(f, "master1").await.expect("pid file");
    let (o, text) = bed.playbook("cluster.yml --limit master1");
    assert!(o.status.success(), "{text}");
    assert_eq!(apiserver_pid(f, "master1").await.as_deref(), Some(&*pid));
    assert_eq!(banner(m, 6443), "testbed-apiserver master1");

    // 2. facts.yml, then scale.yml --limit worker10 touches worker10 only
    bed.write_inventory(&[("worker1", w1), ("worker10", w10)])
        .await;
    let (o, text) = bed.playbook("facts.yml");
    assert!(o.status.success(), "facts.yml failed:\n{text}");
    assert_eq!(recap(&text).len(), 3, "{text}");
    let before = (
        bed.log("master1").await.len(),
        bed.log("worker1").await.len(),
    );
    let w10_before = bed.log("worker10").await.len();
    let (o, text) = bed.playbook("scale.yml --limit worker10");
    assert!(o.status.success(), "scale.yml failed:\n{text}");
    assert_eq!(recap(&text).keys().collect::<Vec<_>>(), ["worker10"]);
    assert_eq!(
        (
            bed.log("master1").await.len(),
            bed.log("worker1").await.len()
        ),
        before,
        "scale.yml --limit worker10 ran commands elsewhere"
    );
    assert!(bed.log("worker10").await.len() > w10_before);
    assert_eq!(bed.nodes(), ["master1", "worker1", "worker10"]);

    // 3. haproxy on the LB host, through the package's install script
    let script = std::fs::read(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../../fixtures/packages/k8s-mgmtdriver-kubespray/Scripts/ExternalLB_installation.sh",
    ))
    .unwrap();
    f.write_file("lb", "/tmp/ExternalLB_installation.sh", &script)
        .await
        .unwrap();
    let out = ssh_pw(
        lb,
        &format!("bash /tmp/ExternalLB_installation.sh -m {m} -w {w1},{w10}"),
    );
    assert!(out.contains("8383"), "{out}");
    assert_eq!(banner(lb, 8383), "testbed-apiserver master1");
    assert_eq!(ssh_pw(lb, "systemctl is-active haproxy").trim(), "active");
    let ha_pid = || async {
        String::from_utf8(f.read_file("lb", "/run/haproxy.pid").await.unwrap()).unwrap()
    };
    let pid1 = ha_pid().await;
    // the same lists again: nothing to do, no reload
    let out = ssh_pw(
        lb,
        &format!("bash /tmp/ExternalLB_installation.sh -m {m} -w {w1},{w10}"),
    );
    assert!(out.contains("unchanged"), "{out}");
    assert_eq!(
        ha_pid().await,
        pid1,
        "haproxy reloaded for an unchanged file"
    );
    // a refused file leaves the running haproxy alone
    let o = f
        .exec(
            "lb",
            "cp /etc/haproxy/haproxy.cfg /root/good.cfg && echo 'bogus directive' >> /etc/haproxy/haproxy.cfg && systemctl reload haproxy",
        )
        .await
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("refused"));
    assert_eq!(ha_pid().await, pid1);
    assert_eq!(banner(lb, 8383), "testbed-apiserver master1");
    // the script rewrites the whole file: worker1 gone, worker10 kept, haproxy reloaded
    let out = ssh_pw(
        lb,
        &format!("bash /tmp/ExternalLB_installation.sh -m {m} -w {w10}"),
    );
    assert!(out.contains("nodeport"), "{out}");
    let cfg =
        String::from_utf8(f.read_file("lb", "/etc/haproxy/haproxy.cfg").await.unwrap()).unwrap();
    let servers: Vec<&str> = cfg
        .lines()
        .filter(|l| l.trim_start().starts_with("server "))
        .collect();
    assert_eq!(servers.len(), 3, "{cfg}");
    assert!(!cfg.contains(&format!(" {w1}")), "{cfg}");
    assert!(cfg.contains(&format!(" {w10}")), "{cfg}");
    assert_ne!(ha_pid().await, pid1, "haproxy was not reloaded");
    assert_eq!(banner(lb, 8383), "testbed-apiserver master1");
    // killed behind systemctl's back: inactive
    f.exec("lb", "kill $(cat /run/haproxy.pid)").await.unwrap();
    let mut inactive = false;
    for _ in 0..50 {
        let o = ssh_pw_raw(lb, "systemctl is-active haproxy");
        if stdout(&o).trim() == "inactive" && o.status.code() == Some(3) {
            inactive = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        inactive,
        "systemctl still reports a killed haproxy as active"
    );

    // 4. remove-node.yml: refused without skip_confirmation, then removes worker1 only
    let (o, text) = bed.playbook("remove-node.yml -e node=worker1");
    assert!(
        !o.status.success(),
        "remove-node.yml ran unconfirmed:\n{text}"
    );
    assert!(text.contains("Delete nodes confirmation failed"), "{text}");
    assert_eq!(bed.nodes(), ["master1", "worker1", "worker10"]);
    let (o, text) = bed.playbook("remove-node.yml -e node=worker1 -e skip_confirmation=yes");
    assert!(o.status.success(), "remove-node.yml failed:\n{text}");
    assert_eq!(bed.nodes(), ["master1", "worker10"]);
    assert!(
        bed.log(ANSIBLE_SERVER_ID)
            .await
            .iter()
            .all(|c| !c.contains("ansible_password") && !c.contains("ubuntu@")),
        "a credential reached the Ansible server's argv"
    );

    // 5. a host that is down, and a host whose key changed: unreachable=1, non-zero exit
    // (Ansible's ControlPersist keeps the connections of the runs above open: end them too)
    f.stop_sshd("worker10").await.unwrap();
    assert!(f.drop_ssh_sessions("worker10").await.unwrap() > 0);
    f.rotate_host_key("worker1").await.unwrap();
    f.drop_ssh_sessions("worker1").await.unwrap();
    let (o, text) = bed.playbook("facts.yml");
    assert_eq!(o.status.code(), Some(4), "{text}");
    let r = recap(&text);
    assert_eq!(r["worker10"].2, 1, "{text}");
    assert_eq!(r["worker1"].2, 1, "{text}");
    assert_eq!(r["master1"], (1, 0, 0, 0), "{text}");
    assert!(text.contains("Host key verification failed"), "{text}");
    // The failure of each host is read with its task and message, as the flavour reports it.
    let run = PlaybookRun::parse(&text);
    assert!(!run.succeeded());
    let failures = run.failures();
    assert_eq!(failures.len(), 2, "{}", run.summary());
    for f in failures {
        assert!(f.unreachable, "{f:?}");
        assert!(!f.task.is_empty(), "{f:?}");
    }
    let summary = run.summary();
    assert!(
        summary.contains("host worker1 unreachable at task")
            && summary.contains("Host key verification failed"),
        "{summary}"
    );
    let (o, text) = bed.playbook("scale.yml --limit worker10");
    assert_ne!(o.status.code(), Some(0), "{text}");
    assert_eq!(recap(&text)["worker10"].2, 1, "{text}");
    assert_eq!(bed.nodes(), ["master1", "worker10"]);

    bed.g.finish().await;
}
