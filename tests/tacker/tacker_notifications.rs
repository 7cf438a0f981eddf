//! The `[tacker]` notification endpoint of a running daemon (no cloud, no root): Tacker 16.0.0's
//! own code (PyPI `tacker==16.0.0`, `tests/tacker/notify/send.py` in the venv of
//! `scripts/tacker-venv`) tests the callback and sends operation-occurrence and identifier
//! notifications, each recorded; wrong or missing credentials are 401 with no side effect, a
//! malformed body 400 naming the field, a body over the limit 413; 1,000 notifications with
//! 20 % duplicates, shuffled and sent 16 at a time, are each recorded exactly once; a daemon
//! killed between the commit and the 204 has the notification after its restart, once, also when
//! the sender sends it again; no credential reaches the daemon's log.

use crate::support;

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use serde_json::{Value, json};
use support::{Install, free_port};
use vnfkeeper::store::Store;
use vnfkeeper_core::wire::notification::NotificationType;

const USER: &str = "tacker-notify";
const PASSWORD: &str = "Cb-S3cret!pw";

/// A daemon with `[tacker]` on a free port (limit 4 KiB); returns it and the callback URL.
fn daemon(install: &Install) -> (support::Daemon, String) {
    daemon_with_env(install, &[])
}

fn daemon_with_env(install: &Install, env: &[(&str, &str)]) -> (support::Daemon, String) {
    let port = free_port();
    let pw = install.dir.path().join("tacker.password");
    std::fs::write(&pw, format!("{PASSWORD}\n")).unwrap();
    std::fs::set_permissions(&pw, std::fs::Permissions::from_mode(0o600)).unwrap();
    let mut text = std::fs::read_to_string(&install.config).unwrap();
    text.push_str(&format!(
        "\n[reconcile]\nenabled = false\n\n[tacker]\nlisten = \"127.0.0.1:{port}\"\n\
         callback_path = \"/vnfkeeper/notifications\"\nusername = \"{USER}\"\n\
         password_file = \"{}\"\nmax_body_kib = 4\n",
        pw.display()
    ));
    std::fs::write(&install.config, text).unwrap();
    let check = install.cli(&["config", "check"]);
    assert!(check.status.success(), "{check:?}");
    let d = install.start_with_env(env);
    d.wait_for_log("Tacker notification endpoint", Duration::from_secs(10));
    (
        d,
        format!("http://127.0.0.1:{port}/vnfkeeper/notifications"),
    )
}

fn occurrence(id: &str, occ: &str, state: &str) -> Value {
    json!({
        "id": id,
        "notificationType": "VnfLcmOperationOccurrenceNotification",
        "subscriptionId": "sub-1",
        "timeStamp": "2026-11-26T02:00:00Z",
        "notificationStatus": if state == "STARTING" { "START" } else { "RESULT" },
        "operationState": state,
        "vnfInstanceId": "vnf-1",
        "operation": "HEAL",
        "isAutomaticInvocation": false,
        "vnfLcmOpOccId": occ,
        "_links": {
            "vnfInstance": {"href": "http://tacker/vnflcm/v2/vnf_instances/vnf-1"},
            "subscription": {"href": "http://tacker/vnflcm/v2/subscriptions/sub-1"},
            "vnfLcmOpOcc": {"href": format!("http://tacker/vnflcm/v2/vnf_lcm_op_occs/{occ}")}
        }
    })
}

async fn post(url: &str, auth: Option<(&str, &str)>, body: Vec<u8>) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body);
    if let Some((u, p)) = auth {
        req = req.basic_auth(u, Some(p));
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

fn recorded(db: &Path) -> Vec<String> {
    let store = Store::open(db).unwrap();
    store
        .reader()
        .tacker_notifications(None)
        .unwrap()
        .into_iter()
        .map(|r| r.notification.id)
        .collect()
}

/// The venv's python (made once by `scripts/tacker-venv`, cached outside the clone).
fn python() -> &'static Path {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        let out = Command::new(support::repo_root().join("scripts/tacker-venv"))
            .stderr(Stdio::inherit())
            .output()
            .expect("run scripts/tacker-venv");
        assert!(
            out.status.success(),
            "scripts/tacker-venv failed (needs python3-venv and PyPI the first time)"
        );
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_have_no_side_effect_and_duplicates_are_recorded_once() {
    let install = Install::new();
    let (mut d, url) = daemon(&install);
    let auth = Some((USER, PASSWORD));

    // The callback test: 401 without credentials, 204 with them.
    let client = reqwest::Client::new();
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert_eq!(
        r.headers()["www-authenticate"].to_str().unwrap(),
        "Basic realm=\"vnfkeeper\""
    );
    let r = client
        .get(&url)
        .basic_auth(USER, Some(PASSWORD))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 204);

    // 401: no or wrong credentials; nothing recorded.
    let good = serde_json::to_vec(&occurrence("n-1", "occ-1", "STARTING")).unwrap();
    let (s, p) = post(&url, None, good.clone()).await;
    assert_eq!((s, p["status"].as_u64()), (401, Some(401)));
    let (s, _) = post(&url, Some((USER, "wrong")), good.clone()).await;
    assert_eq!(s, 401);
    let (s, _) = post(&url, Some(("someone", PASSWORD)), good.clone()).await;
    assert_eq!(s, 401);
    assert!(recorded(&install.database).is_empty());

    // 400: the ProblemDetails names each defective field.
    let mut bad = occurrence("n-2", "occ-1", "DONE");
    bad["vnfInstanceId"] = json!(7);
    let (s, p) = post(&url, auth, serde_json::to_vec(&bad).unwrap()).await;
    assert_eq!(s, 400, "{p}");
    let pointers: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["pointer"].as_str().unwrap())
        .collect();
    assert_eq!(pointers, ["/vnfInstanceId", "/operationState"], "{p}");
    assert!(p["detail"].as_str().unwrap().contains("/operationState"));
    let (s, _) = post(&url, auth, b"{not json".to_vec()).await;
    assert_eq!(s, 400);

    // 413: over max_body_kib (4 KiB), declared or not.
    let mut big = occurrence("n-3", "occ-1", "PROCESSING");
    big["padding"] = json!("x".repeat(5 * 1024));
    let (s, p) = post(&url, auth, serde_json::to_vec(&big).unwrap()).await;
    assert_eq!((s, p["status"].as_u64()), (413, Some(413)));
    assert!(recorded(&install.database).is_empty());

    // 1,000 notifications: 800 distinct (200 operations × 4 states), 100 resent with the same
    // id, 100 with a new id for an (operation, state) already sent; shuffled; 16 at a time.
    let states = ["STARTING", "PROCESSING", "FAILED_TEMP", "COMPLETED"];
    let mut all: Vec<Value> = Vec::new();
    for i in 0..200 {
        for (k, st) in states.iter().enumerate() {
            all.push(occurrence(&format!("n-{i}-{k}"), &format!("occ-{i}"), st));
        }
    }
    for i in 0..100 {
        all.push(all[i * 7].clone());
        all.push(occurrence(
            &format!("n-again-{i}"),
            &format!("occ-{}", i * 2),
            states[i % 4],
        ));
    }
    fastrand::seed(7);
    fastrand::shuffle(&mut all);
    let statuses: Vec<u16> =
        futures::future::join_all(all.chunks(all.len().div_ceil(16)).map(|chunk| {
            let url = url.clone();
            let chunk = chunk.to_vec();
            async move {
                let mut out = Vec::new();
                for n in chunk {
                    out.push(post(&url, auth, serde_json::to_vec(&n).unwrap()).await.0);
                }
                out
            }
        }))
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(statuses.len(), 1000);
    assert!(statuses.iter().all(|s| *s == 204), "{statuses:?}");
    let rows = recorded(&install.database);
    assert_eq!(rows.len(), 800);
    let distinct: std::collections::BTreeSet<&String> = rows.iter().collect();
    assert_eq!(distinct.len(), 800);

    d.stop();
    let log = d.log_text();
    assert!(
        !log.contains(PASSWORD),
        "the password is in the daemon's log"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs python3-venv and PyPI once (scripts/tacker-venv; scripts/test runs it)"]
async fn tackers_own_code_tests_the_callback_and_its_notifications_are_recorded() {
    let install = Install::new();
    let (mut d, url) = daemon(&install);
    let run = |req: Value| {
        let mut child = Command::new(python())
            .arg(support::repo_root().join("tests/tacker/notify/send.py"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write as _;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(req.to_string().as_bytes())
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "send.py: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_str::<Value>(stdout.lines().last().unwrap()).unwrap()
    };
    let occurrences: Vec<Value> = [
        ("occ-a", "STARTING"),
        ("occ-a", "PROCESSING"),
        ("occ-a", "COMPLETED"),
        ("occ-b", "FAILED_TEMP"),
        ("occ-b", "ROLLED_BACK"),
    ]
    .iter()
    .map(|(id, st)| {
        json!({"id": id, "vnfInstanceId": "vnf-t", "operation": "INSTANTIATE",
               "operationState": st, "isAutomaticInvocation": false})
    })
    .collect();
    let req = |password: &str| {
        json!({
            "callbackUri": url, "userName": USER, "password": password,
            "occurrences": occurrences,
            "instances": [{"id": "vnf-t", "created": true}, {"id": "vnf-t", "created": false}]
        })
    };

    // Wrong password: Tacker's own callback test fails, as it would when creating the
    // subscription.
    let out = run(req("not-it"));
    assert!(
        out["error"]
            .as_str()
            .is_some_and(|e| e.contains("TestNotificationFailed")),
        "{out}"
    );
    assert!(recorded(&install.database).is_empty());

    // Right password: the test passes and every notification Tacker built is recorded.
    let out = run(req(PASSWORD));
    assert_eq!(out["tested"], true, "{out}");
    let sent: Vec<String> = out["sent"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(sent.len(), 7);
    let store = Store::open(&install.database).unwrap();
    let rows = store.reader().tacker_notifications(Some("vnf-t")).unwrap();
    let mut got: Vec<String> = rows.iter().map(|r| r.notification.id.clone()).collect();
    let mut want = sent.clone();
    got.sort();
    want.sort();
    let log = d.log_text();
    let refused: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("notification") || l.contains("endpoint"))
        .collect();
    assert_eq!(
        got, want,
        "every notification Tacker sent is recorded: {refused:#?}"
    );
    let types: Vec<NotificationType> = rows
        .iter()
        .map(|r| r.notification.notification_type)
        .collect();
    assert_eq!(
        types
            .iter()
            .filter(|t| **t == NotificationType::VnfLcmOperationOccurrence)
            .count(),
        5
    );
    let rolled_back = rows
        .iter()
        .filter_map(|r| r.notification.occurrence.as_ref())
        .find(|o| o.vnf_lcm_op_occ_id == "occ-b" && o.operation_state.as_str() == "ROLLED_BACK")
        .expect("occ-b ROLLED_BACK recorded");
    assert_eq!(rolled_back.operation, "INSTANTIATE");

    d.stop();
    assert!(!d.log_text().contains(PASSWORD));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_between_commit_and_204_loses_nothing_and_records_once() {
    let install = Install::new();
    let (mut d, url) = daemon_with_env(
        &install,
        &[("VNFKEEPER_FAILPOINT", "tacker-notification-committed")],
    );
    let n = serde_json::to_vec(&occurrence("n-crash", "occ-crash", "COMPLETED")).unwrap();
    let sent = reqwest::Client::new()
        .post(&url)
        .basic_auth(USER, Some(PASSWORD))
        .header("content-type", "application/json")
        .body(n.clone())
        .send()
        .await;
    assert!(sent.is_err(), "no answer from a daemon that died: {sent:?}");
    assert!(
        support::wait_until(Duration::from_secs(10), || !d.is_running()),
        "the failpoint ended the daemon"
    );
    assert_eq!(
        recorded(&install.database),
        ["n-crash"],
        "committed before the 204"
    );

    // Restarted, and the sender (who saw no 204) sends it again: still one row.
    let config = std::fs::read_to_string(&install.config).unwrap();
    let port = config
        .lines()
        .find_map(|l| l.strip_prefix("listen = \"127.0.0.1:"))
        .and_then(|l| l.trim_end_matches('"').parse::<u16>().ok())
        .unwrap();
    let mut d2 = install.start();
    d2.wait_for_log("Tacker notification endpoint", Duration::from_secs(10));
    let url2 = format!("http://127.0.0.1:{port}/vnfkeeper/notifications");
    let (s, _) = post(&url2, Some((USER, PASSWORD)), n).await;
    assert_eq!(s, 204);
    assert_eq!(recorded(&install.database), ["n-crash"]);
    d2.stop();
    d.kill9();
}
