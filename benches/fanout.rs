//! Fan-out benchmark (needs root), on 50 testbed hosts (`-- --hosts N`; `-- --quick`: 10), each
//! run with cold SSH sessions:
//!
//! 1. A latency-bound step — each host waits 2 s under sudo, as a package install does — once host
//!    after host (which gives the slowest single host) and once fanned out to all hosts at once;
//!    each with cold sessions and again on the pooled (warm) sessions — as the apply of an
//!    engine step finds its host's session: the step's check, a moment before, opened it (the
//!    pool keeps it for the operation's later steps too). Target: fan-out wall time ≤ 1.2× the
//!    slowest single host.
//! 2. A CPU-bound configuration step — make sure `/etc/hosts` holds a registry entry (check,
//!    apply, check again; the private registry's "hosts_string" step) — run three ways:
//!    host after host (the reference MgmtDrivers' way), vnfkeeper's bounded-parallel fan-out (all
//!    at once, as a stage with `max_parallel_hosts` = the host count runs it), and
//!    `ansible -f N -m shell` with the same script (apply only; ansible-core in a venv under
//!    /var/tmp, installed from PyPI on first use). On 2 cores the hosts' sshd, PAM and sudo share
//!    the CPU with the client, so this step cannot fan out for free; the question is how much
//!    CPU the client spends: vnfkeeper's own CPU time per host-step (utime + stime of this
//!    process, `/proc/self/stat`, over the fan-out; the hosts are other processes) against
//!    Ansible's controller CPU per host-step (utime + stime of the waited-for `ansible` process
//!    and its children, `cutime` + `cstime`). Targets: Ansible / vnfkeeper CPU ≥ 10×, Ansible
//!    wall time / fan-out wall time ≥ 3×.
//!
//! Run: `cargo bench --bench fanout`.

use std::net::IpAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use testbed::hosts::{FarmConfig, HostFarm, HostSpec};
use vnfkeeper::remote::{Auth, HostKeyPolicy, Remote, RemoteCommand, SshConfig, SshRemote, Target};
use vnfkeeper_core::wire::Secret;

mod table;

const PREFIX: &str = "vkf";
const NET: &str = "10.231.80";
const ANSIBLE_VENV: &str = "/var/tmp/vnfkeeper-bench-ansible";
const ENTRY: &str = "10.231.80.1 registry.vnfkeeper.test";
/// How long the latency-bound step waits on each host.
const WAIT: &str = "2";

/// The step: MODE check → exit 0 done / 10 needed; MODE apply → add the line.
const SCRIPT: &str = r#"set -eu
mode=$1; line=$2
if grep -qxF "$line" /etc/hosts; then echo "already done"; exit 0; fi
[ "$mode" = check ] && exit 10
printf '%s\n' "$line" >> /etc/hosts
grep -qxF "$line" /etc/hosts"#;

fn main() {
    let hosts: usize = table::arg("hosts").unwrap_or(if table::quick() { 10 } else { 50 });
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
            profile: testbed::hosts::HostProfile::Debian,
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

    // Latency-bound: host after host (the slowest single host), then all at once; each first
    // with cold sessions (a handshake and password authentication per host), then again on the
    // sessions the first round left in the pool — as an engine step's apply (the part that
    // waits for a package install) finds the session its check opened.
    let remote = SshRemote::new(SshConfig::default());
    let wait_slowest = wait_sequential(&remote, &targets).await;
    let wait_slowest_warm = wait_sequential(&remote, &targets).await;
    remote.close().await;
    let remote = SshRemote::new(SshConfig::default());
    let cpu0 = cpu_ticks();
    let own0 = own_cpu().0;
    let t = Instant::now();
    wait_fanned(&remote, &targets).await;
    let wait_fanout = t.elapsed();
    let cpu1 = cpu_ticks();
    let wait_busy = busy_share(cpu0, cpu1);
    let cold_work = CpuWork::between(cpu0, cpu1, own_cpu().0 - own0);
    let own0 = own_cpu().0;
    let t = Instant::now();
    wait_fanned(&remote, &targets).await;
    let wait_fanout_warm = t.elapsed();
    let warm_work = CpuWork::between(cpu1, cpu_ticks(), own_cpu().0 - own0);
    remote.close().await;

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
    let own0 = own_cpu();
    let t = Instant::now();
    futures::stream::iter(targets.iter())
        .map(|target| step(&remote, target))
        .buffer_unordered(n)
        .collect::<Vec<()>>()
        .await;
    let fanout = t.elapsed();
    let own_per_host = (own_cpu().0 - own0.0) / n as f64;
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
    let children0 = own_cpu().1;
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
    let ansible_per_host = (own_cpu().1 - children0) / n as f64;
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
    println!("  latency-bound step (each host waits {WAIT} s under sudo):");
    println!(
        "    slowest single host (host after host):     {:>7.3} s",
        wait_slowest.as_secs_f64()
    );
    println!(
        "    vnfkeeper fan-out (all {n} at once):        {:>7.3} s",
        wait_fanout.as_secs_f64()
    );
    println!(
        "    fan-out / slowest single host:             {:>7.2}   (target ≤ 1.2)",
        wait_fanout.as_secs_f64() / wait_slowest.as_secs_f64()
    );
    println!(
        "    CPU busy during the fan-out:               {:>6.0} % of {} cores ({n} handshakes, password logins and sudo)",
        wait_busy * 100.0,
        cores()
    );
    cold_work.print(wait_fanout.saturating_sub(wait_slowest));
    println!(
        "  the same on warm sessions (pooled, as a step's apply finds the one its check opened):"
    );
    println!(
        "    slowest single host (host after host):     {:>7.3} s",
        wait_slowest_warm.as_secs_f64()
    );
    println!(
        "    vnfkeeper fan-out (all {n} at once):        {:>7.3} s",
        wait_fanout_warm.as_secs_f64()
    );
    println!(
        "    fan-out / slowest single host:             {:>7.2}   (target ≤ 1.2)",
        wait_fanout_warm.as_secs_f64() / wait_slowest_warm.as_secs_f64()
    );
    warm_work.print(wait_fanout_warm.saturating_sub(wait_slowest_warm));
    println!("  CPU-bound step (check, apply, check of an /etc/hosts entry):");
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
        "  fan-out / slowest single host:               {:>7.2}   (CPU-bound: the hosts share the cores)",
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
    println!(
        "  client CPU per host-step: vnfkeeper {:.2} ms, ansible controller {:.2} ms; ansible / vnfkeeper {:.1}   (target ≥ 10)",
        own_per_host * 1e3,
        ansible_per_host * 1e3,
        ansible_per_host / own_per_host.max(1e-6)
    );
    table::row(
        &format!(
            "fanout: latency-bound step (2 s wait) on {n} hosts, cold sessions (ratio: / slowest single host)"
        ),
        wait_fanout.as_secs_f64(),
        "s",
        table::Target::None,
        Some(table::SameRun {
            baseline: wait_slowest.as_secs_f64(),
            ratio: wait_fanout.as_secs_f64() / wait_slowest.as_secs_f64(),
            target: table::Target::AtMost(1.2),
        }),
    );
    table::row(
        &format!(
            "fanout: latency-bound step (2 s wait) on {n} hosts, warm sessions (ratio: / slowest single host)"
        ),
        wait_fanout_warm.as_secs_f64(),
        "s",
        table::Target::None,
        Some(table::SameRun {
            baseline: wait_slowest_warm.as_secs_f64(),
            ratio: wait_fanout_warm.as_secs_f64() / wait_slowest_warm.as_secs_f64(),
            target: table::Target::AtMost(1.2),
        }),
    );
    table::row(
        "fanout: vnfkeeper CPU per host-step (ratio: ansible controller / vnfkeeper)",
        own_per_host * 1e3,
        "ms",
        table::Target::None,
        Some(table::SameRun {
            baseline: ansible_per_host * 1e3,
            ratio: ansible_per_host / own_per_host.max(1e-6),
            target: table::Target::AtLeast(10.0),
        }),
    );
    table::row(
        &format!("fanout: CPU-bound step on {n} hosts (ratio: ansible wall / fan-out wall)"),
        fanout.as_secs_f64(),
        "s",
        table::Target::None,
        Some(table::SameRun {
            baseline: ansible_time.as_secs_f64(),
            ratio: ansible_time.as_secs_f64() / fanout.as_secs_f64(),
            target: table::Target::AtLeast(3.0),
        }),
    );
    farm.shutdown().await.unwrap();
    let report = testbed::hosts::down_all(PREFIX).await.unwrap();
    assert!(report.is_empty(), "left behind: {report:?}");
}

/// check → apply → check on one host, as the engine runs a step; panics on failure.
async fn step(remote: &SshRemote, target: &Target) {
    let run = |mode: &'static str| {
        let cmd = RemoteCommand::script(SCRIPT)
            .arg(mode)
            .arg(ENTRY)
            .sudo(true)
            .timeout(Duration::from_secs(60))
            .step("bench.hosts-entry");
        // The engine runs an apply under the host's step lock.
        if mode == "apply" {
            cmd.host_lock()
        } else {
            cmd
        }
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

/// The latency-bound step host after host; returns the slowest host's time.
async fn wait_sequential(remote: &SshRemote, targets: &[Target]) -> Duration {
    let mut slowest = Duration::ZERO;
    for target in targets {
        let h = Instant::now();
        wait_step(remote, target).await;
        slowest = slowest.max(h.elapsed());
    }
    slowest
}

/// The latency-bound step on every host at once, as an engine stage fans it out.
async fn wait_fanned(remote: &SshRemote, targets: &[Target]) {
    futures::stream::iter(targets.iter())
        .map(|target| wait_step(remote, target))
        .buffer_unordered(targets.len())
        .collect::<Vec<()>>()
        .await;
}

/// The latency-bound step on one host: wait [`WAIT`] seconds under sudo; panics on failure.
async fn wait_step(remote: &SshRemote, target: &Target) {
    let cmd = RemoteCommand::script("sleep \"$1\"")
        .arg(WAIT)
        .sudo(true)
        .timeout(Duration::from_secs(60))
        .step("bench.wait");
    let out = remote.run(target, &cmd).await.expect("wait");
    assert_eq!(out.exit_status, Some(0), "{}: {:?}", target.label, out);
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

/// CPU seconds (user + system) of this process and of its waited-for children, from
/// `/proc/self/stat` (utime + stime, cutime + cstime; clock ticks of 1/100 s), as getrusage
/// gives them for `RUSAGE_SELF` and `RUSAGE_CHILDREN`.
fn own_cpu() -> (f64, f64) {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = s.rsplit(')').next().unwrap_or("");
    let f: Vec<f64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0.0))
        .collect();
    // After the command: state(0) … utime(11) stime(12) cutime(13) cstime(14).
    let at = |i: usize| f.get(i).copied().unwrap_or(0.0) / 100.0;
    (at(11) + at(12), at(13) + at(14))
}

/// The CPU work done on this machine during one fan-out: what bounds its wall time from below
/// when the hosts (sshd, PAM, sudo, the shells) share the client's cores.
struct CpuWork {
    /// Busy core-seconds of the machine, niced processes' user time left out (a fuzzer or build
    /// at `nice` yields to the hosts).
    busy: f64,
    /// This process's (the client's) share of it, seconds.
    client: f64,
}

impl CpuWork {
    fn between(a: (u64, u64), b: (u64, u64), client: f64) -> Self {
        CpuWork {
            busy: b.0.saturating_sub(a.0) as f64 / 100.0,
            client,
        }
    }

    /// Prints the work and the wall time it needs on this machine's cores, beside the fan-out's
    /// excess over the slowest single host: when the two are close, the waiting overlapped and
    /// what remains is CPU the hosts need, not something the client serialises.
    fn print(&self, excess: Duration) {
        println!(
            "    CPU work during the fan-out: {:.2} core-s (client {:.3} s, hosts {:.2} s) = {:.2} s on {} cores; fan-out − slowest host: {:.2} s",
            self.busy,
            self.client,
            (self.busy - self.client).max(0.0),
            self.busy / cores() as f64,
            cores(),
            excess.as_secs_f64()
        );
    }
}

/// (busy, total) jiffies of all CPUs from /proc/stat; busy leaves out idle, iowait and niced
/// user time (`/proc/stat` counts a niced process's system time as system).
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
    // user nice system idle iowait …
    let field = |i: usize| v.get(i).copied().unwrap_or(0);
    (total - field(1) - field(3) - field(4), total)
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
