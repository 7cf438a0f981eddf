//! The Prometheus endpoint (`[metrics] listen`) of a running daemon over the testbed cloud (no
//! hosts, no root): scraped before and after a good and a bad request, a paused VNF with a
//! server in ERROR, the automatic heal after `resume`, and an operator HEAL that fails and is
//! then FAILed, the counters move by exactly what happened and the state gauges say what the
//! database holds (instances, the paused VNF and its unhealthy VNFC, the HEAL in FAILED_TEMP); the scraped text passes `promtool check metrics`; OpenMetrics is served to a client
//! that asks for it; other paths and methods are refused; an idle connection is closed; a port
//! that cannot be bound stops the daemon at start; the README's example alert rules pass
//! `promtool check rules` and their unit tests (`promtool test rules`).

use crate::support;

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use support::{Install, free_port, wait_until};
use testbed::cloud::{CloudOptions, FaultRule, Testbed};

/// `promtool` (Debian package `prometheus`; `scripts/test` installs it).
fn promtool() -> &'static str {
    let ok = Command::new("promtool")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "promtool not found: install Debian's `prometheus` package (scripts/test does)"
    );
    "promtool"
}

/// `promtool ARGS` with `stdin`; panics with its output unless it exits 0.
fn run_promtool(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(promtool())
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "promtool {args:?} failed:\n{text}");
    text
}

/// One scrape: (status, content type, body).
async fn get(url: &str, accept: Option<&str>) -> (u16, String, String) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let ctype = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, ctype, resp.text().await.unwrap())
}

/// The value of `series` (name with labels as printed) in a scrape.
fn value(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no series {series} in:\n{text}"))
}

fn intake(text: &str, outcome: &str) -> f64 {
    value(
        text,
        &format!("vnfkeeper_intake_files_total{{outcome=\"{outcome}\"}}"),
    )
}

fn finished(text: &str, operation: &str, state: &str) -> f64 {
    value(
        text,
        &format!(
            "vnfkeeper_operations_finished_total{{operation=\"{operation}\",state=\"{state}\"}}"
        ),
    )
}

fn blocked(text: &str, reason: &str) -> f64 {
    value(
        text,
        &format!("vnfkeeper_heals_blocked_total{{reason=\"{reason}\"}}"),
    )
}

/// `vnfkeeper_operations{operation, state="FAILED_TEMP"}`: operations waiting in FAILED_TEMP.
fn failed_temp(text: &str, operation: &str) -> f64 {
    value(
        text,
        &format!("vnfkeeper_operations{{operation=\"{operation}\",state=\"FAILED_TEMP\"}}"),
    )
}

/// `vnfkeeper_vnfcs_unhealthy{held_by}`.
fn unhealthy(text: &str, held_by: &str) -> f64 {
    value(
        text,
        &format!("vnfkeeper_vnfcs_unhealthy{{held_by=\"{held_by}\"}}"),
    )
}

fn full_passes(text: &str) -> f64 {
    value(
        text,
        "vnfkeeper_reconcile_passes_total{kind=\"full\",result=\"recorded\"}",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs promtool (Debian package prometheus; scripts/test installs it)"]
async fn scrapes_count_what_happened_and_pass_promtool() {
    let install = Install::new();
    let tb = Testbed::start(CloudOptions::no_hosts(install.dir.path().join("cloud")))
        .await
        .unwrap();
    let port = free_port();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[cloud]\nclouds_yaml = \"{}\"\ncloud = \"testbed\"\n\n[reconcile]\nenabled = false\n\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n",
        tb.clouds_yaml().display()
    ));
    std::fs::write(&install.config, text).unwrap();
    let daemon = install.start();
    daemon.wait_for_log("metrics endpoint", Duration::from_secs(5));
    let url = format!("http://127.0.0.1:{port}/metrics");

    let (status, ctype, before) = get(&url, None).await;
    assert_eq!(status, 200);
    assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8");
    run_promtool(&["check", "metrics"], &before);
    for outcome in [
        "accepted",
        "rejected",
        "duplicate",
        "quarantined",
        "recovered",
    ] {
        assert_eq!(intake(&before, outcome), 0.0, "{outcome}");
    }
    assert_eq!(
        value(
            &before,
            "vnfkeeper_reconcile_last_success_timestamp_seconds"
        ),
        0.0
    );
    // The state gauges and the step histogram have their series before anything happened.
    assert_eq!(
        value(
            &before,
            "vnfkeeper_step_duration_seconds_count{step=\"heat.create\",result=\"done\"}"
        ),
        0.0
    );
    assert_eq!(failed_temp(&before, "HEAL"), 0.0);
    assert_eq!(
        value(&before, "vnfkeeper_vnf_instances{state=\"INSTANTIATED\"}"),
        0.0
    );
    assert!(value(&before, "process_start_time_seconds") > 1.7e9);

    // One good request (a plain VNF: cloud steps only), one that is not an envelope.
    let fixture =
        support::repo_root().join("fixtures/requests/good/pv-k8s-cluster.10-instantiate.json");
    let mut env: Value = serde_json::from_slice(&std::fs::read(fixture).unwrap()).unwrap();
    env["request"]["additionalParams"]
        .as_object_mut()
        .unwrap()
        .remove("k8s_cluster_installation_param");
    let vnf = env["vnfInstanceId"].as_str().unwrap().to_owned();
    install.drop_file("instantiate.json", env.to_string().as_bytes());
    install.drop_file("bad.json", br#"{"not": "an envelope"}"#);
    assert!(wait_until(Duration::from_secs(60), || {
        install
            .ops_json()
            .first()
            .is_some_and(|o| o["operationState"] == "COMPLETED")
            && Install::files(&install.rejected_dir()).contains(&"bad.json".to_owned())
    }));

    let (_, _, after) = get(&url, None).await;
    run_promtool(&["check", "metrics"], &after);
    assert_eq!(intake(&after, "accepted"), 1.0);
    assert_eq!(intake(&after, "rejected"), 1.0);
    for outcome in ["duplicate", "quarantined", "recovered"] {
        assert_eq!(intake(&after, outcome), 0.0, "{outcome}");
    }
    assert_eq!(finished(&after, "INSTANTIATE", "COMPLETED"), 1.0);
    assert_eq!(finished(&after, "INSTANTIATE", "FAILED_TEMP"), 0.0);
    assert_eq!(
        value(
            &after,
            "vnfkeeper_operation_duration_seconds_count{operation=\"INSTANTIATE\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &after,
            "vnfkeeper_step_duration_seconds_count{step=\"heat.create\",result=\"done\"}"
        ),
        1.0
    );
    assert_eq!(value(&after, "vnfkeeper_spool_backlog_files"), 0.0);
    assert_eq!(
        value(&after, "vnfkeeper_vnf_instances{state=\"INSTANTIATED\"}"),
        1.0
    );

    // A paused VNF with a worker in ERROR: the pass records the blocked heal, starts nothing.
    let status: Value = serde_json::from_slice(&install.cli(&["status", "--json"]).stdout).unwrap();
    let worker = status[0]["vnfcs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vduId"] == "workerNode")
        .unwrap()
        .clone();
    let out = install.cli(&["pause", &vnf, "--reason", "metrics test"]);
    assert!(out.status.success(), "{out:?}");
    tb.cloud()
        .inject_server_error(worker["serverId"].as_str().unwrap(), "hypervisor lost")
        .await
        .unwrap();
    assert!(install.cli(&["reconcile", "--now"]).status.success());
    let mut paused = String::new();
    assert!(
        wait_for_scrape(&url, &mut paused, |t| full_passes(t) >= 1.0).await,
        "no recorded full pass:\n{paused}"
    );
    assert_eq!(full_passes(&paused), 1.0);
    assert_eq!(blocked(&paused, "paused"), 1.0);
    assert_eq!(value(&paused, "vnfkeeper_vnfs_paused"), 1.0);
    assert_eq!(unhealthy(&paused, "paused"), 1.0);
    assert_eq!(unhealthy(&paused, "none"), 0.0);
    assert_eq!(value(&paused, "vnfkeeper_heals_started_total"), 0.0);
    let last = value(
        &paused,
        "vnfkeeper_reconcile_last_success_timestamp_seconds",
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    assert!((now - last).abs() < 120.0, "last pass {last}, now {now}");
    assert!(
        value(
            &paused,
            "vnfkeeper_reconcile_api_requests_count{kind=\"full\"}"
        ) == 1.0
            && value(
                &paused,
                "vnfkeeper_reconcile_api_requests_sum{kind=\"full\"}"
            ) >= 1.0,
        "{paused}"
    );

    // resume: the next pass starts the heal, which completes.
    assert!(install.cli(&["resume", &vnf]).status.success());
    assert!(install.cli(&["reconcile", "--now"]).status.success());
    let mut healed = String::new();
    assert!(
        wait_for_scrape(&url, &mut healed, |t| finished(t, "HEAL", "COMPLETED")
            >= 1.0)
        .await,
        "the automatic heal did not complete:\n{healed}"
    );
    run_promtool(&["check", "metrics"], &healed);
    assert_eq!(value(&healed, "vnfkeeper_vnfs_paused"), 0.0);
    assert_eq!(unhealthy(&healed, "paused"), 0.0);
    assert_eq!(value(&healed, "vnfkeeper_heals_started_total"), 1.0);
    assert_eq!(blocked(&healed, "paused"), 1.0);
    assert_eq!(full_passes(&healed), 2.0);
    assert_eq!(finished(&healed, "HEAL", "COMPLETED"), 1.0);
    assert_eq!(intake(&healed, "accepted"), 1.0);

    // An operator HEAL that Heat refuses stops in FAILED_TEMP; a FAIL task ends it in FAILED.
    tb.cloud().add_api_fault(
        "orchestration",
        FaultRule {
            status: Some(400),
            ..FaultRule::default()
        },
    );
    let out = install.cli(&["heal", &vnf, worker["id"].as_str().unwrap(), "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let heal = String::from_utf8_lossy(&out.stdout)
        .lines()
        .next()
        .unwrap()
        .trim()
        .to_owned();
    tb.cloud().clear_api_faults(None);
    let (_, _, held) = get(&url, None).await;
    assert_eq!(failed_temp(&held, "HEAL"), 1.0, "{held}");
    let out = install.cli(&["fail", &heal, "--wait"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    // `--wait` returns when the database says FAILED; the daemon counts the operation right
    // after its commit, so the scrape may come first: scrape until it is counted (10 s).
    let deadline = Instant::now() + Duration::from_secs(10);
    let failed = loop {
        let (_, _, text) = get(&url, None).await;
        if finished(&text, "HEAL", "FAILED") >= 1.0 || Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    run_promtool(&["check", "metrics"], &failed);
    assert_eq!(failed_temp(&failed, "HEAL"), 0.0);
    assert_eq!(finished(&failed, "HEAL", "FAILED_TEMP"), 1.0);
    assert_eq!(finished(&failed, "HEAL", "FAILED"), 1.0);
    assert_eq!(finished(&failed, "HEAL", "COMPLETED"), 1.0);
    assert_eq!(intake(&failed, "accepted"), 3.0);
    let failed_steps: f64 = failed
        .lines()
        .filter(|l| {
            l.starts_with("vnfkeeper_step_duration_seconds_count{")
                && l.contains("result=\"failed\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert_eq!(failed_steps, 1.0, "{failed}");

    // Every metric name the example alert rules use is served.
    let rules = std::fs::read_to_string(support::repo_root().join(ALERT_RULES)).unwrap();
    for name in rules
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| w.starts_with("vnfkeeper_"))
    {
        assert!(
            failed.contains(&format!("\n{name}")),
            "{ALERT_RULES} uses {name}, which /metrics does not serve"
        );
    }

    // OpenMetrics for a client that asks for it, as Prometheus does.
    let (status, ctype, om) = get(
        &url,
        Some("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(
        ctype,
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(om.ends_with("# EOF\n"), "{om}");
    assert!(om.contains("# UNIT vnfkeeper_operation_duration_seconds seconds"));
    assert_eq!(
        value(&om, "vnfkeeper_intake_files_total{outcome=\"accepted\"}"),
        3.0
    );

    // Other paths are 404, other methods 405.
    let client = reqwest::Client::new();
    for path in ["/", "/metrics/", "/metric", "/metrics/x"] {
        let s = client
            .get(format!("http://127.0.0.1:{port}{path}"))
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(s.as_u16(), 404, "{path}");
    }
    let s = client.post(&url).body("x").send().await.unwrap().status();
    assert_eq!(s.as_u16(), 405);
    let s = client.delete(&url).send().await.unwrap().status();
    assert_eq!(s.as_u16(), 405);

    // A client that connects and says nothing is closed by the server (header timeout), and
    // the endpoint keeps answering meanwhile.
    let mut idle = TcpStream::connect(("127.0.0.1", port)).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let (status, _, _) = get(&url, None).await;
    assert_eq!(status, 200);
    let t = Instant::now();
    let mut buf = [0u8; 64];
    let n = idle.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the server answered an empty request");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "idle connection held {:?}",
        t.elapsed()
    );
}

/// Scrapes until `done` holds (at most 60 s); the last scrape stays in `last`.
async fn wait_for_scrape(url: &str, last: &mut String, done: impl Fn(&str) -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(60);
    while Instant::now() < until {
        *last = get(url, None).await.2;
        if done(last) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    false
}

#[test]
fn a_port_in_use_stops_the_daemon_at_start() {
    let install = Install::new();
    let taken = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!("\n[metrics]\nlisten = \"127.0.0.1:{port}\"\n"));
    std::fs::write(&install.config, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vnfkeeper"))
        .args(["daemon", "--config"])
        .arg(&install.config)
        .env_remove("JOURNAL_STREAM")
        .env_remove("NOTIFY_SOCKET")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon kept running with its metrics port taken");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains(&format!(
            "metrics.listen: cannot listen on 127.0.0.1:{port}"
        )),
        "{err}"
    );
    drop(taken);
}

/// The example alert rules the README shows (kept in this file, copied verbatim there).
const ALERT_RULES: &str = "packaging/prometheus/vnfkeeper-alerts.yml";

#[test]
#[ignore = "needs promtool (Debian package prometheus; scripts/test installs it)"]
fn example_alert_rules_are_valid_and_fire_as_documented() {
    let root = support::repo_root();
    let rules = root.join(ALERT_RULES);
    let text = std::fs::read_to_string(&rules).unwrap();
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(
        readme.contains(&text),
        "README.md does not show {ALERT_RULES} verbatim"
    );
    let out = Command::new(promtool())
        .args(["check", "rules"])
        .arg(&rules)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool check rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // promtool test rules resolves rule_files against the test file's directory.
    let tests = root.join("packaging/prometheus/vnfkeeper-alerts.test.yml");
    assert!(Path::new(&tests).exists());
    let out = Command::new(promtool())
        .args(["test", "rules"])
        .arg(&tests)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "promtool test rules: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
