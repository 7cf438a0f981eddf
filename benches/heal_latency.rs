//! Reconcile benchmark (b): time from a worker's server going into Nova `ERROR` to the start of
//! its automatic HEAL, with the real daemon at default `[reconcile]` settings, against the testbed
//! cloud (record-only servers: a plain VNF of the pv-k8s-cluster package without cluster
//! parameters, so INSTANTIATE and HEAL are cloud steps only). "Start" = the HEAL operation exists
//! (`vnfkeeper ops --json`, polled every 100 ms). Baseline measured in the same run: the time
//! until a bare Nova listing shows the server in `ERROR` (the detection floor). Target (not
//! asserted): ≤ 30 s; Cluster API's MachineHealthCheck typically needs 5 minutes (its
//! `unhealthyNodeConditions` are usually `Ready=Unknown/False` for 300 s). Runs 3 trials (one
//! fresh daemon and VNF each).
//!
//! Run: `cargo bench --bench heal_latency` (`-- --quick`: one trial).

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use testbed::cloud::{CloudOptions, Testbed};
use vnfkeeper::cloud::{Cloud, OpenStackCloud};

mod support;
mod table;

use support::{ops, vk};

const VK: &str = env!("CARGO_BIN_EXE_vnfkeeper");

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn wait<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let t = Instant::now();
    while t.elapsed() < limit {
        if let Some(v) = f() {
            return Some(v);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    None
}

struct DaemonGuard(Child);

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        terminate(self.0.id());
        let _ = self.0.wait();
    }
}

fn terminate(pid: u32) {
    let _ = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let trials = if table::quick() { 1 } else { 3 };
    let mut latencies = Vec::new();
    let mut floors = Vec::new();
    for trial in 1..=trials {
        let dir = tempfile::tempdir().unwrap();
        let tb = Testbed::start(CloudOptions::no_hosts(dir.path()))
            .await
            .unwrap();
        let config = dir.path().join("vnfkeeper.toml");
        std::fs::write(
            &config,
            format!(
                "spool_dir = \"{0}/spool\"\ndatabase = \"{0}/state.db\"\npackages_dir = \"{1}\"\n\n[cloud]\nclouds_yaml = \"{2}\"\ncloud = \"testbed\"\n",
                dir.path().display(),
                repo().display(),
                tb.clouds_yaml().display()
            ),
        )
        .unwrap();
        let daemon = Command::new(VK)
            .arg("daemon")
            .env("VNFKEEPER_CONFIG", &config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let _guard = DaemonGuard(daemon);

        // A plain VNF: the seed's instantiate without cluster parameters.
        let mut env: Value = serde_json::from_slice(
            &std::fs::read(
                repo().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"),
            )
            .unwrap(),
        )
        .unwrap();
        env["request"]["additionalParams"]
            .as_object_mut()
            .unwrap()
            .remove("k8s_cluster_installation_param");
        let req = dir.path().join("instantiate.json");
        std::fs::write(&req, env.to_string()).unwrap();
        let out = vk(&config, &["submit", req.to_str().unwrap()]);
        assert!(out.status.success(), "{out:?}");
        let done = wait(Duration::from_secs(120), || {
            ops(&config)
                .first()
                .filter(|o| o["operationState"] == "COMPLETED")
                .cloned()
        });
        assert!(done.is_some(), "instantiate did not complete");
        let status: Value =
            serde_json::from_slice(&vk(&config, &["status", "--json"]).stdout).unwrap();
        let worker = status[0]["vnfcs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["vduId"] == "workerNode")
            .and_then(|v| v["serverId"].as_str())
            .unwrap()
            .to_owned();

        // A random moment inside the 15 s cloud-pass interval, like a real fault.
        tokio::time::sleep(Duration::from_millis(fastrand::u64(0..15_000))).await;
        let cloud = OpenStackCloud::connect(tb.clouds_yaml(), "testbed", Duration::from_secs(30))
            .await
            .unwrap();
        let t0 = Instant::now();
        tb.cloud()
            .inject_server_error(&worker, "benchmark: hypervisor lost")
            .await
            .unwrap();
        // Baseline: a bare listing shows the ERROR.
        loop {
            let servers = cloud.servers().await.unwrap();
            if servers
                .iter()
                .any(|s| s.id == worker && s.status == "ERROR")
            {
                break;
            }
        }
        let floor = t0.elapsed();
        let started = wait(Duration::from_secs(120), || {
            ops(&config)
                .iter()
                .find(|o| o["operation"] == "HEAL" && o["isAutomaticInvocation"] == true)
                .map(|_| t0.elapsed())
        })
        .expect("no automatic HEAL within 120 s");
        println!(
            "trial {trial}: ERROR → automatic HEAL started {:.2} s (listing shows ERROR after {:.3} s)",
            started.as_secs_f64(),
            floor.as_secs_f64()
        );
        latencies.push(started.as_secs_f64());
        floors.push(floor.as_secs_f64());
        drop(_guard);
        tb.shutdown().await;
    }
    latencies.sort_by(f64::total_cmp);
    floors.sort_by(f64::total_cmp);
    let median = latencies[trials / 2];
    let floor = floors[trials / 2];
    println!(
        "heal start: median {median:.2} s, worst {:.2} s over {trials} trials (target ≤ 30 s: median/target = {:.2})",
        latencies[trials - 1],
        median / 30.0
    );
    println!(
        "baseline (listing shows ERROR): median {floor:.3} s; heal start / baseline = {:.0}×; MachineHealthCheck's typical 300 s / heal start = {:.1}×",
        median / floor.max(1e-3),
        300.0 / median
    );
    table::row(
        "heal latency: ERROR to automatic HEAL start, median",
        median,
        "s",
        table::Target::AtMost(30.0),
        Some(table::SameRun {
            baseline: floor,
            ratio: median / floor.max(1e-3),
            target: table::Target::None,
        }),
    );
}
