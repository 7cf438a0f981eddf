//! Reference-order benchmark (needs root): wall time of INSTANTIATE of the pv-k8s-cluster seed
//! request with 1 master + N workers (N = 2, 10, 30; `-- --sizes 2,10` to choose; `-- --quick`:
//! N = 2 with 1 s per package), run twice on fresh testbeds:
//! - **vnfkeeper**: the daemon as installed (default limits: a stage works on up to 16 hosts at
//!   once);
//! - **reference order**: the same daemon, the same request and the same steps, one host after
//!   another — `[limits] max_parallel_hosts = 1` in this benchmark's configuration, which is the
//!   order Tacker's sample MgmtDrivers run their SSH steps in (a loop over masters, then over
//!   workers, then the storage server). It is a setting of the benchmark's daemon, not a mode of
//!   the product.
//!
//! Every host's `apt-get` stand-in takes a fixed time for each package it installs that is not
//! installed yet (`-- --install-seconds S`, default 5 s; a real install from a mirror takes
//! longer): the package's install script installs kubeadm, kubelet and kubectl, the NFS client
//! step nfs-common, the storage server nfs-kernel-server. So each node waits about 4 × S, as a
//! real cluster install waits on downloads, and the benchmark asks whether that waiting overlaps.
//!
//! Printed per N: both wall times (from `vnfkeeper submit` to COMPLETED seen by polling `ops`
//! every 100 ms) and reference / vnfkeeper. Target (printed with "met"/"missed", never
//! asserted): ≥ 5× at N = 10.
//!
//! Each run gets a fresh testbed cloud whose servers are real hosts (network namespaces with
//! sshd) on `10.231.89.0/24` and a fresh daemon (the real binary, temporary config, spool and
//! database, reconcile off); everything is torn down after each run, also on failure.
//!
//! Run: `cargo bench -p vnfkeeper --bench reference_order`.

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
const PREFIX: &str = "vkro";
/// Third octet of the testbed subnet `10.231.<NET>.0/24` (no test or other bench uses it).
const NET: u8 = 89;
/// The fixture package, copied and resized per N.
const PACKAGE: &str = "pv-k8s-cluster";
/// The seed request's VNF instance id.
const VNF: &str = "vnf-pv-k8s-cluster";
/// How long one INSTANTIATE may take before the run is given up.
const LIMIT: Duration = Duration::from_secs(60 * 60);
/// Target of reference / vnfkeeper at N = [`TARGET_N`].
const TARGET: f64 = 5.0;
/// The size the target applies to.
const TARGET_N: u32 = 10;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// How the daemon orders the hosts of a stage.
#[derive(Clone, Copy, PartialEq)]
enum Order {
    /// Default limits.
    Vnfkeeper,
    /// `max_parallel_hosts = 1`: one host after another.
    Reference,
}

fn main() {
    let quick = table::quick();
    let sizes: Vec<u32> = match table::arg::<String>("sizes") {
        Some(s) => s
            .split(',')
            .map(|n| n.trim().parse().expect("--sizes: comma-separated counts"))
            .collect(),
        None if quick => vec![2],
        None => vec![2, 10, 30],
    };
    assert!(
        sizes.iter().all(|&n| (1..=100).contains(&n)),
        "--sizes: each N in 1..=100"
    );
    let seconds: f64 = table::arg("install-seconds").unwrap_or(if quick { 1.0 } else { 5.0 });
    assert!(
        (0.0..=600.0).contains(&seconds),
        "--install-seconds: 0 to 600"
    );
    if Command::new("id")
        .arg("-u")
        .output()
        .map(|o| o.stdout != b"0\n")
        .unwrap_or(true)
    {
        eprintln!("reference_order benchmark: needs root (network namespaces); skipped");
        return;
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap();
    println!(
        "INSTANTIATE of the pv-k8s-cluster seed request, 1 master + N workers + storage server on testbed hosts, {seconds} s per package installed, {} cores shared by the hosts and the daemon",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    println!(
        "  {:>3} {:>14} {:>19} {:>20}",
        "N", "vnfkeeper s", "reference order s", "reference/vnfkeeper"
    );
    for &n in &sizes {
        let ours = rt.block_on(run(n, Order::Vnfkeeper, seconds));
        let reference = rt.block_on(run(n, Order::Reference, seconds));
        let ratio = reference / ours;
        println!("  {n:>3} {ours:>14.2} {reference:>19.2} {ratio:>20.2}");
        let target = if n == TARGET_N {
            table::Target::AtLeast(TARGET)
        } else {
            table::Target::None
        };
        table::row(
            &format!(
                "reference order: INSTANTIATE 1 master + {n} workers, wall (ratio: reference order / vnfkeeper)"
            ),
            ours,
            "s",
            table::Target::None,
            Some(table::SameRun {
                baseline: reference,
                ratio,
                target,
            }),
        );
    }
}

/// One INSTANTIATE with `n` workers on a fresh testbed and daemon, in `order`; its wall time in
/// seconds.
async fn run(n: u32, order: Order, install_seconds: f64) -> f64 {
    let _ = testbed::hosts::down_all(PREFIX).await;
    let mut teardown = Teardown {
        daemon: None,
        prefix: PREFIX,
    };
    testbed::hosts::setup_packages()
        .await
        .expect("host packages");
    let dir = tempfile::Builder::new()
        .prefix("vk-bench-reference-")
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
    farm.set_apt_install_seconds(install_seconds)
        .expect("apt install time");
    let mut opts = CloudOptions::no_hosts(dir.path());
    opts.subnet = format!("10.231.{NET}.0/24");
    opts.farm = Some(Arc::new(testbed::cloud::farm::FarmBackend(farm.clone())));
    let tb = Testbed::start(opts).await.expect("testbed");

    let packages = dir.path().join("packages");
    resized_package(
        &repo().join("fixtures/packages").join(PACKAGE),
        &packages.join(PACKAGE),
        "Definitions/pv_k8s_cluster_vnfd.yaml",
        "BaseHOT/simple/pv_k8s_cluster_top.hot.yaml",
        n,
    );
    let mut env: Value = serde_json::from_slice(
        &std::fs::read(repo().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"))
            .unwrap(),
    )
    .unwrap();
    env["vnfPackage"] = Value::from(PACKAGE);
    let req = dir.path().join("instantiate.json");
    write_private(&req, env.to_string().as_bytes());

    let limits = match order {
        Order::Vnfkeeper => "",
        Order::Reference => "\n[limits]\nmax_parallel_hosts = 1\n",
    };
    let (config, log) = start_daemon(
        &mut teardown,
        VK,
        dir.path(),
        &packages,
        tb.clouds_yaml(),
        limits,
    )
    .await;
    let Finished { wall, done, .. } = submit_and_wait(&config, &req, LIMIT).await;
    let mode = match order {
        Order::Vnfkeeper => "vnfkeeper",
        Order::Reference => "reference order",
    };
    assert_eq!(
        done.as_ref().map(|o| &o["operationState"]),
        Some(&Value::from("COMPLETED")),
        "INSTANTIATE ({mode}) with {n} workers did not complete within {LIMIT:?}: {:?}\n{}",
        ops(&config).first(),
        tail(&log)
    );
    let status: Value = serde_json::from_slice(&vk(&config, &["status", "--json"]).stdout).unwrap();
    let instance = status
        .as_array()
        .and_then(|a| a.iter().find(|i| i["vnfInstanceId"] == VNF))
        .unwrap_or(&status[0]);
    let count = |vdu: &str| {
        instance["vnfcs"]
            .as_array()
            .map(|v| v.iter().filter(|c| c["vduId"] == vdu).count())
            .unwrap_or(0)
    };
    assert_eq!(
        (count("masterNode"), count("workerNode")),
        (1, n as usize),
        "VNFCs of the instantiated VNF"
    );
    eprintln!(
        "N = {n}, {mode}: COMPLETED in {wall:.2} s; steps (name: count, first start → last finish):"
    );
    let events: Value =
        serde_json::from_slice(&vk(&config, &["events", VNF, "--json"]).stdout).unwrap();
    let steps: Vec<Step> = events
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|e| Step::from_json(&e["step"]))
                .collect()
        })
        .unwrap_or_default();
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
    drop(teardown);
    wall
}
