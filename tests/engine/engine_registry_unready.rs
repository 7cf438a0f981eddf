//! A registry that never answers `GET /v2/` (cir-k8s-cluster seed, registry VNF; needs root),
//! through the daemon binary: the INSTANTIATE ends FAILED_TEMP with the reason in its
//! ProblemDetails, and RETRY completes once the registry answers.
//!
//! Deterministic set-up: the daemon aborts right after `registry.run` started the registry
//! container on the VM (failpoint, before the step was journaled); the test then stops the
//! container's real `docker-registry` process with SIGSTOP — it still holds its port, the kernel
//! still accepts connections, nothing ever answers (a hung registry) — and restarts the daemon.
//! It resumes at `registry.run` (the container runs: nothing to do), and `registry.ready` waits its
//! bounded time and fails. The test lets the process continue (SIGCONT), and RETRY resumes at the
//! failed step and completes, without formatting the volume again.

use crate::support;

use std::process::Command;
use std::time::Duration;

use serde_json::Value;
use support::{Install, wait_until};

const PREFIX: &str = "vku";
const VNF: &str = "vnf-cir-registry";

fn op_of(install: &Install) -> Option<Value> {
    install
        .ops_json()
        .into_iter()
        .find(|o| o["vnfInstanceId"] == VNF)
}

fn v2_status(ip: &str) -> String {
    let out = Command::new("curl")
        .args(["-s", "-o", "/dev/null", "-m", "3", "-w", "%{http_code}"])
        .arg(format!("http://{ip}:5000/v2/"))
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs root (network namespaces, loop devices)"]
async fn registry_never_answering_v2_fails_temp_with_the_reason_and_retry_completes() {
    let dir = tempfile::Builder::new()
        .prefix("vk-regunready-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let (farm, tb, _cleanup) = support::testbed_with_hosts(PREFIX, 79, dir.path()).await;
    let install = Install::new();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();
    let request = std::fs::read(
        support::repo_root()
            .join("fixtures/requests/good/cir-k8s-cluster.10-registry-instantiate.json"),
    )
    .unwrap();

    // Up to the registry container started on the VM; the daemon aborts there.
    let mut daemon =
        install.start_with_env(&[("VNFKEEPER_FAILPOINT", "engine-applied-registry.run")]);
    install.drop_file("registry.json", &request);
    assert!(
        wait_until(Duration::from_secs(180), || !daemon.is_running()),
        "the daemon did not reach the failpoint:\n{}",
        daemon.log_text()
    );
    assert!(
        daemon
            .log_text()
            .contains("failpoint engine-applied-registry.run reached"),
        "{}",
        daemon.log_text()
    );
    drop(daemon);
    let db = rusqlite::Connection::open(&install.database).unwrap();
    let (server, ip): (String, String) = db
        .query_row(
            "SELECT server_id, ip_address FROM vnfc WHERE vnf_instance_id = ?1",
            [VNF],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    drop(db);

    assert_eq!(
        v2_status(&ip),
        "200",
        "the registry answered before it hung"
    );
    // A hung registry: the process keeps its port, the kernel accepts, nothing answers.
    let pid_of = "docker inspect -f '{{.State.Pid}}' private_registry";
    let out = farm
        .exec(&server, &format!("kill -STOP \"$({pid_of})\""))
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        v2_status(&ip),
        "000",
        "the stopped registry answers nothing"
    );

    // The resumed INSTANTIATE ends FAILED_TEMP, the reason in its ProblemDetails.
    let mut daemon = install.start();
    let ended = wait_until(Duration::from_secs(240), || {
        op_of(&install).is_some_and(|o| {
            matches!(
                o["operationState"].as_str(),
                Some("FAILED_TEMP" | "COMPLETED" | "FAILED")
            )
        })
    });
    let op = op_of(&install).unwrap();
    assert!(ended, "{op}\n{}", daemon.log_text());
    assert_eq!(op["operationState"], "FAILED_TEMP", "{op}");
    let error = op["error"].to_string();
    eprintln!("FAILED_TEMP, error: {error}");
    assert!(
        error.contains("registry.ready")
            && error.contains("did not answer GET http://127.0.0.1:5000/v2/ within 60 s")
            && error.contains("last status 000; 000: no connection, or no answer within 5 s"),
        "the reason is in the ProblemDetails: {error}"
    );
    let docker_log = String::from_utf8(
        farm.read_file(&server, "/var/lib/testbed/docker.log")
            .await
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        docker_log
            .lines()
            .filter(|l| l.starts_with("docker run "))
            .count(),
        1,
        "the resumed registry.run found the container running: {docker_log}"
    );

    // The registry answers again.
    let out = farm
        .exec(&server, &format!("kill -CONT \"$({pid_of})\""))
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(v2_status(&ip), "200");

    let id = op["id"].as_str().unwrap().to_owned();
    let out = install.cli(&["retry", &id, "--wait", "--timeout", "180"]);
    assert!(
        out.status.success(),
        "retry: {out:?}\n{}",
        daemon.log_text()
    );
    let op = op_of(&install).unwrap();
    assert_eq!(op["id"], id.as_str());
    assert_eq!(op["operationState"], "COMPLETED", "{op}");
    assert_eq!(v2_status(&ip), "200");
    let mkfs = farm.mkfs_log(&server).await.unwrap();
    assert_eq!(mkfs.len(), 1, "the volume was formatted once: {mkfs:?}");
    eprintln!(
        "RETRY {id}: COMPLETED; GET /v2/ 200; mkfs runs on the volume: {}",
        mkfs.len()
    );
    assert_eq!(daemon.stop(), Some(0));
    tb.shutdown().await;
}
