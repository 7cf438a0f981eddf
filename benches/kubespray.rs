//! Kubespray benchmark (needs root): wall time of INSTANTIATE of the kubespray flavour's seed
//! request with 1 master + N workers (N = 2, 10, 20; `-- --sizes 2,10` to choose, `-- --quick`:
//! N = 2 only), against the time Ansible itself took, so vnfkeeper's own overhead shows as a
//! ratio.
//!
//! Each size runs on a fresh testbed cloud whose servers are real hosts (network namespaces with
//! sshd) on `10.231.84.0/24`, with the testbed's Ansible server (Debian's `ansible` and the
//! kubespray stand-in playbooks, `tests/testbed/kubespray/`), and a fresh daemon (the real
//! binary, temporary config, spool and database, reconcile off). The request is
//! `fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json` with its `ansible` block
//! filled in with the testbed's Ansible server; the package is a copy of
//! `fixtures/packages/k8s-mgmtdriver-kubespray` whose VNFD gives the worker VDU N instances at the
//! default instantiation level (the level's `VduInstantiationLevels` count is what the engine
//! reads first, then the `VduInitialDelta`: both are set) and whose BaseHOT's worker group allows
//! them (`max_size`).
//!
//! Measured per N:
//! - wall: from `vnfkeeper submit` to `vnfkeeper ops --json` showing COMPLETED (polled every
//!   100 ms);
//! - Ansible: the sum over the operation's `ansible.playbook` steps (`cluster.yml` on the Ansible
//!   server) of finishedAt − startedAt, from `vnfkeeper events VNF --json`;
//! - the cloud part: the span of the `heat.*` steps (stack create and its wait: in the testbed,
//!   starting the hosts);
//! - outside the steps: wall time before the first step starts and after the last one finishes
//!   (intake, scheduling, state changes, the polling);
//! - vnfkeeper's own share = wall − Ansible, as wall / Ansible and as own seconds per cluster
//!   node (N + 1), and once more without the cloud part.
//!
//! Target (printed with "met"/"not met", never asserted): at N = 20, vnfkeeper's own time
//! with the cloud part excluded is at most 25 % of Ansible's, i.e. (wall − cloud) / Ansible ≤ 1.25. On the testbed every host is a process on the
//! same machine as the daemon and the Ansible server, so all of them share its cores.
//!
//! Run: `cargo bench -p vnfkeeper --bench kubespray`.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use testbed::cloud::{CloudOptions, Testbed};
use testbed::hosts::{FarmConfig, HostFarm};

mod support;
mod table;

use support::cluster::{
    Finished, Step, Teardown, resized_package, span, start_daemon, submit_and_wait, tail,
    write_private,
};
use support::{ops, vk};

const VK: &str = env!("CARGO_BIN_EXE_vnfkeeper");
/// Name prefix of the testbed's namespaces and links (no test or other bench uses it).
const PREFIX: &str = "vkkb";
/// Third octet of the testbed subnet `10.231.<NET>.0/24` (no test or other bench uses it).
const NET: u8 = 84;
/// The fixture package, copied and resized per N.
const PACKAGE: &str = "k8s-mgmtdriver-kubespray";
/// The seed request's VNF instance id.
const VNF: &str = "vnf-kubespray";
/// How long one INSTANTIATE may take before the run is given up.
const LIMIT: Duration = Duration::from_secs(30 * 60);
/// Target of (wall − cloud) / Ansible at N = [`TARGET_N`].
const TARGET: f64 = 1.25;
/// The size the target applies to (the largest cluster measured); smaller clusters carry more fixed cost
/// per node, so their ratios are printed for information.
const TARGET_N: u32 = 20;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn main() {
    let sizes: Vec<u32> = match table::arg::<String>("sizes") {
        Some(s) => s
            .split(',')
            .map(|n| n.trim().parse().expect("--sizes: comma-separated counts"))
            .collect(),
        None if table::quick() => vec![2],
        None => vec![2, 10, 20],
    };
    assert!(
        sizes.iter().all(|&n| (1..=200).contains(&n)),
        "--sizes: each N in 1..=200"
    );
    if Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout != b"0\n")
        .unwrap_or(true)
    {
        eprintln!("kubespray benchmark: needs root (network namespaces); skipped");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    let mut results = Vec::new();
    for &n in &sizes {
        results.push(rt.block_on(run(n)));
    }
    report(&results);
}

/// What one size measured (seconds).
struct Run {
    workers: u32,
    wall: f64,
    ansible: f64,
    cloud: f64,
    /// Wall time outside the steps: from submission to the first step's start and from the last
    /// step's finish to COMPLETED seen (intake, scheduling, state changes, the 100 ms polling).
    outside: f64,
    playbooks: usize,
}

/// One INSTANTIATE with `n` workers on a fresh testbed and daemon.
async fn run(n: u32) -> Run {
    let _ = testbed::hosts::down_all(PREFIX).await;
    let mut teardown = Teardown {
        daemon: None,
        prefix: PREFIX,
    };
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let dir = tempfile::Builder::new()
        .prefix("vk-bench-kubespray-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let farm = Arc::new(
        HostFarm::new(FarmConfig {
            state_dir: dir.path().join("hosts"),
            prefix: PREFIX.into(),
            bridge_cidr: format!("10.231.{NET}.1/24").parse().unwrap(),
        })
        .await
        .expect("farm"),
    );
    let mut opts = CloudOptions::no_hosts(dir.path());
    opts.subnet = format!("10.231.{NET}.0/24");
    opts.farm = Some(Arc::new(testbed::cloud::farm::FarmBackend(farm.clone())));
    opts.ansible_server = true;
    let tb = Testbed::start(opts)
        .await
        .expect("testbed with Ansible server");
    let (server, _) = tb.ansible_server().expect("Ansible server");

    let packages = dir.path().join("packages");
    resized_package(
        &repo().join("fixtures/packages").join(PACKAGE),
        &packages.join(PACKAGE),
        "Definitions/kubespray_k8s_cluster_vnfd.yaml",
        "BaseHOT/simple/kubespray_k8s_cluster_top.hot.yaml",
        n,
    );
    let mut env: Value = serde_json::from_slice(
        &std::fs::read(
            repo().join("fixtures/requests/good/k8s-mgmtdriver-kubespray.10-instantiate.json"),
        )
        .unwrap(),
    )
    .unwrap();
    env["vnfPackage"] = Value::from(PACKAGE);
    server.fill_request(&mut env).unwrap();
    let req = dir.path().join("instantiate.json");
    write_private(&req, env.to_string().as_bytes());

    let (config, log) = start_daemon(
        &mut teardown,
        VK,
        dir.path(),
        &packages,
        tb.clouds_yaml(),
        "",
    )
    .await;
    let Finished {
        wall,
        submitted,
        done,
    } = submit_and_wait(&config, &req, LIMIT).await;
    assert_eq!(
        done.as_ref().map(|o| &o["operationState"]),
        Some(&Value::from("COMPLETED")),
        "INSTANTIATE with {n} workers did not complete within {LIMIT:?}: {:?}\n{}",
        ops(&config).first(),
        tail(&log)
    );

    // The VNF really has 1 master and n workers.
    let status: Value = serde_json::from_slice(&vk(&config, &["status", "--json"]).stdout).unwrap();
    let count = |vdu: &str| {
        status[0]["vnfcs"]
            .as_array()
            .map(|v| v.iter().filter(|c| c["vduId"] == vdu).count())
            .unwrap_or(0)
    };
    assert_eq!(
        (count("masterNode"), count("workerNode")),
        (1, n as usize),
        "VNFCs of the instantiated VNF"
    );

    // Step times from the VNF's timeline.
    let events: Value =
        serde_json::from_slice(&vk(&config, &["events", VNF, "--json"]).stdout).unwrap();
    let steps: Vec<Step> = events
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| done.as_ref().is_some_and(|o| e["vnfLcmOpOccId"] == o["id"]))
        .filter_map(|e| Step::from_json(&e["step"]))
        .collect();
    let playbooks: Vec<&Step> = steps
        .iter()
        .filter(|s| s.name == "ansible.playbook")
        .collect();
    assert!(!playbooks.is_empty(), "no ansible.playbook step: {events}");
    let ansible: f64 = playbooks.iter().map(|s| s.seconds()).sum();
    let cloud = span(steps.iter().filter(|s| s.name.starts_with("heat.")));
    let outside = wall - span(steps.iter());
    // Where the time outside the steps goes: submit → operation created (intake), created →
    // first step, last step → COMPLETED, COMPLETED → seen by the polling.
    let op_time = |k: &str| {
        done.as_ref()
            .and_then(|o| o[k].as_str())
            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
    };
    if let (Some(created), Some(completed), Some(first), Some(last)) = (
        op_time("startTime"),
        op_time("stateEnteredTime"),
        steps.iter().map(|s| s.started).min(),
        steps.iter().map(|s| s.finished).max(),
    ) {
        let secs = |a: chrono::DateTime<chrono::FixedOffset>,
                    b: chrono::DateTime<chrono::FixedOffset>| {
            (b - a).as_seconds_f64()
        };
        eprintln!(
            "N = {n}: outside the steps {outside:.3} s: submit → operation created {:.3} s, → first step {:.3} s; last step → COMPLETED {:.3} s, → seen {:.3} s",
            secs(submitted, created),
            secs(created, first),
            secs(last, completed),
            wall - secs(submitted, completed)
        );
    }

    eprintln!("N = {n}: steps of the INSTANTIATE (name: count, first start → last finish):");
    let mut names: Vec<&str> = steps.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    for name in names {
        let of: Vec<&Step> = steps.iter().filter(|s| s.name == name).collect();
        eprintln!(
            "  {name:<24} {:>3} × {:>8.3} s",
            of.len(),
            span(of.iter().copied())
        );
    }

    teardown.stop_daemon();
    tb.shutdown().await;
    farm.shutdown().await.unwrap();
    let left = testbed::hosts::down_all(PREFIX).await.unwrap();
    assert!(left.is_empty(), "left behind: {left:?}");
    let netns = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let netns = String::from_utf8_lossy(&netns.stdout);
    assert!(
        !netns.lines().any(|l| l.starts_with(PREFIX)),
        "namespaces left: {netns}"
    );
    drop(teardown);
    Run {
        workers: n,
        wall,
        ansible,
        cloud,
        outside,
        playbooks: playbooks.len(),
    }
}

/// Prints the table: a human-readable block, then one `bench-result` row per figure.
fn report(runs: &[Run]) {
    println!(
        "kubespray INSTANTIATE, 1 master + N workers + 1 LB on testbed hosts, {} cores shared by the hosts, the Ansible server and the daemon",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "  {:>3} {:>9} {:>9} {:>9} {:>9} {:>11} {:>12} {:>14} {:>18}",
        "N",
        "wall s",
        "ansible s",
        "cloud s",
        "outside s",
        "wall/ansible",
        "own s (w−a)",
        "own s per node",
        "(wall−cloud)/ansible"
    );
    for r in runs {
        let own = r.wall - r.ansible;
        println!(
            "  {:>3} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>11.2} {:>12.2} {:>14.2} {:>18.2}",
            r.workers,
            r.wall,
            r.ansible,
            r.cloud,
            r.outside,
            r.wall / r.ansible,
            own,
            own / f64::from(r.workers + 1),
            (r.wall - r.cloud) / r.ansible
        );
        if r.playbooks != 1 {
            println!("      ({} ansible.playbook steps summed)", r.playbooks);
        }
    }
    println!(
        "  cloud = span of the heat.* steps (stack create: starting the hosts); outside = wall time before the first and after the last step"
    );
    match runs.iter().find(|r| r.workers == TARGET_N) {
        Some(r) => {
            let ratio = (r.wall - r.cloud) / r.ansible;
            println!(
                "  target: (wall − cloud) / ansible ≤ {TARGET} at N = {TARGET_N} (vnfkeeper's own time ≤ 25 % of Ansible's): {ratio:.3}, {}",
                if ratio <= TARGET { "met" } else { "not met" }
            );
        }
        None => println!(
            "  target: (wall − cloud) / ansible ≤ {TARGET} at N = {TARGET_N}: not measured in this run"
        ),
    }
    for r in runs {
        let n = r.workers;
        let target = if n == TARGET_N {
            table::Target::AtMost(TARGET)
        } else {
            table::Target::None
        };
        table::row(
            &format!(
                "kubespray: INSTANTIATE 1 master + {n} workers, wall (ratio: / ansible-playbook)"
            ),
            r.wall,
            "s",
            table::Target::None,
            Some(table::SameRun {
                baseline: r.ansible,
                ratio: r.wall / r.ansible,
                target: table::Target::None,
            }),
        );
        table::row(
            &format!("kubespray: N = {n}, wall without the cloud part (ratio: / ansible-playbook)"),
            r.wall - r.cloud,
            "s",
            table::Target::None,
            Some(table::SameRun {
                baseline: r.ansible,
                ratio: (r.wall - r.cloud) / r.ansible,
                target,
            }),
        );
        table::row(
            &format!("kubespray: N = {n}, own seconds per node ((wall − ansible) / (N + 1))"),
            (r.wall - r.ansible) / f64::from(n + 1),
            "s",
            table::Target::None,
            None,
        );
    }
}
