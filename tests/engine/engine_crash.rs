//! Crash-resume of INSTANTIATE through the daemon binary (needs root): the daemon aborts (as a
//! SIGKILL would end it) at every step boundary of the seed's instantiate, one run per boundary,
//! and once right after `mkfs` succeeded but before it was journaled; each time a restarted
//! daemon converges to COMPLETED and `mkfs` ran at most once per volume (counted on the host).
//! Also: no secret reaches the daemon's log or the argv of any remote command.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Install, wait_until};
use vnfkeeper::cloud::{Cloud as _, OpenStackCloud, StackRef, StackStatus};

const PREFIX: &str = "vkc";

fn op_state(install: &Install, vnf: &str) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == vnf)
}

/// One run: submit an instantiate of `vnf`, let the daemon abort at `failpoint`, restart it,
/// wait for COMPLETED; returns (whether the failpoint was reached, the storage server id).
async fn run_once(install: &Install, vnf: &str, failpoint: &str) -> (bool, String) {
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["vnfInstanceId"] = vnf.into();
    env["requestId"] = vnf.into();
    let mut daemon = install.start_with_env(&[("VNFKEEPER_FAILPOINT", failpoint)]);
    install.drop_file(&format!("{vnf}.json"), &serde_json::to_vec(&env).unwrap());
    let aborted = wait_until(Duration::from_secs(120), || {
        !daemon.is_running()
            || op_state(install, vnf).is_some_and(|o| o["operationState"] == "COMPLETED")
    });
    assert!(
        aborted,
        "{vnf}: neither aborted nor completed:\n{}",
        daemon.log_text()
    );
    let reached = daemon.log_text().contains(&format!(
        "failpoint {} reached",
        failpoint.split(':').next().unwrap()
    ));
    let first_log = daemon.log_text();
    drop(daemon);
    let daemon = install.start();
    let done = wait_until(Duration::from_secs(180), || {
        op_state(install, vnf).is_some_and(|o| {
            o["operationState"] == "COMPLETED" || o["operationState"] == "FAILED_TEMP"
        })
    });
    let op = op_state(install, vnf).unwrap();
    assert!(
        done && op["operationState"] == "COMPLETED",
        "{vnf} after restart: {op}\n{}",
        daemon.log_text()
    );
    // Secrets: the proxies' credentials and the cloud password never reach the log.
    for log in [first_log, daemon.log_text()] {
        for secret in ["password1", "password2", "testbed-secret"] {
            assert!(!log.contains(secret), "{vnf}: {secret} in the daemon log");
        }
    }
    let db = rusqlite::Connection::open(&install.database).unwrap();
    let storage: String = db
        .query_row(
            "SELECT server_id FROM vnfc WHERE vnf_instance_id = ?1 AND vdu_id = 'storage_server'",
            [vnf],
            |r| r.get(0),
        )
        .unwrap();
    (reached, storage)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn abort_at_every_step_boundary_converges_and_mkfs_runs_once() {
    let dir = tempfile::Builder::new()
        .prefix("vk-crash-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts(PREFIX, 64, dir.path()).await;
    let cloud = OpenStackCloud::connect(tb.clouds_yaml(), "testbed", Duration::from_secs(30))
        .await
        .unwrap();

    let install = Install::new();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();

    // A complete run has this many step boundaries (DONE journal rows); abort after each.
    let t = Instant::now();
    let mut boundary = 1;
    let mut runs = Vec::new();
    loop {
        let vnf = format!("crash-{boundary:02}");
        let (reached, storage) =
            run_once(&install, &vnf, &format!("engine-step-done:{boundary}")).await;
        let mkfs = farm.mkfs_log(&storage).await.unwrap();
        assert!(
            mkfs.len() <= 1,
            "{vnf}: mkfs ran {} times: {mkfs:?}",
            mkfs.len()
        );
        runs.push((vnf.clone(), reached, mkfs.len()));
        // Free the hosts for the next run.
        let stack = cloud
            .find_stack(&format!("vnf-{vnf}"))
            .await
            .unwrap()
            .unwrap();
        cloud.delete_stack(&stack).await.unwrap();
        let _ = cloud
            .wait_stack(
                &StackRef { ..stack },
                &[StackStatus::DeleteComplete],
                Duration::from_secs(60),
            )
            .await;
        if !reached {
            break; // the whole run had fewer boundaries: every one was tried
        }
        boundary += 1;
    }
    // The window in which a naive driver formats twice: mkfs done, not yet journaled.
    let (reached, storage) =
        run_once(&install, "crash-mkfs", "engine-applied-storage.filesystem").await;
    assert!(reached, "the mkfs failpoint was not reached");
    let mkfs = farm.mkfs_log(&storage).await.unwrap();
    assert_eq!(
        mkfs.len(),
        1,
        "mkfs after a crash right behind it: {mkfs:?}"
    );
    runs.push(("crash-mkfs".into(), reached, mkfs.len()));

    for (vnf, reached, mkfs) in &runs {
        eprintln!(
            "{vnf}: aborted={reached} completed after restart, mkfs runs on the volume: {mkfs}"
        );
    }
    eprintln!("{} boundaries tried in {:?}", boundary - 1, t.elapsed());
    assert!(
        boundary > 15,
        "expected at least 15 step boundaries, saw {}",
        boundary - 1
    );

    // No secret in the argv of any remote process: every command line run over SSH is logged by
    // the hosts; the seed's proxy credentials and the SSH password never appear in one.
    let mut commands = 0;
    for h in farm.hosts() {
        for line in farm.command_log(&h.server_id).await.unwrap() {
            commands += 1;
            for secret in ["password1", "password2", "testbed-secret"] {
                assert!(!line.contains(secret), "{secret} in remote argv: {line}");
            }
            let words: Vec<&str> = line.split(|c: char| !c.is_ascii_alphanumeric()).collect();
            assert!(
                !words.contains(&"ubuntu"),
                "SSH password in remote argv: {line}"
            );
        }
    }
    assert!(commands > 0, "no remote command was logged");
    tb.shutdown().await;
}
