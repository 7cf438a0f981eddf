//! The storage-server HEAL through vnfkeeper and through Tacker's own sample
//! `KubernetesMgmtDriver` (Tacker 16.0.0's `samples/mgmt_driver/kubernetes/kubernetes_mgmt.py`,
//! fetched by `scripts/tacker-samples`, run in the venv of `scripts/tacker-venv` by
//! `tests/tacker/mgmt/storage_heal.py`), on the same testbed and the same PV cluster (1 master,
//! 2 workers, the storage server with 3 PersistentVolumes and its kept Cinder volume; hosts of
//! the Ubuntu 20.04 profile Tacker's driver checks for), vnfkeeper first, then Tacker's driver;
//! N rounds, each on a new testbed and cluster (needs root).
//!
//! Tacker's side is its driver's `heal_start`, the Heat heal of Tacker's OpenStack infra driver
//! (the server and, as Tacker's default `heal_vnfc_block_storage = true` does, its volume marked
//! unhealthy — Heat recreates the volume empty and the driver's `heal_end` formats it —, stack
//! update with `existing`, waited for by Tacker's own `_wait_until_stack_ready` with its default
//! `stack_retry_wait`), then `heal_end`; vnfkeeper's is a HEAL request run by the engine from its
//! start to COMPLETED (the volume kept, its filesystem not touched). For both: wall time and
//! SSH sessions, as the hosts' sshd logged them (commands and SFTP subsystems). Prints one line
//! per run and `bench-result` lines (benches/table) with Tacker's driver as the same-run
//! baseline; fails when a run of either does not complete, or when vnfkeeper takes more
//! sessions than Tacker's driver in the same run.
//!
//! Outside the default run (`.config/nextest.toml`, about 2 minutes with 3 runs each):
//! `scripts/bench storage_heal` runs it; `VNFKEEPER_STORAGE_HEAL_RUNS` sets N (default 3).

use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::{Value, json};

use crate::support;
use support::bed::{Bed, fast_limits};
use vnfkeeper::intake::spool::Outcome;
use vnfkeeper::store::VnfcRow;
use vnfkeeper_core::model::{OperationState, VnfInstanceId};

/// The CP of each VDU of the PV cluster's package (Tacker's driver tells the storage server
/// from the Kubernetes nodes by `storage_server.nic_cp_name`).
fn cpd_ids(row: &VnfcRow) -> Vec<String> {
    row.cp_addresses.keys().cloned().collect()
}

fn vnfcs(bed: &Bed, vnf: &VnfInstanceId) -> Vec<VnfcRow> {
    bed.db.with(|s| s.reader().vnfcs(vnf)).unwrap()
}

/// Every server the farm has had (a host's command log outlives it).
fn remember_servers(bed: &Bed, seen: &mut BTreeSet<String>) {
    for h in bed.farm.hosts() {
        seen.insert(h.server_id);
    }
}

/// SSH sessions the servers in `seen` served so far: (commands, SFTP subsystems).
async fn sessions(bed: &Bed, seen: &BTreeSet<String>) -> (usize, usize) {
    let (mut commands, mut sftp) = (0, 0);
    for id in seen {
        for line in bed.farm.command_log(id).await.unwrap() {
            if line == "[sftp subsystem]" {
                sftp += 1;
            } else {
                commands += 1;
            }
        }
    }
    (commands, sftp)
}

/// One heal's figures.
#[derive(Debug, Clone, Copy)]
struct Run {
    seconds: f64,
    commands: usize,
    sftp: usize,
}

impl Run {
    fn sessions(&self) -> usize {
        self.commands + self.sftp
    }

    /// A heal of `seconds` whose sessions are those the servers in `seen` (and any new ones)
    /// served since `before` (a [`sessions`] count).
    async fn since(
        bed: &Bed,
        seen: &mut BTreeSet<String>,
        before: (usize, usize),
        seconds: f64,
    ) -> Run {
        remember_servers(bed, seen);
        let after = sessions(bed, seen).await;
        Run {
            seconds,
            commands: after.0 - before.0,
            sftp: after.1 - before.1,
        }
    }

    /// One line: `what`, the time, `detail`, the sessions and the load average.
    fn print(&self, what: &str, detail: &str) {
        println!(
            "{what}: {:.2} s{detail}, {} SSH sessions ({} commands, {} SFTP); load {}",
            self.seconds,
            self.sessions(),
            self.commands,
            self.sftp,
            load_average()
        );
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The instantiate request's additionalParams, with `storage_server.nic_cp_name`, which Tacker's
/// driver needs to tell the storage server from a Kubernetes node (Tacker's PV usage guide
/// names it; vnfkeeper finds the storage server by its VDU).
fn additional_params() -> Value {
    let path =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let req: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut params = req["request"]["additionalParams"].clone();
    let ss = &mut params["k8s_cluster_installation_param"]["storage_server"];
    let cp = ss["ssh_cp_name"].clone();
    ss["nic_cp_name"] = cp;
    params
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn storage_heal_through_vnfkeeper_and_tackers_driver_alternating() {
    let runs: usize = std::env::var("VNFKEEPER_STORAGE_HEAL_RUNS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(3);
    let python = support::tacker::venv_python();
    let samples = support::tacker::samples_dir();
    let params = additional_params();
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for round in 0..runs {
        // A new cluster each round: Tacker's heal recreates the storage server's volume (its
        // default `heal_vnfc_block_storage`) behind vnfkeeper's back, and vnfkeeper's rows would
        // name the old one.
        let bed = Bed::new("vst", 73, fast_limits()).await;
        // Hosts of the Ubuntu 20.04 profile: Tacker's driver refuses any other storage server OS.
        bed.tb.cloud().set_image_properties(
            "ubuntu-20.04-server-cloudimg-amd64",
            testbed::hosts::HostProfile::Ubuntu2004.image_properties(),
        );
        let (op, vnf) = bed.submit_instantiate();
        let state = bed.engine.run(&op).await.unwrap();
        assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));
        let stack_id = bed
            .db
            .with(|s| s.reader().instances())
            .unwrap()
            .into_iter()
            .find(|i| i.id == vnf)
            .and_then(|i| i.stack_id)
            .unwrap();
        let mut seen = BTreeSet::new();
        // vnfkeeper: a HEAL request of the storage server's VNFC.
        let rows = vnfcs(&bed, &vnf);
        let storage = rows
            .iter()
            .find(|v| v.vdu_id == "storage_server")
            .unwrap()
            .clone();
        remember_servers(&bed, &mut seen);
        let before = sessions(&bed, &seen).await;
        let heal = json!({
            "operation": "HEAL",
            "vnfInstanceId": vnf.as_str(),
            "requestId": format!("heal-storage-{round}"),
            "request": {"vnfcInstanceId": [storage.id.as_str()], "cause": "bench"}
        });
        let op = match bed.submit(&serde_json::to_vec(&heal).unwrap()) {
            Outcome::Accepted {
                vnf_lcm_op_occ_id, ..
            } => vnf_lcm_op_occ_id,
            other => panic!("not accepted: {other:?}"),
        };
        let started = Instant::now();
        let state = bed.engine.run(&op).await.unwrap();
        let seconds = started.elapsed().as_secs_f64();
        if state != OperationState::Completed {
            bed.print_journal(&op);
        }
        assert_eq!(state, OperationState::Completed, "{:?}", bed.error_of(&op));
        let run = Run::since(&bed, &mut seen, before, seconds).await;
        run.print(&format!("vnfkeeper storage-server heal {}", round + 1), "");
        ours.push(run);

        // Tacker's driver: the same heal of the same VNFC on the same cluster.
        let rows = vnfcs(&bed, &vnf);
        let storage = rows
            .iter()
            .find(|v| v.vdu_id == "storage_server")
            .unwrap()
            .clone();
        let input = json!({
            "samples_dir": samples,
            "package_dir": support::repo_root().join("fixtures/packages/pv-k8s-cluster"),
            "clouds_yaml": bed.tb.clouds_yaml(),
            "cloud": testbed::cloud::CLOUD_NAME,
            "stack_id": stack_id,
            "vnf_instance_id": vnf.as_str(),
            "vnfd_id": "pv-k8s-cluster",
            "additional_params": params,
            "vnfcs": rows.iter().map(|v| json!({
                "id": v.id.as_str(),
                "vdu_id": v.vdu_id,
                "server_id": v.server_id,
                "cpd_ids": cpd_ids(v),
                "volumes": v.volumes.iter().map(|a| a.volume_id.as_str()).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "heal": [storage.id.as_str()],
        });
        remember_servers(&bed, &mut seen);
        let before = sessions(&bed, &seen).await;
        let started = Instant::now();
        let mut child = Command::new(python)
            .arg(support::repo_root().join("tests/tacker/mgmt/storage_heal.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run storage_heal.py");
        serde_json::to_writer(child.stdin.take().unwrap(), &input).unwrap();
        let out = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let seconds = started.elapsed().as_secs_f64();
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "storage_heal.py: {e}; stdout {}; stderr {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        assert_eq!(
            answer["ok"],
            true,
            "Tacker's driver: {answer}; its log:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let run = Run::since(&bed, &mut seen, before, seconds).await;
        run.print(
            &format!("Tacker's driver storage-server heal {}", round + 1),
            &format!(" ({answer})"),
        );
        theirs.push(run);
        // Every host and the testbed are torn down before the next round's.
        drop(bed);
    }
    report(&ours, &theirs);
    for (a, b) in ours.iter().zip(&theirs) {
        assert!(
            a.sessions() <= b.sessions(),
            "vnfkeeper {a:?} against Tacker's driver {b:?}"
        );
    }
}

/// Prints the comparison: median and range of the wall time, sessions, ratios, and the
/// `bench-result` lines with Tacker's driver as the same-run baseline.
fn report(ours: &[Run], theirs: &[Run]) {
    let secs = |v: &[Run]| v.iter().map(|r| r.seconds).collect::<Vec<_>>();
    let range = |v: &[f64]| {
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        )
    };
    let sess = |v: &[Run]| median(v.iter().map(|r| r.sessions() as f64).collect());
    let (a, b) = (secs(ours), secs(theirs));
    let (ma, mb) = (median(a.clone()), median(b.clone()));
    let ((la, ha), (lb, hb)) = (range(&a), range(&b));
    let (sa, sb) = (sess(ours), sess(theirs));
    println!(
        "storage-server heal, {} runs each, load {}: vnfkeeper {ma:.2} s median ({la:.2}-{ha:.2}), {sa} sessions; Tacker's driver {mb:.2} s median ({lb:.2}-{hb:.2}), {sb} sessions; ratio {:.2} (time), {:.2} (sessions)",
        ours.len(),
        load_average(),
        ma / mb,
        sa / sb
    );
    println!(
        "bench-result\tstorage-server heal wall time, median (s; baseline: Tacker's KubernetesMgmtDriver)\t{ma:.4}\ts\t-\t{mb:.4}\t{:.4}\t<=1",
        ma / mb
    );
    println!(
        "bench-result\tstorage-server heal SSH sessions, median (baseline: Tacker's KubernetesMgmtDriver)\t{sa:.4}\tsessions\t-\t{sb:.4}\t{:.4}\t<=1",
        sa / sb
    );
}
