//! Resume replays the stored plan (needs root): the daemon aborts in the middle of the seed's
//! INSTANTIATE (as a SIGKILL would end it), the VNF package on disk is changed — PersistentVolume
//! manifests renamed and re-pointed, the install script replaced by one that fails —, and the
//! restarted daemon completes exactly the stages it stored before the crash: the stages DONE
//! before are not run again, the others run with the content stored in the plan.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::{Install, StoredPlan, repo_root, wait_until};

const PREFIX: &str = "vkrs";
const VNF: &str = "resume-1";

/// (stage keys of the stored plan in order, steps_total, DONE stage key → attempts).
fn plan_and_journal(db: &Path, op: &str) -> (Vec<String>, i64, BTreeMap<String, i64>) {
    let p = StoredPlan::read(db, op);
    (p.keys(), p.total, p.done)
}

fn op_of(install: &Install) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == VNF)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn resume_after_a_package_change_runs_exactly_the_stored_stages() {
    let dir = tempfile::Builder::new()
        .prefix("vk-resume-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts(PREFIX, 69, dir.path()).await;

    // A copy of the package under a packages_dir of its own: it changes while the daemon is down.
    let packages = dir.path().join("packages");
    let package = packages.join("fixtures/packages/pv-k8s-cluster");
    std::fs::create_dir_all(package.parent().unwrap()).unwrap();
    let cp = std::process::Command::new("cp")
        .arg("-a")
        .arg(repo_root().join("fixtures/packages/pv-k8s-cluster"))
        .arg(&package)
        .status()
        .unwrap();
    assert!(cp.success());
    let install = Install::with_packages_dir(false);
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "packages_dir = \"{}\"\n\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n",
        packages.display(),
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();

    // Abort right after the 4th DONE: heat.create, heat.wait_create, heat.read_vnfcs, and the
    // first master's k8s.install; the plan's configuration stages are stored by then.
    let fixture = repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["vnfInstanceId"] = VNF.into();
    env["requestId"] = VNF.into();
    let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", "engine-step-done:4")]);
    install.drop_file("resume.json", &serde_json::to_vec(&env).unwrap());
    assert!(
        wait_until(Duration::from_secs(120), || !daemon.is_running()),
        "the daemon did not abort:\n{}",
        daemon.log_text()
    );
    assert!(
        daemon
            .log_text()
            .contains("failpoint engine-step-done reached")
    );
    drop(daemon);
    let op = op_of(&install).unwrap()["id"].as_str().unwrap().to_owned();
    let (keys, total, done_before) = plan_and_journal(&install.database, &op);
    eprintln!("stored plan: {keys:?}\nDONE before the crash: {done_before:?}");
    assert_eq!(total, keys.len() as i64, "steps_total is the plan's length");
    assert_eq!(done_before.len(), 4, "{done_before:?}");
    // One stage registers every PersistentVolume, one waits for all (keyed by the master).
    for step in ["pv.register@", "pv.available@"] {
        let n = keys.iter().filter(|k| k.starts_with(step)).count();
        assert_eq!(n, 1, "{keys:?}");
    }

    // The package changes on disk: every PV renamed and re-pointed, and an install script that
    // fails. A plan recomputed from the package would have other keys and fail the workers.
    for n in 1..=3 {
        let path = package.join(format!("Files/kubernetes/nfs-pv{n}.yaml"));
        let text = std::fs::read_to_string(&path).unwrap();
        let changed = text
            .replace(&format!("name: nfs-pv{n}"), &format!("name: changed-pv{n}"))
            .replace("/volume/nfs/", "/elsewhere/");
        assert_ne!(text, changed);
        std::fs::write(&path, changed).unwrap();
    }
    std::fs::write(
        package.join("Scripts/install_k8s_cluster.sh"),
        "#!/bin/sh\necho 'changed after the crash' >&2\nexit 3\n",
    )
    .unwrap();

    let daemon = install.start();
    let finished = wait_until(Duration::from_secs(240), || {
        op_of(&install).is_some_and(|o| {
            o["operationState"] == "COMPLETED" || o["operationState"] == "FAILED_TEMP"
        })
    });
    let o = op_of(&install).unwrap();
    assert!(
        finished && o["operationState"] == "COMPLETED",
        "{o}\n{}",
        daemon.log_text()
    );
    let (keys_after, total_after, done_after) = plan_and_journal(&install.database, &op);
    assert_eq!(keys_after, keys, "the stored plan did not change");
    assert_eq!(total_after, total);
    // Exactly the stored stages ran: every key DONE, no other key journaled.
    let all: BTreeSet<&String> = keys.iter().collect();
    let journaled: BTreeSet<&String> = done_after.keys().collect();
    assert_eq!(journaled, all);
    // The stages DONE before the crash were not run again.
    for (key, attempts) in &done_before {
        assert_eq!(done_after.get(key), Some(attempts), "{key} ran again");
    }
    // The PersistentVolumes are the stored ones, served from the stored paths.
    let conn = rusqlite::Connection::open(&install.database).unwrap();
    let stack_id: String = conn
        .query_row(
            "SELECT stack_id FROM vnf_instance WHERE id = ?1",
            [VNF],
            |r| r.get(0),
        )
        .unwrap();
    let kube = farm.kube(&stack_id);
    for n in 1..=3 {
        assert!(
            kube.pv_phase(&format!("nfs-pv{n}")).unwrap().is_some(),
            "nfs-pv{n} registered"
        );
        assert_eq!(kube.pv_phase(&format!("changed-pv{n}")).unwrap(), None);
    }
    let pvs = kube.read().unwrap().to_string();
    assert!(!pvs.contains("/elsewhere/"), "{pvs}");
}
