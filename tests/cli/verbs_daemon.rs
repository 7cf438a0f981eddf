//! The task verbs against a running daemon and the testbed cloud (no hosts, no root): each
//! builds its request, goes through the spool and intake, prints the operation id, and with
//! `--wait` exits with the status of how the operation ended (0 as asked, 3 FAILED_TEMP,
//! 6 rejected). Then `vnfkeeper events` tells that whole story in order, with a maintenance
//! pause and a rejected request carrying passwords (which it never shows).

use crate::support;

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

    // A maintenance pause and its end, and an INSTANTIATE of the existing instance carrying
    // passwords (rejected), for the timeline below.
    assert!(
        verb(&install, &["pause", &vnf, "--reason", "disk swap"])
            .status
            .success()
    );
    assert!(verb(&install, &["resume", &vnf]).status.success());
    let mut again: Value = serde_json::from_slice(
        &std::fs::read(
            support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json"),
        )
        .unwrap(),
    )
    .unwrap();
    set_passwords(&mut again, SECRET);
    again["requestId"] = "events-instantiate-again".into();
    install.drop_file("instantiate-again.json", again.to_string().as_bytes());
    assert!(wait_until(Duration::from_secs(30), || Install::files(
        &install.rejected_dir()
    )
    .contains(&"instantiate-again.json".to_string())));
    let out = verb(&install, &["terminate", &vnf, "--graceful", "1", "--wait"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(op_state(&install, &out).1, "COMPLETED");
    events_tell_the_story(&install, &vnf);
    rollback_and_timeout(&install, &tb);
    tb.shutdown().await;
}

/// A second VNF: its INSTANTIATE stops in FAILED_TEMP while Heat refuses, `rollback --wait`
/// exits 0 at ROLLED_BACK; then, with Heat answering slowly, `heal --wait --timeout 1` gives
/// up with exit 7 and the last state it saw while the HEAL goes on to COMPLETED.
fn rollback_and_timeout(install: &Install, tb: &Testbed) {
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]
        .as_object_mut()
        .unwrap()
        .remove("k8s_cluster_installation_param");
    env["vnfInstanceId"] = "verbs-second-vnf".into();
    env["requestId"] = "verbs-second-instantiate".into();
    tb.cloud().add_api_fault(
        "orchestration",
        FaultRule {
            status: Some(400),
            ..FaultRule::default()
        },
    );
    install.drop_file("second.json", env.to_string().as_bytes());
    let failed = || {
        install.ops_json().into_iter().find(|o| {
            o["vnfInstanceId"] == "verbs-second-vnf" && o["operationState"] == "FAILED_TEMP"
        })
    };
    assert!(wait_until(Duration::from_secs(60), || failed().is_some()));
    let op = failed().unwrap()["id"].as_str().unwrap().to_owned();
    tb.cloud().clear_api_faults(None);
    let out = verb(install, &["rollback", &op, "--wait"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(op_state(install, &out), (op, "ROLLED_BACK".into()));

    // Instantiate it for real, then heal it while every Heat call takes 3 s.
    env["requestId"] = "verbs-second-instantiate-again".into();
    install.drop_file("second-again.json", env.to_string().as_bytes());
    assert!(wait_until(Duration::from_secs(60), || install
        .ops_json()
        .iter()
        .any(|o| o["vnfInstanceId"] == "verbs-second-vnf"
            && o["operation"] == "INSTANTIATE"
            && o["operationState"] == "COMPLETED")));
    tb.cloud().add_api_fault(
        "orchestration",
        FaultRule {
            latency_ms: 3000,
            ..FaultRule::default()
        },
    );
    let started = std::time::Instant::now();
    let out = verb(
        install,
        &["heal", "verbs-second-vnf", "--wait", "--timeout", "1"],
    );
    let waited = started.elapsed();
    assert_eq!(out.status.code(), Some(7));
    assert!(waited < Duration::from_secs(20), "gave up after {waited:?}");
    let (heal, state) = op_state(install, &out);
    assert!(
        ["STARTING", "PROCESSING"].contains(&state.as_str()),
        "{state}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.lines().nth(1).is_some_and(|l| l.ends_with(&heal)),
        "{stdout}"
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("gave up waiting after 1 s"));
    tb.cloud().clear_api_faults(None);
    assert!(wait_until(Duration::from_secs(120), || install
        .ops_json()
        .iter()
        .any(
            |o| o["id"] == heal.as_str() && o["operationState"] == "COMPLETED"
        )));
    // --timeout without --wait is a usage error.
    let out = verb(install, &["heal", "verbs-second-vnf", "--timeout", "5"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A password no output may contain.
const SECRET: &str = "Evts-S3cret-7731";

/// Sets every `password` member in `v` to `secret`.
fn set_passwords(v: &mut Value, secret: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter_mut() {
                if k == "password" {
                    *x = secret.into();
                } else {
                    set_passwords(x, secret);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| set_passwords(x, secret)),
        _ => {}
    }
}

/// The fields of every `events --json` entry (README "vnfkeeper events").
const EVENT_FIELDS: [&str; 12] = [
    "at",
    "source",
    "eventId",
    "kind",
    "vnfInstanceId",
    "vnfLcmOpOccId",
    "operation",
    "vnfcInstanceId",
    "message",
    "evidence",
    "intake",
    "step",
];

/// `vnfkeeper events` over the history the test above made: in time order, the whole story as
/// milestones in sequence, every documented field, evidence as JSON, `--since`, the table, an
/// instance known only from a rejected request, an unknown one, and no password anywhere.
fn events_tell_the_story(install: &Install, vnf: &str) {
    let out = verb(install, &["events", vnf, "--json"]);
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(!stdout.contains(SECRET), "a password in events --json");
    let list: Vec<Value> = serde_json::from_str(&stdout).unwrap();
    for e in &list {
        let mut keys: Vec<&str> = e.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        let mut want = EVENT_FIELDS.to_vec();
        want.sort_unstable();
        assert_eq!(keys, want, "{e:#}");
    }
    let at =
        |e: &Value| vnfkeeper_core::model::Timestamp::parse(e["at"].as_str().unwrap()).unwrap();
    assert!(
        list.windows(2).all(|w| at(&w[0]) <= at(&w[1])),
        "not in time order"
    );

    // The story, as milestones that must appear in this order: (kind, operation, message part).
    let story = [
        ("REQUEST_ACCEPTED", "INSTANTIATE", "accepted"),
        ("STEP_DONE", "INSTANTIATE", "heat."),
        ("STATE_CHANGED", "INSTANTIATE", "→ COMPLETED"),
        ("REQUEST_ACCEPTED", "SCALE", "accepted"),
        ("STATE_CHANGED", "SCALE", "→ COMPLETED"),
        ("REQUEST_ACCEPTED", "HEAL", "accepted"),
        ("STATE_CHANGED", "HEAL", "→ FAILED_TEMP"),
        ("TASK_ACCEPTED", "HEAL", "RETRY"),
        ("STEP_DONE", "HEAL", "heat."),
        ("STATE_CHANGED", "HEAL", "→ COMPLETED"),
        ("REQUEST_REJECTED", "", "needs FAILED_TEMP"),
        ("TASK_ACCEPTED", "SCALE", "FAIL"),
        ("MAINTENANCE_PAUSED", "", "disk swap"),
        ("MAINTENANCE_RESUMED", "", "lifted"),
        ("REQUEST_REJECTED", "", "instantiate-again.json"),
        ("REQUEST_ACCEPTED", "TERMINATE", "accepted"),
        ("STATE_CHANGED", "TERMINATE", "→ COMPLETED"),
    ];
    let mut found = Vec::new();
    let mut rest = list.iter();
    for (kind, op, part) in story {
        let hit = rest.by_ref().find(|e| {
            e["kind"] == kind
                && e["operation"].as_str().unwrap_or_default() == op
                && e["message"].as_str().unwrap().contains(part)
        });
        let Some(hit) = hit else {
            let summary: Vec<String> = list
                .iter()
                .map(|e| format!("{} {} {}", e["kind"], e["operation"], e["message"]))
                .collect();
            panic!(
                "after {found:?}: no {kind} {op} {part:?} in\n{}",
                summary.join("\n")
            );
        };
        found.push(kind);
        match kind {
            "STATE_CHANGED" if part.contains("FAILED_TEMP") => {
                assert!(hit["evidence"]["detail"].is_string(), "{hit:#}");
            }
            "REQUEST_REJECTED" => {
                let intake = &hit["intake"];
                assert_eq!(intake["outcome"], "REJECTED", "{hit:#}");
                assert!(intake["fileName"].is_string(), "{hit:#}");
                assert!(intake["problem"]["title"].is_string(), "{hit:#}");
            }
            "REQUEST_ACCEPTED" => {
                assert_eq!(hit["intake"]["outcome"], "ACCEPTED", "{hit:#}");
                assert_eq!(hit["source"], "event");
            }
            "STEP_DONE" => {
                let step = &hit["step"];
                assert_eq!(step["state"], "DONE", "{hit:#}");
                let started = step["startedAt"].as_str().unwrap();
                assert!(vnfkeeper_core::model::Timestamp::parse(started).unwrap() <= at(hit));
                assert_eq!(hit["source"], "step");
            }
            _ => {}
        }
    }

    // --since: the entries from the pause on, by time or as a span back from now.
    let paused = list
        .iter()
        .find(|e| e["kind"] == "MAINTENANCE_PAUSED")
        .unwrap();
    let since = paused["at"].as_str().unwrap();
    let out = verb(install, &["events", vnf, "--json", "--since", since]);
    assert!(out.status.success());
    let later: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let expected: Vec<&Value> = list.iter().filter(|e| at(e) >= at(paused)).collect();
    assert_eq!(later.iter().collect::<Vec<_>>(), expected);
    assert!(!later.is_empty() && later.len() < list.len());
    let out = verb(install, &["events", vnf, "--json", "--since", "1d"]);
    let all: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(all, list);
    let out = verb(install, &["events", vnf, "--since", "last week"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--since"));

    // The table: the same entries, one line each after the header, no password.
    let out = verb(install, &["events", vnf]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(!table.contains(SECRET));
    let header = table.lines().next().unwrap();
    for h in ["TIME", "KIND", "OPERATION", "VNFC", "MESSAGE"] {
        assert!(header.contains(h), "{header}");
    }
    assert_eq!(table.lines().count(), list.len() + 1, "{table}");
    assert!(table.contains("MAINTENANCE_PAUSED"));

    // An instance only a rejected request named has that request as its timeline; one that
    // nothing names is an error (exit 1).
    let out = verb(install, &["events", "no-such-vnf", "--json"]);
    assert!(out.status.success());
    let only: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(only.len(), 1, "{only:#?}");
    assert_eq!(only[0]["kind"], "REQUEST_REJECTED");
    let out = verb(install, &["events", "never-named"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no VNF instance \"never-named\""));
}
