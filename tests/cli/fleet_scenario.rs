//! The steps that bring a daemon over the testbed cloud into the states an operator reads back
//! (shared by the Prometheus and status-page tests): a daemon with a metrics listener, an
//! INSTANTIATE of a plain VNF, every server in ERROR with a reconcile pass that holds back their
//! heal (more than max_unhealthy), and an operator HEAL that Heat refuses (FAILED_TEMP).

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::{Daemon, Install, free_port, wait_until};
use testbed::cloud::{CloudOptions, FaultRule, Testbed};

/// A daemon on `install` over a fresh testbed cloud (no hosts), reconcile off, its metrics
/// listener on a free loopback port with `metrics_extra` (TOML lines) added to `[metrics]`;
/// returns the cloud, the daemon (started, its metrics endpoint up) and the port.
pub async fn daemon_with_metrics(install: &Install, metrics_extra: &str) -> (Testbed, Daemon, u16) {
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    let port = free_port();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n{metrics_extra}",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();
    let daemon = install.start();
    daemon.wait_for_log("metrics endpoint", Duration::from_secs(5));
    (tb, daemon, port)
}

/// Drops the PV seed's INSTANTIATE without its cluster parameters (a plain VNF: cloud steps
/// only) and waits until it completes; returns the VNF instance id.
pub fn instantiate_plain(install: &Install) -> String {
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]
        .as_object_mut()
        .unwrap()
        .remove("k8s_cluster_installation_param");
    let vnf = env["vnfInstanceId"].as_str().unwrap().to_owned();
    install.drop_file("instantiate.json", env.to_string().as_bytes());
    assert!(wait_until(Duration::from_secs(60), || {
        install
            .ops_json()
            .first()
            .is_some_and(|o| o["operationState"] == "COMPLETED")
    }));
    vnf
}

/// Puts every server of the (only) VNF into Nova ERROR — more than max_unhealthy (40 %), so
/// reconcile heals none — and asks for a reconcile pass; returns the VNFCs as `status --json`
/// listed them.
pub async fn every_server_in_error(install: &Install, tb: &Testbed) -> Vec<Value> {
    let status: Value = serde_json::from_slice(&install.cli(&["status", "--json"]).stdout).unwrap();
    let vnfcs = status[0]["vnfcs"].as_array().unwrap().clone();
    assert!(!vnfcs.is_empty());
    for v in &vnfcs {
        tb.cloud()
            .inject_server_error(v["serverId"].as_str().unwrap(), "hypervisor lost")
            .await
            .unwrap();
    }
    assert!(install.cli(&["reconcile", "--now"]).status.success());
    vnfcs
}

/// An operator HEAL of `vnfc` that Heat refuses (400): it stops in FAILED_TEMP (`--wait` exits
/// 3); returns its operation id.
pub fn heal_refused_by_heat(install: &Install, tb: &Testbed, vnf: &str, vnfc: &str) -> String {
    tb.cloud().add_api_fault(
        "orchestration",
        FaultRule {
            status: Some(400),
            ..FaultRule::default()
        },
    );
    let out = install.cli(&["heal", vnf, vnfc, "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    tb.cloud().clear_api_faults(None);
    install
        .ops_json()
        .into_iter()
        .find(|o| o["operation"] == "HEAL")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned()
}
