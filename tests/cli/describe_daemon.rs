//! The one-object views against a running daemon and the testbed cloud (no hosts): after an
//! INSTANTIATE and a HEAL of one worker, `status VNF` shows the instance and each VNFC (Nova
//! status as observed, probe verdict, reconcile's last decision, in every format), and
//! `ops show ID` shows each operation in SOL003 VnfLcmOpOcc shape: operationParams with the
//! secret masked, the affected VNFCs (ADDED by the INSTANTIATE, MODIFIED by the HEAL) and the
//! stages with their times.

use crate::support;

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;
use support::{Install, wait_until};
use testbed::cloud::{CloudOptions, Testbed};

/// A credential no output may contain.
const SECRET: &str = "Dscr-S3cret-4410";

fn run(install: &Install, args: &[&str]) -> Output {
    let out = install.cli(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        !stdout.contains(SECRET),
        "vnfkeeper {args:?} printed the credential"
    );
    eprintln!(
        "vnfkeeper {args:?}: {:?}\n{stdout}{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json_of(install: &Install, args: &[&str]) -> Value {
    let out = run(install, args);
    assert!(out.status.success(), "vnfkeeper {args:?} failed");
    serde_json::from_slice(&out.stdout).expect("JSON output")
}

/// Every string that looks like a time in `v` is RFC 3339 with `Z`.
fn times_are_utc(v: &Value) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, x)| {
            if let Some(s) = x
                .as_str()
                .filter(|_| k.ends_with("At") || k.ends_with("Time"))
            {
                assert!(
                    s.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(s).is_ok(),
                    "{k}: {s}"
                );
            }
            times_are_utc(x);
        }),
        Value::Array(a) => a.iter().for_each(times_are_utc),
        _ => {}
    }
}

/// A daemon on the testbed cloud (reconcile off) and a COMPLETED INSTANTIATE (no hosts) whose
/// vimConnectionInfo carries [`SECRET`]; returns the testbed, the daemon and the vnfInstanceId.
async fn instantiated(install: &Install) -> (Testbed, support::Daemon, String) {
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();
    let daemon = install.start();

    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]
        .as_object_mut()
        .unwrap()
        .remove("k8s_cluster_installation_param");
    env["request"]["vimConnectionInfo"][0]["accessInfo"] = serde_json::json!({
        "username": "admin", "password": SECRET,
    });
    let vnf = env["vnfInstanceId"].as_str().unwrap().to_owned();
    install.drop_file("instantiate.json", env.to_string().as_bytes());
    assert!(wait_until(Duration::from_secs(60), || install
        .ops_json()
        .first()
        .is_some_and(|o| o["operationState"] == "COMPLETED")));
    (tb, daemon, vnf)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_vnf_and_ops_show_describe_one_object() {
    let install = Install::new();
    let (tb, _daemon, vnf) = instantiated(&install).await;
    let instantiate = install.ops_json()[0]["id"].as_str().unwrap().to_owned();

    let fleet = json_of(&install, &["status", "--json"]);
    let worker = fleet[0]["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vduId"] == "workerNode")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = run(
        &install,
        &["heal", &vnf, &worker, "--cause", "disk", "--wait"],
    );
    assert_eq!(out.status.code(), Some(0));
    let heal = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_owned();

    // status VNF: the instance and each VNFC as recorded.
    let one = json_of(&install, &["status", &vnf, "-o", "json"]);
    times_are_utc(&one);
    assert_eq!(one["id"], vnf.as_str());
    assert_eq!(one["instantiationState"], "INSTANTIATED");
    assert_eq!(one["lastOperation"]["id"], heal.as_str());
    assert_eq!(one["maintenancePause"], Value::Null);
    let vnfcs = one["vnfcs"].as_array().unwrap();
    assert_eq!(vnfcs.len(), fleet[0]["vnfcs"].as_array().unwrap().len());
    for c in vnfcs {
        assert_eq!(c["novaStatus"], "ACTIVE", "{c:#}");
        // Reconcile is off: nothing observed, nothing decided, nothing guessed.
        assert_eq!(c["probeVerdict"], "UNKNOWN");
        assert_eq!(c["lastDecision"], Value::Null);
        assert_eq!(c["unhealthySince"], Value::Null);
    }
    assert!(vnfcs.iter().any(|c| c["id"] == worker.as_str()));
    // The same document as YAML; the table names every VNFC with zoned times.
    let out = run(&install, &["status", &vnf, "-o", "yaml"]);
    assert!(out.status.success());
    let yaml: Value = serde_yaml_ng::from_slice(&out.stdout).expect("YAML output");
    assert_eq!(yaml, one);
    let out = run(&install, &["status", &vnf]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains(&format!("VNF instance:      {vnf}")),
        "{table}"
    );
    assert!(table.contains("NOVA STATUS"), "{table}");
    for c in vnfcs {
        assert!(table.contains(c["id"].as_str().unwrap()), "{table}");
    }
    assert!(table.contains("Z ("), "{table}");
    let out = run(&install, &["status", "no-such-vnf"]);
    assert_eq!(out.status.code(), Some(1));

    // ops show: the HEAL modified the worker; its stages carry their times.
    let h = json_of(&install, &["ops", "show", &heal, "-o", "json"]);
    times_are_utc(&h);
    assert_eq!(h["id"], heal.as_str());
    assert_eq!(h["operation"], "HEAL");
    assert_eq!(h["operationState"], "COMPLETED");
    assert_eq!(h["isAutomaticInvocation"], false);
    assert_eq!(h["vnfInstanceId"], vnf.as_str());
    assert_eq!(h["error"], Value::Null);
    assert_eq!(h["operationParams"]["vnfcInstanceId"][0], worker.as_str());
    let affected = h["resourceChanges"]["affectedVnfcs"].as_array().unwrap();
    assert!(
        affected
            .iter()
            .any(|a| a["id"] == worker.as_str() && a["changeType"] == "MODIFIED"),
        "{affected:#?}"
    );
    let stages = h["stages"].as_array().unwrap();
    assert!(!stages.is_empty());
    assert!(
        stages
            .iter()
            .all(|s| s["state"] == "DONE" && s["finishedAt"].is_string())
    );

    // The INSTANTIATE: every VNFC ADDED, the credential masked, in YAML too.
    let out = run(&install, &["ops", "show", &instantiate, "-o", "yaml"]);
    assert!(out.status.success());
    let i: Value = serde_yaml_ng::from_slice(&out.stdout).expect("YAML output");
    assert_eq!(i["operation"], "INSTANTIATE");
    // Who dropped the file (its owner at intake: this test runs as root) and under which name.
    assert_eq!(i["intake"]["submitter"]["uid"], 0);
    assert_eq!(i["intake"]["submitter"]["name"], "root");
    assert!(i["intake"]["fileName"].is_string());
    assert_eq!(
        i["operationParams"]["vimConnectionInfo"][0]["accessInfo"],
        "***"
    );
    let added: Vec<&Value> = i["resourceChanges"]["affectedVnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["changeType"] == "ADDED")
        .collect();
    assert_eq!(added.len(), vnfcs.len(), "{added:#?}");
    let out = run(&install, &["ops", "show", &instantiate]);
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("ADDED") && table.contains("heat.create"),
        "{table}"
    );
    let out = run(&install, &["ops", "show", "no-such-op"]);
    assert_eq!(out.status.code(), Some(1));

    // -o on the lists; --json stays an alias of -o json.
    let out = run(&install, &["ops", "-o", "yaml"]);
    let list: Value = serde_yaml_ng::from_slice(&out.stdout).expect("YAML output");
    assert_eq!(list, json_of(&install, &["ops", "--json"]));
    let out = run(&install, &["ops"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Z ("));
    let out = run(&install, &["events", &vnf, "-o", "yaml"]);
    let list: Value = serde_yaml_ng::from_slice(&out.stdout).expect("YAML output");
    let events = json_of(&install, &["events", &vnf, "--json"]);
    assert_eq!(list, events);
    times_are_utc(&events);
    let out = run(&install, &["events", &vnf]);
    let table = String::from_utf8_lossy(&out.stdout);
    let first = table.lines().nth(1).unwrap_or_default();
    let time = first.split_whitespace().next().unwrap_or_default();
    assert!(
        time.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(time).is_ok(),
        "{table}"
    );
    let out = run(&install, &["status", "-o", "yaml"]);
    let list: Value = serde_yaml_ng::from_slice(&out.stdout).expect("YAML output");
    assert_eq!(list, json_of(&install, &["status", "--json"]));
    tb.shutdown().await;
}

/// `submit` checks a file as intake would before it writes into the spool: a truncated file
/// and a non-JSON file are not submitted (exit 6, the ProblemDetails on stderr); a valid one
/// prints its spool file and requestId, and with `--wait` the operation id and how it ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_checks_locally_then_waits_for_the_outcome() {
    let install = Install::new();
    let (tb, _daemon, vnf) = instantiated(&install).await;
    let before = install.ops_json().len();

    let scale = std::fs::read(
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.20-scale-out.json"),
    )
    .unwrap();
    let truncated = install.dir.path().join("truncated.json");
    std::fs::write(&truncated, &scale[..scale.len() / 2]).unwrap();
    let not_json = install.dir.path().join("notes.txt");
    std::fs::write(&not_json, b"scale the workers out please\n").unwrap();
    for f in [&truncated, &not_json] {
        let out = run(&install, &["submit", f.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(6));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("not submitted") && err.contains("\"status\":400"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
        assert!(Install::files(&install.new_dir()).is_empty());
    }

    // A valid file: its spool name and requestId, then (--wait) the operation and its end.
    let file = install.dir.path().join("scale-out.json");
    std::fs::write(&file, &scale).unwrap();
    let out = run(&install, &["submit", file.to_str().unwrap(), "--wait"]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].starts_with("submitted ")
            && lines[0].contains("(requestId vnf-pv-k8s-cluster.20)"),
        "{text}"
    );
    let op = lines[1].trim();
    assert_eq!(lines[2], format!("COMPLETED {op}"), "{text}");
    let ops = install.ops_json();
    assert_eq!(ops.len(), before + 1);
    // Recorded: who submitted it (root, this test) and the operator's file name.
    let shown = json_of(&install, &["ops", "show", op, "-o", "json"]);
    assert_eq!(shown["intake"]["submitter"]["name"], "root");
    assert_eq!(shown["intake"]["submitter"]["file"], "scale-out.json");
    // Under sudo, the user who ran sudo as well.
    let out = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .args(["scale", &vnf, "worker_instance", "in", "--wait", "--config"])
        .arg(&install.config)
        .env("SUDO_USER", "alice")
        .env_remove("JOURNAL_STREAM")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let scale_in = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_owned();
    let events = json_of(&install, &["events", &vnf, "--json"]);
    let accepted = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "REQUEST_ACCEPTED" && e["vnfLcmOpOccId"] == scale_in.as_str())
        .unwrap();
    assert_eq!(accepted["intake"]["submitter"]["sudoUser"], "alice");
    assert_eq!(accepted["intake"]["submitter"]["file"], Value::Null);
    let out = run(&install, &["events", &vnf]);
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("submitted by root (uid 0) via sudo from alice"),
        "the events table names the sudo user"
    );
    assert!(
        ops.iter().any(|o| o["id"] == op
            && o["operation"] == "SCALE"
            && o["vnfInstanceId"] == vnf.as_str())
    );

    // Without --wait: submitted, exit 0 at once; the same requestId again is intake's
    // duplicate (the operation of the first).
    let out = run(&install, &["submit", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert!(wait_until(Duration::from_secs(30), || Install::files(
        &install.new_dir()
    )
    .is_empty()));
    assert_eq!(install.ops_json().len(), before + 2);
    tb.shutdown().await;
}

/// A `vnfkeeper ARGS --config …` left running (`--watch`): its stdout lines arrive on a
/// channel; killed when dropped.
struct Watching {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Watching {
    fn start(install: &Install, args: &[&str]) -> Watching {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
            .args(args)
            .arg("--config")
            .arg(&install.config)
            .env_remove("JOURNAL_STREAM")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watching { child, lines }
    }

    /// The next printed line (60 s at most).
    fn next(&self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(60))
            .expect("the watch printed nothing more")
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn value_and_columns_select_and_watch_follows_a_heal_to_its_end() {
    let install = Install::new();
    let (tb, _daemon, vnf) = instantiated(&install).await;
    let instantiate = install.ops_json()[0]["id"].as_str().unwrap().to_owned();

    // -o value and -c on every read command.
    let text = |args: &[&str]| {
        let out = run(&install, args);
        assert!(out.status.success(), "vnfkeeper {args:?} failed");
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(
        text(&["ops", "-o", "value", "-c", "id", "-c", "operationState"]),
        format!("{instantiate} COMPLETED\n")
    );
    assert_eq!(
        text(&[
            "status",
            "-o",
            "value",
            "-c",
            "instantiationState",
            "-c",
            "id"
        ]),
        format!("INSTANTIATED {vnf}\n")
    );
    assert_eq!(
        text(&["status", &vnf, "-o", "value", "-c", "id", "-c", "flavourId"]),
        format!("{vnf}\nsimple\n")
    );
    assert_eq!(
        text(&[
            "ops",
            "show",
            &instantiate,
            "-o",
            "value",
            "-c",
            "operationState"
        ]),
        "COMPLETED\n"
    );
    let kinds = text(&["events", &vnf, "-o", "value", "-c", "kind"]);
    assert!(kinds.lines().any(|k| k == "REQUEST_ACCEPTED"), "{kinds}");
    let yaml = text(&["ops", "-o", "yaml", "-c", "operation"]);
    assert_eq!(yaml, "- operation: INSTANTIATE\n");
    let table = text(&["ops", "-c", "operation", "-c", "operationState"]);
    assert!(
        table.contains("OPERATION") && table.contains("INSTANTIATE") && table.contains("COMPLETED"),
        "{table}"
    );
    let out = run(&install, &["ops", "-o", "value", "-c", "colour"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no column \"colour\"") && err.contains("operationState"),
        "{err}"
    );

    // --watch: ops and status VNF follow a HEAL (Heat slowed down) from queued to COMPLETED.
    let ops_watch = Watching::start(
        &install,
        &[
            "ops",
            "--vnf",
            &vnf,
            "-o",
            "json",
            "--watch",
            "--interval",
            "1",
        ],
    );
    let first: Value = serde_json::from_str(&ops_watch.next()).unwrap();
    assert_eq!(first.as_array().unwrap().len(), 1, "{first}");
    let status_watch = Watching::start(
        &install,
        &[
            "status",
            &vnf,
            "-o",
            "value",
            "-c",
            "lastOperation",
            "--watch",
            "--interval",
            "1",
        ],
    );
    assert!(status_watch.next().contains("INSTANTIATE"));
    tb.cloud().add_api_fault(
        "orchestration",
        testbed::cloud::FaultRule {
            latency_ms: 1500,
            ..testbed::cloud::FaultRule::default()
        },
    );
    let worker = json_of(&install, &["status", "--json"])[0]["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vduId"] == "workerNode")
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = run(&install, &["heal", &vnf, &worker]);
    assert!(out.status.success());
    let heal = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_owned();
    let mut states = Vec::new();
    loop {
        let doc: Value = serde_json::from_str(&ops_watch.next()).unwrap();
        let state = doc
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == heal.as_str())
            .map(|o| o["operationState"].as_str().unwrap().to_owned());
        if let Some(s) = state {
            if states.last() != Some(&s) {
                states.push(s.clone());
            }
            if s == "COMPLETED" {
                break;
            }
        }
    }
    assert!(
        states.len() >= 2 && states.iter().any(|s| s == "PROCESSING"),
        "the watch did not follow the heal: {states:?}"
    );
    // status VNF's watch printed the HEAL as the last operation, up to COMPLETED.
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    while std::time::Instant::now() < until {
        let line = status_watch.next();
        seen.push(line.clone());
        if line.contains(&heal) && line.contains("COMPLETED") {
            break;
        }
    }
    assert!(
        seen.iter()
            .any(|l| l.contains(&heal) && l.contains("COMPLETED")),
        "{seen:?}"
    );
    tb.cloud().clear_api_faults(None);
    drop(ops_watch);
    drop(status_watch);
}
