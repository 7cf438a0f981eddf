//! Spool intake end to end: the daemon binary, a temporary spool and database, the fixture corpus.

use crate::support;

use std::collections::BTreeMap;
use std::fs;
use std::time::Duration;

use serde_json::Value;
use support::{Install, repo_root, wait_until};

fn good_fixtures() -> Vec<(String, Vec<u8>)> {
    let dir = repo_root().join("fixtures/requests/good");
    let mut v: Vec<(String, Vec<u8>)> = fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                fs::read(&p).unwrap(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Bad fixtures with the pointer each error must name: `(file name, bytes, pointer)`.
fn bad_fixtures() -> Vec<(String, Vec<u8>, String)> {
    let dir = repo_root().join("fixtures/requests/bad");
    let index: Vec<Value> =
        serde_json::from_slice(&fs::read(dir.join("index.json")).unwrap()).unwrap();
    index
        .iter()
        .map(|e| {
            let file = e["file"].as_str().unwrap().to_owned();
            let pointer = e["pointer"].as_str().unwrap().to_owned();
            let bytes = match e.get("generate") {
                Some(g) => {
                    let n = g["bytes"].as_u64().unwrap() as usize;
                    let from = fs::read(
                        repo_root()
                            .join("fixtures/requests")
                            .join(g["from"].as_str().unwrap()),
                    )
                    .or_else(|_| fs::read(repo_root().join(g["from"].as_str().unwrap())))
                    .expect("generate.from fixture");
                    // Valid JSON padded with whitespace to the size: only the size is wrong.
                    let mut b = from;
                    b.resize(n.max(b.len()), b' ');
                    b
                }
                None => fs::read(dir.join(&file)).unwrap(),
            };
            (file, bytes, pointer)
        })
        .collect()
}

fn is_task(name: &str) -> bool {
    name.starts_with("task.")
}

/// The fixture with a relative `vnfPackage` made absolute (fixtures name packages relative to
/// the repository root; a daemon with the default `packages_dir` needs the full path).
fn with_absolute_package(bytes: &[u8]) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(bytes).unwrap();
    if let Some(p) = v.get("vnfPackage").and_then(Value::as_str) {
        v["vnfPackage"] = repo_root().join(p).display().to_string().into();
        return serde_json::to_vec_pretty(&v).unwrap();
    }
    bytes.to_vec()
}

#[test]
fn daemon_accepts_every_seed_request_and_rejects_every_bad_one_with_its_pointer() {
    // The configuration sets only spool_dir and database; no cloud.
    let install = Install::with_packages_dir(false);
    let text = fs::read_to_string(&install.config).unwrap();
    assert_eq!(text.lines().count(), 2, "{text}");
    let mut daemon = install.start();
    let good: Vec<(String, Vec<u8>)> = good_fixtures()
        .into_iter()
        .map(|(n, b)| (n, with_absolute_package(&b)))
        .collect();
    let bad = bad_fixtures();
    assert!(
        good.len() >= 20,
        "expected the seed corpus, found {}",
        good.len()
    );
    assert!(
        bad.len() >= 40,
        "expected at least 40 bad requests, found {}",
        bad.len()
    );

    for (name, bytes) in &good {
        install.drop_file(name, bytes);
    }
    for (name, bytes, _) in &bad {
        install.drop_file(name, bytes);
    }
    let total = good.len() + bad.len();
    let settled = wait_until(Duration::from_secs(60), || {
        let accepted = Install::files(&install.accepted_dir()).len();
        let rejected = Install::files(&install.rejected_dir())
            .iter()
            .filter(|n| !n.ends_with(".error.json"))
            .count();
        Install::files(&install.new_dir()).is_empty() && accepted + rejected == total
    });
    assert!(
        settled,
        "not every file was processed:\n{}",
        daemon.log_text()
    );
    assert!(daemon.is_running(), "daemon died:\n{}", daemon.log_text());

    // Every accepted file is the copy of exactly one good fixture (by the digest of the original
    // bytes in its sidecar), named <op id>.json, with no password left in it.
    let ops: BTreeMap<String, Value> = install
        .ops_json()
        .into_iter()
        .map(|o| (o["id"].as_str().unwrap().to_owned(), o))
        .collect();
    let accepted = Install::files(&install.accepted_dir());
    let mut matched = BTreeMap::new();
    for a in &accepted {
        let copy = install.accepted_dir().join(a);
        let digest = install.original_digest(&copy);
        let which: Vec<&String> = good
            .iter()
            .filter(|(_, b)| install.digest_hex(b) == digest)
            .map(|(n, _)| n)
            .collect();
        let text = fs::read_to_string(&copy).unwrap();
        for secret in [
            "password1",
            "password2",
            "\"password\": \"ubuntu\"",
            "\"ssh_password\": \"ubuntu\"",
        ] {
            assert!(!text.contains(secret), "accepted/{a} holds {secret}");
        }
        assert_eq!(which.len(), 1, "accepted/{a} matches {which:?}");
        let op_id = a.strip_suffix(".json").unwrap();
        let op = ops
            .get(op_id)
            .unwrap_or_else(|| panic!("accepted/{a} has no operation"));
        // An operation queued ahead of a FORCEFUL TERMINATE of its VNF may already have been
        // ended by it (the runner applies that within a second): FAILED, superseded.
        let superseded = op["operationState"] == "FAILED"
            && op["error"].to_string().contains("superseded by TERMINATE");
        assert!(
            op["operationState"] == "STARTING" || superseded,
            "accepted/{a}: {op}"
        );
        assert_eq!(op["isAutomaticInvocation"], false);
        matched.insert(which[0].clone(), op_id.to_owned());
    }
    for (name, _) in good.iter().filter(|(n, _)| !is_task(n)) {
        assert!(
            matched.contains_key(name),
            "seed request {name} was not accepted"
        );
    }
    assert_eq!(ops.len(), good.iter().filter(|(n, _)| !is_task(n)).count());

    // Task envelopes name operations that do not exist here: rejected, naming /vnfLcmOpOccId.
    for (name, _) in good.iter().filter(|(n, _)| is_task(n)) {
        let err: Value = serde_json::from_slice(
            &fs::read(install.rejected_dir().join(format!("{name}.error.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(err["status"], 404, "{name}: {err}");
        assert_eq!(err["errors"][0]["pointer"], "/vnfLcmOpOccId");
    }

    // Every bad fixture is in rejected/ with an error naming its pointer.
    for (name, bytes, pointer) in &bad {
        let moved = install.rejected_dir().join(name);
        assert_eq!(
            install.original_digest(&moved),
            install.digest_hex(bytes),
            "{name} not in rejected/ as submitted"
        );
        let err_path = install.rejected_dir().join(format!("{name}.error.json"));
        let err: Value = serde_json::from_slice(&fs::read(&err_path).unwrap()).unwrap();
        assert!(err["status"].as_u64().unwrap() >= 400, "{name}: {err}");
        assert!(!err["title"].as_str().unwrap().is_empty());
        let pointers: Vec<&str> = err["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["pointer"].as_str().unwrap())
            .collect();
        assert!(
            pointers.contains(&pointer.as_str()),
            "{name}: expected pointer {pointer:?}, got {pointers:?}"
        );
        // Rejected files never leak a password into the error file.
        let text = fs::read_to_string(&err_path).unwrap();
        for secret in ["password1", "password2", "\"ubuntu\""] {
            assert!(
                !text.contains(secret),
                "{name}: error file contains {secret}"
            );
        }
    }
    // A request with several normalised fields logs one WARN line naming them all (the PV
    // seed's pod_cidr and both proxies), not one line per field.
    let log = daemon.log_text();
    let normalised: Vec<&str> = log
        .lines()
        .filter(|l| {
            l.contains("request normalised") && l.contains("pv-k8s-cluster.10-instantiate.json")
        })
        .collect();
    assert_eq!(normalised.len(), 1, "{normalised:#?}");
    for field in ["pod_cidr", "proxy/http_proxy", "proxy/https_proxy"] {
        assert!(normalised[0].contains(field), "{field}: {}", normalised[0]);
    }
    assert!(daemon.is_running());
    assert_eq!(daemon.stop(), Some(0), "clean stop:\n{}", daemon.log_text());
}

#[test]
fn same_content_or_request_id_twice_creates_one_operation() {
    let install = Install::new();
    let _daemon = install.start();
    let (_, body) = good_fixtures()
        .into_iter()
        .find(|(n, _)| n.starts_with("pv-k8s-cluster.10"))
        .unwrap();
    install.drop_file("first.json", &body);
    install.drop_file("second.json", &body);
    // Same requestId, different content: a conflict naming /requestId.
    let mut other: Value = serde_json::from_slice(&body).unwrap();
    other["request"]["flavourId"] = "other".into();
    install.drop_file("third.json", &serde_json::to_vec(&other).unwrap());
    assert!(wait_until(Duration::from_secs(20), || Install::files(
        &install.new_dir()
    )
    .is_empty()
        && Install::files(&install.accepted_dir()).len() == 2
        // new/ empties when the last file is taken, before its verdict is filed.
        && install.rejected_dir().join("third.json.error.json").exists()));
    let ops = install.ops_json();
    assert_eq!(ops.len(), 1, "{ops:?}");
    let op = ops[0]["id"].as_str().unwrap();
    let accepted = Install::files(&install.accepted_dir());
    assert!(accepted.contains(&format!("{op}.json")), "{accepted:?}");
    assert!(
        accepted
            .iter()
            .any(|n| n.starts_with(&format!("{op}.dup-"))),
        "{accepted:?}"
    );
    let err: Value = serde_json::from_slice(
        &fs::read(install.rejected_dir().join("third.json.error.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(err["status"], 409);
    assert_eq!(err["errors"][0]["pointer"], "/requestId");
}

#[test]
fn scale_of_unknown_instance_is_rejected_and_instantiate_then_scale_is_queued_in_order() {
    let install = Install::new();
    let _daemon = install.start();
    let good = good_fixtures();
    let body = |prefix: &str| {
        good.iter()
            .find(|(n, _)| n.starts_with(prefix))
            .unwrap()
            .1
            .clone()
    };
    install.drop_file("a-scale.json", &body("pv-k8s-cluster.20"));
    assert!(wait_until(Duration::from_secs(20), || install
        .rejected_dir()
        .join("a-scale.json.error.json")
        .exists()));
    let err: Value = serde_json::from_slice(
        &fs::read(install.rejected_dir().join("a-scale.json.error.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(err["status"], 404);
    assert_eq!(err["errors"][0]["pointer"], "/vnfInstanceId");

    install.drop_file("b-instantiate.json", &body("pv-k8s-cluster.10"));
    install.drop_file("c-scale.json", &body("pv-k8s-cluster.20"));
    install.drop_file("d-terminate.json", &body("pv-k8s-cluster.90"));
    install.drop_file("e-heal.json", &body("pv-k8s-cluster.30"));
    assert!(wait_until(Duration::from_secs(20), || Install::files(
        &install.new_dir()
    )
    .is_empty()
        && install
            .rejected_dir()
            .join("e-heal.json.error.json")
            .exists()));
    let ops = install.ops_json();
    let kinds: Vec<&str> = ops
        .iter()
        .map(|o| o["operation"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["INSTANTIATE", "SCALE", "TERMINATE"]);
    assert!(
        ops[1]["statusDetail"]
            .as_str()
            .unwrap()
            .contains(ops[0]["id"].as_str().unwrap())
    );
    // HEAL after a queued TERMINATE: the instance will be NOT_INSTANTIATED by then.
    let err: Value = serde_json::from_slice(
        &fs::read(install.rejected_dir().join("e-heal.json.error.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(err["status"], 409);
    assert!(
        err["detail"].as_str().unwrap().contains("NOT_INSTANTIATED"),
        "{err}"
    );

    let out = install.cli(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("vnf-") && text.contains("NOT_INSTANTIATED"),
        "{text}"
    );
}

#[test]
fn config_check_prints_effective_settings_and_exits_78_on_an_invalid_file() {
    let install = Install::new();
    let out = install.cli(&["config", "check"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("max_parallel_hosts = 16") && text.contains("schedule = \"*/5 * * * *\""),
        "{text}"
    );

    fs::write(&install.config, "spool_dir = \"/x\"\nspool = 1\n").unwrap();
    let out = install.cli(&["config", "check"]);
    assert_eq!(out.status.code(), Some(78));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("spool"),
        "{out:?}"
    );
    // The daemon refuses to start with it, with the same status.
    let st = std::process::Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .args(["daemon", "--config"])
        .arg(&install.config)
        .env_remove("JOURNAL_STREAM")
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(st.code(), Some(78));
}

#[test]
fn forceful_terminate_ends_the_operations_queued_ahead_of_it() {
    let install = Install::new();
    let _daemon = install.start();
    let good = good_fixtures();
    let body = |prefix: &str| {
        good.iter()
            .find(|(n, _)| n.starts_with(prefix))
            .unwrap()
            .1
            .clone()
    };
    let mut terminate: Value = serde_json::from_slice(&body("pv-k8s-cluster.90")).unwrap();
    terminate["request"] = serde_json::json!({"terminationType": "FORCEFUL"});
    install.drop_file("a-instantiate.json", &body("pv-k8s-cluster.10"));
    install.drop_file("b-scale.json", &body("pv-k8s-cluster.20"));
    install.drop_file("c-terminate.json", &serde_json::to_vec(&terminate).unwrap());
    // No cloud is configured: nothing runs, but the queue is still kept by the runner.
    assert!(wait_until(Duration::from_secs(20), || {
        let ops = install.ops_json();
        ops.len() == 3 && ops[..2].iter().all(|o| o["operationState"] == "FAILED")
    }));
    let ops = install.ops_json();
    for o in &ops[..2] {
        let detail = o["error"]["detail"].as_str().unwrap_or_default();
        assert!(
            detail.contains("superseded by TERMINATE") && detail.contains("FORCEFUL"),
            "{o}"
        );
        assert_eq!(o["error"]["status"], 409, "{o}");
    }
    assert_eq!(ops[2]["operation"], "TERMINATE");
    assert_eq!(ops[2]["operationState"], "STARTING");
}
