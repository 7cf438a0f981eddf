//! Fleet-size benchmark: a store as a large deployment leaves it after a long time — 2,000 VNF
//! instances × 6 VNFCs and 100,000 finished operations of history, each with its intake row and
//! two events (`-- --quick`: 200 VNFs, 10,000 operations). Prints the database's size; the idle
//! daemon's resident memory on it (VmRSS 3 s after READY=1) against the same daemon on an empty
//! store, measured in the same run; and the wall time (median of 5 runs of the release binary,
//! process start included) of `vnfkeeper status`, `ops --vnf X` and `events X`, against
//! `vnfkeeper --version` as the start-up baseline. Targets (not asserted): RSS ≤ 150 MB, `status`
//! and `ops --vnf` ≤ 200 ms.
//!
//! Run: `cargo bench --bench fleet`.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;
use vnfkeeper::store::{NewEvent, NewIntake, NewOperation, RequestBody, Store};
use vnfkeeper_core::model::{
    EventKind, InstantiationState, LcmOperationType, OpOccId, OperationState, Timestamp,
    VnfInstanceId,
};
use vnfkeeper_core::plan::vnfcs::ObservedVnfc;

mod support;
mod table;

const VK: &str = env!("CARGO_BIN_EXE_vnfkeeper");
const VDUS: [&str; 6] = [
    "masterNode",
    "masterNode",
    "masterNode",
    "workerNode",
    "workerNode",
    "storage_server",
];

fn main() {
    let quick = table::quick();
    let vnfs: usize = table::arg("vnfs").unwrap_or(if quick { 200 } else { 2_000 });
    let ops: usize = table::arg("ops").unwrap_or(if quick { 10_000 } else { 100_000 });
    let dir = tempfile::tempdir().unwrap();
    let packages = dir.path().join("packages");
    std::fs::create_dir_all(&packages).unwrap();

    // The baseline: the idle daemon on an empty store.
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let (_, _, empty_config) = support::write_config(&empty, &packages);
    let rss_empty = idle_rss(&empty_config, &empty);

    let full = dir.path().join("full");
    std::fs::create_dir_all(&full).unwrap();
    let (_, db, config) = support::write_config(&full, &packages);
    let t = Instant::now();
    fill(&db, vnfs, ops);
    let filled = t.elapsed();
    let size: u64 = ["", "-wal", "-shm"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len())
        .sum();
    println!(
        "fleet: {vnfs} VNFs × {} VNFCs, {ops} operations (intake rows and 2 events each) written in {:.1} s; database {:.1} MB",
        VDUS.len(),
        filled.as_secs_f64(),
        size as f64 / 1e6
    );
    let rss_full = idle_rss(&config, &full);

    let config = config.to_str().unwrap();
    let probe = "fleet-vnf-000007";
    let version = median(&["--version"], config);
    let status = median(&["status", "--config", config], config);
    let status_json = median(&["status", "--json", "--config", config], config);
    let ops_vnf = median(&["ops", "--vnf", probe, "--config", config], config);
    let events = median(&["events", probe, "--config", config], config);
    println!(
        "fleet: idle RSS {:.1} MB (empty store {:.1} MB); status {:.0} ms (--json {:.0} ms), ops --vnf {:.0} ms, events {:.0} ms (start-up {:.0} ms)",
        rss_full / 1e3,
        rss_empty / 1e3,
        status * 1e3,
        status_json * 1e3,
        ops_vnf * 1e3,
        events * 1e3,
        version * 1e3
    );
    table::row(
        &format!("fleet: database, {vnfs} VNFs, {ops} operations"),
        size as f64 / 1e6,
        "MB",
        table::Target::None,
        None,
    );
    table::row(
        &format!("fleet: idle daemon RSS, {vnfs} VNFs, {ops} operations"),
        rss_full / 1e3,
        "MB",
        table::Target::AtMost(150.0),
        Some(table::SameRun {
            baseline: rss_empty / 1e3,
            ratio: rss_full / rss_empty,
            target: table::Target::None,
        }),
    );
    for (name, secs) in [
        ("status", status),
        ("status --json", status_json),
        ("ops --vnf", ops_vnf),
        ("events VNF", events),
    ] {
        let target = if name == "events VNF" {
            table::Target::None
        } else {
            table::Target::AtMost(200.0)
        };
        table::row(
            &format!("fleet: vnfkeeper {name}, {vnfs} VNFs, {ops} operations"),
            secs * 1e3,
            "ms",
            target,
            Some(table::SameRun {
                baseline: version * 1e3,
                ratio: secs / version,
                target: table::Target::None,
            }),
        );
    }
}

/// VmRSS in kB of the daemon on `config`, 3 s after READY=1.
fn idle_rss(config: &Path, dir: &Path) -> f64 {
    let daemon = support::Daemon::start(Path::new(VK), config, dir);
    std::thread::sleep(Duration::from_secs(3));
    let status = std::fs::read_to_string(format!("/proc/{}/status", daemon.pid())).unwrap();
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .expect("VmRSS");
    let (_, exit) = daemon.sigterm();
    assert!(exit.success(), "daemon exit {exit}");
    kb
}

/// Median wall time in seconds of 5 runs of `vnfkeeper ARGS` (after one warm-up run).
fn median(args: &[&str], config: &str) -> f64 {
    let run = || {
        let t = Instant::now();
        let out = support::vk(Path::new(config), args);
        assert!(
            out.status.success(),
            "vnfkeeper {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        t.elapsed().as_secs_f64()
    };
    run();
    let mut v: Vec<f64> = (0..5).map(|_| run()).collect();
    v.sort_by(f64::total_cmp);
    v[2]
}

/// `vnfs` instantiated instances with 6 VNFCs each, and `ops` COMPLETED operations spread over
/// them (an INSTANTIATE first, then HEAL and SCALE), each with its intake row and two events.
fn fill(db: &Path, vnfs: usize, ops: usize) {
    let mut store = Store::open(db).unwrap();
    let now = Timestamp(chrono::Utc::now());
    let body = |op: LcmOperationType, v: serde_json::Value| RequestBody::split(op, &v.to_string());
    let instantiate = body(
        LcmOperationType::Instantiate,
        json!({"flavourId": "simple", "additionalParams": {"lcm-operation-user-data": "./UserData/x.py"}}),
    );
    let heal = body(
        LcmOperationType::Heal,
        json!({"vnfcInstanceId": ["vnfc-1"], "cause": "fleet"}),
    );
    let scale = body(
        LcmOperationType::Scale,
        json!({"type": "SCALE_OUT", "aspectId": "worker_instance", "numberOfSteps": 1}),
    );
    store
        .write(|tx| {
            for v in 0..vnfs {
                let vnf = format!("fleet-vnf-{v:06}");
                let observed: Vec<ObservedVnfc> = VDUS
                    .iter()
                    .enumerate()
                    .map(|(i, vdu)| ObservedVnfc {
                        vdu_id: (*vdu).into(),
                        stack_name: format!("vnf-{vnf}"),
                        stack_id: format!("stack-{v}"),
                        resource_name: format!("{vdu}-{i}"),
                        server_id: format!("server-{v}-{i}"),
                        server_status: Some("ACTIVE".into()),
                        created: None,
                        cp_addresses: [(
                            format!("{vdu}_CP1"),
                            format!("10.{}.{}.{}", v / 250, v % 250, i + 10),
                        )]
                        .into_iter()
                        .collect(),
                        shared_addresses: Default::default(),
                        floating_addresses: Default::default(),
                        volumes: Vec::new(),
                        index: None,
                        parameters: None,
                    })
                    .collect();
                tx.create_instance_if_missing(&VnfInstanceId::from(&vnf), now)?;
                tx.set_instance_stack(
                    &VnfInstanceId::from(&vnf),
                    &format!("vnf-{vnf}"),
                    Some(&format!("stack-{v}")),
                    now,
                )?;
                tx.sync_vnfcs(&VnfInstanceId::from(&vnf), &observed, now)?;
                tx.set_instantiation_state(
                    &VnfInstanceId::from(&vnf),
                    InstantiationState::Instantiated,
                    Some("simple"),
                    None,
                    now,
                )?;
            }
            for o in 0..ops {
                let v = o % vnfs;
                let vnf = format!("fleet-vnf-{v:06}");
                let id = format!("fleet-op-{o:07}");
                let (kind, params) = match o / vnfs {
                    0 => (LcmOperationType::Instantiate, &instantiate),
                    n if n % 2 == 1 => (LcmOperationType::Heal, &heal),
                    _ => (LcmOperationType::Scale, &scale),
                };
                tx.insert_operation(
                    &NewOperation {
                        id: &OpOccId::from(&id),
                        vnf_instance_id: &VnfInstanceId::from(&vnf),
                        operation: kind,
                        operation_params: params,
                        vnf_package: None,
                        request_id: Some(&id),
                        is_automatic_invocation: kind == LcmOperationType::Heal,
                        status_detail: Some("completed"),
                    },
                    now,
                )?;
                tx.set_operation_state(&id, OperationState::Processing, None, now)?;
                tx.set_operation_state(&id, OperationState::Completed, None, now)?;
                let file = format!("{id}.json");
                let sha = format!("{o:064x}");
                tx.insert_intake(
                    &NewIntake {
                        file_name: &file,
                        content_sha256: &sha,
                        request_id: Some(&id),
                        outcome: "ACCEPTED",
                        vnf_instance_id: Some(&vnf),
                        vnf_lcm_op_occ_id: Some(&id),
                        problem: None,
                        warnings: None,
                    },
                    now,
                )?;
                for (k, m) in [
                    (EventKind::RequestAccepted, "request accepted"),
                    (EventKind::StateChanged, "PROCESSING → COMPLETED: completed"),
                ] {
                    tx.append_event(
                        &NewEvent {
                            vnf_instance_id: Some(&VnfInstanceId::from(&vnf)),
                            vnf_lcm_op_occ_id: Some(&OpOccId::from(&id)),
                            message: m,
                            ..NewEvent::of(k)
                        },
                        now,
                    )?;
                }
            }
            Ok(())
        })
        .unwrap();
}
