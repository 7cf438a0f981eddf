//! The reconcile commands against a running daemon and the testbed cloud (no hosts, no root):
//! with scheduled passes off, `vnfkeeper plan` shows the heal a worker in Nova ERROR needs and
//! starts nothing; `vnfkeeper reconcile --now` makes the daemon run a full pass at once, which
//! starts the automatic HEAL.

use crate::support;

use std::time::Duration;

use serde_json::Value;
use support::{Install, wait_until};
use testbed::cloud::{CloudOptions, Testbed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plan_changes_nothing_and_reconcile_now_starts_the_heal() {
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

    // A plain VNF (the seed's instantiate without cluster parameters: cloud steps only).
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]
        .as_object_mut()
        .unwrap()
        .remove("k8s_cluster_installation_param");
    install.drop_file("instantiate.json", env.to_string().as_bytes());
    assert!(wait_until(Duration::from_secs(60), || install
        .ops_json()
        .first()
        .is_some_and(|o| o["operationState"] == "COMPLETED")));
    let status: Value = serde_json::from_slice(&install.cli(&["status", "--json"]).stdout).unwrap();
    let worker = status[0]["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vduId"] == "workerNode")
        .unwrap()
        .clone();
    tb.cloud()
        .inject_server_error(worker["serverId"].as_str().unwrap(), "hypervisor lost")
        .await
        .unwrap();

    // plan: the heal it would start, and why; nothing recorded.
    let out = install.cli(&["plan", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    let heals = plan["heals"].as_array().unwrap();
    assert_eq!(heals.len(), 1, "{plan:#}");
    assert_eq!(
        heals[0]["request"]["vnfcInstanceId"],
        serde_json::json!([worker["id"]]),
        "{plan:#}"
    );
    let text = plan.to_string();
    assert!(
        text.contains("ERROR"),
        "the evidence names Nova's status: {plan:#}"
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(install.ops_json().len(), 1, "plan starts nothing");

    // reconcile --now: the daemon runs a full pass and starts the automatic HEAL.
    let out = install.cli(&["reconcile", "--now"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(wait_until(Duration::from_secs(30), || install
        .ops_json()
        .iter()
        .any(
            |o| o["operation"] == "HEAL" && o["isAutomaticInvocation"] == true
        )));
    let leftovers: Vec<_> = std::fs::read_dir(install.new_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".reconcile-now")
        })
        .collect();
    assert!(leftovers.is_empty(), "the trigger file is consumed");
}

/// The fast observation alone (cloud passes every hour, full passes once a year, one
/// `changes-since` request a second): a worker SHUTOFF is one failed observation, "1 of 2",
/// and no heal (the poll lists it again, unchanged, without a second pass); a worker deleted
/// behind Heat's back (listed as DELETED) is a vanished server, and its automatic HEAL starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_since_alone_observes_once_and_heals_a_vanished_server() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nschedule = \"0 0 1 1 *\"\ncloud_interval_secs = 3600\nchanges_since_interval_secs = 1\ngrace_secs = 1\n",
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
    install.drop_file("instantiate.json", env.to_string().as_bytes());
    assert!(wait_until(Duration::from_secs(60), || install
        .ops_json()
        .first()
        .is_some_and(|o| o["operationState"] == "COMPLETED")));
    let status: Value = serde_json::from_slice(&install.cli(&["status", "--json"]).stdout).unwrap();
    let vnf = status[0]["id"].as_str().unwrap().to_owned();
    let vnfcs = status[0]["vnfcs"].as_array().unwrap().clone();
    let server_of = |vdu: &str| {
        vnfcs
            .iter()
            .find(|v| v["vduId"] == vdu)
            .and_then(|v| v["serverId"].as_str())
            .unwrap()
            .to_owned()
    };
    let events = || -> Vec<Value> {
        let out = install.cli(&["events", &vnf, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };

    let wait_event = |what: &dyn Fn(&Value) -> bool| {
        wait_until(Duration::from_secs(30), || events().iter().any(what))
    };

    // SHUTOFF: the poll names the VNF, its cloud pass counts one failed observation; the poll
    // lists the server again (overlap), unchanged, and that is no second observation.
    let master = server_of("masterNode");
    tb.cloud()
        .inject_server_power(&master, false)
        .await
        .unwrap();
    assert!(
        wait_event(&|e| e["kind"] == "RECONCILE_DEFERRED_GRACE"
            && e["message"]
                .as_str()
                .unwrap_or("")
                .contains("failed observation 1 of 2")),
        "no first observation of the SHUTOFF server: {:#?}",
        events()
    );
    std::thread::sleep(Duration::from_secs(5));
    assert!(
        !install.ops_json().iter().any(|o| o["operation"] == "HEAL"),
        "SHUTOFF healed on one observation: {:#?}\n{:#?}",
        install.ops_json(),
        events()
    );
    assert!(
        !events().iter().any(|e| e["message"]
            .as_str()
            .unwrap_or("")
            .contains("failed observation 2")),
        "{:#?}",
        events()
    );
    tb.cloud().inject_server_power(&master, true).await.unwrap();

    // Deleted behind Heat's back: listed as DELETED, confirmed as vanished, healed.
    let worker = server_of("workerNode");
    tb.cloud().inject_server_vanish(&worker).await.unwrap();
    assert!(
        wait_until(Duration::from_secs(30), || install.ops_json().iter().any(
            |o| o["operation"] == "HEAL" && o["isAutomaticInvocation"] == true
        )),
        "no automatic HEAL of the vanished worker: {:#?}",
        events()
    );
    let heal = events()
        .into_iter()
        .find(|e| e["kind"] == "RECONCILE_HEAL_STARTED")
        .expect("a RECONCILE_HEAL_STARTED event");
    assert!(
        heal["message"]
            .as_str()
            .unwrap()
            .contains("missing from a successful Nova listing"),
        "{heal:#}"
    );
    tb.shutdown().await;
}
