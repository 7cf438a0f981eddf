//! The engine on the testbed (needs root): the seed's PersistentVolume instantiate request runs
//! against the simulated cloud whose servers are real SSH hosts; then every step of the completed
//! operation is run again and each check reports "already done".

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use testbed::cloud::farm::FarmBackend;
use testbed::cloud::{CloudOptions, Testbed};
use testbed::hosts::{FarmConfig, HostFarm};
use vnfkeeper::cloud::OpenStackCloud;
use vnfkeeper::engine::{Engine, EngineLimits};
use vnfkeeper::intake::spool::{self, IntakeContext, Outcome, Spool};
use vnfkeeper::model::{OperationState, Timestamp};
use vnfkeeper::remote::{SshConfig, SshRemote};
use vnfkeeper::store::{Db, Store};

const PREFIX: &str = "vke";
const SUBNET: &str = "10.231.60.0/24";

fn is_root() -> bool {
    std::process::Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false)
}

/// Removes every testbed leftover with our prefix when dropped (also on panic).
struct Cleanup;
impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::thread::spawn(|| {
            tokio::runtime::Runtime::new().unwrap().block_on(async {
                let _ = testbed::hosts::down_all(PREFIX).await;
            })
        })
        .join();
    }
}

fn now() -> Timestamp {
    Timestamp(chrono::Utc::now())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instantiate_pv_cluster_on_the_testbed_then_rerun_changes_nothing() {
    if !is_root() {
        eprintln!("skipped: needs root (network namespaces, loop devices)");
        return;
    }
    let _ = testbed::hosts::down_all(PREFIX).await;
    let _cleanup = Cleanup;
    testbed::hosts::setup_packages().await.expect("host packages");
    let dir = tempfile::Builder::new().prefix("vk-engine-").tempdir_in("/var/tmp").unwrap();
    let farm = Arc::new(
        HostFarm::new(FarmConfig {
            state_dir: dir.path().join("hosts"),
            prefix: PREFIX.into(),
            bridge_cidr: "10.231.60.1/24".parse().unwrap(),
        })
        .await
        .expect("farm"),
    );
    let mut opts = CloudOptions::no_hosts(dir.path());
    opts.subnet = SUBNET.into();
    opts.farm = Some(Arc::new(FarmBackend(farm.clone())));
    let tb = Testbed::start(opts).await.unwrap();

    // Intake: the seed's request, verbatim, through the spool.
    let db = Db::new(Store::open(&dir.path().join("state.db")).unwrap());
    let spool_dir = dir.path().join("spool");
    let spool = Spool::open(&spool_dir).unwrap();
    let fixture = support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let path = spool.submit(&std::fs::read(fixture).unwrap()).unwrap();
    let root = support::repo_root();
    let ctx = IntakeContext { packages_dir: &root, cloud_configured: true };
    let outcomes = db.with(|s| spool::process(&spool, s, &[path], &ctx, now())).unwrap();
    let Outcome::Accepted { vnf_lcm_op_occ_id: op, vnf_instance_id: vnf, .. } = &outcomes[0] else {
        panic!("{outcomes:?}")
    };

    let cloud = OpenStackCloud::connect(tb.clouds_yaml(), "testbed", Duration::from_secs(30)).await.unwrap();
    let remote = SshRemote::new(SshConfig::default());
    let limits = EngineLimits { backoff: Duration::from_millis(200), pv_wait: Duration::from_secs(30), ..EngineLimits::default() };
    let engine = Engine::new(db.clone(), Arc::new(cloud), Arc::new(remote), limits);

    let t = Instant::now();
    let state = engine.run(op).await.unwrap();
    let journal = db.with(|s| s.reader().journal(op)).unwrap();
    for j in &journal {
        eprintln!("{:>3} {:<18} {:<38} {:<6} {}", j.step_no, j.name, j.host, j.state, j.detail.as_deref().unwrap_or(""));
    }
    let ops = db.with(|s| s.reader().operations(None)).unwrap();
    assert_eq!(state, OperationState::Completed, "error: {:?}", ops[0].error);
    eprintln!("instantiate completed in {:?}", t.elapsed());

    // What the operator sees: 4 VNFCs with addresses, instance INSTANTIATED.
    let inst = db.with(|s| s.reader().instances()).unwrap();
    assert_eq!(inst[0].instantiation_state.as_str(), "INSTANTIATED");
    let vnfcs = db.with(|s| s.reader().vnfcs(vnf)).unwrap();
    let by_vdu = |v: &str| vnfcs.iter().filter(|c| c.vdu_id == v).count();
    assert_eq!((by_vdu("masterNode"), by_vdu("workerNode"), by_vdu("storage_server")), (1, 2, 1), "{vnfcs:?}");
    assert!(vnfcs.iter().all(|c| c.host_key.is_some()), "host keys pinned on first use");

    // The cluster store: 3 nodes Ready, 3 PVs Available pointing at the storage server.
    let storage = vnfcs.iter().find(|c| c.vdu_id == "storage_server").unwrap();
    let storage_ip = storage.ip_address.clone().unwrap();
    let hosts = farm.hosts();
    let master = vnfcs.iter().find(|c| c.vdu_id == "masterNode").unwrap();
    let kube_out = farm.exec(master.server_id.as_deref().unwrap(), "kubectl get pv -o json").await.unwrap();
    let pvs: serde_json::Value = serde_json::from_slice(&kube_out.stdout).unwrap();
    let items = pvs["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{pvs}");
    for pv in items {
        assert_eq!(pv["status"]["phase"], "Available");
        assert_eq!(pv["spec"]["nfs"]["server"], storage_ip.as_str());
    }
    assert!(hosts.len() >= 4);
    let nodes = farm.exec(master.server_id.as_deref().unwrap(), "kubectl get nodes -o json").await.unwrap();
    let nodes: serde_json::Value = serde_json::from_slice(&nodes.stdout).unwrap();
    assert_eq!(nodes["items"].as_array().unwrap().len(), 3, "one node per master and worker: {nodes}");

    // NFS for real: write through pv1's export from a worker, read it back from the master.
    let workers: Vec<_> = vnfcs.iter().filter(|c| c.vdu_id == "workerNode").collect();
    let w = workers[0].server_id.as_deref().unwrap();
    let url = format!("nfs://{storage_ip}/volume/nfs/pv1/hello.txt");
    let wrote = farm
        .exec(w, &format!("echo written-by-worker > /tmp/h.txt && nfs-cp /tmp/h.txt {url}"))
        .await
        .unwrap();
    assert!(wrote.status.success(), "{}", String::from_utf8_lossy(&wrote.stderr));
    let read = farm.exec(master.server_id.as_deref().unwrap(), &format!("nfs-cat {url}")).await.unwrap();
    assert_eq!(String::from_utf8_lossy(&read.stdout).trim(), "written-by-worker");

    // Re-run every step of the completed operation: each check says "already done".
    let conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    conn.execute("UPDATE vnf_lcm_op_occ SET operation_state = 'PROCESSING' WHERE id = ?1", [op]).unwrap();
    conn.execute("DELETE FROM step_journal WHERE vnf_lcm_op_occ_id = ?1", [op]).unwrap();
    drop(conn);
    assert_eq!(engine.run(op).await.unwrap(), OperationState::Completed);
    let again = db.with(|s| s.reader().journal(op)).unwrap();
    assert_eq!(again.len(), journal.len());
    for j in again.iter().filter(|j| !j.host.is_empty()) {
        let d = j.detail.as_deref().unwrap_or("");
        assert!(d.starts_with("already done"), "step {} {} on {}: {d}", j.step_no, j.name, j.host);
    }
    let mkfs = farm.mkfs_log(storage.server_id.as_deref().unwrap()).await.unwrap();
    assert_eq!(mkfs.len(), 1, "mkfs ran once: {mkfs:?}");
    assert_eq!(tb.cloud().record_counts().0, 4, "no server was created again");

    tb.shutdown().await;
}
