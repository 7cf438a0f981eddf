//! The engine on the testbed (needs root): the seed's PersistentVolume instantiate request runs
//! against the simulated cloud whose servers are real SSH hosts; then every step of the completed
//! operation is run again and each check reports "already done".

use crate::support;
use vnfkeeper_core::model::{OpOccId, OperationState, StepState, VnfInstanceId};

use std::time::{Duration, Instant};

use support::bed::{Bed, fast_limits};
use vnfkeeper::engine::EngineLimits;
use vnfkeeper::intake::spool::Outcome;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn instantiate_pv_cluster_on_the_testbed_then_rerun_changes_nothing() {
    let bed = Bed::new("vke", 60, fast_limits()).await;
    let (op, vnf) = bed.submit_instantiate();
    let (op, vnf, db, farm, tb, engine, dir) = (
        &op,
        &vnf,
        &bed.db,
        &bed.farm,
        &bed.tb,
        &bed.engine,
        &bed.dir,
    );

    let t = Instant::now();
    let state = engine.run(op).await.unwrap();
    let journal = db.with(|s| s.reader().journal(op)).unwrap();
    bed.print_journal(op);
    let ops = db.with(|s| s.reader().operations(None)).unwrap();
    assert_eq!(
        state,
        OperationState::Completed,
        "error: {:?}",
        ops[0].error
    );
    eprintln!("instantiate completed in {:?}", t.elapsed());
    // "step k/N" of `vnfkeeper ops`: N is the real number of steps of the plan.
    let last = journal.iter().map(|j| j.step_no).max().unwrap();
    assert_eq!(db.with(|s| s.reader().steps_total(op)).unwrap(), Some(last));

    // What the operator sees: 4 VNFCs with addresses, instance INSTANTIATED.
    let inst = db.with(|s| s.reader().instances()).unwrap();
    assert_eq!(inst[0].instantiation_state.as_str(), "INSTANTIATED");
    let vnfcs = db.with(|s| s.reader().vnfcs(vnf)).unwrap();
    let by_vdu = |v: &str| vnfcs.iter().filter(|c| c.vdu_id == v).count();
    assert_eq!(
        (
            by_vdu("masterNode"),
            by_vdu("workerNode"),
            by_vdu("storage_server")
        ),
        (1, 2, 1),
        "{vnfcs:?}"
    );
    assert!(
        vnfcs.iter().all(|c| c.host_key.is_some()),
        "host keys pinned at first contact"
    );
    // Each verified against the key blocks the testbed's Nova prints to the console.
    let events = rusqlite::Connection::open(dir.path().join("state.db"))
        .unwrap()
        .prepare("SELECT evidence FROM event WHERE kind = 'HOST_KEY_PINNED'")
        .unwrap()
        .query_map([], |r| r.get::<_, String>(0))
        .unwrap()
        .map(Result::unwrap)
        .collect::<Vec<_>>();
    assert_eq!(events.len(), vnfcs.len(), "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| e.contains("\"verified_by\":\"console\"")),
        "{events:?}"
    );

    // The cluster store: 3 nodes Ready, 3 PVs Available pointing at the storage server.
    let storage = vnfcs.iter().find(|c| c.vdu_id == "storage_server").unwrap();
    let storage_ip = storage.ip_address.clone().unwrap();
    let hosts = farm.hosts();
    let master = vnfcs.iter().find(|c| c.vdu_id == "masterNode").unwrap();
    let kube_out = farm
        .exec(
            master.server_id.as_deref().unwrap(),
            "kubectl get pv -o json",
        )
        .await
        .unwrap();
    let pvs: serde_json::Value = serde_json::from_slice(&kube_out.stdout).unwrap();
    let items = pvs["items"].as_array().unwrap();
    assert_eq!(items.len(), 3, "{pvs}");
    for pv in items {
        assert_eq!(pv["status"]["phase"], "Available");
        assert_eq!(pv["spec"]["nfs"]["server"], storage_ip.as_str());
    }
    assert!(hosts.len() >= 4);
    let nodes = farm
        .exec(
            master.server_id.as_deref().unwrap(),
            "kubectl get nodes -o json",
        )
        .await
        .unwrap();
    let nodes: serde_json::Value = serde_json::from_slice(&nodes.stdout).unwrap();
    assert_eq!(
        nodes["items"].as_array().unwrap().len(),
        3,
        "one node per master and worker: {nodes}"
    );

    // NFS for real: write through pv1's export from a worker, read it back from the master.
    let workers: Vec<_> = vnfcs.iter().filter(|c| c.vdu_id == "workerNode").collect();
    let w = workers[0].server_id.as_deref().unwrap();
    let url = format!("nfs://{storage_ip}/volume/nfs/pv1/hello.txt");
    let wrote = farm
        .exec(
            w,
            &format!("echo written-by-worker > /tmp/h.txt && nfs-cp /tmp/h.txt {url}"),
        )
        .await
        .unwrap();
    assert!(
        wrote.status.success(),
        "{}",
        String::from_utf8_lossy(&wrote.stderr)
    );
    let read = farm
        .exec(
            master.server_id.as_deref().unwrap(),
            &format!("nfs-cat {url}"),
        )
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim(),
        "written-by-worker"
    );

    // No secret in the argv of any remote process: every command line run over SSH is logged by
    // the hosts. The SSH and sudo password ("ubuntu") goes to sudo on stdin, so the word never
    // appears in a command line; neither do the seed's proxy credentials.
    let mut commands = 0;
    for h in farm.hosts() {
        for line in farm.command_log(&h.server_id).await.unwrap() {
            commands += 1;
            let words: Vec<&str> = line.split(|c: char| !c.is_ascii_alphanumeric()).collect();
            assert!(
                !words.contains(&"ubuntu"),
                "password word in remote argv: {line}"
            );
            assert!(
                !line.contains("password1") && !line.contains("password2"),
                "{line}"
            );
        }
    }
    assert!(commands >= 40, "only {commands} remote commands logged");

    // Re-run every step of the completed operation: each check says "already done".
    let conn = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    conn.execute(
        "UPDATE vnf_lcm_op_occ SET operation_state = 'PROCESSING' WHERE id = ?1",
        [op.as_str()],
    )
    .unwrap();
    conn.execute(
        "DELETE FROM step_journal WHERE vnf_lcm_op_occ_id = ?1",
        [op.as_str()],
    )
    .unwrap();
    drop(conn);
    assert_eq!(engine.run(op).await.unwrap(), OperationState::Completed);
    let again = db.with(|s| s.reader().journal(op)).unwrap();
    assert_eq!(again.len(), journal.len());
    for j in again.iter().filter(|j| !j.host.is_empty()) {
        let d = j.detail.as_deref().unwrap_or("");
        assert!(
            d.starts_with("already done"),
            "step {} {} on {}: {d}",
            j.step_no,
            j.name,
            j.host
        );
    }
    let mkfs = farm
        .mkfs_log(storage.server_id.as_deref().unwrap())
        .await
        .unwrap();
    assert_eq!(mkfs.len(), 1, "mkfs ran once: {mkfs:?}");
    assert_eq!(
        tb.cloud().record_counts().0,
        4,
        "no server was created again"
    );
}

/// The storage server's sshd is stopped before the run: the first storage step (`nfs.server`,
/// beside the first master's cluster install) fails after its retry budget (connection refused
/// is transient) → FAILED_TEMP.
async fn fail_at_storage(bed: &Bed) -> (OpOccId, VnfInstanceId, String) {
    let (op, vnf) = bed.submit_instantiate();
    // Stop sshd on the storage server as soon as it exists, before the engine reaches it.
    let farm = bed.farm.clone();
    let stopper = tokio::spawn(async move {
        for _ in 0..600 {
            let storage = farm
                .hosts()
                .into_iter()
                .find(|h| h.hostname.to_lowercase().contains("storage"));
            if let Some(h) = storage
                && farm.stop_sshd(&h.server_id).await.is_ok()
            {
                return h.server_id;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("no storage server host appeared");
    });
    let state = bed.engine.run(&op).await.unwrap();
    let storage = stopper.await.unwrap();
    bed.print_journal(&op);
    assert_eq!(state, OperationState::FailedTemp);
    let error = bed.error_of(&op).unwrap();
    assert!(
        error.contains("nfs.server") && error.contains("Connection refused"),
        "{error}"
    );
    (op, vnf, storage)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn retry_after_a_transient_fault_resumes_at_the_failed_step() {
    let bed = Bed::new(
        "vkti",
        63,
        EngineLimits {
            attempts: 2,
            ..fast_limits()
        },
    )
    .await;
    let (op, _vnf, storage) = fail_at_storage(&bed).await;
    let before = bed.db.with(|s| s.reader().journal(&op)).unwrap();

    // The fault goes away; the operator sends RETRY through the spool.
    bed.farm.start_sshd(&storage).await.unwrap();
    let retry = format!(r#"{{"operation": "RETRY", "vnfLcmOpOccId": "{op}"}}"#);
    assert!(matches!(
        bed.submit(retry.as_bytes()),
        Outcome::Accepted { .. }
    ));
    assert_eq!(
        bed.engine.run(&op).await.unwrap(),
        OperationState::Completed,
        "{:?}",
        bed.error_of(&op)
    );
    bed.print_journal(&op);

    // Steps done before the fault were not run again (same attempt count, still DONE).
    let after = bed.db.with(|s| s.reader().journal(&op)).unwrap();
    for b in before.iter().filter(|b| b.state == StepState::Done) {
        let a = after.iter().find(|a| a.stage_key == b.stage_key).unwrap();
        assert_eq!(
            (a.attempts, a.state),
            (b.attempts, StepState::Done),
            "step {} {} ran again",
            b.step_no,
            b.name
        );
    }
    let failed = before
        .iter()
        .find(|b| b.state == StepState::Failed)
        .unwrap();
    let resumed = after
        .iter()
        .find(|a| a.stage_key == failed.stage_key)
        .unwrap();
    assert_eq!(resumed.state, StepState::Done);
    assert_eq!(bed.farm.mkfs_log(&storage).await.unwrap().len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn rollback_of_a_failed_instantiate_leaves_no_stack_and_no_server() {
    let bed = Bed::new(
        "vkb",
        62,
        EngineLimits {
            attempts: 2,
            ..fast_limits()
        },
    )
    .await;
    let (op, vnf, _storage) = fail_at_storage(&bed).await;
    assert_eq!(bed.tb.cloud().record_counts().0, 4);

    let rollback = format!(r#"{{"operation": "ROLLBACK", "vnfLcmOpOccId": "{op}"}}"#);
    assert!(matches!(
        bed.submit(rollback.as_bytes()),
        Outcome::Accepted { .. }
    ));
    assert_eq!(
        bed.engine.run(&op).await.unwrap(),
        OperationState::RolledBack,
        "{:?}",
        bed.error_of(&op)
    );

    assert_eq!(
        bed.tb.cloud().record_counts(),
        (0, 0, 0),
        "servers, ports, volumes left"
    );
    use vnfkeeper::cloud::Cloud as _;
    assert!(
        bed.cloud
            .find_stack(&format!("vnf-{vnf}"))
            .await
            .unwrap()
            .is_none(),
        "stack left"
    );
    assert!(
        bed.farm.hosts().is_empty(),
        "hosts left: {:?}",
        bed.farm.hosts()
    );
    assert!(bed.db.with(|s| s.reader().vnfcs(&vnf)).unwrap().is_empty());
    let inst = bed.db.with(|s| s.reader().instances()).unwrap();
    assert_eq!(inst[0].instantiation_state.as_str(), "NOT_INSTANTIATED");
    // A new INSTANTIATE of the same instance is accepted after the rollback.
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut again: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    again["requestId"] = "second-try".into();
    assert!(matches!(
        bed.submit(&serde_json::to_vec(&again).unwrap()),
        Outcome::Accepted { .. }
    ));
}
