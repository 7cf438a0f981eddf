//! Fan-out benchmark (needs root): one configuration step — make sure `/etc/hosts` holds a registry
//! entry (check, apply, check again; the private registry's "hosts_string" step) — on 50 testbed
//! hosts, run three ways in one process, each with cold SSH sessions:
//!   1. vnfkeeper's bounded-parallel fan-out (all 50 at once, as a stage with
//!      `max_parallel_hosts = 50` runs it),
//!   2. the same step host after host (the reference MgmtDrivers' way),
//!   3. `ansible -f 50 -m shell` with the same script on the same hosts (ansible-core in a venv
//!      under /var/tmp, installed from PyPI on first use).
//!
//! Prints wall times and the ratios against the slowest single host and against Ansible
//! (targets: fan-out ≤ 1.5× the slowest single host, ≥ 3× faster than Ansible).
//!
//! Run: `cargo bench --bench fanout` (optionally `-- --hosts N`).

use std::net::IpAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use testbed::hosts::{FarmConfig, HostFarm, HostSpec};
use vnfkeeper::intake::wire::Secret;
use vnfkeeper::remote::{Auth, HostKeyPolicy, Remote, RemoteCommand, SshConfig, SshRemote, Target};

const PREFIX: &str = "vkf";
const NET: &str = "10.231.80";
const ANSIBLE_VENV: &str = "/var/tmp/vnfkeeper-bench-ansible";
const ENTRY: &str = "10.231.80.1 registry.vnfkeeper.test";

/// The step: MODE check → exit 0 done / 10 needed; MODE apply → add the line.
const SCRIPT: &str = r#"set -eu
mode=$1; line=$2
if grep -qxF "$line" /etc/hosts; then echo "already done"; exit 0; fi
[ "$mode" = check ] && exit 10
printf '%s\n' "$line" >> /etc/hosts
grep -qxF "$line" /etc/hosts"#;

fn main() {
    let hosts: usize = std::env::args()
        .skip_while(|a| a != "--hosts")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(50);
    if Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout != b"0\n")
        .unwrap_or(true)
    {
        eprintln!("fanout benchmark: needs root (network namespaces); skipped");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(run(hosts));
}

async fn run(n: usize) {
    let _ = testbed::hosts::down_all(PREFIX).await;
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let ansible = ensure_ansible();
    let dir = tempfile::Builder::new()
        .prefix("vk-fanout-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let farm = Arc::new(
        HostFarm::new(FarmConfig {
            state_dir: dir.path().join("hosts"),
            prefix: PREFIX.into(),
            bridge_cidr: format!("{NET}.1/24").parse().unwrap(),
        })
        .await
        .expect("farm"),
    );
    let t = Instant::now();
    let specs: Vec<HostSpec> = (0..n)
        .map(|i| HostSpec {
            server_id: format!("bench-{i:02}"),
            hostname: format!("bench-{i:02}"),
            ip: format!("{NET}.{}", 10 + i).parse().unwrap(),
            cluster: "bench".into(),
            volumes: Vec::new(),
        })
        .collect();
    let started: Vec<_> =
        futures::future::join_all(specs.iter().cloned().map(|s| farm.start(s))).await;
    for s in &started {
        s.as_ref().expect("host start");
    }
    eprintln!("{n} hosts up in {:.2} s", t.elapsed().as_secs_f64());
    let targets: Vec<Target> = specs
        .iter()
        .map(|s| Target {
            address: IpAddr::V4(s.ip),
            port: 22,
            username: "ubuntu".into(),
            auth: Auth::Password(Secret::new("ubuntu".to_owned())),
            host_key: HostKeyPolicy::TrustOnFirstUse,
            label: s.server_id.clone(),
        })
        .collect();

    // 1. Host after host (also gives the slowest single host).
    reset(&farm, &specs).await;
    let remote = SshRemote::new(SshConfig::default());
    let t = Instant::now();
    let mut per_host = Vec::new();
    for target in &targets {
        let h = Instant::now();
        step(&remote, target).await;
        per_host.push(h.elapsed());
    }
    let sequential = t.elapsed();
    remote.close().await;
    verify(&farm, &specs).await;
    let slowest = per_host.iter().max().copied().unwrap_or_default();

    // 2. Fan-out, as an engine stage runs it.
    reset(&farm, &specs).await;
    let remote = SshRemote::new(SshConfig::default());
    let cpu0 = cpu_ticks();
    let t = Instant::now();
    futures::stream::iter(targets.iter())
        .map(|target| step(&remote, target))
        .buffer_unordered(n)
        .collect::<Vec<()>>()
        .await;
    let fanout = t.elapsed();
    let fanout_busy = busy_share(cpu0, cpu_ticks());
    remote.close().await;
    verify(&farm, &specs).await;

    // 3. Ansible, same script, same hosts.
    reset(&farm, &specs).await;
    let inventory = dir.path().join("inventory.ini");
    let mut inv = String::from("[all]\n");
    for s in &specs {
        inv.push_str(&format!("{} ansible_host={}\n", s.server_id, s.ip));
    }
    inv.push_str(
        "\n[all:vars]\nansible_user=ubuntu\nansible_password=ubuntu\nansible_python_interpreter=/usr/bin/python3\n\
         ansible_ssh_common_args='-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'\n",
    );
    std::fs::write(&inventory, inv).unwrap();
    let t = Instant::now();
    let out = Command::new(&ansible)
        .args(["all", "-i"])
        .arg(&inventory)
        .args(["-f", &n.to_string(), "-b", "-m", "shell", "-a"])
        .arg(format!(
            "sh -c '{}' step apply '{ENTRY}'",
            SCRIPT.replace('\'', "'\\''")
        ))
        .env("ANSIBLE_HOST_KEY_CHECKING", "False")
        .env("ANSIBLE_LOCAL_TEMP", dir.path().join("ansible-tmp"))
        .env("ANSIBLE_HOME", dir.path().join("ansible-home"))
        .output()
        .expect("run ansible");
    let ansible_time = t.elapsed();
    assert!(
        out.status.success(),
        "ansible failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    verify(&farm, &specs).await;

    println!(
        "fan-out benchmark: one configuration step (check, apply, check) on {n} testbed hosts, {} cores",
        cores()
    );
    println!(
        "  slowest single host (in the sequential run): {:>7.3} s",
        slowest.as_secs_f64()
    );
    println!(
        "  host after host:                             {:>7.3} s",
        sequential.as_secs_f64()
    );
    println!(
        "  vnfkeeper fan-out (all {n} at once):          {:>7.3} s",
        fanout.as_secs_f64()
    );
    println!(
        "  ansible -f {n} -m shell:                       {:>7.3} s",
        ansible_time.as_secs_f64()
    );
    println!(
        "  fan-out / slowest single host:               {:>7.2}   (target ≤ 1.5)",
        fanout.as_secs_f64() / slowest.as_secs_f64()
    );
    println!(
        "  ansible / fan-out:                           {:>7.2}   (target ≥ 3)",
        ansible_time.as_secs_f64() / fanout.as_secs_f64()
    );
    println!(
        "  host after host / fan-out:                   {:>7.2}",
        sequential.as_secs_f64() / fanout.as_secs_f64()
    );
    println!(
        "  CPU busy during the fan-out:                 {:>6.0} % of {} cores (the hosts share them with the client)",
        fanout_busy * 100.0,
        cores()
    );
    farm.shutdown().await.unwrap();
    let report = testbed::hosts::down_all(PREFIX).await.unwrap();
    assert!(report.is_empty(), "left behind: {report:?}");
}

/// check → apply → check on one host, as the engine runs a step; panics on failure.
async fn step(remote: &SshRemote, target: &Target) {
    let run = |mode: &'static str| {
        RemoteCommand::script(SCRIPT)
            .arg(mode)
            .arg(ENTRY)
            .sudo(true)
            .timeout(Duration::from_secs(60))
            .step("bench.hosts-entry")
    };
    let check = remote.run(target, &run("check")).await.expect("check");
    if check.exit_status == Some(0) {
        return;
    }
    assert_eq!(check.exit_status, Some(10), "{}: {:?}", target.label, check);
    let apply = remote.run(target, &run("apply")).await.expect("apply");
    assert_eq!(apply.exit_status, Some(0), "{}: {:?}", target.label, apply);
    let verify = remote.run(target, &run("check")).await.expect("verify");
    assert_eq!(
        verify.exit_status,
        Some(0),
        "{}: {:?}",
        target.label,
        verify
    );
}

/// Removes the entry on every host (not timed).
async fn reset(farm: &HostFarm, specs: &[HostSpec]) {
    for s in specs {
        let out = farm
            .exec(
                &s.server_id,
                "sed -i '/registry.vnfkeeper.test/d' /etc/hosts",
            )
            .await
            .unwrap();
        assert!(out.status.success());
    }
}

/// Every host has the entry exactly once.
async fn verify(farm: &HostFarm, specs: &[HostSpec]) {
    for s in specs {
        let out = farm
            .exec(&s.server_id, &format!("grep -cxF '{ENTRY}' /etc/hosts"))
            .await
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "1",
            "{}",
            s.server_id
        );
    }
}

/// The `ansible` executable, installed into a venv from PyPI on first use.
fn ensure_ansible() -> std::path::PathBuf {
    let bin = std::path::Path::new(ANSIBLE_VENV).join("bin/ansible");
    if !bin.exists() {
        eprintln!("installing ansible-core into {ANSIBLE_VENV} (once)");
        let ok = Command::new("python3")
            .args(["-m", "venv", ANSIBLE_VENV])
            .status()
            .unwrap()
            .success()
            && Command::new(format!("{ANSIBLE_VENV}/bin/pip"))
                .args(["install", "-q", "ansible-core"])
                .status()
                .unwrap()
                .success();
        assert!(ok, "could not install ansible-core");
    }
    bin
}

/// (busy, total) jiffies of all CPUs from /proc/stat.
fn cpu_ticks() -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let v: Vec<u64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|x| x.parse().ok())
        .collect();
    let total: u64 = v.iter().sum();
    let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
    (total - idle, total)
}

/// Share of CPU time that was busy between two samples (0..1).
fn busy_share(a: (u64, u64), b: (u64, u64)) -> f64 {
    let total = b.1.saturating_sub(a.1).max(1);
    b.0.saturating_sub(a.0) as f64 / total as f64
}

fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
