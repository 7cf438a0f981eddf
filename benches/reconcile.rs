//! Reconcile benchmark (a): one cloud-only reconcile pass (no SSH probes) over 200 VNFs × 6
//! VNFCs and over 50 × 6 in the testbed cloud (record-only servers, no hosts), with a baseline
//! measured in the same run: the bare list calls (`Cloud::inventory`). Prints API requests, wall
//! time and CPU time of the thread running the pass (getrusage-equivalent `/proc/thread-self/stat`
//! utime+stime; the testbed runs on other threads), requests per pass per VNF count, and CPU per
//! 1,000 servers. Targets (not asserted): requests grow only with pagination, CPU ≤ 0.5 s per
//! 1,000 servers.
//!
//! Run: `cargo bench --bench reconcile` (`-- --quick`: 20 and 50 VNFs; `-- --sizes 50,2000`:
//! the fleet size of the fleet benchmark, 12,000 servers, a few minutes to create).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use testbed::cloud::{CloudOptions, Testbed};
use vnfkeeper::cloud::{Cloud, OpenStackCloud, StackCreate};
use vnfkeeper::reconcile::probe::ProbeSettings;
use vnfkeeper::reconcile::{self, PassKind, Reconciler};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::{Db, Store};
use vnfkeeper_core::model::{InstantiationState, Timestamp, VnfInstanceId};
use vnfkeeper_core::plan::vnfcs::ObservedVnfc;
use vnfkeeper_core::policy::Policy;

mod table;

const PER_VNF: usize = 6;

/// CPU seconds (user + system) of the calling thread.
fn thread_cpu() -> f64 {
    let s = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    let rest = s.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields after the command: state(0) … utime(11) stime(12), in clock ticks (100 Hz).
    let ticks: f64 = f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    // The testbed cloud on its own runtime and threads.
    let (tx, rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let state = dir.path().to_path_buf();
    let server = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut opts = CloudOptions::no_hosts(&state);
            opts.subnet = "10.232.0.0/16".into();
            let tb = Testbed::start(opts).await.unwrap();
            tx.send(tb.clouds_yaml().to_path_buf()).unwrap();
            let _ = stop_rx.await;
            tb.shutdown().await;
        });
    });
    let clouds_yaml = rx.recv().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cloud = Arc::new(
            OpenStackCloud::connect(&clouds_yaml, "testbed", Duration::from_secs(120))
                .await
                .unwrap(),
        );
        let mut made = 0;
        let sizes: [usize; 2] = match table::arg::<String>("sizes") {
            Some(s) => {
                let v: Vec<usize> = s
                    .split(',')
                    .map(|n| n.trim().parse().expect("--sizes: two VNF counts, a,b"))
                    .collect();
                assert!(
                    v.len() == 2 && v[0] <= v[1] && v[0] > 0,
                    "--sizes: two VNF counts a,b with 0 < a <= b"
                );
                [v[0], v[1]]
            }
            None if table::quick() => [20, 50],
            None => [50, 200],
        };
        for (n, db_name) in [(sizes[0], "small.db"), (sizes[1], "large.db")] {
            // Each database in a directory of its own: the secrets key another one left beside
            // it would be a sign of an earlier database and refuse the new one.
            let state_dir = dir.path().join(db_name.trim_end_matches(".db"));
            std::fs::create_dir_all(&state_dir).unwrap();
            let db = Db::new(Store::open(&state_dir.join(db_name)).unwrap());
            // Stacks are shared: the 50-VNF database names the first 50 of the 200.
            while made < n {
                make_vnf(&cloud, made).await;
                made += 1;
            }
            for i in 0..n {
                record_vnf(&cloud, &db, i).await;
            }
            let rec = Reconciler::new(
                cloud.clone(),
                Arc::new(SshRemote::new(SshConfig::default())),
                Policy::default(),
                ProbeSettings {
                    timeout: Duration::from_secs(30),
                    max_parallel_hosts: 16,
                },
            );
            // Baseline: the bare list calls.
            let r0 = cloud.request_count();
            let (t0, c0) = (Instant::now(), thread_cpu());
            let inv = cloud.inventory().await.unwrap();
            let (base_wall, base_cpu) = (t0.elapsed(), thread_cpu() - c0);
            let base_req = cloud.request_count() - r0;
            // One cloud-only pass: snapshot, observe, decide, record.
            let (t1, c1) = (Instant::now(), thread_cpu());
            let now = Timestamp(chrono::Utc::now());
            let snap = db.with(|s| reconcile::snapshot(s.reader(), None)).unwrap();
            let mut report = rec.evaluate(&snap, PassKind::Cloud, now).await;
            db.write(|tx| reconcile::record(tx, &mut report, now)).unwrap();
            let (wall, cpu) = (t1.elapsed(), thread_cpu() - c1);
            let servers = report.vnfcs;
            println!(
                "reconcile {n:>3} VNFs x {PER_VNF} = {servers:>4} VNFCs (cloud holds {} servers, {} ports, {} volumes)",
                inv.servers.len(),
                inv.ports.len(),
                inv.volumes.len()
            );
            println!(
                "  baseline list calls: {base_req:>3} requests, wall {:>7.1} ms, CPU {:>6.3} s",
                base_wall.as_secs_f64() * 1e3,
                base_cpu
            );
            println!(
                "  reconcile pass:      {:>3} requests, wall {:>7.1} ms, CPU {:>6.3} s ({:.3} s per 1,000 VNFCs), {} heals, cloud error {:?}",
                report.api_requests,
                wall.as_secs_f64() * 1e3,
                cpu,
                cpu * 1000.0 / servers.max(1) as f64,
                report.started.len(),
                report.cloud_error
            );
            table::row(
                &format!("reconcile: pass CPU per 1,000 VNFCs ({n} VNFs)"),
                cpu * 1000.0 / servers.max(1) as f64,
                "s",
                table::Target::AtMost(0.5),
                None,
            );
            table::row(
                &format!("reconcile: API requests per pass ({n} VNFs; ratio: / bare list calls)"),
                report.api_requests as f64,
                "requests",
                table::Target::None,
                Some(table::SameRun {
                    baseline: base_req as f64,
                    ratio: report.api_requests as f64 / base_req.max(1) as f64,
                    target: table::Target::None,
                }),
            );
        }
        println!(
            "requests per pass do not depend on the VNF count beyond pagination (compare the two rows; cloud inventory grows between them)"
        );
    });
    let _ = stop_tx.send(());
    server.join().unwrap();
}

fn template() -> serde_json::Value {
    let mut resources = serde_json::Map::new();
    for i in 0..PER_VNF {
        resources.insert(
            format!("VDU{i}"),
            json!({"type": "OS::Nova::Server", "properties": {"name": format!("vdu{i}"), "flavor": "m1.tiny", "image": "cirros"}}),
        );
    }
    json!({"heat_template_version": "2013-05-23", "resources": resources})
}

async fn make_vnf(cloud: &OpenStackCloud, i: usize) {
    let s = cloud
        .create_stack(&StackCreate::new(format!("bench-{i}"), template()))
        .await
        .unwrap();
    cloud
        .wait_stack(
            &s,
            &[vnfkeeper::cloud::StackStatus::CreateComplete],
            Duration::from_secs(120),
        )
        .await
        .unwrap();
}

/// The VNF instance and its VNFC rows, as the engine would have recorded them.
async fn record_vnf(cloud: &OpenStackCloud, db: &Db, i: usize) {
    let s = cloud
        .find_stack(&format!("bench-{i}"))
        .await
        .unwrap()
        .unwrap();
    let res = cloud.stack_resources(&s, 0).await.unwrap();
    let observed: Vec<ObservedVnfc> = res
        .iter()
        .filter(|r| r.resource_type == "OS::Nova::Server")
        .map(|r| ObservedVnfc {
            vdu_id: r.resource_name.clone(),
            stack_name: s.name.clone(),
            stack_id: s.id.clone(),
            resource_name: r.resource_name.clone(),
            server_id: r.physical_resource_id.clone(),
            server_status: Some("ACTIVE".into()),
            created: None,
            cp_addresses: Default::default(),
            shared_addresses: Default::default(),
            floating_addresses: Default::default(),
            volumes: Vec::new(),
            index: None,
            parameters: None,
        })
        .collect();
    let now = Timestamp(chrono::Utc::now());
    let vnf = format!("bench-vnf-{i}");
    db.write(|tx| {
        tx.create_instance_if_missing(&VnfInstanceId::from(&vnf), now)?;
        tx.set_instance_stack(&VnfInstanceId::from(&vnf), &s.name, Some(&s.id), now)?;
        tx.sync_vnfcs(&VnfInstanceId::from(&vnf), &observed, now)?;
        tx.set_instantiation_state(
            &VnfInstanceId::from(&vnf),
            InstantiationState::Instantiated,
            Some("simple"),
            None,
            now,
        )
    })
    .unwrap();
}
