//! Crash-resume of the registry VNF's INSTANTIATE through the daemon binary (needs root): the
//! daemon aborts (as a SIGKILL would end it) at every step boundary, one run per boundary, and
//! once right after `mkfs` succeeded but before it was journaled; each time a restarted daemon
//! converges to COMPLETED with the registry answering `GET /v2/`, and `mkfs` ran at most once on
//! the registry's volume (counted on the host). No SSH password in the argv of any remote command.

use crate::support;

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Install, wait_until};
use vnfkeeper::cloud::{Cloud as _, OpenStackCloud, StackRef, StackStatus};

const PREFIX: &str = "vkg";

fn op_state(install: &Install, vnf: &str) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == vnf)
}

/// One run: submit the registry instantiate as `vnf`, let the daemon abort at `failpoint`,
/// restart it, wait for COMPLETED; returns (whether the failpoint was reached, the registry
/// server id, its address).
async fn run_once(install: &Install, vnf: &str, failpoint: &str) -> (bool, String, String) {
    let fixture = support::repo_root()
        .join("fixtures/requests/good/cir-k8s-cluster.10-registry-instantiate.json");
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
    let db = rusqlite::Connection::open(&install.database).unwrap();
    let (server, ip): (String, String) = db
        .query_row(
            "SELECT server_id, ip_address FROM vnfc WHERE vnf_instance_id = ?1",
            [vnf],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    (reached, server, ip)
}

fn v2_status(ip: &str) -> String {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-m", "5", "-w", "%{http_code}"])
        .arg(format!("http://{ip}:5000/v2/"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn registry_abort_at_every_step_boundary_converges_and_mkfs_runs_once() {
    let dir = tempfile::Builder::new()
        .prefix("vk-regcrash-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts(PREFIX, 75, dir.path()).await;
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

    let t = Instant::now();
    let mut boundary = 1;
    let mut runs = Vec::new();
    let free = |vnf: String| {
        let cloud = &cloud;
        async move {
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
        }
    };
    loop {
        let vnf = format!("regcrash-{boundary:02}");
        let (reached, server, ip) =
            run_once(&install, &vnf, &format!("engine-step-done:{boundary}")).await;
        let mkfs = farm.mkfs_log(&server).await.unwrap();
        assert!(
            mkfs.len() <= 1,
            "{vnf}: mkfs ran {} times: {mkfs:?}",
            mkfs.len()
        );
        assert_eq!(v2_status(&ip), "200", "{vnf}: the registry answers /v2/");
        runs.push((vnf.clone(), reached, mkfs.len()));
        free(vnf).await;
        if !reached {
            break; // the whole run had fewer boundaries: every one was tried
        }
        boundary += 1;
    }
    // The window in which a naive driver formats twice: mkfs done, not yet journaled.
    let (reached, server, _) = run_once(
        &install,
        "regcrash-mkfs",
        "engine-applied-storage.filesystem",
    )
    .await;
    assert!(reached, "the mkfs failpoint was not reached");
    let mkfs = farm.mkfs_log(&server).await.unwrap();
    assert_eq!(
        mkfs.len(),
        1,
        "mkfs after a crash right behind it: {mkfs:?}"
    );
    runs.push(("regcrash-mkfs".into(), reached, mkfs.len()));

    for (vnf, reached, mkfs) in &runs {
        eprintln!(
            "{vnf}: aborted={reached} completed after restart, mkfs runs on the volume: {mkfs}"
        );
    }
    eprintln!("{} boundaries tried in {:?}", boundary - 1, t.elapsed());
    assert!(
        boundary > 6,
        "expected at least 6 step boundaries, saw {}",
        boundary - 1
    );

    // No SSH password in the argv of any remote process (every command line run over SSH is
    // logged by the hosts).
    let mut commands = 0;
    for h in farm.hosts() {
        for line in farm.command_log(&h.server_id).await.unwrap() {
            commands += 1;
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
