//! The task verbs against a running daemon and the testbed cloud (no hosts, no root): each
//! builds its request, goes through the spool and intake, prints the operation id, and with
//! `--wait` exits with the status of how the operation ended (0 as asked, 3 FAILED_TEMP,
//! 6 rejected).

mod support;

use std::process::Output;
use std::time::Duration;

use serde_json::Value;
use support::{Install, wait_until};
use testbed::cloud::{CloudOptions, FaultRule, Testbed};

fn verb(install: &Install, args: &[&str]) -> Output {
    let out = install.cli(args);
    eprintln!(
        "vnfkeeper {args:?}: {:?}\n{}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The operation id the verb printed first, and its state as `ops --json` shows it.
fn op_state(install: &Install, out: &Output) -> (String, String) {
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.lines().next().unwrap_or_default().trim().to_owned();
    let ops = install.ops_json();
    let op = ops
        .iter()
        .find(|o| o["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no operation {id:?} in {ops:#?}"));
    (id, op["operationState"].as_str().unwrap().to_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_verb_goes_through_the_spool_and_wait_exits_with_the_outcome() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();
    let _daemon = install.start();

    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]
        .as_object_mut()
        .unwrap()
        .remove("k8s_cluster_installation_param");
    let vnf = env["vnfInstanceId"].as_str().unwrap().to_owned();
    install.drop_file("instantiate.json", env.to_string().as_bytes());
    assert!(wait_until(Duration::from_secs(60), || install
        .ops_json()
        .first()
        .is_some_and(|o| o["operationState"] == "COMPLETED")));

    // scale out --wait: COMPLETED, exit 0.
    let out = verb(
        &install,
        &["scale", &vnf, "worker_instance", "out", "--wait"],
    );
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(op_state(&install, &out).1, "COMPLETED");

    // Heat refuses every call: the heal stops in FAILED_TEMP, exit 3.
    let status: Value = serde_json::from_slice(&install.cli(&["status", "--json"]).stdout).unwrap();
    let worker = status[0]["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vduId"] == "workerNode")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let heat_refuses = || FaultRule {
        status: Some(400),
        ..FaultRule::default()
    };
    tb.cloud().add_api_fault("orchestration", heat_refuses());
    let out = verb(
        &install,
        &["heal", &vnf, &worker, "--cause", "disk", "--wait"],
    );
    assert_eq!(out.status.code(), Some(3));
    let (heal, state) = op_state(&install, &out);
    assert_eq!(state, "FAILED_TEMP");

    // retry --wait once Heat answers again: COMPLETED, exit 0 (followed past the old state).
    tb.cloud().clear_api_faults(None);
    let out = verb(&install, &["retry", &heal, "--wait"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(op_state(&install, &out), (heal.clone(), "COMPLETED".into()));

    // A task on an operation that is not FAILED_TEMP is rejected by intake: exit 6.
    let out = verb(&install, &["fail", &heal, "--wait"]);
    assert_eq!(out.status.code(), Some(6));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs FAILED_TEMP"));

    // Another FAILED_TEMP, then fail --wait: FAILED is what was asked, exit 0.
    tb.cloud().add_api_fault("orchestration", heat_refuses());
    let out = verb(
        &install,
        &["scale", &vnf, "worker_instance", "in", "--wait"],
    );
    assert_eq!(out.status.code(), Some(3));
    let (scale_in, _) = op_state(&install, &out);
    let out = verb(&install, &["fail", &scale_in, "--wait"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(op_state(&install, &out), (scale_in, "FAILED".into()));

    // The same command typed again is a request of its own (a fresh requestId), not a
    // duplicate of the first scale out.
    tb.cloud().clear_api_faults(None);
    let out = verb(
        &install,
        &["scale", &vnf, "worker_instance", "out", "--wait"],
    );
    assert_eq!(out.status.code(), Some(0));
    let (again, state) = op_state(&install, &out);
    assert_eq!(state, "COMPLETED");
    assert_eq!(
        install
            .ops_json()
            .iter()
            .filter(|o| o["id"] == again.as_str())
            .count(),
        1
    );
    assert_eq!(
        install
            .ops_json()
            .iter()
            .filter(|o| o["operation"] == "SCALE")
            .count(),
        3
    );

    // Without --wait: the id at once, exit 0; an unknown VNF is rejected, exit 6.
    let out = verb(&install, &["heal", "no-such-vnf"]);
    assert_eq!(out.status.code(), Some(6));
    let out = verb(&install, &["terminate", &vnf, "--graceful", "1", "--wait"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(op_state(&install, &out).1, "COMPLETED");
    tb.shutdown().await;
}
