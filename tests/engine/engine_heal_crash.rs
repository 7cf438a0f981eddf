//! Crash-resume of the storage-server HEAL at every stage boundary (needs root): the seed's
//! PersistentVolume VNF is instantiated by the daemon, then its storage server is healed by a
//! daemon that aborts (as a SIGKILL would end it) right after the first DONE it journals
//! (`engine-step-done:1`), or right after `pv.unregister` or `pv.register` applied on the master
//! but before their DONE (`engine-applied-pv.unregister:1`, `engine-applied-pv.register:1`).
//! Each life resumes where the last one ended. After each life: every PersistentVolume deleted
//! at most once and applied at most once by the heal (the resumed check finds the work done);
//! at the end: COMPLETED, every stage of the stored plan DONE, the three PVs Available, the kept
//! volume's data on the new server.

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Install, repo_root, wait_until};

const PREFIX: &str = "vkhc";
const VNF: &str = "heal-walk-1";
/// Every life of the heal is armed with these failpoints; whichever is reached first ends it.
const FAILPOINTS: &str =
    "engine-step-done:1,engine-applied-pv.unregister:1,engine-applied-pv.register:1";
const FILE_ON_PV: &str = "/volume/nfs/pv1/kept-across-heal.txt";
const PVS: [&str; 3] = ["nfs-pv1", "nfs-pv2", "nfs-pv3"];

/// The VNF's operation whose `operation` is `kind`.
fn op_of(install: &Install, kind: &str) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == VNF && o["operation"] == kind)
}

fn query(db: &Path, sql: &str, arg: &str) -> Option<String> {
    let conn = rusqlite::Connection::open(db).unwrap();
    conn.query_row(sql, [arg], |r| r.get(0)).ok()
}

/// (stored plan's stage keys, keys journaled DONE) of the operation `op`.
fn plan_and_done(db: &Path, op: &str) -> (Vec<String>, Vec<String>) {
    let p = support::StoredPlan::read(db, op);
    (p.keys(), p.done.into_keys().collect())
}

/// How often the heal's kubectl calls (lines of the cluster's `kubectl.log` after `from`)
/// deleted and applied each PersistentVolume.
fn pv_calls(log: &[String], from: usize) -> Vec<(usize, usize)> {
    PVS.iter()
        .map(|pv| {
            let calls = &log[from.min(log.len())..];
            // `kubectl delete pv NAME...` names several at once.
            let deleted = calls
                .iter()
                .filter(|l| l.contains(" delete pv ") && l.split(' ').any(|w| w == *pv))
                .count();
            let applied = calls
                .iter()
                .filter(|l| l.contains(" apply -f ") && l.contains(&format!("/{pv}.yaml")))
                .count();
            (deleted, applied)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn storage_heal_aborted_at_every_stage_boundary_converges_touching_each_pv_once() {
    let dir = tempfile::Builder::new()
        .prefix("vk-heal-crash-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts(PREFIX, 143, dir.path()).await;
    let install = Install::new();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();

    // INSTANTIATE by a daemon without failpoints.
    let fixture = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["vnfInstanceId"] = VNF.into();
    env["requestId"] = VNF.into();
    let daemon = install.start();
    install.drop_file("instantiate.json", &serde_json::to_vec(&env).unwrap());
    let done = wait_until(Duration::from_secs(300), || {
        op_of(&install, "INSTANTIATE").is_some_and(|o| {
            o["operationState"] == "COMPLETED" || o["operationState"] == "FAILED_TEMP"
        })
    });
    let o = op_of(&install, "INSTANTIATE");
    assert!(
        done && o
            .as_ref()
            .is_some_and(|o| o["operationState"] == "COMPLETED"),
        "{o:?}\n{}",
        daemon.log_text()
    );
    drop(daemon);

    let db = &install.database;
    let storage = "SELECT id FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'storage_server'";
    let storage_id = query(db, storage, VNF).unwrap();
    let server =
        "SELECT server_id FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'storage_server'";
    let old_server = query(db, server, VNF).unwrap();
    let out = farm
        .exec(
            &old_server,
            &format!("echo written-before-heal > {FILE_ON_PV} && sync"),
        )
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stack_id = query(db, "SELECT stack_id FROM vnf_instance WHERE id = ?1", VNF).unwrap();
    let kube = farm.kube(&stack_id);
    let from = kube.kubectl_log().unwrap().len();

    let heal = json!({
        "operation": "HEAL",
        "vnfInstanceId": VNF,
        "requestId": "heal-walk-storage",
        "request": {"vnfcInstanceId": [storage_id], "cause": "crash walk"}
    });
    install.drop_file("heal.json", &serde_json::to_vec(&heal).unwrap());

    // The walk: one life per boundary until a life completes the heal.
    let mut lives: Vec<(String, Vec<String>)> = Vec::new();
    let mut done_before: Vec<String> = Vec::new();
    let completed = loop {
        let life = lives.len() + 1;
        assert!(life <= 60, "no end after 59 lives: {lives:?}");
        let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", FAILPOINTS)]);
        let ended = wait_until(Duration::from_secs(300), || {
            !daemon.is_running()
                || op_of(&install, "HEAL").is_some_and(|o| {
                    o["operationState"] == "COMPLETED" || o["operationState"] == "FAILED_TEMP"
                })
        });
        let log = daemon.log_text();
        drop(daemon);
        let op = op_of(&install, "HEAL");
        let state = op.as_ref().map(|o| o["operationState"].clone());
        assert!(
            ended && state != Some("FAILED_TEMP".into()),
            "life {life}: {op:?}\n{log}"
        );
        let done = op
            .as_ref()
            .map(|o| plan_and_done(db, o["id"].as_str().unwrap()).1)
            .unwrap_or_default();
        let new: Vec<String> = done
            .iter()
            .filter(|k| !done_before.contains(k))
            .cloned()
            .collect();
        done_before = done;
        for (pv, (deleted, applied)) in PVS.iter().zip(pv_calls(&kube.kubectl_log().unwrap(), from))
        {
            assert!(
                deleted <= 1 && applied <= 1,
                "life {life}: {pv} deleted {deleted} and applied {applied} times"
            );
        }
        if state == Some("COMPLETED".into()) {
            lives.push(("completed".into(), new));
            break true;
        }
        let point = log
            .lines()
            .find_map(|l| {
                l.strip_prefix("failpoint ")
                    .and_then(|r| r.strip_suffix(" reached: aborting"))
            })
            .map(str::to_owned)
            .unwrap_or_else(|| panic!("life {life} ended without a failpoint:\n{log}"));
        lives.push((point, new));
    };
    assert!(completed);
    for (i, (point, new)) in lives.iter().enumerate() {
        eprintln!("life {:2}: {point:<32} new DONE: {new:?}", i + 1);
    }

    let op = op_of(&install, "HEAL").unwrap();
    let (plan, done) = plan_and_done(db, op["id"].as_str().unwrap());
    for k in &plan {
        assert!(done.contains(k), "{k} not DONE: {done:?}");
    }
    let boundaries = lives
        .iter()
        .filter(|(p, _)| p == "engine-step-done")
        .count();
    // Every stage but the last few (one life may journal the DONE of stages of one wave that
    // ran side by side) ended a life at its DONE.
    assert!(
        boundaries + 3 >= plan.len() && plan.len() > 10,
        "{boundaries} boundaries crossed for {} stages: {plan:?}",
        plan.len()
    );
    for point in ["engine-applied-pv.unregister", "engine-applied-pv.register"] {
        assert_eq!(
            lives.iter().filter(|(p, _)| p == point).count(),
            1,
            "{point}: {lives:?}"
        );
    }
    // The PVs' stages are one per action over all PVs, keyed by the master.
    for step in ["pv.unregister@", "pv.register@", "pv.available@"] {
        assert_eq!(
            plan.iter().filter(|k| k.starts_with(step)).count(),
            1,
            "{plan:?}"
        );
    }
    assert_eq!(
        pv_calls(&kube.kubectl_log().unwrap(), from),
        vec![(1, 1); 3],
        "each PV deleted once and applied once"
    );
    let pvs = kube.read().unwrap();
    for pv in PVS {
        assert_eq!(
            pvs["pvs"][pv]["status"]["phase"].as_str(),
            Some("Available"),
            "{pvs}"
        );
    }
    let new_server = query(db, server, VNF).unwrap();
    assert_ne!(new_server, old_server, "the storage server was replaced");
    let read = farm
        .exec(&new_server, &format!("cat {FILE_ON_PV}"))
        .await
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&read.stdout).trim(),
        "written-before-heal"
    );
    assert!(
        farm.mkfs_log(&new_server).await.unwrap().is_empty(),
        "no mkfs on the kept volume"
    );
}
