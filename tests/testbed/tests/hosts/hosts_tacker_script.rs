//! Tacker's REAL sample `install_k8s_cluster.sh` (tacker 16.0.0 sdist,
//! `samples/mgmt_driver/kubernetes/install_k8s_cluster.sh`, fetched from PyPI at test time and
//! checked by sha256) run unmodified on a 1-master + 1-worker farm of Ubuntu 20.04-profile hosts,
//! each command as Tacker's sample MgmtDriver (`kubernetes_mgmt.py`) sends it: the `/etc/hosts`
//! lines first, the script uploaded over SFTP to `/tmp/install_k8s_cluster.sh` and run as the
//! login user with `bash`; the join material read on the master as the driver reads it for
//! scale/heal (`sudo kubeadm token create`, the openssl CA-pin pipeline, `sudo kubeadm init phase
//! upload-certs --upload-certs`). Only what this machine cannot run is a stand-in (kubeadm,
//! kubelet, the API, apt, internet downloads; see tests/testbed/README.md).
//!
//! [`hosts_tacker_v2_install_script`] does the same with the v2 sample's script
//! (`samples/mgmt_driver/kubernetes/sol_v2_kubernetes_vnf_package/contents/Scripts/
//! install_k8s_cluster.sh`: containerd, runc and the cilium CLI from release downloads,
//! the Kubernetes apt key through `gpg --dearmor`) and the arguments `kubernetes_mgmt_v2.py`
//! passes, reading the join material from the master's output as that driver does.
//!
//! Join tokens and certificate keys are secrets: nothing here prints them (output shown on a
//! failure goes through [`mask`]).

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use sha2::{Digest, Sha256};

use crate::hosts_common;

use hosts_common::*;
use testbed::hosts::{HostProfile, HostSpec};

const CLUSTER: &str = "stack-tacker-script";
const CLUSTER_V2: &str = "stack-tacker-v2-script";
/// sha256 of `samples/mgmt_driver/kubernetes/install_k8s_cluster.sh` in tacker 16.0.0's sdist.
const SCRIPT_SHA256: &str = "78262ac2126191ce7f6420fd7f37c74e2ce849583cc392c1593a8e4e5c263047";

/// sha256 of the v2 sample's `install_k8s_cluster.sh` (`sol_v2_kubernetes_vnf_package`) in
/// tacker 16.0.0's sdist.
const V2_SCRIPT_SHA256: &str = "e7422dd6c32e7ac94fd174b810cb85e736d5801a8a0253fb3977ed31daecbd77";
/// Where the v2 sample's script is under the directory `scripts/tacker-samples` prints.
const V2_SCRIPT: &str = "samples/mgmt_driver/kubernetes/sol_v2_kubernetes_vnf_package/contents/Scripts/install_k8s_cluster.sh";

/// Tacker 16.0.0's sample install script, fetched once from PyPI by `scripts/tacker-samples`
/// (cached under `$VNFKEEPER_CACHE`); returns its path.
fn tacker_script() -> PathBuf {
    sample_script("install_k8s_cluster.sh", SCRIPT_SHA256)
}

/// The file `rel` of Tacker 16.0.0's samples (see [`tacker_script`]), checked against `sha256`.
fn sample_script(rel: &str, sha256: &str) -> PathBuf {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(repo.join("scripts/tacker-samples"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scripts/tacker-samples failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let script = dir.join(rel);
    let data = std::fs::read(&script).unwrap();
    let sum: String = Sha256::digest(&data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(
        sum,
        sha256,
        "{} is not tacker 16.0.0's script",
        script.display()
    );
    script
}

/// Replaces what looks like a bootstrap token (`[a-z0-9]{6}.[a-z0-9]{16}`) or a 64-hex-digit
/// value (certificate key, CA hash) by a placeholder, so failure messages show no secret.
fn mask(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        let token = run.len() == 23
            && run.as_bytes()[6] == b'.'
            && run
                .char_indices()
                .all(|(i, c)| i == 6 || c.is_ascii_lowercase() || c.is_ascii_digit());
        let hex = run.len() == 64 && run.chars().all(|c| c.is_ascii_hexdigit());
        out.push_str(if token {
            "<token>"
        } else if hex {
            "<hex64>"
        } else {
            run
        });
        run.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '.' {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// The last `n` lines of the output, masked.
fn tail(o: &Output, n: usize) -> String {
    let show = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        let lines: Vec<&str> = s.lines().collect();
        mask(&lines[lines.len().saturating_sub(n)..].join("\n"))
    };
    format!(
        "exit {:?}\n--- stdout (last {n} lines) ---\n{}\n--- stderr (last {n} lines) ---\n{}",
        o.status.code(),
        show(&o.stdout),
        show(&o.stderr)
    )
}

const SSH_OPTS: [&str; 8] = [
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "LogLevel=ERROR",
    "-o",
    "ConnectTimeout=5",
];

/// `ssh ubuntu@IP CMD` by password (the driver's paramiko login), bounded by `secs`; runs on a
/// blocking thread. The command may carry secrets: callers print only [`tail`].
async fn ssh(ip: Ipv4Addr, cmd: String, secs: u32) -> Output {
    tokio::task::spawn_blocking(move || {
        Command::new("timeout")
            .arg(secs.to_string())
            .args(["sshpass", "-p", "ubuntu", "ssh"])
            .args(SSH_OPTS)
            .arg(format!("ubuntu@{ip}"))
            .arg(cmd)
            .output()
            .unwrap()
    })
    .await
    .unwrap()
}

/// Like [`ssh`], but the command must succeed; returns stdout.
async fn ssh_ok(ip: Ipv4Addr, cmd: &str) -> String {
    let o = ssh(ip, cmd.to_string(), 120).await;
    assert!(o.status.success(), "on {ip}: {}", tail(&o, 20));
    stdout(&o)
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `TESTBED_SHOW_SCRIPT_OUTPUT=1`: print the script runs' whole output (masked) to stderr.
fn show_output() -> bool {
    std::env::var_os("TESTBED_SHOW_SCRIPT_OUTPUT").is_some()
}

/// The words of `kubectl get nodes -o wide`'s row for node `name`.
fn row(nodes: &str, name: &str) -> Vec<String> {
    nodes
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("{name} missing in\n{nodes}"))
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

fn spec(id: &str, ip: Ipv4Addr) -> HostSpec {
    spec_in(CLUSTER, id, ip)
}

fn spec_in(cluster: &str, id: &str, ip: Ipv4Addr) -> HostSpec {
    HostSpec {
        server_id: id.into(),
        // the VM's name before the script renames it (hostnamectl set-hostname masterNN)
        hostname: format!("vkq-{id}"),
        ip,
        cluster: cluster.into(),
        volumes: Vec::new(),
        profile: HostProfile::Ubuntu2004,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces) and PyPI once (tacker 16.0.0 sdist)"]
async fn hosts_tacker_install_script() {
    let started = std::time::Instant::now();
    let script = tokio::task::spawn_blocking(tacker_script).await.unwrap();
    let swaps_before = std::fs::read_to_string("/proc/swaps").unwrap();
    let g = Guard::new("vkq", 94).await;
    let (m, w) = tokio::join!(
        g.farm.start(spec("master", g.ip(11))),
        g.farm.start(spec("worker", g.ip(12)))
    );
    let (m, w) = (m.unwrap().ip, w.unwrap().ip);
    let hosts = format!("{m} master11\\n{w} worker12");

    for ip in [m, w] {
        // _init_commander_and_send_install_scripts: SFTP as the login user
        let o = Command::new("sshpass")
            .args(["-p", "ubuntu", "scp", "-q"])
            .args(SSH_OPTS)
            .arg(&script)
            .arg(format!("ubuntu@{ip}:/tmp/install_k8s_cluster.sh"))
            .output()
            .unwrap();
        assert!(o.status.success(), "upload to {ip}: {}", err(&o));
        // the driver's /etc/hosts lines, written before the install (four separate commands)
        for cmd in [
            "> /tmp/tmp_hosts".to_string(),
            "cp /etc/hosts /tmp/tmp_hosts".to_string(),
            format!("sed -i '$a{hosts}' /tmp/tmp_hosts"),
            "sudo mv /tmp/tmp_hosts /etc/hosts;".to_string(),
        ] {
            ssh_ok(ip, &cmd).await;
        }
    }
    assert_eq!(
        ssh_ok(m, "kubeadm version; echo $?").await.lines().last(),
        Some("127"),
        "no kubeadm before the install"
    );

    // first master: bash /tmp/install_k8s_cluster.sh -m <masters> -i <cluster ip> -p <pod> -a <svc>
    let t = std::time::Instant::now();
    let o = ssh(
        m,
        format!("bash /tmp/install_k8s_cluster.sh -m {m} -i {m} -p 192.168.0.0/16 -a 10.96.0.0/12"),
        900,
    )
    .await;
    let master_secs = t.elapsed().as_secs();
    if show_output() {
        eprintln!(
            "MASTER STDOUT\n{}\nMASTER STDERR\n{}",
            mask(&stdout(&o)),
            mask(&err(&o))
        );
    }
    let out = stdout(&o);
    assert!(o.status.success(), "master install: {}", tail(&o, 40));
    assert!(
        out.lines().any(|l| l == "Install Success!"),
        "master install: {}",
        tail(&o, 40)
    );
    assert!(
        out.lines().any(|l| l == format!("server:https://{m}:6443")),
        "server line: {}",
        tail(&o, 40)
    );
    assert!(
        out.contains("Your Kubernetes control-plane has initialized successfully!"),
        "{}",
        tail(&o, 40)
    );
    assert!(
        out.contains("daemonset.apps/calico-node created"),
        "{}",
        tail(&o, 40)
    );
    let printed_hash = out
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("ssl_ca_cert_hash:"))
        .map(str::to_string)
        .unwrap_or_default();
    assert_eq!(
        ssh_ok(m, "hostname; cat /etc/hostname").await,
        "master11\nmaster11\n"
    );
    // what the other stand-ins were asked for on the way
    assert_eq!(
        ssh_ok(m, "apt-mark showhold").await,
        "kubeadm\nkubectl\nkubelet\n"
    );
    assert_eq!(
        ssh_ok(
            m,
            "cat /etc/apt/sources.list.d/testbed-add-apt-repository.list"
        )
        .await,
        "deb [arch=amd64] https://download.docker.com/linux/ubuntu focal stable\n"
    );
    assert_eq!(
        ssh_ok(m, "sudo cat /var/lib/testbed/curl.log").await,
        "curl https://download.docker.com/linux/ubuntu/gpg -> -\n\
         curl https://packages.cloud.google.com/apt/doc/apt-key.gpg -> -\n\
         curl https://docs.projectcalico.org/manifests/calico.yaml -> calico.yaml\n"
    );

    // join material, as the driver reads it on the master (heal: with sudo)
    let token = ssh_ok(m, "sudo kubeadm token create").await;
    let token = token.lines().next().unwrap_or("").to_string();
    assert!(
        token.len() == 23 && mask(&token) == "<token>",
        "token create printed no token of kubeadm's form"
    );
    let hash = ssh_ok(
        m,
        "sudo openssl x509 -pubkey -in /etc/kubernetes/pki/ca.crt | openssl rsa -pubin -outform der 2>/dev/null | openssl dgst -sha256 -hex | sed 's/^.* //'",
    )
    .await;
    let hash = hash.lines().next().unwrap_or("").to_string();
    assert_eq!(hash.len(), 64, "CA hash {hash:?}");
    assert_eq!(
        hash, printed_hash,
        "the script's ssl_ca_cert_hash is the CA pin"
    );
    let certs = ssh_ok(m, "sudo kubeadm init phase upload-certs --upload-certs").await;
    let lines: Vec<&str> = certs.lines().collect();
    assert_eq!(lines.len(), 3, "upload-certs prints 3 lines");
    assert_eq!(lines[1], "[upload-certs] Using certificate key:");
    let cert_key = lines[2].to_string();
    assert_eq!(
        mask(&cert_key),
        "<hex64>",
        "certificate key is 64 hex digits"
    );

    // without sudo (as the sample driver's scale_end sends it) kubeadm cannot read admin.conf
    let o = ssh(m, "kubeadm token create;".into(), 60).await;
    assert!(
        !o.status.success()
            && err(&o).contains("open /etc/kubernetes/admin.conf: permission denied"),
        "token create as the login user: {}",
        tail(&o, 10)
    );

    // worker: export ha_flag=False;bash /tmp/install_k8s_cluster.sh -w <ip> -i <cluster ip> -t -s
    let worker_secs = install_worker(w, m, &token, &hash).await;

    // the cluster as kubectl on the master shows it
    let nodes = ssh_ok(m, "kubectl get nodes -o wide").await;
    let (mr, wr) = (row(&nodes, "master11"), row(&nodes, "worker12"));
    assert_eq!(mr[1], "Ready", "{nodes}");
    assert_eq!(mr[2], "control-plane", "{nodes}");
    assert_eq!(mr.last().unwrap(), &m.to_string(), "{nodes}");
    assert_eq!(wr[1], "Ready", "{nodes}");
    assert_eq!(wr.last().unwrap(), &w.to_string(), "{nodes}");
    let mut names = g.farm.kube(CLUSTER).nodes().unwrap();
    names.sort();
    assert_eq!(names, ["master11", "worker12"]);
    // the join material read on the master is the cluster's current one
    let state = g
        .farm
        .kube(CLUSTER)
        .kubeadm_state()
        .unwrap()
        .expect("kubeadm state");
    assert_eq!(state["endpoint"], format!("{m}:6443"));
    assert_eq!(state["control_planes"], serde_json::json!(["master11"]));
    assert_eq!(state["workers"], serde_json::json!(["worker12"]));
    assert!(
        state["certificate_key"].as_str() == Some(cert_key.as_str()),
        "upload-certs' key is the cluster's certificate key"
    );
    assert!(
        state["tokens"].get(&token).is_some(),
        "the created token is known to the cluster"
    );
    // the pod network manifest again: kinds the stand-in does not model are "unchanged"
    assert!(
        ssh_ok(m, "kubectl apply -f calico.yaml")
            .await
            .contains("daemonset.apps/calico-node unchanged")
    );
    // the machine's swap was never touched
    assert_eq!(
        std::fs::read_to_string("/proc/swaps").unwrap(),
        swaps_before
    );

    // a second init on the master is refused by kubeadm's preflight
    let o = ssh(
        m,
        format!("sudo kubeadm init --pod-network-cidr=192.168.0.0/16 --service-cidr=10.96.0.0/12 --control-plane-endpoint {m}:6443 --upload-certs"),
        60,
    )
    .await;
    assert!(!o.status.success(), "second init: {}", tail(&o, 10));
    assert!(
        err(&o).contains("[ERROR FileAvailable--etc-kubernetes-manifests-kube-apiserver.yaml]"),
        "second init: {}",
        tail(&o, 10)
    );

    // joins: a joined node is refused; after reset, wrong material fails, the right one works
    let join = |ep: String, tok: &str, h: &str, extra: &str| {
        format!(
            "sudo kubeadm join {ep} --token {tok} --discovery-token-ca-cert-hash sha256:{h}{extra}"
        )
    };
    let o = ssh(w, join(format!("{m}:6443"), &token, &hash, ""), 60).await;
    assert!(
        !o.status.success()
            && err(&o).contains("[ERROR FileAvailable--etc-kubernetes-kubelet.conf]"),
        "join on a joined node: {}",
        tail(&o, 10)
    );
    ssh_ok(w, "sudo kubeadm reset -f").await;
    let wrong_token = "abcdef.0123456789abcdef";
    let o = ssh(w, join(format!("{m}:6443"), wrong_token, &hash, ""), 60).await;
    assert!(
        !o.status.success()
            && err(&o).contains("could not find a JWS signature in the cluster-info ConfigMap"),
        "join with a wrong token: {}",
        tail(&o, 10)
    );
    let o = ssh(
        w,
        join(format!("{m}:6443"), &token, &"0".repeat(64), ""),
        60,
    )
    .await;
    assert!(
        !o.status.success() && err(&o).contains("are pinned"),
        "join with a wrong CA hash: {}",
        tail(&o, 10)
    );
    // ha_flag unset: the worker joins port 16443, where nothing listens
    let o = ssh(w, join(format!("{m}:16443"), &token, &hash, ""), 60).await;
    assert!(
        !o.status.success() && err(&o).contains("connect: connection refused"),
        "join on the wrong port: {}",
        tail(&o, 10)
    );
    let wrong_key = format!(" --control-plane --certificate-key {}", "0".repeat(64));
    let o = ssh(w, join(format!("{m}:6443"), &token, &hash, &wrong_key), 60).await;
    assert!(
        !o.status.success() && err(&o).contains("message authentication failed"),
        "control-plane join with a wrong certificate key: {}",
        tail(&o, 10)
    );
    let o = ssh(w, join(format!("{m}:6443"), &token, &hash, ""), 60).await;
    assert!(
        o.status.success() && stdout(&o).contains("This node has joined the cluster:"),
        "rejoin: {}",
        tail(&o, 10)
    );
    let nodes = ssh_ok(m, "kubectl get nodes -o wide").await;
    assert_eq!(row(&nodes, "worker12")[1], "Ready", "{nodes}");

    println!(
        "tacker install_k8s_cluster.sh: master {master_secs} s, worker {worker_secs} s, whole test {} s",
        started.elapsed().as_secs()
    );
    g.finish().await;
}

/// Uploads `script` to `/tmp/install_k8s_cluster.sh` on each host and writes the driver's
/// `/etc/hosts` lines there (`_init_commander_and_send_install_scripts`, `_set_node_ip_in_hosts`).
async fn upload_and_set_hosts(script: &Path, ips: &[Ipv4Addr], hosts: &str, first_truncate: bool) {
    for ip in ips {
        let o = Command::new("sshpass")
            .args(["-p", "ubuntu", "scp", "-q"])
            .args(SSH_OPTS)
            .arg(script)
            .arg(format!("ubuntu@{ip}:/tmp/install_k8s_cluster.sh"))
            .output()
            .unwrap();
        assert!(o.status.success(), "upload to {ip}: {}", err(&o));
        let mut cmds = Vec::new();
        if first_truncate {
            cmds.push("> /tmp/tmp_hosts".to_string());
        }
        cmds.extend([
            "cp /etc/hosts /tmp/tmp_hosts".to_string(),
            format!("sed -i '$a{hosts}' /tmp/tmp_hosts"),
            "sudo mv /tmp/tmp_hosts /etc/hosts;".to_string(),
        ]);
        for cmd in cmds {
            ssh_ok(*ip, &cmd).await;
        }
    }
}

/// Runs the script on worker `w` as Tacker's drivers do (`export ha_flag=False;bash
/// /tmp/install_k8s_cluster.sh -w <ip> -i <cluster ip> -t <token> -s <hash>`), asserts it
/// printed "Install Success!" and renamed the host `worker12`; returns its seconds.
async fn install_worker(w: Ipv4Addr, m: Ipv4Addr, token: &str, hash: &str) -> u64 {
    let t = std::time::Instant::now();
    let o = ssh(
        w,
        format!("export ha_flag=False;bash /tmp/install_k8s_cluster.sh -w {w} -i {m} -t {token} -s {hash}"),
        900,
    )
    .await;
    let secs = t.elapsed().as_secs();
    if show_output() {
        eprintln!(
            "WORKER STDOUT\n{}\nWORKER STDERR\n{}",
            mask(&stdout(&o)),
            mask(&err(&o))
        );
    }
    assert!(o.status.success(), "worker install: {}", tail(&o, 40));
    assert!(
        stdout(&o).lines().any(|l| l == "Install Success!"),
        "worker install: {}",
        tail(&o, 40)
    );
    assert_eq!(ssh_ok(w, "hostname").await, "worker12\n");
    secs
}

/// The value of the last output line `key:VALUE` (how `kubernetes_mgmt_v2.py` reads the first
/// master's `token:`, `server:`, `ssl_ca_cert_hash:`).
fn printed(out: &str, key: &str) -> String {
    out.lines()
        .rev()
        .find_map(|l| l.strip_prefix(key))
        .map(str::to_string)
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces) and PyPI once (tacker 16.0.0 sdist)"]
async fn hosts_tacker_v2_install_script() {
    let started = std::time::Instant::now();
    let script = tokio::task::spawn_blocking(|| sample_script(V2_SCRIPT, V2_SCRIPT_SHA256))
        .await
        .unwrap();
    let swaps_before = std::fs::read_to_string("/proc/swaps").unwrap();
    let g = Guard::new("vkr", 95).await;
    let (m, w) = tokio::join!(
        g.farm.start(spec_in(CLUSTER_V2, "master", g.ip(11))),
        g.farm.start(spec_in(CLUSTER_V2, "worker", g.ip(12)))
    );
    let (m, w) = (m.unwrap().ip, w.unwrap().ip);
    upload_and_set_hosts(
        &script,
        &[m, w],
        &format!("{m} master11\\n{w} worker12"),
        false,
    )
    .await;

    // first master: bash /tmp/install_k8s_cluster.sh -m <masters> -i <cluster ip> -p <pod> -a <svc>
    let t = std::time::Instant::now();
    let o = ssh(
        m,
        format!("bash /tmp/install_k8s_cluster.sh -m {m} -i {m} -p 192.168.0.0/16 -a 10.96.0.0/12"),
        900,
    )
    .await;
    let master_secs = t.elapsed().as_secs();
    if show_output() {
        eprintln!(
            "MASTER STDOUT\n{}\nMASTER STDERR\n{}",
            mask(&stdout(&o)),
            mask(&err(&o))
        );
    }
    let out = stdout(&o);
    assert!(o.status.success(), "master install: {}", tail(&o, 40));
    assert!(
        out.lines().any(|l| l == "Install Success!"),
        "master install: {}",
        tail(&o, 40)
    );
    assert_eq!(printed(&out, "server:"), format!("https://{m}:6443"));
    assert!(
        out.contains("Cilium was successfully installed!")
            && out.contains("Cilium:             OK"),
        "cilium: {}",
        tail(&o, 40)
    );
    // what the script fetched, checked and installed on the way
    assert_eq!(
        ssh_ok(m, "sudo cat /var/lib/testbed/curl.log").await,
        "curl https://github.com/containerd/containerd/releases/download/v1.7.11/containerd-1.7.11-linux-amd64.tar.gz -> containerd-1.7.11-linux-amd64.tar.gz\n\
         curl https://github.com/containerd/containerd/releases/download/v1.7.11/containerd-1.7.11-linux-amd64.tar.gz.sha256sum -> containerd-1.7.11-linux-amd64.tar.gz.sha256sum\n\
         curl https://raw.githubusercontent.com/containerd/containerd/main/containerd.service -> /usr/local/lib/systemd/system/containerd.service\n\
         curl https://github.com/opencontainers/runc/releases/download/v1.1.10/runc.amd64 -> runc.amd64\n\
         curl https://github.com/opencontainers/runc/releases/download/v1.1.10/runc.sha256sum -> runc.sha256sum\n\
         curl https://pkgs.k8s.io/core:/stable:/v1.26/deb/Release.key -> -\n\
         curl https://raw.githubusercontent.com/cilium/cilium-cli/main/stable.txt -> -\n\
         curl https://github.com/cilium/cilium-cli/releases/download/v0.15.19/cilium-linux-amd64.tar.gz -> cilium-linux-amd64.tar.gz\n\
         curl https://github.com/cilium/cilium-cli/releases/download/v0.15.19/cilium-linux-amd64.tar.gz.sha256sum -> cilium-linux-amd64.tar.gz.sha256sum\n"
    );
    assert!(
        out.contains("containerd-1.7.11-linux-amd64.tar.gz: OK"),
        "sha256sum --check of containerd: {}",
        tail(&o, 40)
    );
    assert!(out.contains("runc.amd64: OK"), "{}", tail(&o, 40));
    assert!(
        out.contains("cilium-linux-amd64.tar.gz: OK"),
        "{}",
        tail(&o, 40)
    );
    assert_eq!(
        ssh_ok(
            m,
            "containerd --version; /usr/local/sbin/runc --version | head -n1; grep SystemdCgroup /etc/containerd/config.toml"
        )
        .await,
        "containerd github.com/containerd/containerd v1.7.11 testbed-standin\nrunc version 1.1.10\n            SystemdCgroup = true\n"
    );
    // the apt key went through the real gpg --dearmor (binary OpenPGP: a public-key packet)
    assert_eq!(
        ssh_ok(
            m,
            "od -An -tx1 -N1 /etc/apt/keyrings/kubernetes-apt-keyring.gpg"
        )
        .await
        .trim(),
        "98"
    );
    assert_eq!(
        ssh_ok(m, "apt-mark showhold").await,
        "kubeadm\nkubectl\nkubelet\n"
    );
    assert_eq!(
        ssh_ok(m, "cat /var/lib/testbed/apt/installed/kubeadm").await,
        "1.26.8-1.1"
    );
    assert_eq!(
        ssh_ok(
            m,
            "cat /var/lib/testbed/modprobe.log; cat /var/lib/testbed/sysctl.log"
        )
        .await,
        "modprobe overlay\nmodprobe br_netfilter\nsysctl --system\n"
    );
    assert_eq!(
        ssh_ok(m, "hostname; stat -c %a /var/lib/kubelet/config.yaml").await,
        "master11\n666\n"
    );

    // worker, with the material the driver parsed from the master's output:
    // export ha_flag=False;bash /tmp/install_k8s_cluster.sh -w <ip> -i <cluster ip> -t -s
    let (token, hash) = (printed(&out, "token:"), printed(&out, "ssl_ca_cert_hash:"));
    assert_eq!(mask(&token), "<token>", "token line");
    assert_eq!(mask(&hash), "<hex64>", "ssl_ca_cert_hash line");
    let worker_secs = install_worker(w, m, &token, &hash).await;

    // the node joined: the cluster as kubectl on the master shows it
    let nodes = ssh_ok(m, "kubectl get nodes -o wide").await;
    let (mr, wr) = (row(&nodes, "master11"), row(&nodes, "worker12"));
    assert_eq!(mr[1], "Ready", "{nodes}");
    assert_eq!(mr.last().unwrap(), &m.to_string(), "{nodes}");
    assert_eq!(wr[1], "Ready", "{nodes}");
    assert_eq!(wr.last().unwrap(), &w.to_string(), "{nodes}");
    let state = g
        .farm
        .kube(CLUSTER_V2)
        .kubeadm_state()
        .unwrap()
        .expect("kubeadm state");
    assert_eq!(state["control_planes"], serde_json::json!(["master11"]));
    assert_eq!(state["workers"], serde_json::json!(["worker12"]));
    // a second cilium install is refused as Helm refuses it
    let o = ssh(m, "cilium install --version 1.14.5".into(), 60).await;
    assert!(
        !o.status.success() && err(&o).contains("cannot re-use a name that is still in use"),
        "second cilium install: {}",
        tail(&o, 10)
    );
    assert_eq!(
        std::fs::read_to_string("/proc/swaps").unwrap(),
        swaps_before
    );
    println!(
        "tacker v2 install_k8s_cluster.sh: master {master_secs} s, worker {worker_secs} s, whole test {} s",
        started.elapsed().as_secs()
    );
    g.finish().await;
}

#[test]
fn mask_hides_tokens_and_keys() {
    let key = "0123456789abcdef".repeat(4);
    let text = format!(
        "kubeadm join 10.231.94.11:6443 --token abcdef.0123456789abcdef \\\n\t--discovery-token-ca-cert-hash sha256:{key} --certificate-key {key}\ntoken:zz9zz9.zz9zz9zz9zz9zz9z\n"
    );
    assert_eq!(
        mask(&text),
        "kubeadm join 10.231.94.11:6443 --token <token> \\\n\t--discovery-token-ca-cert-hash sha256:<hex64> --certificate-key <hex64>\ntoken:<token>\n"
    );
    // other words are kept
    assert_eq!(
        mask("master11 Ready 10.231.94.12"),
        "master11 Ready 10.231.94.12"
    );
}
